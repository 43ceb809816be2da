//! Campaigns: a scenario file's sweep points × seeds as numbered runs, each a
//! pure function of (file, index).
//!
//! A campaign is any scenario file: its sweep points (one without a sweep)
//! times its seeds (`seeds = [...]`, `--seeds N`, or the point's own `seed`).
//! [`Campaign::new`] numbers the runs point-major, seed-minor: run `i` is
//! point `i / seeds` with seed `seeds[i % seeds]`, and writes
//! `<out>/<name>/<point>/seed-<s>/` (`<point>` a file-name-safe label of
//! `param=value`, or `default` without a sweep). The same index gives the
//! same results.json on any machine, so the runs can be spread over local
//! processes (`tollgate campaign run`), a Slurm job array (`tollgate campaign
//! slurm`) or anything else that can run `tollgate sim FILE --run-index I`.
//!
//! The campaign directory `<out>/<name>/` holds `campaign-plan.json` (the
//! runs and a hash of the resolved plan, written by the first command that
//! writes there, checked by every later one, so results of two different
//! files never mix) and, after [`merge`], `campaign.json`.
//!
//! | module | holds |
//! |---|---|
//! | this file | [`Campaign`], the plan file, the status of a run |
//! | `merge` | [`merge`]: `campaign.json`, the statistics table and plots |
//! | `slurm` | [`slurm_script`]: the sbatch job-array script |

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::scenario::{Plan, Scenario};

mod merge;
mod slurm;

pub use merge::{
    merge, stats_table, summary_metrics, Merged, MissingRun, PointStats, RUN_SUMMARY_METRICS,
};
pub use slurm::{slurm_script, SlurmOptions};

/// Name of the plan file in a campaign directory.
pub const PLAN_FILE: &str = "campaign-plan.json";
/// Name of the merged file in a campaign directory.
pub const MERGED_FILE: &str = "campaign.json";
/// Label of the only point of a file without a sweep.
pub const DEFAULT_POINT: &str = "default";

/// One sweep point of a campaign.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Directory label: `param=value` made file-name safe, or `default`.
    pub label: String,
    /// `param=value` as the scenario says it, or `None` without a sweep.
    pub point: Option<String>,
    /// The swept value as written (`0.5bdp`, `0.1`), or `None`.
    pub value: Option<String>,
}

/// One numbered run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Index, `0..runs`: point-major, seed-minor.
    pub index: usize,
    /// Index of its point in [`Campaign::points`].
    pub point: usize,
    /// Seed.
    pub seed: u64,
    /// Directory relative to the campaign directory: `<label>/seed-<seed>`.
    pub dir: String,
}

/// A scenario file's runs, numbered.
#[derive(Debug)]
pub struct Campaign {
    /// Scenario name (the campaign directory is `<out>/<name>/`).
    pub name: String,
    /// The swept parameter, if any.
    pub sweep_param: Option<String>,
    /// Seeds per point (the same list for every point, except a sweep over
    /// `seed`, where each point has its own single seed).
    pub seeds_per_point: usize,
    /// The sweep points in file order.
    pub points: Vec<Point>,
    /// Every run, by index.
    pub runs: Vec<Run>,
    /// `sha256:<hex>` of the resolved plan: every run's index, directory and
    /// fully resolved scenario (seed included).
    pub hash: String,
    scenarios: Vec<Scenario>,
}

/// What `campaign-plan.json` holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlanFile {
    /// Format version.
    pub format: u32,
    /// Scenario name.
    pub scenario: String,
    /// Hash of the resolved plan ([`Campaign::hash`]).
    pub plan_hash: String,
    /// The swept parameter, if any.
    pub sweep_param: Option<String>,
    /// The points.
    pub points: Vec<Point>,
    /// The runs.
    pub runs: Vec<Run>,
}

/// Where a run stands in a campaign directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunStatus {
    /// A complete results.json (not partial).
    Finished,
    /// results.json says `"partial": true` (stopped early): to be re-run.
    Partial,
    /// No results.json.
    Missing,
    /// results.json exists but cannot be read (e.g. cut short): to be re-run.
    Unreadable(String),
}

impl RunStatus {
    /// Why a run that is not finished needs running, in words.
    pub fn reason(&self) -> String {
        match self {
            RunStatus::Finished => "finished".into(),
            RunStatus::Partial => "partial (stopped before its end)".into(),
            RunStatus::Missing => "no results.json".into(),
            RunStatus::Unreadable(e) => format!("unreadable results.json: {e}"),
        }
    }
}

/// `param=value` as a directory name: letters, digits and `.=+-_` are kept,
/// anything else becomes `_`.
pub fn point_label(point: Option<&str>) -> String {
    match point {
        None => DEFAULT_POINT.to_string(),
        Some(p) => p
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._=+-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect(),
    }
}

impl Campaign {
    /// Number the runs of a plan. Fails if two points would share a
    /// directory (values that differ only in characters a label replaces).
    pub fn new(plan: &Plan) -> anyhow::Result<Campaign> {
        let mut points = Vec::new();
        let mut runs = Vec::new();
        let mut scenarios = Vec::new();
        let seeds_per_point = plan.seeds.as_ref().map_or(1, Vec::len);
        for (p, s) in plan.runs.iter().enumerate() {
            let label = point_label(s.sweep_point.as_deref());
            if let Some(other) = points.iter().find(|q: &&Point| q.label == label) {
                anyhow::bail!(
                    "sweep points {} and {} would share the directory `{label}`: \
                     make the values in `sweep.values` differ in letters or digits",
                    other.point.as_deref().unwrap_or(""),
                    s.sweep_point.as_deref().unwrap_or("")
                );
            }
            let seeds = plan.seeds.clone().unwrap_or_else(|| vec![s.seed]);
            for seed in seeds {
                let mut run = s.clone();
                run.seed = seed;
                runs.push(Run {
                    index: runs.len(),
                    point: p,
                    seed,
                    dir: format!("{label}/seed-{seed}"),
                });
                scenarios.push(run);
            }
            points.push(Point {
                label,
                value: s
                    .sweep_point
                    .as_deref()
                    .and_then(|sp| sp.split_once('='))
                    .map(|(_, v)| v.to_string()),
                point: s.sweep_point.clone(),
            });
        }
        let resolved: Vec<serde_json::Value> = runs
            .iter()
            .zip(&scenarios)
            .map(|(r, s)| serde_json::json!({ "index": r.index, "dir": r.dir, "scenario": s }))
            .collect();
        let bytes = serde_json::to_vec(&resolved)?;
        let hash = format!("sha256:{:x}", Sha256::digest(&bytes));
        Ok(Campaign {
            name: plan.name.clone(),
            sweep_param: plan.sweep_param.clone(),
            seeds_per_point,
            points,
            runs,
            hash,
            scenarios,
        })
    }

    /// The resolved scenario of run `index` (its seed set); an index out of
    /// range is an error naming the valid range.
    pub fn scenario(&self, index: usize) -> anyhow::Result<&Scenario> {
        self.scenarios.get(index).ok_or_else(|| {
            anyhow::anyhow!(
                "--run-index {index} is out of range: campaign `{}` has {} run{} ({} point{} x {} seed{}), \
                 valid indices 0..={}; `tollgate campaign plan FILE` lists them",
                self.name,
                self.runs.len(),
                plural(self.runs.len()),
                self.points.len(),
                plural(self.points.len()),
                self.seeds_per_point,
                plural(self.seeds_per_point),
                self.runs.len().saturating_sub(1)
            )
        })
    }

    /// The campaign directory under a results root: `<root>/<name>`.
    pub fn dir(&self, root: &Path) -> PathBuf {
        root.join(&self.name)
    }

    /// The directory of run `index` under a results root.
    pub fn run_dir(&self, root: &Path, index: usize) -> PathBuf {
        self.dir(root).join(&self.runs[index].dir)
    }

    /// The indices of the runs under `root` without complete results.
    pub fn unfinished(&self, root: &Path) -> Vec<usize> {
        self.runs
            .iter()
            .filter(|r| run_status(&self.run_dir(root, r.index)) != RunStatus::Finished)
            .map(|r| r.index)
            .collect()
    }

    /// The plan file's content.
    pub fn plan_file(&self) -> PlanFile {
        PlanFile {
            format: 1,
            scenario: self.name.clone(),
            plan_hash: self.hash.clone(),
            sweep_param: self.sweep_param.clone(),
            points: self.points.clone(),
            runs: self.runs.clone(),
        }
    }

    /// Write `campaign-plan.json` into the campaign directory under `root`
    /// if there is none, or check that the one there is this plan's.
    ///
    /// Several processes may do this at once (the tasks of a job array):
    /// each writes a temporary file and renames it into place, and they all
    /// write the same bytes.
    pub fn ensure_plan_file(&self, root: &Path) -> anyhow::Result<()> {
        let dir = self.dir(root);
        let path = dir.join(PLAN_FILE);
        if path.exists() {
            return self.check_plan_file(&path);
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        let tmp = dir.join(format!(".{PLAN_FILE}.{}", std::process::id()));
        let text = serde_json::to_string_pretty(&self.plan_file())? + "\n";
        std::fs::write(&tmp, text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &path)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        self.check_plan_file(&path)
    }

    fn check_plan_file(&self, path: &Path) -> anyhow::Result<()> {
        let stored = read_plan_file(path)?;
        if stored.plan_hash != self.hash {
            let dir = path.parent().unwrap_or(Path::new("."));
            anyhow::bail!(
                "{} was made from another campaign file: its plan ({} runs, {}) differs from this \
                 file's ({} runs, {}), so their results must not mix. Use another results root \
                 (--out DIR), or delete {} to start this campaign over, or run the file (and \
                 --seeds) that made it",
                dir.display(),
                stored.runs.len(),
                short(&stored.plan_hash),
                self.runs.len(),
                short(&self.hash),
                dir.display()
            );
        }
        Ok(())
    }
}

/// Read a `campaign-plan.json`.
pub fn read_plan_file(path: &Path) -> anyhow::Result<PlanFile> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let plan: PlanFile = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: not a campaign plan ({e}); delete it to start the campaign over",
            path.display()
        )
    })?;
    // Readers index `points` by each run's `point`.
    if let Some((i, r)) = plan
        .runs
        .iter()
        .enumerate()
        .find(|(_, r)| r.point >= plan.points.len())
    {
        anyhow::bail!(
            "{}: `runs[{i}].point` = {} but the plan has {} points; delete it to start the campaign over",
            path.display(),
            r.point,
            plan.points.len()
        );
    }
    Ok(plan)
}

/// The status of the run whose directory is `run_dir`.
pub fn run_status(run_dir: &Path) -> RunStatus {
    let path = run_dir.join("results.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return RunStatus::Missing,
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return RunStatus::Missing,
        Err(e) => return RunStatus::Unreadable(e.to_string()),
    };
    #[derive(Deserialize)]
    struct Head {
        #[serde(default)]
        partial: bool,
    }
    match serde_json::from_str::<Head>(&text) {
        Ok(h) if h.partial => RunStatus::Partial,
        Ok(_) => RunStatus::Finished,
        Err(e) => RunStatus::Unreadable(e.to_string()),
    }
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(19)]
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse_plan;

    const FILE: &str = r#"
name = "c"
duration = "2s"
seeds = [4, 5, 6]
[topology]
kind = "dumbbell"
bottleneck = { rate = "20Mbit", delay = "2ms" }
[[flows]]
cca = "newreno"
rtt = "20ms"
[sweep]
param = "topology.bottleneck.buffer"
values = ["0.5bdp", "1bdp"]
"#;

    #[test]
    fn runs_are_point_major_seed_minor() {
        let c = Campaign::new(&parse_plan(FILE).unwrap()).unwrap();
        assert_eq!(c.runs.len(), 6);
        let got: Vec<(usize, u64, &str)> = c
            .runs
            .iter()
            .map(|r| (r.point, r.seed, r.dir.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (0, 4, "topology.bottleneck.buffer=0.5bdp/seed-4"),
                (0, 5, "topology.bottleneck.buffer=0.5bdp/seed-5"),
                (0, 6, "topology.bottleneck.buffer=0.5bdp/seed-6"),
                (1, 4, "topology.bottleneck.buffer=1bdp/seed-4"),
                (1, 5, "topology.bottleneck.buffer=1bdp/seed-5"),
                (1, 6, "topology.bottleneck.buffer=1bdp/seed-6"),
            ]
        );
        assert_eq!(c.scenario(4).unwrap().seed, 5);
        assert_eq!(c.points[1].value.as_deref(), Some("1bdp"));
        let e = c.scenario(6).unwrap_err().to_string();
        assert!(e.contains("0..=5") && e.contains("--run-index 6"), "{e}");
    }

    /// A plan whose run names a point the plan does not have made
    /// `campaign merge` panic (index out of bounds) once that run had a
    /// results.json (fuzz/corpus/campaign_merge/crash-run-point-out-of-range).
    #[test]
    fn a_plan_whose_run_names_a_missing_point_is_an_error() {
        let dir = std::env::temp_dir().join(format!("tollgate-plan-point-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("r")).unwrap();
        let plan = r#"{"format": 1, "scenario": "tiny", "plan_hash": "sha256:0",
            "sweep_param": null, "points": [{"label": "default", "point": null, "value": null}],
            "runs": [{"index": 0, "point": 0, "seed": 1, "dir": "r"},
                     {"index": 1, "point": 3, "seed": 2, "dir": "r"}]}"#;
        std::fs::write(dir.join(PLAN_FILE), plan).unwrap();
        std::fs::write(dir.join("r/results.json"), "{}").unwrap();
        let e = read_plan_file(&dir.join(PLAN_FILE))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`runs[1].point` = 3") && e.contains("1 points"),
            "{e}"
        );
        let e = merge(&dir).unwrap_err().to_string();
        assert!(e.contains("runs[1].point"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_hash_follows_the_resolved_plan_not_the_text() {
        let a = Campaign::new(&parse_plan(FILE).unwrap()).unwrap();
        let b = Campaign::new(&parse_plan(&format!("# a comment\n{FILE}")).unwrap()).unwrap();
        assert_eq!(a.hash, b.hash);
        let c = Campaign::new(&parse_plan(&FILE.replace("\"2s\"", "\"3s\"")).unwrap()).unwrap();
        assert_ne!(a.hash, c.hash);
        let d = Campaign::new(&parse_plan(&FILE.replace("[4, 5, 6]", "[4, 5]")).unwrap()).unwrap();
        assert_ne!(a.hash, d.hash);
    }

    #[test]
    fn labels_are_file_name_safe() {
        assert_eq!(point_label(None), "default");
        assert_eq!(point_label(Some("router.tau=0.1")), "router.tau=0.1");
        assert_eq!(
            point_label(Some("flows.0.cca=taxed(newreno, tau=0.1)")),
            "flows.0.cca=taxed_newreno__tau=0.1_"
        );
        assert_eq!(point_label(Some("x=a/b")), "x=a_b");
    }

    #[test]
    fn without_seeds_each_point_runs_its_own_seed() {
        let text = FILE.replace("seeds = [4, 5, 6]", "seed = 9");
        let c = Campaign::new(&parse_plan(&text).unwrap()).unwrap();
        assert_eq!(c.runs.len(), 2);
        assert!(c.runs.iter().all(|r| r.seed == 9));
        let no_sweep = text.split("[sweep]").next().unwrap().to_string();
        let c = Campaign::new(&parse_plan(&no_sweep).unwrap()).unwrap();
        assert_eq!(c.runs[0].dir, "default/seed-9");
    }
}
