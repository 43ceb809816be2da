//! The JSON readers of `report`, `compare`, `campaign merge` and
//! `reproduce --values-from`: a hostile or truncated file gives an error,
//! never a panic.

use std::path::PathBuf;
use std::sync::OnceLock;

use tollgate_tools::campaign::{merge, stats_table, summary_metrics, PLAN_FILE};
use tollgate_tools::compare::{compare, table};
use tollgate_tools::reproduce::metric::Metric;
use tollgate_tools::reproduce::read_stored;
use tollgate_tools::results;

use crate::input::split_at_byte;

/// A directory of this process's own for the files the readers open.
fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("tollgate-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(d.join("r")).expect("scratch directory");
        d
    })
}

/// A `results.json` through `results::read` and then what `tollgate report`
/// (the text table and the CSV) and `tollgate compare` (two runs, its
/// table) compute from it; plots are not drawn.
pub fn results_json(data: &[u8]) {
    let path = scratch().join("results.json");
    std::fs::write(&path, data).expect("write scratch file");
    match results::read(&path) {
        Err(e) => assert!(!e.to_string().is_empty()),
        Ok(r) => {
            let _ = results::table(&r);
            let _ = results::csv(&r);
            let _ = summary_metrics(&r);
            let runs = [r.clone(), r];
            let c = compare(vec!["a".into(), "b".into()], &runs);
            let _ = table(&c);
            let _ = serde_json::to_string(&c).expect("a comparison serialises");
        }
    }
}

/// A campaign directory through `campaign merge`: the bytes before the
/// first `0xff` are its `campaign-plan.json`, the rest the `results.json`
/// of the run directory `r`.
pub fn campaign_merge(data: &[u8]) {
    let (plan, run) = split_at_byte(data, 0xff);
    let dir = scratch().join("campaign");
    std::fs::create_dir_all(dir.join("r")).expect("scratch directory");
    std::fs::write(dir.join(PLAN_FILE), plan).expect("write scratch file");
    std::fs::write(dir.join("r").join("results.json"), run).expect("write scratch file");
    match merge(&dir) {
        Err(e) => assert!(!e.to_string().is_empty()),
        Ok(m) => {
            let _ = stats_table(&m);
        }
    }
}

/// A `reproduce.json` through `read_stored` (`reproduce --values-from`)
/// and what is read from each experiment: its provenance line and each
/// row's metric.
pub fn reproduce_json(data: &[u8]) {
    let path = scratch().join("reproduce.json");
    std::fs::write(&path, data).expect("write scratch file");
    match read_stored(&path) {
        Err(e) => assert!(!e.to_string().is_empty()),
        Ok(s) => {
            for e in &s.experiments {
                let _ = s.provenance(e);
                for row in &e.rows {
                    let _ = Metric::parse(&row.metric);
                }
            }
        }
    }
}
