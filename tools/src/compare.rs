//! `tollgate compare`: two or more results files side by side, e.g. the same
//! scenario through `sim` and through `load` (or, later, the testbed).
//!
//! Flows are matched by id (both runs drew the same flows from the same
//! scenario and seed); every run is compared with the first, the reference:
//!
//! - **summary**: Jain's index, fairness ratio, total goodput, utilization
//!   and time to the target ratio of each run, and each one's difference
//!   from the reference;
//! - **per flow**: goodput in each run and its difference from the
//!   reference in percent;
//! - **ordering**: whether the flows rank the same by goodput, counted as
//!   discordant pairs (Kendall's: a pair of flows whose order differs between
//!   the two runs). Pairs within 5 % of each other in *both* runs are ties,
//!   not discordant: noise should not count as a reversal.
//!
//! The plots (`compare-throughput`, `compare-jain`, drawn by
//! [`crate::plot::render_compare`]) overlay the runs' series.

use std::fmt::Write as _;

use schemars::JsonSchema;
use serde::Serialize;

use crate::results::{clip, Results};

/// Goodputs within this relative distance of each other are a tie when
/// ranking flows.
pub const TIE: f64 = 0.05;

/// One summary metric across the runs.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct MetricRow {
    /// Metric name as printed; it gives the unit (`total goodput Mbit/s`,
    /// `time to target ratio s`); Jain's index, the fairness ratio and the
    /// utilization have none.
    pub metric: String,
    /// Its value per run, in the metric's unit (`None`: not defined for that
    /// run).
    pub values: Vec<Option<f64>>,
}

/// One flow across the runs.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct FlowRow {
    /// Flow id (0-based).
    pub id: usize,
    /// Group name in the reference run.
    pub group: String,
    /// CCA spec in the reference run.
    pub cca: String,
    /// Goodput per run, Mbit/s (`None`: the run has no such flow).
    pub goodput_mbps: Vec<Option<f64>>,
}

/// How a run's flow ranking compares with the reference's.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Ordering {
    /// Number of flow pairs compared (both flows present in both runs, not
    /// tied).
    pub pairs: usize,
    /// Number of pairs ranked the other way round.
    pub discordant: usize,
}

/// `compare.json`: runs side by side (`tollgate compare`).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Comparison {
    /// A label per run, the reference first.
    pub labels: Vec<String>,
    /// Summary metrics.
    pub summary: Vec<MetricRow>,
    /// Flows, by id.
    pub flows: Vec<FlowRow>,
    /// Per run after the reference: its ordering against the reference.
    pub ordering: Vec<Ordering>,
    /// Differences the reader must know about (flow counts, CCAs, partial runs).
    pub warnings: Vec<String>,
}

/// Compare `runs` (at least two) with the first.
pub fn compare(labels: Vec<String>, runs: &[Results]) -> Comparison {
    let summary = vec![
        row("Jain's index", runs, |r| r.summary.jain),
        row("fairness ratio", runs, |r| r.summary.fairness_ratio),
        row("total goodput Mbit/s", runs, |r| {
            Some(r.summary.total_goodput_mbps)
        }),
        row("utilization", runs, |r| {
            (r.summary.bottleneck_mbps > 0.0).then_some(r.summary.utilization)
        }),
        row("time to target ratio s", runs, |r| {
            r.summary.time_to_target_s
        }),
    ];
    let n = runs.iter().map(|r| r.flows.len()).max().unwrap_or(0);
    let mut warnings = Vec::new();
    let reference = &runs[0];
    let flows: Vec<FlowRow> = (0..n)
        .map(|id| {
            let first = runs.iter().find_map(|r| r.flows.get(id));
            FlowRow {
                id,
                group: first.map_or_else(String::new, |f| f.group.clone()),
                cca: first.map_or_else(String::new, |f| f.cca.clone()),
                goodput_mbps: runs
                    .iter()
                    .map(|r| r.flows.get(id).map(|f| f.goodput_mbps))
                    .collect(),
            }
        })
        .collect();
    for (k, r) in runs.iter().enumerate() {
        if r.flows.len() != reference.flows.len() {
            warnings.push(format!(
                "{} has {} flows, {} has {}: only common ids are compared",
                labels[k],
                r.flows.len(),
                labels[0],
                reference.flows.len()
            ));
        }
        for (a, b) in reference.flows.iter().zip(&r.flows) {
            if a.cca != b.cca {
                warnings.push(format!(
                    "flow {}: cca {} in {}, {} in {}",
                    a.id, a.cca, labels[0], b.cca, labels[k]
                ));
            }
        }
        if r.partial {
            warnings.push(format!("{} is partial (interrupted)", labels[k]));
        }
        if r.summary.measure_from_s != reference.summary.measure_from_s {
            warnings.push(format!(
                "{} measures from {} s, {} from {} s",
                labels[k], r.summary.measure_from_s, labels[0], reference.summary.measure_from_s
            ));
        }
    }
    let ordering = (1..runs.len()).map(|k| ordering(&flows, k)).collect();
    Comparison {
        labels,
        summary,
        flows,
        ordering,
        warnings,
    }
}

fn row(metric: &str, runs: &[Results], f: impl Fn(&Results) -> Option<f64>) -> MetricRow {
    MetricRow {
        metric: metric.to_string(),
        values: runs.iter().map(f).collect(),
    }
}

/// Which of `a`, `b` is larger, or `None` within [`TIE`].
fn rank(a: f64, b: f64) -> Option<bool> {
    let scale = a.abs().max(b.abs());
    if scale == 0.0 || (a - b).abs() <= TIE * scale {
        None
    } else {
        Some(a > b)
    }
}

/// Discordant pairs between run 0 and run `k`.
fn ordering(flows: &[FlowRow], k: usize) -> Ordering {
    let mut pairs = 0;
    let mut discordant = 0;
    for (i, a) in flows.iter().enumerate() {
        for b in &flows[i + 1..] {
            let (Some(a0), Some(b0), Some(ak), Some(bk)) = (
                a.goodput_mbps[0],
                b.goodput_mbps[0],
                a.goodput_mbps[k],
                b.goodput_mbps[k],
            ) else {
                continue;
            };
            match (rank(a0, b0), rank(ak, bk)) {
                (Some(x), Some(y)) => {
                    pairs += 1;
                    discordant += usize::from(x != y);
                }
                // Tied in one run only: ordered in the other, counted as
                // a pair but not a reversal.
                (Some(_), None) | (None, Some(_)) => pairs += 1,
                (None, None) => {}
            }
        }
    }
    Ordering { pairs, discordant }
}

fn cell(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.3}"))
}

/// The comparison as text tables.
pub fn table(c: &Comparison) -> String {
    let mut o = String::new();
    let w = c.labels.iter().map(|l| l.len()).max().unwrap_or(0).max(10);
    let _ = write!(o, "{:<24}", "metric");
    for (k, l) in c.labels.iter().enumerate() {
        let _ = write!(o, " {l:>w$}");
        if k > 0 {
            let _ = write!(o, " {:>9}", "diff");
        }
    }
    o.push('\n');
    for m in &c.summary {
        let _ = write!(o, "{:<24}", m.metric);
        for (k, v) in m.values.iter().enumerate() {
            let _ = write!(o, " {:>w$}", cell(*v));
            if k > 0 {
                let d = v.zip(m.values[0]).map(|(a, b)| a - b);
                let _ = write!(o, " {:>9}", d.map_or("-".into(), |d| format!("{d:+.3}")));
            }
        }
        o.push('\n');
    }
    o.push('\n');
    let _ = write!(o, "{:>4}  {:<10} {:<20}", "flow", "group", "cca");
    for (k, l) in c.labels.iter().enumerate() {
        let _ = write!(o, " {l:>w$}");
        if k > 0 {
            let _ = write!(o, " {:>8}", "diff %");
        }
    }
    o.push('\n');
    for f in &c.flows {
        let _ = write!(
            o,
            "{:>4}  {:<10} {:<20}",
            f.id,
            clip(&f.group, 10),
            clip(&f.cca, 20)
        );
        for (k, v) in f.goodput_mbps.iter().enumerate() {
            let _ = write!(o, " {:>w$}", v.map_or("-".into(), |x| format!("{x:.2}")));
            if k > 0 {
                let d = v
                    .zip(f.goodput_mbps[0])
                    .filter(|&(_, b)| b > 0.0)
                    .map(|(a, b)| (a - b) / b * 100.0);
                let _ = write!(o, " {:>8}", d.map_or("-".into(), |d| format!("{d:+.1}")));
            }
        }
        o.push('\n');
    }
    o.push('\n');
    for (k, ord) in c.ordering.iter().enumerate() {
        let _ = writeln!(
            o,
            "flow order, {} vs {}: {}",
            c.labels[k + 1],
            c.labels[0],
            if ord.discordant == 0 {
                format!("same ({} ordered pairs, ties within 5 %)", ord.pairs)
            } else {
                format!(
                    "differs: {} of {} ordered pairs reversed",
                    ord.discordant, ord.pairs
                )
            }
        );
    }
    for w in &c.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flows(g: &[&[f64]]) -> Vec<FlowRow> {
        (0..g[0].len())
            .map(|id| FlowRow {
                id,
                group: String::new(),
                cca: String::new(),
                goodput_mbps: g.iter().map(|run| Some(run[id])).collect(),
            })
            .collect()
    }

    #[test]
    fn the_same_order_has_no_discordant_pairs() {
        let f = flows(&[&[40.0, 30.0, 20.0], &[50.0, 25.0, 10.0]]);
        let o = ordering(&f, 1);
        assert_eq!((o.pairs, o.discordant), (3, 0));
    }

    #[test]
    fn a_swapped_pair_is_counted() {
        let f = flows(&[&[40.0, 30.0, 20.0], &[25.0, 30.0, 10.0]]);
        let o = ordering(&f, 1);
        assert_eq!((o.pairs, o.discordant), (3, 1));
    }

    #[test]
    fn near_equal_flows_are_ties_not_reversals() {
        // 30 vs 29.5 in the reference, 29 vs 30 in the other: both within 5 %.
        let f = flows(&[&[30.0, 29.5], &[29.0, 30.0]]);
        let o = ordering(&f, 1);
        assert_eq!((o.pairs, o.discordant), (0, 0));
    }
}
