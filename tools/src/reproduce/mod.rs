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

use serde::Serialize;

use crate::campaign::{self, Campaign, RunStatus};
use crate::results::{self, Results};
use crate::scenario;
use crate::stats::{mean_ci, MeanCi};

pub mod manifest;
pub mod metric;
mod report;

pub use manifest::{discover, Experiment, Published, Tolerance};
pub use report::{write_report, ReportInfo};

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
    let mut out = Vec::new();
    for (e, exp) in experiments.iter().enumerate() {
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

/// Whether a row's number matches the published one.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// The mean is within the tolerance of the published number.
    Reproduced,
    /// It is not: `by` = mean - published (or the nearest end of a range),
    /// `relative` = that / |published|.
    Differs {
        /// Signed difference.
        by: f64,
        /// Signed difference relative to the published value.
        relative: f64,
    },
    /// No published number: we only measure.
    Measured,
    /// No run defined the metric.
    NoData,
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
    /// The allowed absolute difference.
    pub tolerance: Option<f64>,
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
}

/// The verdict for a mean against a published number.
pub fn verdict(published: Option<Published>, tolerance: Option<f64>, mean: Option<f64>) -> Verdict {
    match (published, mean) {
        (None, _) => Verdict::Measured,
        (Some(_), None) => Verdict::NoData,
        (Some(p), Some(m)) => {
            let d = p.distance(m);
            if d <= tolerance.unwrap_or(0.0) + 1e-12 {
                Verdict::Reproduced
            } else {
                let by = if m < p.centre() { -d } else { d };
                Verdict::Differs {
                    by,
                    relative: by / p.centre().abs().max(1e-12),
                }
            }
        }
    }
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

/// Every row of `exp` from the results under `prepared` (that
/// experiment's scenarios).
pub fn evaluate(exp: &Experiment, prepared: &[&Prepared]) -> anyhow::Result<Vec<RowResult>> {
    let mut rows = Vec::new();
    let mut cache = ResultsCache::new();
    for ((row, metric), &tolerance) in exp
        .manifest
        .rows
        .iter()
        .zip(&exp.metrics)
        .zip(&exp.tolerances)
    {
        let (mut values, mut missing) =
            per_seed(exp, prepared, &mut cache, &row.scenario, &row.point, metric)?;
        if let Some(base) = &row.baseline {
            let (b, b_missing) = per_seed(exp, prepared, &mut cache, base, &row.point, metric)?;
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
        let defined: Vec<f64> = values
            .iter()
            .filter_map(|v| v.1)
            .filter(|v| v.is_finite())
            .collect();
        let ours = mean_ci(&defined);
        let metric = match &row.baseline {
            Some(b) => format!("{} ÷ same in {b}", row.metric),
            None => row.metric.clone(),
        };
        rows.push(RowResult {
            table: row.table.clone(),
            label: row.label.clone(),
            scenario: row.scenario.clone(),
            point: row.point.clone(),
            metric,
            published: row.published,
            tolerance,
            verdict: verdict(row.published, tolerance, ours.as_ref().map(|o| o.mean)),
            ours,
            values,
            missing,
            note: row.note.clone(),
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_tolerance_and_ranges() {
        let v = |p, t, m| verdict(Some(p), Some(t), Some(m));
        assert_eq!(v(Published::Value(3.85), 0.1, 3.80), Verdict::Reproduced);
        match v(Published::Value(3.85), 0.1, 4.35) {
            Verdict::Differs { by, relative } => {
                assert!((by - 0.5).abs() < 1e-9);
                assert!((relative - 0.5 / 3.85).abs() < 1e-9);
            }
            other => panic!("{other:?}"),
        }
        match v(Published::Value(1.08), 0.1, 0.5) {
            Verdict::Differs { by, .. } => assert!(by < 0.0),
            other => panic!("{other:?}"),
        }
        let range = Published::Range([0.975, 0.988]);
        assert_eq!(v(range, 0.0, 0.980), Verdict::Reproduced);
        assert_eq!(v(range, 0.01, 0.970), Verdict::Reproduced);
        assert!(matches!(v(range, 0.01, 0.95), Verdict::Differs { .. }));
        assert_eq!(verdict(None, None, Some(1.0)), Verdict::Measured);
        assert_eq!(
            verdict(Some(Published::Value(1.0)), Some(0.1), None),
            Verdict::NoData
        );
    }

    #[test]
    fn relative_tolerances_scale_with_the_published_value() {
        let t = Tolerance::Relative("10%".into());
        assert!((t.allowed(Published::Value(50.0)).unwrap() - 5.0).abs() < 1e-9);
        assert!(Tolerance::Relative("ten".into())
            .allowed(Published::Value(1.0))
            .is_err());
        assert!(Tolerance::Absolute(-1.0)
            .allowed(Published::Value(1.0))
            .is_err());
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
