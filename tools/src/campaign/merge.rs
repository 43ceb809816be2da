//! `campaign.json`: every run's summary metrics and, per sweep point, the
//! mean and 95 % confidence interval of each ([`crate::stats::mean_ci`]),
//! the table `tollgate sim` and `tollgate campaign merge` print, and the
//! plots of the main metrics against the swept value with error bars.
//!
//! Nothing in `campaign.json` depends on where or when the runs ran: run
//! directories are relative to the campaign directory and the results files
//! themselves hold no wall-clock values, so merging the same runs gives the
//! same bytes on any machine.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use schemars::JsonSchema;
use serde::Serialize;

use super::{read_plan_file, run_status, PlanFile, RunStatus, MERGED_FILE, PLAN_FILE};
use crate::plot::{self, ErrorSeries};
use crate::results::{self, Results};
use crate::stats::{mean_ci, MeanCi, CONFIDENCE};

/// A run without complete results.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct MissingRun {
    /// Run index (0-based, `tollgate sim --run-index`).
    pub index: usize,
    /// Its sweep point (`param=value`), if any.
    pub point: Option<String>,
    /// Seed (an integer, no unit).
    pub seed: u64,
    /// Directory relative to the campaign directory.
    pub dir: String,
    /// Why it does not count.
    pub reason: String,
}

/// One metric of one sweep point over its finished runs.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct MetricStats {
    /// Number of runs in which the metric was not defined (e.g. a fairness
    /// ratio with a starved flow, a time to ratio never reached).
    pub undefined: usize,
    /// Mean and interval over the runs where it was (absent if none).
    #[serde(flatten)]
    pub ci: Option<MeanCi>,
}

/// Statistics of one sweep point.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct PointStats {
    /// Directory label.
    pub label: String,
    /// `param=value`, if any.
    pub point: Option<String>,
    /// The swept value as written, if any.
    pub value: Option<String>,
    /// Number of runs of this point in the plan.
    pub runs: usize,
    /// Number of runs with complete results, the ones the statistics are
    /// over.
    pub finished: usize,
    /// Every summary metric, by name. The name gives the unit: `_mbps`
    /// Mbit/s, `_s` seconds, `_ms` milliseconds, `.drops` packets; `jain`,
    /// `fairness_ratio`, `utilization` and `.share` have none.
    pub metrics: BTreeMap<String, MetricStats>,
    /// Metric names in the order the results give them (for the table).
    #[serde(skip)]
    pub order: Vec<String>,
}

/// One finished run in `campaign.json`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
struct RunSummary {
    /// Run index (0-based, `tollgate sim --run-index`).
    index: usize,
    /// Its sweep point (`param=value`), if any.
    point: Option<String>,
    /// Seed (an integer, no unit).
    seed: u64,
    /// Directory relative to the campaign directory.
    dir: String,
    /// Every summary metric by name, `null` where not defined; units as
    /// in [`PointStats::metrics`].
    metrics: BTreeMap<String, Option<f64>>,
}

/// `campaign.json`: the merged campaign (`tollgate campaign merge`, or
/// `tollgate sim` with several seeds).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Merged {
    /// Format version of this file (an integer; 1).
    pub format: u32,
    /// Scenario name.
    pub scenario: String,
    /// `tollgate-tools` version that merged.
    pub tollgate_version: String,
    /// Hash of the resolved plan (SHA-256, hex).
    pub plan_hash: String,
    /// The swept parameter, if any.
    pub sweep_param: Option<String>,
    /// Confidence level of the intervals (a fraction; 0.95).
    pub confidence: f64,
    /// Number of runs in the plan.
    pub runs_planned: usize,
    /// Number of runs with complete results.
    pub runs_finished: usize,
    /// Runs without complete results (not in the statistics).
    pub missing: Vec<MissingRun>,
    /// Per sweep point, in file order.
    pub points: Vec<PointStats>,
    /// Every finished run's summary metrics.
    runs: Vec<RunSummary>,
}

/// A run's summary metrics by name ([`summary_metrics`]).
pub type Metrics = Vec<(String, Option<f64>)>;

/// The names of the whole-run summary metrics, first in [`summary_metrics`].
pub const RUN_SUMMARY_METRICS: [&str; 5] = [
    "jain",
    "fairness_ratio",
    "utilization",
    "total_goodput_mbps",
    "time_to_target_s",
];

/// Every summary metric of a run, in a fixed order: `jain`,
/// `fairness_ratio`, `utilization`, `total_goodput_mbps`,
/// `time_to_target_s`, then per flow group `group.<name>.goodput_mbps` and
/// `.share`, per variant (when there are several) `variant.<name>.goodput_mbps`
/// and `.share`, and per forward port `port.<name>.queue_delay_p50_ms`,
/// `.queue_delay_p99_ms`, where the port carried L4S traffic
/// `.queue_delay_l4s_{mean,p50,p99}_ms` and `.queue_delay_classic_{mean,p50,p99}_ms`
/// (the two ECN classes of RFC 9332), and `.drops`. `None`: not defined in
/// this run (e.g. no measurement window).
pub fn summary_metrics(r: &Results) -> Metrics {
    let s = &r.summary;
    let measured = |x: f64| (!s.window_empty).then_some(x);
    let whole_run = [
        s.jain,
        s.fairness_ratio,
        measured(s.utilization),
        measured(s.total_goodput_mbps),
        s.time_to_target_s,
    ];
    let mut m: Metrics = RUN_SUMMARY_METRICS
        .iter()
        .map(|n| n.to_string())
        .zip(whole_run)
        .collect();
    for g in &r.groups {
        m.push((
            format!("group.{}.goodput_mbps", g.name),
            measured(g.goodput_mbps),
        ));
        m.push((format!("group.{}.share", g.name), measured(g.share)));
    }
    if r.variants.len() > 1 {
        for v in &r.variants {
            m.push((
                format!("variant.{}.goodput_mbps", v.name),
                measured(v.goodput_mbps),
            ));
            m.push((format!("variant.{}.share", v.name), measured(v.share)));
        }
    }
    for p in r.ports.iter().filter(|p| p.name.starts_with("fwd")) {
        let d = p.queue_delay_ms.as_ref();
        m.push((
            format!("port.{}.queue_delay_p50_ms", p.name),
            d.map(|d| d.p50),
        ));
        m.push((
            format!("port.{}.queue_delay_p99_ms", p.name),
            d.map(|d| d.p99),
        ));
        let classes = [
            ("l4s", &p.queue_delay_l4s_ms),
            ("classic", &p.queue_delay_classic_ms),
        ];
        for (class, d) in classes {
            if let Some(d) = d {
                for (stat, v) in [("mean", d.mean), ("p50", d.p50), ("p99", d.p99)] {
                    m.push((
                        format!("port.{}.queue_delay_{class}_{stat}_ms", p.name),
                        Some(v),
                    ));
                }
            }
        }
        let drops: u64 = p.dropped.iter().map(|(_, n)| n).sum();
        m.push((format!("port.{}.drops", p.name), Some(drops as f64)));
    }
    m
}

/// Read every run of the campaign in `dir` (which holds `campaign-plan.json`)
/// and compute the statistics. Runs without complete results are listed in
/// [`Merged::missing`] and left out of the statistics; nothing is written
/// ([`write`] does that).
pub fn merge(dir: &Path) -> anyhow::Result<Merged> {
    let plan_path = dir.join(PLAN_FILE);
    if !plan_path.exists() {
        anyhow::bail!(
            "{} has no {PLAN_FILE}: give the campaign directory `<out>/<name>` that \
             `tollgate campaign run`, `campaign slurm` or `sim --run-index` wrote to",
            dir.display()
        );
    }
    let plan: PlanFile = read_plan_file(&plan_path)?;
    let mut missing = Vec::new();
    let mut runs = Vec::new();
    // Per point, the summary metrics of each finished run.
    let mut per_point: Vec<Vec<Metrics>> = vec![Vec::new(); plan.points.len()];
    for run in &plan.runs {
        let run_dir = dir.join(&run.dir);
        let point = plan.points.get(run.point).and_then(|p| p.point.clone());
        let status = run_status(&run_dir);
        let read = match status {
            RunStatus::Finished => results::read(&run_dir.join("results.json"))
                .map_err(|e| RunStatus::Unreadable(e.to_string())),
            other => Err(other),
        };
        match read {
            Ok(r) => {
                let m = summary_metrics(&r);
                runs.push(RunSummary {
                    index: run.index,
                    point,
                    seed: run.seed,
                    dir: run.dir.clone(),
                    metrics: m.iter().cloned().collect(),
                });
                per_point[run.point].push(m);
            }
            Err(status) => missing.push(MissingRun {
                index: run.index,
                point,
                seed: run.seed,
                dir: run.dir.clone(),
                reason: status.reason(),
            }),
        }
    }
    let points = plan
        .points
        .iter()
        .zip(&per_point)
        .enumerate()
        .map(|(p, (point, done))| {
            let mut order: Vec<String> = Vec::new();
            let mut values: BTreeMap<String, (Vec<f64>, usize)> = BTreeMap::new();
            for m in done {
                for (name, v) in m {
                    if !values.contains_key(name) {
                        order.push(name.clone());
                    }
                    let e = values.entry(name.clone()).or_default();
                    match v {
                        Some(x) if x.is_finite() => e.0.push(*x),
                        _ => e.1 += 1,
                    }
                }
            }
            let metrics = values
                .into_iter()
                .map(|(name, (xs, undefined))| {
                    (
                        name,
                        MetricStats {
                            undefined,
                            ci: mean_ci(&xs),
                        },
                    )
                })
                .collect();
            PointStats {
                label: point.label.clone(),
                point: point.point.clone(),
                value: point.value.clone(),
                runs: plan.runs.iter().filter(|r| r.point == p).count(),
                finished: done.len(),
                metrics,
                order,
            }
        })
        .collect();
    Ok(Merged {
        format: 1,
        scenario: plan.scenario.clone(),
        tollgate_version: env!("CARGO_PKG_VERSION").to_string(),
        plan_hash: plan.plan_hash.clone(),
        sweep_param: plan.sweep_param.clone(),
        confidence: CONFIDENCE,
        runs_planned: plan.runs.len(),
        runs_finished: runs.len(),
        missing,
        points,
        runs,
    })
}

impl Merged {
    /// Write `campaign.json` into `dir` and, with `plots` and a sweep, the
    /// plots of the main metrics against the swept value
    /// (`campaign-<metric>.svg/png`).
    pub fn write(&self, dir: &Path, plots: bool) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)? + "\n";
        let path = dir.join(MERGED_FILE);
        std::fs::write(&path, text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        if plots {
            self.plot(dir)?;
        }
        Ok(())
    }

    /// The main metrics against the swept value, mean with 95 % error bars.
    fn plot(&self, dir: &Path) -> anyhow::Result<()> {
        let Some(param) = &self.sweep_param else {
            return Ok(());
        };
        // The x position of each point: the number the value starts with
        // (`0.5bdp` -> 0.5, `20ms` -> 20), or the point's index if any
        // value has none.
        let numeric: Option<Vec<f64>> = self
            .points
            .iter()
            .map(|p| p.value.as_deref().and_then(leading_number))
            .collect();
        let (xs, x_label) = match numeric {
            Some(xs) => (xs, param.clone()),
            None => (
                (0..self.points.len()).map(|i| i as f64).collect(),
                format!("{param} (point index)"),
            ),
        };
        let series_of = |metric: &str, name: &str| ErrorSeries {
            name: name.to_string(),
            points: self
                .points
                .iter()
                .zip(&xs)
                .filter_map(|(p, &x)| {
                    let ci = p.metrics.get(metric)?.ci.as_ref()?;
                    Some((
                        x,
                        ci.mean,
                        ci.ci95_low.unwrap_or(ci.mean),
                        ci.ci95_high.unwrap_or(ci.mean),
                    ))
                })
                .collect(),
        };
        let title = |what: &str| format!("{}: {what} vs {param} (mean, 95 % CI)", self.scenario);
        for (metric, label) in [
            ("jain", "Jain's fairness index"),
            ("fairness_ratio", "fairness ratio (max/min)"),
            ("utilization", "utilization"),
            ("total_goodput_mbps", "total goodput (Mbit/s)"),
        ] {
            plot::render_error_bars(
                dir,
                &format!("campaign-{metric}"),
                &title(label),
                &x_label,
                label,
                &[series_of(metric, label)],
            )?;
        }
        // Goodput per flow group, one series per group.
        let groups: Vec<String> = self
            .points
            .first()
            .map(|p| {
                p.order
                    .iter()
                    .filter_map(|m| m.strip_prefix("group.")?.strip_suffix(".goodput_mbps"))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let series: Vec<ErrorSeries> = groups
            .iter()
            .map(|g| series_of(&format!("group.{g}.goodput_mbps"), g))
            .collect();
        plot::render_error_bars(
            dir,
            "campaign-group-goodput",
            &title("goodput per flow group"),
            &x_label,
            "goodput (Mbit/s)",
            &series,
        )
    }
}

/// The number a value starts with: `0.5bdp` -> 0.5, `-3` -> -3.
fn leading_number(v: &str) -> Option<f64> {
    let end = v
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || ((c == '-' || c == '+') && i == 0)))
        .map_or(v.len(), |(i, _)| i);
    v[..end].parse().ok()
}

/// The statistics table: per sweep point, every metric's mean, 95 %
/// interval, n, and the runs where it was undefined.
pub fn stats_table(m: &Merged) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "campaign {}: {} of {} runs finished; mean and {:.0} % confidence interval (Student t) over seeds",
        m.scenario,
        m.runs_finished,
        m.runs_planned,
        m.confidence * 100.0
    );
    let num = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |v| format!("{v:.4}"));
    for p in &m.points {
        let _ = writeln!(
            o,
            "\n{} ({} of {} runs)",
            p.point.as_deref().unwrap_or("all runs"),
            p.finished,
            p.runs
        );
        let _ = writeln!(
            o,
            "  {:<36} {:>11} {:>11} {:>11} {:>11} {:>4}",
            "metric", "mean", "± 95 %", "low", "high", "n"
        );
        for name in &p.order {
            let s = &p.metrics[name];
            let ci = s.ci.as_ref();
            let _ = writeln!(
                o,
                "  {:<36} {:>11} {:>11} {:>11} {:>11} {:>4}{}",
                name,
                num(ci.map(|c| c.mean)),
                num(ci.and_then(|c| c.half_width)),
                num(ci.and_then(|c| c.ci95_low)),
                num(ci.and_then(|c| c.ci95_high)),
                ci.map_or(0, |c| c.n),
                if s.undefined > 0 {
                    format!("  (undefined in {})", s.undefined)
                } else {
                    String::new()
                }
            );
        }
    }
    if !m.missing.is_empty() {
        let _ = writeln!(o, "\nmissing ({}):", m.missing.len());
        for r in &m.missing {
            let _ = writeln!(o, "  run {} ({}): {}", r.index, r.dir, r.reason);
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::leading_number;

    #[test]
    fn leading_numbers_of_sweep_values() {
        assert_eq!(leading_number("0.5bdp"), Some(0.5));
        assert_eq!(leading_number("20ms"), Some(20.0));
        assert_eq!(leading_number("0.1"), Some(0.1));
        assert_eq!(leading_number("-3"), Some(-3.0));
        assert_eq!(leading_number("newreno"), None);
    }
}
