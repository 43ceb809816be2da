//! `experiment.toml`: what an experiment under `tools/scenarios/reproduce/`
//! runs and which published numbers it puts ours beside.
//!
//! ```toml
//! title = "Sender-side taxation (Brown & Kaur, poster)"
//! source = "seeds/sender-side-taxation-poster.txt; the authors' ns-3 code"
//! summary = "What the experiment is and how our setup maps onto theirs."
//! seeds = 5                       # default 5
//! quick = { duration = "12s" }    # --quick: shorter runs (and seeds = 2)
//!
//! [[rows]]
//! table = "NewReno"               # rows are grouped by table in the report
//! label = "raw: fairness ratio"
//! scenario = "newreno-raw.toml"   # a scenario file next to this one
//! point = "router.tau=0.1"        # a sweep point of that file (if it sweeps)
//! metric = "fairness_ratio"       # see `metric`
//! baseline = "other.toml"         # optional: metric(scenario) / metric(other), seed by seed
//! published = 3.85                # or [0.975, 0.988]; leave out: measured only
//! tolerance = 0.1                 # absolute either way, "10%" of the published value, or "1.25x"
//! note = "what differs in the setup"
//! evidence = "what explains a difference: an independent simulator's run, a diagnostic run"
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::metric::Metric;
use super::verdict::Bounds;
use crate::scenario::{self, Plan};

/// Default seeds per run of a full reproduction.
pub const DEFAULT_SEEDS: u64 = 5;
/// Default seeds with `--quick`.
pub const QUICK_SEEDS: u64 = 2;
/// The manifest's file name in an experiment directory.
pub const MANIFEST: &str = "experiment.toml";

/// A published number: one value, or a range the paper gives.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum Published {
    /// One value.
    Value(f64),
    /// `[low, high]`.
    Range([f64; 2]),
}

impl Published {
    /// The value, or the middle of the range.
    pub fn centre(self) -> f64 {
        match self {
            Published::Value(v) => v,
            Published::Range([a, b]) => (a + b) / 2.0,
        }
    }

    /// Distance from `x` to the value (or to the nearest end of the range;
    /// 0 inside it).
    pub fn distance(self, x: f64) -> f64 {
        match self {
            Published::Value(v) => (x - v).abs(),
            Published::Range([a, b]) => {
                if x < a {
                    a - x
                } else if x > b {
                    x - b
                } else {
                    0.0
                }
            }
        }
    }
}

/// How close ours must be to count as reproduced: with the published number
/// it gives the band of agreeing values ([`Tolerance::band`]).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum Tolerance {
    /// `0.1`: an absolute difference, in the metric's unit, either way.
    Absolute(f64),
    /// `"10%"`: a fraction of the published value either way; `"1.25x"`: a
    /// factor either way (`[p / 1.25, p * 1.25]`, for positive values).
    Written(String),
}

impl Tolerance {
    /// The band of values that agree with `published`: `[low, high]`
    /// (a range's band extends from its ends).
    pub fn band(&self, published: Published) -> Result<[f64; 2], String> {
        let (a, b) = match published {
            Published::Value(v) => (v, v),
            Published::Range([a, b]) => (a, b),
        };
        match self {
            Tolerance::Absolute(t) if *t >= 0.0 && t.is_finite() => Ok([a - t, b + t]),
            Tolerance::Absolute(t) => Err(format!("{t}: give a finite number >= 0")),
            Tolerance::Written(s) => {
                let number = |x: &str| x.trim().parse::<f64>().ok().filter(|v| v.is_finite());
                if let Some(pct) = s.strip_suffix('%').and_then(number) {
                    if pct < 0.0 {
                        return Err(format!("\"{s}\": give a percentage >= 0"));
                    }
                    let f = pct / 100.0;
                    return Ok([a - a.abs() * f, b + b.abs() * f]);
                }
                if let Some(f) = s.strip_suffix('x').and_then(number) {
                    if f < 1.0 {
                        return Err(format!(
                            "\"{s}\": a factor either way is at least 1 (\"1.25x\" means [p / 1.25, p * 1.25])"
                        ));
                    }
                    if a <= 0.0 {
                        return Err(format!(
                            "\"{s}\": a factor needs a positive published value; give an absolute tolerance"
                        ));
                    }
                    return Ok([a / f, b * f]);
                }
                Err(format!(
                    "\"{s}\": give a number (absolute), a percentage such as \"10%\" or a factor such as \"1.25x\""
                ))
            }
        }
    }

    /// The tolerance as the report prints it: `±0.1`, `±10 %`, `1.25x`.
    pub fn text(&self) -> String {
        match self {
            Tolerance::Absolute(t) => format!("±{t}"),
            Tolerance::Written(s) => match s.strip_suffix('%') {
                Some(p) => format!("±{} %", p.trim()),
                None => s.clone(),
            },
        }
    }
}

/// `quick = { ... }`: how `--quick` shortens the experiment.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Quick {
    /// Replaces every scenario's `duration`.
    pub duration: Option<String>,
    /// Replaces every scenario's `metrics.measure_from`.
    pub measure_from: Option<String>,
    /// Seeds per run (default 2).
    pub seeds: Option<u64>,
}

/// One row of the report: a metric of one scenario (point) beside a
/// published number.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// Sub-table heading in the report.
    pub table: Option<String>,
    /// What the row shows.
    pub label: String,
    /// Scenario file, relative to the experiment directory.
    pub scenario: String,
    /// Sweep point of that file (`param=value`), if it sweeps.
    pub point: Option<String>,
    /// The metric (see [`Metric`]).
    pub metric: String,
    /// Another scenario file: the row is then metric(scenario) /
    /// metric(baseline), seed by seed (same seed, same point), e.g. what
    /// NewReno keeps of its goodput when half the flows run another CCA.
    pub baseline: Option<String>,
    /// The published number; absent: a row we only measure.
    pub published: Option<Published>,
    /// Required with `published`.
    pub tolerance: Option<Tolerance>,
    /// Printed under the table (why a difference is expected, what differs
    /// in the setup).
    pub note: Option<String>,
    /// What explains a difference from the published number: an independent
    /// simulator's result, a diagnostic run (with where to find it). A row
    /// that differs without it counts as unexplained.
    pub evidence: Option<String>,
}

/// The manifest as written.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Heading.
    pub title: String,
    /// Where the published numbers come from.
    pub source: String,
    /// A paragraph for the report.
    pub summary: Option<String>,
    /// Seeds per run (default 5).
    pub seeds: Option<u64>,
    /// `--quick` settings.
    #[serde(default)]
    pub quick: Quick,
    /// Findings and explanations (Markdown), printed after the tables.
    pub findings: Option<String>,
    /// The rows.
    pub rows: Vec<Row>,
}

/// A loaded, checked experiment.
#[derive(Debug)]
pub struct Experiment {
    /// Directory name: the experiment's name on the command line.
    pub name: String,
    /// Its directory.
    pub dir: PathBuf,
    /// The manifest.
    pub manifest: Manifest,
    /// The distinct scenario files the rows use, in first-use order.
    pub scenarios: Vec<String>,
    /// Each of those files as parsed (full length: `--quick` copies are
    /// parsed again when they are written).
    pub plans: Vec<Plan>,
    /// Each row's parsed metric.
    pub metrics: Vec<Metric>,
    /// Each row's band of agreeing values (with a published number).
    pub bands: Vec<Option<[f64; 2]>>,
    /// Each row's metric's floor and ceiling in its scenario.
    pub bounds: Vec<Bounds>,
}

impl Experiment {
    /// Read and check `dir/experiment.toml` and every scenario it names:
    /// the scenarios parse, each row's point exists, its metric parses, a
    /// published number has a tolerance. Errors name the file and field.
    pub fn load(dir: &Path) -> anyhow::Result<Experiment> {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| anyhow::anyhow!("{}: not a directory name", dir.display()))?
            .to_string();
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let manifest: Manifest =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let bad = |i: usize, field: &str, why: String| {
            anyhow::anyhow!("{}: rows[{i}].{field}: {why}", path.display())
        };
        if manifest.rows.is_empty() {
            anyhow::bail!("{}: no [[rows]]: give at least one", path.display());
        }
        for (field, seeds) in [
            ("seeds", manifest.seeds),
            ("quick.seeds", manifest.quick.seeds),
        ] {
            if seeds == Some(0) {
                anyhow::bail!(
                    "{}: {field} = 0: give at least 1 (5 or more for a reproduction)",
                    path.display()
                );
            }
        }
        let mut scenarios: Vec<String> = Vec::new();
        let mut plans: Vec<Plan> = Vec::new();
        let mut metrics = Vec::new();
        let mut bands = Vec::new();
        let mut bounds = Vec::new();
        for (i, row) in manifest.rows.iter().enumerate() {
            for (field, file) in [
                ("scenario", Some(&row.scenario)),
                ("baseline", row.baseline.as_ref()),
            ] {
                let Some(file) = file else { continue };
                if !scenarios.contains(file) {
                    let plan = scenario::load(&dir.join(file))
                        .map_err(|e| bad(i, field, e.to_string()))?;
                    scenarios.push(file.clone());
                    plans.push(plan);
                }
            }
            let plan = &plans[scenarios
                .iter()
                .position(|s| s == &row.scenario)
                .unwrap_or(0)];
            let points: Vec<&str> = plan
                .runs
                .iter()
                .filter_map(|s| s.sweep_point.as_deref())
                .collect();
            match (&row.point, points.is_empty()) {
                (None, true) => {}
                (Some(p), false) if points.contains(&p.as_str()) => {}
                (Some(p), true) => {
                    return Err(bad(
                        i,
                        "point",
                        format!(
                            "\"{p}\": {} has no [sweep]; leave `point` out",
                            row.scenario
                        ),
                    ))
                }
                (p, false) => {
                    return Err(bad(
                        i,
                        "point",
                        format!(
                            "{}: {} sweeps; name one of: {}",
                            p.as_deref()
                                .map_or("missing".into(), |p| format!("\"{p}\"")),
                            row.scenario,
                            points.join(", ")
                        ),
                    ))
                }
            }
            let metric = Metric::parse(&row.metric).map_err(|e| bad(i, "metric", e))?;
            let run = plan
                .runs
                .iter()
                .find(|s| s.sweep_point == row.point)
                .or(plan.runs.first());
            bounds.push(run.map_or(Bounds::default(), |s| metric.bounds(s)));
            metrics.push(metric);
            if row.evidence.is_some() && row.published.is_none() {
                return Err(bad(
                    i,
                    "evidence",
                    "given without `published`: evidence explains a difference from a published number"
                        .into(),
                ));
            }
            bands.push(match (&row.published, &row.tolerance) {
                (Some(p), Some(t)) => Some(t.band(*p).map_err(|e| bad(i, "tolerance", e))?),
                (Some(_), None) => {
                    return Err(bad(
                        i,
                        "tolerance",
                        "missing: a published number needs the tolerance we claim (e.g. 0.1, \"10%\" or \"1.25x\")"
                            .into(),
                    ))
                }
                (None, Some(_)) => {
                    return Err(bad(
                        i,
                        "tolerance",
                        "given without `published`: add the published number or drop it".into(),
                    ))
                }
                (None, None) => None,
            });
        }
        let names: BTreeSet<&str> = plans.iter().map(|p| p.name.as_str()).collect();
        if names.len() != plans.len() {
            anyhow::bail!(
                "{}: two scenario files share a `name`; give each its own (results go to <out>/{name}/<scenario name>/)",
                path.display()
            );
        }
        Ok(Experiment {
            name,
            dir: dir.to_path_buf(),
            manifest,
            scenarios,
            plans,
            metrics,
            bands,
            bounds,
        })
    }

    /// Seeds per run: `--seeds`, else the manifest's (quick or full), else
    /// the default.
    pub fn seeds(&self, quick: bool, given: Option<u64>) -> u64 {
        given.unwrap_or(if quick {
            self.manifest.quick.seeds.unwrap_or(QUICK_SEEDS)
        } else {
            self.manifest.seeds.unwrap_or(DEFAULT_SEEDS)
        })
    }
}

/// Every experiment under `root` (a directory per experiment holding
/// `experiment.toml`), sorted by name.
pub fn discover(root: &Path) -> anyhow::Result<Vec<Experiment>> {
    let entries = std::fs::read_dir(root).map_err(|e| {
        anyhow::anyhow!(
            "cannot read the experiments directory {}: {e}; give it with --experiments DIR \
             (tools/scenarios/reproduce in the Tollgate repository)",
            root.display()
        )
    })?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join(MANIFEST).is_file())
        .collect();
    dirs.sort();
    dirs.iter().map(|d| Experiment::load(d)).collect()
}
