//! `tollgate reproduce`: the seed experiments beside their published numbers.
//!
//! An experiment is a directory under `tools/scenarios/reproduce/` holding
//! scenario files and an `experiment.toml` ([`manifest`]) whose rows each
//! name a scenario (and sweep point), a [`metric`], the published number and
//! the tolerance we claim. Reproducing is three steps:
//!
//! 1. [`prepare`]: copy every scenario into `<out>/<experiment>/scenarios/`
//!    (shortened for `--quick`) and plan it as a campaign of `seeds` runs
//!    per point under `<out>/<experiment>/` (the same layout and resume
//!    rules as `tollgate campaign`);
//! 2. the CLI runs every unfinished run of every campaign through one
//!    process pool (`tollgate sim FILE --run-index I` children);
//! 3. [`evaluate`] reads each run's results, computes each row's metric per
//!    seed, its mean and 95 % interval, and a [`Verdict`]; [`write_report`]
//!    writes `REPORT.md`, `reproduce.json` and one plot per experiment.

use std::collections::hash_map::{Entry, HashMap};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::campaign::{self, Campaign, RunStatus};
use crate::results::{self, Results};
use crate::scenario;
use crate::stats::{mean_ci, MeanCi};

pub mod manifest;
pub mod metric;
mod report;
pub mod verdict;

pub use manifest::{discover, Experiment, Published, Tolerance};
pub use report::{write_report, Judged, ReportInfo};
pub use verdict::{Bounds, Verdict};

/// How to reproduce.
#[derive(Clone, Debug)]
pub struct Options {
    /// Results root: each experiment writes `<out>/<name>/`.
    pub out: PathBuf,
    /// Shorter runs and fewer seeds (the manifest's `quick`).
    pub quick: bool,
    /// Seeds per run instead of the manifest's.
    pub seeds: Option<u64>,
}

/// One scenario of one experiment, copied and planned.
#[derive(Debug)]
pub struct Prepared {
    /// Index of its experiment in the list given to [`prepare`].
    pub experiment: usize,
    /// The scenario file as the manifest names it.
    pub file: String,
    /// The copy that runs.
    pub path: PathBuf,
    /// Results root of the campaign (`<out>/<experiment>`).
    pub root: PathBuf,
    /// Seeds per point.
    pub seeds: u64,
    /// Its runs.
    pub campaign: Campaign,
}

/// Copy and plan every scenario of `experiments` (see the module doc).
/// A scenario whose earlier results were planned differently (other seeds,
/// other mode, an edited file) is refused with the campaign's own message.
pub fn prepare(experiments: &[Experiment], opts: &Options) -> anyhow::Result<Vec<Prepared>> {
    prepare_some(experiments, &vec![true; experiments.len()], opts)
}

/// [`prepare`] for the experiments whose `include` entry is true (the
/// others are judged from stored values); [`Prepared::experiment`] still
/// indexes `experiments`.
pub fn prepare_some(
    experiments: &[Experiment],
    include: &[bool],
    opts: &Options,
) -> anyhow::Result<Vec<Prepared>> {
    let mut out = Vec::new();
    for (e, exp) in experiments.iter().enumerate() {
        if !include.get(e).copied().unwrap_or(true) {
            continue;
        }
        let root = opts.out.join(&exp.name);
        let copies = root.join("scenarios");
        std::fs::create_dir_all(&copies)
            .map_err(|err| anyhow::anyhow!("cannot create {}: {err}", copies.display()))?;
        let seeds = exp.seeds(opts.quick, opts.seeds);
        for file in &exp.scenarios {
            let source = exp.dir.join(file);
            let text = std::fs::read_to_string(&source)
                .map_err(|err| anyhow::anyhow!("cannot read {}: {err}", source.display()))?;
            let text = if opts.quick {
                quick_copy(&text, &exp.manifest.quick)
                    .map_err(|err| anyhow::anyhow!("{}: {err}", source.display()))?
            } else {
                text
            };
            let path = copies.join(file);
            std::fs::write(&path, &text)
                .map_err(|err| anyhow::anyhow!("cannot write {}: {err}", path.display()))?;
            let mut plan = scenario::load(&path)?;
            plan.set_seed_count(seeds)?;
            let campaign = Campaign::new(&plan)?;
            campaign.ensure_plan_file(&root).map_err(|err| {
                anyhow::anyhow!(
                    "{err}\n(`tollgate reproduce` keeps finished runs and resumes; give another \
                     --out, or remove {} to start this experiment again)",
                    campaign.dir(&root).display()
                )
            })?;
            out.push(Prepared {
                experiment: e,
                file: file.clone(),
                path,
                root: root.clone(),
                seeds,
                campaign,
            });
        }
    }
    Ok(out)
}

/// The `--quick` copy of a scenario: `duration` and `metrics.measure_from`
/// replaced as the manifest's `quick` says.
fn quick_copy(text: &str, quick: &manifest::Quick) -> anyhow::Result<String> {
    let mut table: toml::Table = toml::from_str(text)?;
    if let Some(d) = &quick.duration {
        table.insert("duration".into(), toml::Value::String(d.clone()));
    }
    if let Some(m) = &quick.measure_from {
        let metrics = table
            .entry("metrics")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let toml::Value::Table(metrics) = metrics else {
            anyhow::bail!("`metrics` is not a table");
        };
        metrics.insert("measure_from".into(), toml::Value::String(m.clone()));
    }
    Ok(format!(
        "# --quick copy written by `tollgate reproduce --quick`\n{}",
        toml::to_string(&table)?
    ))
}

/// One row of the report.
#[derive(Clone, Debug, Serialize)]
pub struct RowResult {
    /// Sub-table.
    pub table: Option<String>,
    /// What the row shows.
    pub label: String,
    /// Scenario file.
    pub scenario: String,
    /// Sweep point.
    pub point: Option<String>,
    /// The metric.
    pub metric: String,
    /// Published number.
    pub published: Option<Published>,
    /// The tolerance as written (`±0.1`, `±10 %`, `1.25x`).
    pub tolerance: Option<String>,
    /// The band of values that agree with the published number.
    pub band: Option<[f64; 2]>,
    /// Our mean and 95 % interval over the runs where it is defined.
    pub ours: Option<MeanCi>,
    /// Per seed: (seed, value; `None` where undefined).
    pub values: SeedValues,
    /// Runs of this row without complete results.
    pub missing: usize,
    /// The verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The manifest's note.
    pub note: Option<String>,
    /// What explains a difference (the manifest's `evidence`); a differing
    /// row without it is unexplained.
    pub evidence: Option<String>,
}

/// A row's value per seed (`None` where the metric is undefined).
pub type SeedValues = Vec<(u64, Option<f64>)>;

/// Each run's results, read once however many rows use them.
type ResultsCache = HashMap<PathBuf, Results>;

/// The metric of every run of `file` at `point`: (seed, value), and how
/// many runs have no complete results.
fn per_seed(
    exp: &Experiment,
    prepared: &[&Prepared],
    cache: &mut ResultsCache,
    file: &str,
    point: &Option<String>,
    metric: &metric::Metric,
) -> anyhow::Result<(SeedValues, usize)> {
    let p = prepared
        .iter()
        .find(|p| p.file == file)
        .ok_or_else(|| anyhow::anyhow!("{}: {file} was not prepared", exp.name))?;
    let c = &p.campaign;
    let mut values = Vec::new();
    let mut missing = 0;
    for run in c.runs.iter().filter(|r| &c.points[r.point].point == point) {
        let dir = c.run_dir(&p.root, run.index);
        if campaign::run_status(&dir) != RunStatus::Finished {
            missing += 1;
            continue;
        }
        let r = match cache.entry(dir) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let r = results::read(&e.key().join("results.json"))?;
                e.insert(r)
            }
        };
        values.push((run.seed, metric.eval(r)));
    }
    Ok((values, missing))
}

/// Where the rows' per-seed values come from.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// The runs under the prepared campaigns (that experiment's scenarios).
    Runs(&'a [&'a Prepared]),
    /// The values an earlier `reproduce.json` recorded for the experiment.
    Stored(&'a StoredExperiment),
}

/// A `reproduce.json` as far as judging its rows again needs it.
#[derive(Debug, Deserialize)]
pub struct StoredReport {
    /// How it was made.
    pub info: StoredInfo,
    /// Its experiments.
    pub experiments: Vec<StoredExperiment>,
}

/// A stored report's provenance.
#[derive(Clone, Debug, Deserialize)]
pub struct StoredInfo {
    /// The command that wrote it.
    pub command: String,
    /// What the runs were (seeds, timing noise), where the command does not say.
    #[serde(default)]
    pub note: Option<String>,
    /// Where its own values came from, if it was itself judged again: the
    /// runs' provenance is carried over.
    #[serde(default)]
    pub values_from: Option<Box<StoredInfo>>,
}

/// One experiment of a stored report.
#[derive(Debug, Deserialize)]
pub struct StoredExperiment {
    /// Its name.
    pub name: String,
    /// Seeds per run.
    pub seeds: u64,
    /// Where its values came from, if that report took them from another.
    #[serde(default)]
    pub values: Option<String>,
    /// Where that report's runs of it were, if it had them.
    #[serde(default)]
    pub runs: Option<String>,
    /// Its rows.
    pub rows: Vec<StoredRow>,
}

/// One stored row: the values, found again by scenario, point and metric.
#[derive(Debug, Deserialize)]
pub struct StoredRow {
    /// Scenario file.
    pub scenario: String,
    /// Sweep point.
    pub point: Option<String>,
    /// The metric as the report writes it.
    pub metric: String,
    /// Per seed.
    pub values: SeedValues,
    /// Runs without results.
    #[serde(default)]
    pub missing: usize,
}

impl StoredReport {
    /// Where experiment `e`'s values came from: what the report says, else
    /// the command that wrote it (and its note).
    pub fn provenance(&self, e: &StoredExperiment) -> String {
        if let Some(v) = &e.values {
            return v.clone();
        }
        if let Some(dir) = &e.runs {
            return format!("{} seeds per run, the runs under `{dir}`", e.seeds);
        }
        let runs = self.info.values_from.as_deref().unwrap_or(&self.info);
        let mut s = format!("{} seeds per run, by `{}`", e.seeds, runs.command);
        if let Some(n) = &runs.note {
            s.push_str("; ");
            s.push_str(n.trim().trim_end_matches('.'));
        }
        s
    }
}

/// Read a `reproduce.json` for [`Source::Stored`].
pub fn read_stored(path: &std::path::Path) -> anyhow::Result<StoredReport> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: not a reproduce.json `tollgate reproduce` wrote: {e}",
            path.display()
        )
    })
}

/// The metric as the report writes it: a baseline row's is a quotient.
fn metric_text(row: &manifest::Row) -> String {
    match &row.baseline {
        Some(b) => format!("{} ÷ same in {b}", row.metric),
        None => row.metric.clone(),
    }
}

/// One row's values from the runs: the metric per seed, divided by the
/// baseline scenario's seed by seed where the row has one.
fn run_values(
    exp: &Experiment,
    prepared: &[&Prepared],
    cache: &mut ResultsCache,
    row: &manifest::Row,
    metric: &metric::Metric,
) -> anyhow::Result<(SeedValues, usize)> {
    let (mut values, mut missing) =
        per_seed(exp, prepared, cache, &row.scenario, &row.point, metric)?;
    if let Some(base) = &row.baseline {
        let (b, b_missing) = per_seed(exp, prepared, cache, base, &row.point, metric)?;
        missing += b_missing;
        values.retain(|(seed, _)| b.iter().any(|(s, _)| s == seed));
        for (seed, v) in &mut values {
            let d = b.iter().find(|(s, _)| s == seed).and_then(|(_, d)| *d);
            *v = match (*v, d) {
                (Some(v), Some(d)) if d != 0.0 => Some(v / d),
                _ => None,
            };
        }
    }
    Ok((values, missing))
}

/// Every row of `exp`, its values from `source`, judged by
/// [`verdict::verdict`].
pub fn evaluate(exp: &Experiment, source: Source<'_>) -> anyhow::Result<Vec<RowResult>> {
    let mut rows = Vec::new();
    let mut cache = ResultsCache::new();
    for (i, (row, metric)) in exp.manifest.rows.iter().zip(&exp.metrics).enumerate() {
        let text = metric_text(row);
        let (values, missing) = match source {
            Source::Runs(prepared) => run_values(exp, prepared, &mut cache, row, metric)?,
            Source::Stored(stored) => stored
                .rows
                .iter()
                .find(|r| r.scenario == row.scenario && r.point == row.point && r.metric == text)
                .map_or((Vec::new(), 0), |r| (r.values.clone(), r.missing)),
        };
        let defined: Vec<f64> = values
            .iter()
            .filter_map(|v| v.1)
            .filter(|v| v.is_finite())
            .collect();
        let ours = mean_ci(&defined);
        let band = exp.bands[i];
        rows.push(RowResult {
            table: row.table.clone(),
            label: row.label.clone(),
            scenario: row.scenario.clone(),
            point: row.point.clone(),
            metric: text,
            published: row.published,
            tolerance: row.tolerance.as_ref().map(Tolerance::text),
            band,
            verdict: verdict::verdict(row.published, band, exp.bounds[i], ours.as_ref()),
            ours,
            values,
            missing,
            note: row.note.clone(),
            evidence: row.evidence.clone(),
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerances_are_bands_written_one_way() {
        let band = |t: Tolerance, p| t.band(p).unwrap();
        let w = |s: &str| Tolerance::Written(s.into());
        assert_eq!(
            band(Tolerance::Absolute(0.25), Published::Value(1.0)),
            [0.75, 1.25]
        );
        let [lo, hi] = band(w("10%"), Published::Value(50.0));
        assert!((lo - 45.0).abs() < 1e-9 && (hi - 55.0).abs() < 1e-9);
        // "1.25x either way" is [0.8, 1.25] around 1, not ±0.25.
        let [lo, hi] = band(w("1.25x"), Published::Value(1.0));
        assert!((lo - 0.8).abs() < 1e-9 && (hi - 1.25).abs() < 1e-9);
        assert_eq!(
            band(Tolerance::Absolute(0.01), Published::Range([0.9, 0.95])),
            [0.89, 0.96]
        );
        for bad in ["ten", "-5%", "0.8x"] {
            assert!(w(bad).band(Published::Value(1.0)).is_err(), "{bad}");
        }
        assert!(w("2x").band(Published::Value(-1.0)).is_err());
        assert!(Tolerance::Absolute(-1.0)
            .band(Published::Value(1.0))
            .is_err());
        assert_eq!(w("1.25x").text(), "1.25x");
        assert_eq!(w("3%").text(), "±3 %");
        assert_eq!(Tolerance::Absolute(0.1).text(), "±0.1");
    }

    #[test]
    fn quick_copies_replace_duration_and_measurement_start() {
        let text = "name = \"x\"\nduration = \"300s\"\n[metrics]\nmeasure_from = \"60s\"\n";
        let q = manifest::Quick {
            duration: Some("20s".into()),
            measure_from: Some("5s".into()),
            seeds: None,
        };
        let copy: toml::Table = toml::from_str(&quick_copy(text, &q).unwrap()).unwrap();
        assert_eq!(copy["duration"].as_str(), Some("20s"));
        assert_eq!(copy["metrics"]["measure_from"].as_str(), Some("5s"));
    }
}
