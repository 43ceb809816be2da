//! A row's metric, evaluated on one run's results.
//!
//! Grammar: `TERM` or `TERM / TERM`, where a term is
//! - a summary metric name as in `campaign.json` ([`summary_metrics`]):
//!   `jain`, `fairness_ratio`, `utilization`, `total_goodput_mbps`,
//!   `time_to_target_s`, `group.<name>.goodput_mbps`, `group.<name>.share`,
//!   `variant.<name>.goodput_mbps`, `port.<name>.drops`, ...;
//! - `wire_mbps`: what the forward bottleneck carried, headers included
//!   (utilization x bottleneck rate), where papers report link throughput;
//! - `median_window_ratio`: the median over the measurement window of the
//!   fairness ratio of each `metrics.fairness_window` (a poster's "median
//!   fairness ratio", against the whole-window `fairness_ratio`);
//! - `rrmqs.accuracy`, `rrmqs.jain`, `rrmqs.jain_real`: the RRMQS meter's
//!   accuracy and its measured and real J(V, V') as means over the meter's
//!   windows (first forward port);
//! - `rrmqs.j_measure`, `rrmqs.j_real`, `rrmqs.accuracy_run`: the same
//!   averaged the thesis's way (section 4.2.1), over the run first and
//!   Jain's index last: `j_measure` is J over each variant's
//!   `mean(v) / mean(v')` (the meter's reports averaged over the
//!   measurement window), `j_real` J over each variant's real index averaged
//!   over the windows (its flows' mean rate through the port against the
//!   fair per-flow rate), `accuracy_run` min / max of the two. An on/off
//!   feedback can equalise these long-run averages while every window stays
//!   unfair, which the per-window means show;
//! - `jain(g1, g2, ...)`: Jain's index over the long-lived flows of the
//!   named groups (e.g. the long flows of a parking lot);
//! - `ratio(g1, g2, ...)`: max / min goodput over those flows;
//! - `sum(g1, g2, ...)`: their total goodput, Mbit/s.
//!
//! A term that is not defined in a run (no such group, a starved flow) makes
//! the row undefined in that run; the report counts such runs.

use super::verdict::Bounds;
use crate::campaign::{summary_metrics, RUN_SUMMARY_METRICS};
use crate::metrics::{fairness_ratio, jain};
use crate::results::{Results, RrmqsWindow};
use crate::scenario::Scenario;

/// One term.
#[derive(Clone, Debug, PartialEq)]
enum Term {
    /// A summary metric by name.
    Summary(String),
    /// Utilization x bottleneck rate.
    WireMbps,
    /// Median of the windowed fairness ratio.
    MedianWindowRatio,
    /// An RRMQS meter figure: `accuracy`, `jain`, `jain_real`.
    Rrmqs(&'static str),
    /// Jain's index over the flows of these groups.
    Jain(Vec<String>),
    /// Max / min goodput over the flows of these groups.
    Ratio(Vec<String>),
    /// Total goodput of the flows of these groups.
    Sum(Vec<String>),
}

/// A parsed metric.
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    num: Term,
    den: Option<Term>,
}

fn parse_term(s: &str) -> Result<Term, String> {
    let s = s.trim();
    let call = |f: &str| {
        s.strip_prefix(f)
            .and_then(|r| r.trim_start().strip_prefix('('))
            .and_then(|r| r.strip_suffix(')'))
    };
    let groups = |args: &str| -> Result<Vec<String>, String> {
        let g: Vec<String> = args.split(',').map(|a| a.trim().to_string()).collect();
        if g.iter().any(String::is_empty) {
            return Err(format!(
                "\"{s}\": name one or more flow groups, comma-separated"
            ));
        }
        Ok(g)
    };
    if s == "wire_mbps" {
        return Ok(Term::WireMbps);
    }
    for f in [
        "accuracy",
        "jain",
        "jain_real",
        "j_measure",
        "j_real",
        "accuracy_run",
    ] {
        if s.strip_prefix("rrmqs.") == Some(f) {
            return Ok(Term::Rrmqs(f));
        }
    }
    if s == "median_window_ratio" {
        return Ok(Term::MedianWindowRatio);
    }
    if let Some(args) = call("jain") {
        return Ok(Term::Jain(groups(args)?));
    }
    if let Some(args) = call("ratio") {
        return Ok(Term::Ratio(groups(args)?));
    }
    if let Some(args) = call("sum") {
        return Ok(Term::Sum(groups(args)?));
    }
    let known = RUN_SUMMARY_METRICS;
    let dotted = ["group.", "variant.", "port."]
        .iter()
        .any(|p| s.starts_with(p) && s.matches('.').count() >= 2);
    if known.contains(&s) || dotted {
        return Ok(Term::Summary(s.to_string()));
    }
    Err(format!(
        "\"{s}\": unknown; give a summary metric ({}, group.<name>.goodput_mbps, \
         group.<name>.share, variant.<name>.goodput_mbps, port.<name>.drops, ...), \
         wire_mbps, median_window_ratio, rrmqs.accuracy, rrmqs.jain, rrmqs.jain_real, rrmqs.j_measure, rrmqs.j_real, rrmqs.accuracy_run, jain(group, ...), ratio(group, ...), sum(group, ...), or A / B of two of these",
        known.join(", ")
    ))
}

impl Metric {
    /// Parse `TERM` or `TERM / TERM`.
    pub fn parse(s: &str) -> Result<Metric, String> {
        let mut parts = s.split('/');
        let num = parse_term(parts.next().unwrap_or(""))?;
        let den = parts.next().map(parse_term).transpose()?;
        if parts.next().is_some() {
            return Err(format!("\"{s}\": at most one `/`"));
        }
        Ok(Metric { num, den })
    }

    /// What the metric can take in scenario `s`: a max/min ratio is at
    /// least 1; Jain's index and a share at most 1; the time to reach the
    /// target ratio, measured in `metrics.target_window` windows from
    /// the measurement start, at least one window. A quotient of two terms
    /// has no bounds.
    pub fn bounds(&self, s: &Scenario) -> Bounds {
        if self.den.is_some() {
            return Bounds::default();
        }
        let (floor, ceiling) = match &self.num {
            Term::Summary(n) if n == "time_to_target_s" => (Some(s.metrics.target_window_s), None),
            Term::Summary(n) if n == "fairness_ratio" => (Some(1.0), None),
            Term::Summary(n) if n == "jain" || n.ends_with(".share") => (None, Some(1.0)),
            Term::MedianWindowRatio | Term::Ratio(_) => (Some(1.0), None),
            Term::Jain(_) | Term::Rrmqs("jain" | "jain_real" | "j_measure" | "j_real") => {
                (None, Some(1.0))
            }
            _ => (None, None),
        };
        Bounds { floor, ceiling }
    }

    /// The metric in one run; `None` where it is not defined.
    pub fn eval(&self, r: &Results) -> Option<f64> {
        let term = |t: &Term| -> Option<f64> {
            match t {
                Term::Summary(name) => summary_metrics(r)
                    .into_iter()
                    .find(|(n, _)| n == name)
                    .and_then(|(_, v)| v),
                Term::WireMbps => (!r.summary.window_empty)
                    .then_some(r.summary.utilization * r.summary.bottleneck_mbps),
                Term::MedianWindowRatio => median_window_ratio(r),
                Term::Rrmqs(f) => r.rrmqs.as_ref().and_then(|m| match *f {
                    "accuracy" => m.accuracy,
                    "jain" => m.mean_jain,
                    "jain_real" => m.mean_jain_real,
                    "j_measure" => run_averaged(r).0,
                    "j_real" => run_averaged(r).1,
                    _ => match run_averaged(r) {
                        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => Some(a.min(b) / a.max(b)),
                        _ => None,
                    },
                }),
                Term::Jain(groups) => jain(&goodputs(r, groups)?),
                Term::Ratio(groups) => fairness_ratio(&goodputs(r, groups)?),
                Term::Sum(groups) => Some(goodputs(r, groups)?.iter().sum()),
            }
        };
        let num = term(&self.num)?;
        match &self.den {
            None => Some(num),
            Some(d) => {
                let d = term(d)?;
                (d != 0.0).then(|| num / d)
            }
        }
    }
}

/// The thesis's J_measure and J_real (module doc): the meter's windows
/// after the measurement start averaged per variant first, Jain's index of
/// the per-variant figures last.
fn run_averaged(r: &Results) -> (Option<f64>, Option<f64>) {
    match &r.rrmqs {
        Some(m) => run_averaged_windows(&m.windows, r.summary.measure_from_s),
        None => (None, None),
    }
}

/// [`run_averaged`] over the windows ending after `from` seconds.
fn run_averaged_windows(windows: &[RrmqsWindow], from: f64) -> (Option<f64>, Option<f64>) {
    let windows: Vec<&RrmqsWindow> = windows.iter().filter(|w| w.end_s > from).collect();
    let variants = windows.first().map_or(0, |w| w.variants.len());
    let mean = |xs: Vec<f64>| (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
    let (mut measured, mut real) = (Vec::new(), Vec::new());
    for k in 0..variants {
        let v = mean(windows.iter().filter_map(|w| w.rates.get(k)?.0).collect());
        let v_prime = mean(windows.iter().filter_map(|w| w.rates.get(k)?.1).collect());
        if let (Some(v), Some(vp)) = (v, v_prime) {
            if vp > 0.0 {
                measured.push(v / vp);
            }
        }
        if let Some(x) = mean(
            windows
                .iter()
                .filter_map(|w| w.variants.get(k)?.2)
                .collect(),
        ) {
            real.push(x);
        }
    }
    let j = |x: &[f64]| if x.len() >= 2 { jain(x) } else { None };
    (j(&measured), j(&real))
}

/// Median of the windowed fairness ratios from the measurement start on
/// (windows with an undefined ratio, e.g. a starved flow, count as
/// infinitely unfair).
fn median_window_ratio(r: &Results) -> Option<f64> {
    let from = r.summary.measure_from_s;
    let mut v: Vec<f64> = r
        .series
        .t_s
        .iter()
        .zip(&r.series.fairness_ratio)
        .filter(|(t, _)| **t > from)
        .map(|(_, x)| x.unwrap_or(f64::INFINITY))
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    let median = if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    };
    median.is_finite().then_some(median)
}

/// Goodput of every long-lived flow in `groups`; `None` if a group has none.
fn goodputs(r: &Results, groups: &[String]) -> Option<Vec<f64>> {
    let mut out = Vec::new();
    for g in groups {
        let before = out.len();
        out.extend(
            r.flows
                .iter()
                .filter(|f| &f.group == g && f.long_lived)
                .map(|f| f.goodput_mbps),
        );
        if out.len() == before {
            return None;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thesis_averages_over_the_run_before_jains_index() {
        // Two variants taking turns: each window one has twice the other's
        // rate, so every window's J is 0.9, but over the run their averages
        // are equal and the thesis's J is 1.
        let window = |end_s: f64, a: f64, b: f64| RrmqsWindow {
            end_s,
            variants: vec![
                ("a".into(), Some(a), Some(a), "normal".into()),
                ("b".into(), Some(b), Some(b), "normal".into()),
            ],
            jain: jain(&[a, b]),
            jain_real: jain(&[a, b]),
            rates: vec![(Some(a * 10.0), Some(10.0)), (Some(b * 10.0), Some(10.0))],
        };
        let windows: Vec<RrmqsWindow> = (1..=10)
            .map(|k| {
                let (a, b) = if k % 2 == 0 { (2.0, 1.0) } else { (1.0, 2.0) };
                window(f64::from(k) * 0.5, a, b)
            })
            .collect();
        assert!((windows[0].jain.unwrap() - 0.9).abs() < 1e-12);
        let (m, r) = run_averaged_windows(&windows, 0.0);
        assert!((m.unwrap() - 1.0).abs() < 1e-12, "{m:?}");
        assert!((r.unwrap() - 1.0).abs() < 1e-12, "{r:?}");
        // Windows ending at or before the measurement start are left out:
        // from 4.5 s only the last one (a = 2, b = 1) counts.
        let (m, _) = run_averaged_windows(&windows, 4.5);
        assert!((m.unwrap() - 0.9).abs() < 1e-12, "{m:?}");
        let (m, _) = run_averaged_windows(&windows, 4.0);
        assert!((m.unwrap() - 1.0).abs() < 1e-12, "{m:?}");
    }

    #[test]
    fn a_time_to_target_is_bounded_below_by_its_window() {
        let text = |extra: &str| {
            format!(
                "name = \"t\"\nduration = \"10s\"\n[topology]\nkind = \"dumbbell\"\n\
                 bottleneck = {{ rate = \"10Mbit\", delay = \"1ms\" }}\n[[flows]]\nname = \"a\"\n\
                 cca = \"newreno\"\nrtt = \"10ms\"\n[metrics]\n{extra}"
            )
        };
        let m = Metric::parse("time_to_target_s").unwrap();
        let floor = |extra: &str| {
            let plan = crate::scenario::parse_plan(&text(extra)).unwrap();
            m.bounds(&plan.runs[0]).floor
        };
        assert_eq!(floor(""), Some(1.0), "the fairness window by default");
        assert_eq!(floor("target_window = \"100ms\"\n"), Some(0.1));
        assert!(crate::scenario::parse_plan(&text("target_window = \"10ms\"\n")).is_err());
    }

    #[test]
    fn parses_terms_ratios_and_group_functions() {
        assert_eq!(
            Metric::parse("fairness_ratio").unwrap(),
            Metric {
                num: Term::Summary("fairness_ratio".into()),
                den: None
            }
        );
        let m = Metric::parse("group.short.goodput_mbps / group.long.goodput_mbps").unwrap();
        assert_eq!(m.den, Some(Term::Summary("group.long.goodput_mbps".into())));
        assert_eq!(
            Metric::parse("jain(a, b)").unwrap().num,
            Term::Jain(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            Metric::parse("rrmqs.j_measure").unwrap().num,
            Term::Rrmqs("j_measure")
        );
        for bad in [
            "jfi",
            "group.x",
            "jain()",
            "a / b / c",
            "ratio(a,,b)",
            "rrmqs.j",
        ] {
            assert!(Metric::parse(bad).is_err(), "{bad} accepted");
        }
    }
}
