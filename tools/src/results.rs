//! The results file: everything a run measured, built from the engine's raw
//! [`RunData`], written as `results.json` (plus per-flow CSV) and read back by
//! `tollgate report`.
//!
//! Determinism: the file holds no wall-clock values and only ordered
//! containers (`Vec`, struct fields), so the same scenario and seed give a
//! byte-identical file.

use std::fmt::Write as _;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tollgate_cca::StatValue;
use tollgate_router::DropReason;

use crate::metrics::{fairness_ratio, jain, time_to_ratio};
use crate::scenario::Scenario;
use crate::sim::RunData;

/// `results.json`: everything one run measured (`tollgate sim`, `load`,
/// `testbed`).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Results {
    /// Format version of this file (an integer; 1).
    pub format: u32,
    /// `tollgate-tools` version.
    pub tollgate_version: String,
    /// Scenario name.
    pub scenario: String,
    /// Sweep point (`param=value`), if any.
    pub sweep_point: Option<String>,
    /// Seed of the run's pseudo-random numbers (an integer, no unit).
    pub seed: u64,
    /// The run was stopped (Ctrl-C, SIGTERM) before the scenario's duration;
    /// every metric covers the time up to `reached_s` only.
    #[serde(default)]
    pub partial: bool,
    /// Virtual time the run reached, s (the duration unless `partial`; 0 in
    /// files written before this field existed).
    #[serde(default)]
    pub reached_s: f64,
    /// The scenario as the run resolved it, every default filled in; the
    /// keys name their units (`_s` seconds, `_bps` bit/s, `_bytes` bytes).
    pub config: serde_json::Value,
    /// Headline numbers.
    pub summary: Summary,
    /// Per flow.
    pub flows: Vec<FlowResult>,
    /// Per variant (CCA algorithm id), in variant-id order.
    pub variants: Vec<GroupResult>,
    /// Per flow group, in file order.
    pub groups: Vec<GroupResult>,
    /// Router ports (forward bottlenecks first).
    pub ports: Vec<PortResult>,
    /// Time series.
    pub series: Series,
    /// RRMQS measurements, when the discipline is RRMQS.
    pub rrmqs: Option<RrmqsResult>,
    /// Real runs (`tollgate load`): software, machine and path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<crate::load::environment::Environment>,
    /// `tollgate testbed`: packets lost outside the router's disciplines
    /// (veths, the router's AF_PACKET rings and devices, host sockets),
    /// by where. Not empty: the machine could not carry the scenario
    /// exactly, and the fairness numbers (Jain's index, the fairness ratio,
    /// the time to the target ratio) are withheld as `null`
    /// ([`Results::withhold_fairness`]). Each entry: (where, packets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside_losses: Vec<(String, u64)>,
}

impl Results {
    /// Drop every fairness number (Jain's index and the fairness ratio of
    /// the summary, the groups, the variants and the series, the time to
    /// the target ratio): a run whose losses were not all the discipline's
    /// says nothing about the discipline's fairness. Goodput stays.
    pub fn withhold_fairness(&mut self) {
        self.summary.jain = None;
        self.summary.fairness_ratio = None;
        self.summary.time_to_target_s = None;
        for g in self.groups.iter_mut().chain(self.variants.iter_mut()) {
            g.jain = None;
        }
        self.series.jain.iter_mut().for_each(|j| *j = None);
        self.series
            .fairness_ratio
            .iter_mut()
            .for_each(|r| *r = None);
    }

    /// `N packets [where n, ...]` of [`Results::outside_losses`], `None`
    /// when there were none.
    pub fn outside_losses_text(&self) -> Option<String> {
        if self.outside_losses.is_empty() {
            return None;
        }
        let total: u64 = self.outside_losses.iter().map(|(_, n)| n).sum();
        let list: Vec<String> = self
            .outside_losses
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        Some(format!("{total} packets [{}]", list.join(", ")))
    }
}

/// Headline numbers over the measurement window.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    /// Discipline.
    pub discipline: String,
    /// Bottleneck rate, Mbit/s (0 when the run has none).
    pub bottleneck_mbps: f64,
    /// The scenario's duration, s (simulated time; wall-clock time for real
    /// runs).
    pub duration_s: f64,
    /// Measurement window start (all long-lived flows active), s.
    pub measure_from_s: f64,
    /// The run stopped at or before `measure_from_s`: there is no measurement
    /// window, so goodput, fairness and utilization are not measured (zero or
    /// absent).
    #[serde(default)]
    pub window_empty: bool,
    /// Number of flows in the fairness metrics (the long-lived ones; all
    /// flows if none is).
    pub fairness_flows: usize,
    /// Jain's fairness index over the measured flows' goodput (no unit;
    /// 1/n to 1, 1 is equal shares).
    pub jain: Option<f64>,
    /// Largest over smallest goodput of the measured flows (no unit; 1 is
    /// equal shares; `null` when a flow got none).
    pub fairness_ratio: Option<f64>,
    /// Fairness ratio `time_to_target_s` waits for (no unit).
    pub target_fairness_ratio: f64,
    /// Time from `measure_from_s` until the windowed fairness ratio reaches
    /// the target and holds, s (`null`: never).
    pub time_to_target_s: Option<f64>,
    /// Sum of all flows' goodput in the window, Mbit/s.
    pub total_goodput_mbps: f64,
    /// Mean utilization of the forward bottleneck ports: wire bytes over
    /// capacity in the window (a fraction, 0 to 1).
    pub utilization: f64,
    /// Datagrams sent by all hosts (packets).
    pub packets: u64,
    /// Events the emulator processed (a count; 0 for real runs).
    pub events: u64,
}

/// One flow.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct FlowResult {
    /// Flow id, 0-based, in the scenario's order.
    pub id: usize,
    /// Group name.
    pub group: String,
    /// CCA spec, as in the scenario (`cubic`, `libra(capacity=100Mbit)`, `tcp:cubic`, ...).
    pub cca: String,
    /// Variant id: the DSCP codepoint the flow's packets carry (0-63; 32
    /// added for a taxed variant).
    pub variant: u8,
    /// Variant name.
    pub variant_name: String,
    /// Base RTT, ms.
    pub rtt_ms: f64,
    /// Start time, s.
    pub start_s: f64,
    /// Size (bytes) or `None` (unbounded).
    pub size_bytes: Option<u64>,
    /// The flow runs in the reverse direction.
    pub reverse: bool,
    /// Counted in the fairness metrics.
    pub long_lived: bool,
    /// Goodput over the measurement window, Mbit/s.
    pub goodput_mbps: f64,
    /// Bytes the receiver got in total, bytes.
    pub bytes: u64,
    /// Flow completion time (sized flows), s.
    pub completion_s: Option<f64>,
    /// Packets of this flow dropped at router ports, by reason: (reason,
    /// packets).
    pub drops: Vec<(String, u64)>,
    /// Packets dropped at the rate-capped access link.
    pub access_drops: u64,
    /// Packets the sender declared lost (packets).
    pub lost_packets: u64,
    /// Datagrams the sender sent (packets).
    pub sent_packets: u64,
    /// UDP payload bytes the sender sent, retransmissions included (QUIC
    /// flows; `None` for kernel TCP and quiche flows and in files written
    /// before it existed). With `sent_packets` it gives the mean datagram
    /// size, which path MTU discovery may raise above QUIC's initial 1200.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_bytes: Option<u64>,
    /// Smoothed RTT at the end, ms.
    pub srtt_ms: Option<f64>,
    /// Median RTT sample, ms.
    pub rtt_p50_ms: Option<f64>,
    /// p99 RTT, ms.
    pub rtt_p99_ms: Option<f64>,
    /// Final CCA statistics as (name, value) text pairs, the unit in the name
    /// or the value (window, details such as Libra's capacity source).
    pub cca_stats: Vec<(String, String)>,
    /// Error, if the flow failed.
    pub error: Option<String>,
    /// Flow control, not congestion control, limited the sender at some
    /// point (QUIC flows; see `ConnReport::window_limited`).
    #[serde(default)]
    pub window_limited: Option<bool>,
    /// Real runs: `quic`, `tcp` or `quiche`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
    /// Real runs: how late the flow started against its schedule, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_late_ms: Option<f64>,
    /// `tollgate testbed`: the RTT the router emulated for the flow (the
    /// scenario's `rtt`), ms; `rtt_ms` is then the measured minimum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulated_rtt_ms: Option<f64>,
}

/// Aggregate of a set of flows (a variant or a group).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct GroupResult {
    /// Name.
    pub name: String,
    /// Number of flows.
    pub flows: usize,
    /// Sum of goodput, Mbit/s.
    pub goodput_mbps: f64,
    /// Mean per flow, Mbit/s.
    pub mean_mbps: f64,
    /// Share of all flows' goodput (a fraction, 0 to 1).
    pub share: f64,
    /// Jain's index within the set (no unit; 1/n to 1).
    pub jain: Option<f64>,
}

/// Queueing-delay percentiles, ms.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct DelayPercentiles {
    /// Median, ms.
    pub p50: f64,
    /// 90th percentile, ms.
    pub p90: f64,
    /// 99th percentile, ms.
    pub p99: f64,
    /// Maximum, ms.
    pub max: f64,
    /// Mean, ms.
    pub mean: f64,
}

/// One router port.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct PortResult {
    /// `fwd1`, `rev1`, ...
    pub name: String,
    /// Discipline.
    pub discipline: String,
    /// Packets received.
    pub received: u64,
    /// Packets transmitted.
    pub transmitted: u64,
    /// Packets dropped, by reason: (reason, packets).
    pub dropped: Vec<(String, u64)>,
    /// Packets ECN-marked.
    pub marked: u64,
    /// Packets inside the port at the end.
    pub in_flight: u64,
    /// `received == transmitted + dropped + in_flight`.
    pub accounting_exact: bool,
    /// Utilization over the measurement window: wire bytes over capacity (a
    /// fraction, 0 to 1).
    pub utilization: f64,
    /// Queueing delay of transmitted packets (HdrHistogram), ms.
    pub queue_delay_ms: Option<DelayPercentiles>,
    /// The same, of the packets that arrived as L4S traffic (ECN ECT(1) or
    /// CE, RFC 9332's classifier), whatever the discipline. Present when the
    /// port carried any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_delay_l4s_ms: Option<DelayPercentiles>,
    /// The same, of the other (Classic) packets. Present with
    /// `queue_delay_l4s_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_delay_classic_ms: Option<DelayPercentiles>,
}

impl DelayPercentiles {
    /// The percentiles of a histogram of delays in µs; `None` when empty.
    pub fn of_micros(h: &hdrhistogram::Histogram<u64>) -> Option<DelayPercentiles> {
        (!h.is_empty()).then(|| DelayPercentiles {
            p50: h.value_at_quantile(0.5) as f64 / 1e3,
            p90: h.value_at_quantile(0.9) as f64 / 1e3,
            p99: h.value_at_quantile(0.99) as f64 / 1e3,
            max: h.max() as f64 / 1e3,
            mean: h.mean() / 1e3,
        })
    }
}

/// Time series, one point per sample.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct Series {
    /// Sample times, s.
    pub t_s: Vec<f64>,
    /// Per flow: goodput in each interval, Mbit/s.
    pub flow_goodput_mbps: Vec<Vec<f64>>,
    /// Per flow: the sender's capacity estimate at each sample, Mbit/s
    /// (what Libra believed the bottleneck to be; `null` where the CCA
    /// reports none). Empty when no flow's CCA reports one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flow_capacity_mbps: Vec<Vec<Option<f64>>>,
    /// Jain's index over the fairness window ending at each sample (no unit;
    /// long-lived flows active for the whole window).
    pub jain: Vec<Option<f64>>,
    /// Fairness ratio over the same window (no unit).
    pub fairness_ratio: Vec<Option<f64>>,
    /// Per port: queue length, packets.
    pub queue_packets: Vec<Vec<u32>>,
    /// Per port: mean queueing delay of packets sent in the interval, ms.
    pub queue_delay_ms: Vec<Vec<f64>>,
    /// Cebinae (first forward port): number of top flows per sample (flows).
    pub cebinae_top_flows: Vec<u32>,
    /// Cebinae: per flow, the fraction of samples in the measurement window
    /// it was a top flow (0 to 1).
    pub cebinae_top_fraction: Vec<f64>,
    /// Cebinae: installed top-class rate per sample, Mbit/s.
    pub cebinae_top_rate_mbps: Vec<f64>,
}

/// One RRMQS meter window.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct RrmqsWindow {
    /// Window end, s.
    pub end_s: f64,
    /// Per variant: (name, measured index i = v/v', real index, feedback);
    /// the indexes have no unit.
    pub variants: Vec<(String, Option<f64>, Option<f64>, String)>,
    /// Measured J(V, V') (no unit).
    pub jain: Option<f64>,
    /// Real J from the per-flow bytes (no unit).
    pub jain_real: Option<f64>,
    /// Per variant, in the order of `variants`: the meter's `v` and `v'`
    /// (main-queue and measuring-queue packets per flow per second).
    #[serde(default)]
    pub rates: Vec<(Option<f64>, Option<f64>)>,
}

/// RRMQS summary.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct RrmqsResult {
    /// Windows (first forward port).
    pub windows: Vec<RrmqsWindow>,
    /// Mean measured J over windows in the measurement period (no unit).
    pub mean_jain: Option<f64>,
    /// Mean real J (no unit).
    pub mean_jain_real: Option<f64>,
    /// min(J_measure, J_real) / max(...) of the means (a fraction, 0 to 1).
    pub accuracy: Option<f64>,
}

/// Display name of a variant id (DSCP codepoint).
pub fn variant_name(v: u8) -> String {
    let id = tollgate_cca::VariantId::from_dscp(v).unwrap_or(tollgate_cca::VariantId::UNMARKED);
    let base = tollgate_cca::registry::name_of_variant(
        tollgate_cca::VariantId::from_dscp(v & 31).unwrap_or(id),
    )
    .unwrap_or("unmarked");
    if v & 32 != 0 {
        format!("taxed({base})")
    } else {
        base.to_string()
    }
}

fn mean(x: &[f64]) -> Option<f64> {
    (!x.is_empty()).then(|| x.iter().sum::<f64>() / x.len() as f64)
}

fn group(name: String, goodputs: &[f64], total: f64) -> GroupResult {
    let sum: f64 = goodputs.iter().sum();
    GroupResult {
        name,
        flows: goodputs.len(),
        goodput_mbps: sum,
        mean_mbps: mean(goodputs).unwrap_or(0.0),
        share: if total > 0.0 { sum / total } else { 0.0 },
        jain: jain(goodputs),
    }
}

/// Index of the first sample at or after `t`.
fn sample_at(t: &[f64], at: f64) -> usize {
    t.iter()
        .position(|&x| x + 1e-9 >= at)
        .unwrap_or(t.len().saturating_sub(1))
}

/// Build the results of a run.
///
/// A partial run (see [`RunData::partial`]) is measured up to the time it
/// reached: the measurement window is `[measure_from, reached]`, and when the
/// run stopped at or before `measure_from` there is no window
/// ([`Summary::window_empty`]): goodput and utilization are zero and the
/// fairness metrics absent.
pub fn build(s: &Scenario, d: &RunData) -> Results {
    let t = &d.t;
    let n = t.len();
    let end = t.last().copied().unwrap_or(0.0);
    let window_empty = end <= s.metrics.measure_from_s + 1e-9;
    // The window starts at the first sample at or after measure_from; with no
    // window it is empty at the end.
    let (t0, k_start) = if window_empty {
        (s.metrics.measure_from_s, n.checked_sub(1))
    } else if s.metrics.measure_from_s <= 0.0 {
        (0.0, None)
    } else {
        let k0 = sample_at(t, s.metrics.measure_from_s);
        (t[k0], Some(k0))
    };
    // Bits over this many seconds are a rate (0 bits with no window).
    let window = if window_empty {
        f64::INFINITY
    } else {
        (end - t0).max(1e-9)
    };
    let rx_at = |f: &crate::sim::engine::FlowRecord, k: Option<usize>| -> u64 {
        match k {
            None => 0,
            Some(k) => f.rx.get(k).copied().unwrap_or(0),
        }
    };

    // Per flow.
    let mut flows = Vec::new();
    for (i, f) in d.flows.iter().enumerate() {
        let bytes = f.rx.last().copied().unwrap_or(0);
        let in_window = bytes.saturating_sub(rx_at(f, k_start));
        let spec = &f.spec;
        let report = f.report.as_ref();
        let cca_stats = report
            .map(|r| {
                let mut v = vec![
                    ("window".to_string(), r.cca.stats.window.to_string()),
                    ("loss_events".to_string(), r.cca.loss_events.to_string()),
                ];
                for (k, val) in &r.cca.stats.details {
                    let text = match val {
                        StatValue::Num(x) => format!("{x:.6}"),
                        StatValue::Text(s) => s.to_string(),
                    };
                    v.push((k.to_string(), text));
                }
                v
            })
            .unwrap_or_default();
        flows.push(FlowResult {
            id: i,
            group: s.flows[spec.group].name.clone(),
            cca: spec.cca.clone(),
            variant: spec.variant.dscp(),
            variant_name: variant_name(spec.variant.dscp()),
            rtt_ms: spec.rtt_ns as f64 / 1e6,
            start_s: spec.start_ns as f64 / 1e9,
            size_bytes: spec.size,
            reverse: spec.reverse,
            long_lived: spec.long_lived,
            goodput_mbps: in_window as f64 * 8.0 / window / 1e6,
            bytes,
            completion_s: f
                .fin_at
                .map(|fin| fin.saturating_sub(spec.start_ns) as f64 / 1e9),
            drops: DropReason::ALL
                .iter()
                .filter(|r| f.drops[r.index()] > 0)
                .map(|r| (r.name().to_string(), f.drops[r.index()]))
                .chain((f.loss_drops > 0).then(|| ("random_loss".to_string(), f.loss_drops)))
                .collect(),
            access_drops: f.access_drops,
            lost_packets: report.map_or(0, |r| r.quic.path.lost_packets),
            sent_packets: report.map_or(0, |r| r.quic.udp_tx.datagrams),
            sent_bytes: report.map(|r| r.quic.udp_tx.bytes),
            srtt_ms: report
                .and_then(|r| r.cca.smoothed_rtt)
                .map(|d| d.as_secs_f64() * 1e3),
            rtt_p50_ms: report
                .and_then(|r| r.rtt_quantile(0.5))
                .map(|d| d.as_secs_f64() * 1e3),
            rtt_p99_ms: report
                .and_then(|r| r.rtt_quantile(0.99))
                .map(|d| d.as_secs_f64() * 1e3),
            cca_stats,
            error: f.error.clone(),
            window_limited: report.map(|r| r.window_limited()),
            stack: None,
            start_late_ms: None,
            emulated_rtt_ms: None,
        });
    }

    // Fairness set: long-lived flows; if none, every flow.
    let fair_idx: Vec<usize> = {
        let ll: Vec<usize> = flows
            .iter()
            .filter(|f| f.long_lived)
            .map(|f| f.id)
            .collect();
        if ll.is_empty() {
            (0..flows.len()).collect()
        } else {
            ll
        }
    };
    let fair_x: Vec<f64> = fair_idx.iter().map(|&i| flows[i].goodput_mbps).collect();
    let total: f64 = flows.iter().map(|f| f.goodput_mbps).sum();

    // Series.
    let dt = s.sample_interval_s;
    let mut series = Series {
        t_s: t.clone(),
        ..Series::default()
    };
    for f in &d.flows {
        let mut g = Vec::with_capacity(n);
        let mut prev = 0u64;
        let mut tp = 0.0;
        for (&x, &tk) in f.rx.iter().zip(t) {
            let span = (tk - tp).max(1e-9);
            // A cumulative count; one that went backwards (a receiver
            // report older than the sender's) counts as no progress.
            g.push(x.saturating_sub(prev) as f64 * 8.0 / span / 1e6);
            prev = prev.max(x);
            tp = tk;
        }
        series.flow_goodput_mbps.push(g);
    }
    if d.flows.iter().any(|f| !f.capacity_mbps.is_empty()) {
        series.flow_capacity_mbps = d
            .flows
            .iter()
            .map(|f| {
                let mut c = f.capacity_mbps.clone();
                c.resize(n, None);
                c
            })
            .collect();
    }
    // The fair flows' goodputs over the `window_s` ending at sample k (flows
    // started by the window's start), where the window fits.
    let windowed = |k: usize, window_s: f64| -> Option<Vec<f64>> {
        let w = ((window_s / dt).round() as usize).max(1);
        if k < w {
            return None;
        }
        let from_t = t[k - w];
        let x: Vec<f64> = fair_idx
            .iter()
            .filter(|&&i| d.flows[i].spec.start_ns as f64 / 1e9 <= from_t + 1e-9)
            .map(|&i| {
                let f = &d.flows[i];
                f.rx[k].saturating_sub(f.rx[k - w]) as f64 * 8.0 / (t[k] - from_t).max(1e-9) / 1e6
            })
            .collect();
        (x.len() >= 2).then_some(x)
    };
    for k in 0..n {
        let x = windowed(k, s.metrics.fairness_window_s);
        series.jain.push(x.as_deref().and_then(jain));
        series
            .fairness_ratio
            .push(x.as_deref().and_then(fairness_ratio));
    }
    // "Time to fairness" follows the ratio over its own window (its
    // resolution), the series' when they are the same.
    let target_ratio: Vec<Option<f64>> =
        if (s.metrics.target_window_s - s.metrics.fairness_window_s).abs() < 1e-12 {
            series.fairness_ratio.clone()
        } else {
            (0..n)
                .map(|k| {
                    windowed(k, s.metrics.target_window_s)
                        .as_deref()
                        .and_then(fairness_ratio)
                })
                .collect()
        };
    let time_to_target = time_to_ratio(
        t,
        &target_ratio,
        s.metrics.measure_from_s + s.metrics.target_window_s,
        s.metrics.target_fairness_ratio,
        s.metrics.hold_s,
    )
    .map(|x| x + s.metrics.target_window_s);

    // Ports.
    let mut ports = Vec::new();
    let mut fwd_util = Vec::new();
    for p in &d.ports {
        let c = &p.counters;
        let tx_window = p.tx_bytes.last().copied().unwrap_or(0)
            - k_start.map_or(0, |k| p.tx_bytes.get(k).copied().unwrap_or(0));
        let util = tx_window as f64 * 8.0 / (s.bottleneck_rate_bps * window);
        if p.forward {
            fwd_util.push(util);
        }
        let delay = DelayPercentiles::of_micros(&p.delay_us());
        let l4s = DelayPercentiles::of_micros(&p.delay_l4s_us);
        let classic = l4s
            .is_some()
            .then(|| DelayPercentiles::of_micros(&p.delay_classic_us))
            .flatten();
        ports.push(PortResult {
            name: format!("{}{}", if p.forward { "fwd" } else { "rev" }, p.hop + 1),
            discipline: s.router.discipline.clone(),
            received: c.received,
            transmitted: c.dequeued,
            dropped: DropReason::ALL
                .iter()
                .map(|r| (r.name().to_string(), c.dropped_for(*r)))
                .filter(|(_, n)| *n > 0)
                .collect(),
            marked: c.marked,
            in_flight: p.in_flight as u64,
            accounting_exact: c.received == c.dequeued + c.dropped_total() + p.in_flight as u64,
            utilization: util,
            queue_delay_ms: delay,
            queue_delay_l4s_ms: l4s,
            queue_delay_classic_ms: classic,
        });
        series.queue_packets.push(p.qlen.clone());
        series
            .queue_delay_ms
            .push(p.delay_mean_ns.iter().map(|x| x / 1e6).collect());
    }

    // Cebinae state (first forward port).
    if let Some(p) = d.ports.iter().find(|p| p.forward && !p.cebinae.is_empty()) {
        series.cebinae_top_flows = p
            .cebinae_top
            .iter()
            .map(|v| v.iter().filter(|x| **x).count() as u32)
            .collect();
        series.cebinae_top_rate_mbps = p.cebinae.iter().map(|r| r.top_rate_bps / 1e6).collect();
        let from = k_start.unwrap_or(0);
        let m = (p.cebinae_top.len() - from.min(p.cebinae_top.len())).max(1);
        series.cebinae_top_fraction = (0..d.flows.len())
            .map(|i| p.cebinae_top.iter().skip(from).filter(|v| v[i]).count() as f64 / m as f64)
            .collect();
    }

    // RRMQS.
    let rrmqs = d
        .ports
        .iter()
        .find(|p| p.forward && !p.rrmqs.is_empty())
        .map(|p| {
            let windows: Vec<RrmqsWindow> = p
                .rrmqs
                .iter()
                .map(|(w, real)| {
                    let real_x: Vec<f64> = real.iter().map(|r| r.index).collect();
                    RrmqsWindow {
                        end_s: w.end.as_secs_f64(),
                        variants: w
                            .variants
                            .iter()
                            .map(|v| {
                                (
                                    variant_name(v.variant.dscp()),
                                    v.index,
                                    real.iter()
                                        .find(|r| r.variant == v.variant)
                                        .map(|r| r.index),
                                    format!("{:?}", v.feedback).to_lowercase(),
                                )
                            })
                            .collect(),
                        jain: w.jain,
                        jain_real: if real_x.len() >= 2 {
                            jain(&real_x)
                        } else {
                            None
                        },
                        rates: w.variants.iter().map(|v| (v.v, v.v_prime)).collect(),
                    }
                })
                .collect();
            let in_window: Vec<&RrmqsWindow> = windows
                .iter()
                .filter(|w| w.end_s > s.metrics.measure_from_s)
                .collect();
            let mj: Vec<f64> = in_window.iter().filter_map(|w| w.jain).collect();
            let mr: Vec<f64> = in_window.iter().filter_map(|w| w.jain_real).collect();
            let (mean_jain, mean_jain_real) = (mean(&mj), mean(&mr));
            let accuracy = match (mean_jain, mean_jain_real) {
                (Some(a), Some(b)) if a > 0.0 && b > 0.0 => Some(a.min(b) / a.max(b)),
                _ => None,
            };
            RrmqsResult {
                windows,
                mean_jain,
                mean_jain_real,
                accuracy,
            }
        });

    // Variants and groups.
    // Kernel TCP and quiche flows form their own rows (`tcp:cubic` is not
    // Tollgate's CUBIC even though it carries the same variant id).
    let label = |f: &FlowResult| {
        if f.cca.starts_with("tcp:") || f.cca.starts_with("quiche:") {
            f.cca.clone()
        } else {
            variant_name(f.variant)
        }
    };
    let mut vids: Vec<(u8, String)> = flows.iter().map(|f| (f.variant, label(f))).collect();
    vids.sort_unstable();
    vids.dedup();
    let variants = vids
        .into_iter()
        .map(|(v, name)| {
            let x: Vec<f64> = flows
                .iter()
                .filter(|f| f.variant == v && label(f) == name)
                .map(|f| f.goodput_mbps)
                .collect();
            group(name, &x, total)
        })
        .collect();
    let groups = s
        .flows
        .iter()
        .map(|g| {
            let x: Vec<f64> = flows
                .iter()
                .filter(|f| f.group == g.name)
                .map(|f| f.goodput_mbps)
                .collect();
            group(g.name.clone(), &x, total)
        })
        .collect();

    Results {
        format: 1,
        tollgate_version: env!("CARGO_PKG_VERSION").to_string(),
        scenario: s.name.clone(),
        sweep_point: s.sweep_point.clone(),
        seed: s.seed,
        partial: d.partial,
        reached_s: d.reached_s,
        config: serde_json::to_value(s).unwrap_or(serde_json::Value::Null),
        summary: Summary {
            discipline: s.router.discipline.clone(),
            bottleneck_mbps: s.bottleneck_rate_bps / 1e6,
            duration_s: s.duration_s,
            measure_from_s: t0,
            window_empty,
            fairness_flows: fair_idx.len(),
            jain: if window_empty { None } else { jain(&fair_x) },
            fairness_ratio: if window_empty {
                None
            } else {
                fairness_ratio(&fair_x)
            },
            target_fairness_ratio: s.metrics.target_fairness_ratio,
            time_to_target_s: time_to_target,
            total_goodput_mbps: total,
            utilization: mean(&fwd_util).unwrap_or(0.0),
            packets: d.packets_sent,
            events: d.events,
        },
        flows,
        variants,
        groups,
        ports,
        series,
        rrmqs,
        environment: None,
        outside_losses: Vec::new(),
    }
}

/// Write `results.json` and `flows.csv` into `dir`.
pub fn write(dir: &Path, r: &Results) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(r)?;
    std::fs::write(dir.join("results.json"), json + "\n")?;
    std::fs::write(dir.join("flows.csv"), csv(r))?;
    Ok(())
}

/// Read a results file: JSON of [`Results`] whose series have the shape
/// [`check_shape`] asks for.
pub fn read(path: &Path) -> anyhow::Result<Results> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let r: Results =
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    check_shape(&r).map_err(|e| {
        anyhow::anyhow!(
            "{}: {e} (a results.json that Tollgate wrote has one value per sample in every series and one goodput series per flow; this one was cut or edited)",
            path.display()
        )
    })?;
    Ok(r)
}

/// What [`csv`], [`table`] and the plots index by: one value per sample
/// (`series.t_s`) in `jain`, `fairness_ratio` and every flow's and port's
/// series, one goodput series per flow, one delay series per queue series,
/// and flow ids `0, 1, ...` in order (ids index the goodput series).
pub fn check_shape(r: &Results) -> Result<(), String> {
    let s = &r.series;
    let n = s.t_s.len();
    let per_sample = |name: &str, len: usize| {
        if len == n {
            Ok(())
        } else {
            Err(format!(
                "series.{name} has {len} values where series.t_s has {n}"
            ))
        }
    };
    per_sample("jain", s.jain.len())?;
    per_sample("fairness_ratio", s.fairness_ratio.len())?;
    if s.flow_goodput_mbps.len() != r.flows.len() {
        return Err(format!(
            "series.flow_goodput_mbps has {} flows where flows has {}",
            s.flow_goodput_mbps.len(),
            r.flows.len()
        ));
    }
    for (i, g) in s.flow_goodput_mbps.iter().enumerate() {
        per_sample(&format!("flow_goodput_mbps[{i}]"), g.len())?;
    }
    if s.queue_packets.len() != s.queue_delay_ms.len() {
        return Err(format!(
            "series.queue_packets has {} ports where series.queue_delay_ms has {}",
            s.queue_packets.len(),
            s.queue_delay_ms.len()
        ));
    }
    for (i, (q, d)) in s.queue_packets.iter().zip(&s.queue_delay_ms).enumerate() {
        per_sample(&format!("queue_packets[{i}]"), q.len())?;
        per_sample(&format!("queue_delay_ms[{i}]"), d.len())?;
    }
    if let Some((i, f)) = r.flows.iter().enumerate().find(|(i, f)| f.id != *i) {
        return Err(format!("flows[{i}].id is {}, not {i}", f.id));
    }
    Ok(())
}

/// Per-flow time series as CSV: `t_s, flow0_mbps, ..., jain, fairness_ratio,
/// queue_pkts, queue_delay_ms` per port, then `flow0_capacity_mbps, ...` when
/// a flow's CCA reports a capacity estimate (empty cells where it has none).
pub fn csv(r: &Results) -> String {
    let mut out = String::from("t_s");
    for f in &r.flows {
        let _ = write!(out, ",flow{}_{}_mbps", f.id, f.group);
    }
    out.push_str(",jain,fairness_ratio");
    for p in &r.ports {
        let _ = write!(out, ",{}_queue_pkts,{}_queue_delay_ms", p.name, p.name);
    }
    if !r.series.flow_capacity_mbps.is_empty() {
        for f in &r.flows {
            let _ = write!(out, ",flow{}_{}_capacity_mbps", f.id, f.group);
        }
    }
    out.push('\n');
    let opt = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v:.6}"));
    for (k, t) in r.series.t_s.iter().enumerate() {
        let _ = write!(out, "{t:.3}");
        for g in &r.series.flow_goodput_mbps {
            let _ = write!(out, ",{:.6}", g[k]);
        }
        let _ = write!(
            out,
            ",{},{}",
            opt(r.series.jain[k]),
            opt(r.series.fairness_ratio[k])
        );
        for (q, d) in r.series.queue_packets.iter().zip(&r.series.queue_delay_ms) {
            let _ = write!(out, ",{},{:.6}", q[k], d[k]);
        }
        for c in &r.series.flow_capacity_mbps {
            let _ = write!(out, ",{}", opt(c.get(k).copied().flatten()));
        }
        out.push('\n');
    }
    out
}

fn opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

/// The summary table printed by `tollgate sim` and `tollgate report`.
///
/// A partial run says so in its first line (`PARTIAL: stopped at 12.3 s of
/// 60 s simulated`); one stopped before its measurement window prints `-`
/// for the numbers it could not measure and says why on the last line.
pub fn table(r: &Results) -> String {
    let mut o = String::new();
    let s = &r.summary;
    // Goodput and utilization are not measured without a window.
    let measured = |text: String| {
        if s.window_empty {
            "-".to_string()
        } else {
            text
        }
    };
    let how = if r.environment.is_some() {
        "run"
    } else {
        "simulated"
    };
    let simulated = if r.partial {
        format!(
            "PARTIAL: stopped at {:.1} s of {} s {how}",
            r.reached_s, s.duration_s
        )
    } else {
        format!("{} s {how}", s.duration_s)
    };
    let window = if s.window_empty {
        "no measurement window".to_string()
    } else if r.partial {
        format!(
            "measured from {:.1} s to {:.1} s",
            s.measure_from_s, r.reached_s
        )
    } else {
        format!("measured from {:.1} s", s.measure_from_s)
    };
    let _ = writeln!(
        o,
        "scenario {}{}: {}, {simulated}, {window}",
        r.scenario,
        r.sweep_point
            .as_ref()
            .map_or(String::new(), |p| format!(" [{p}]")),
        if s.bottleneck_mbps > 0.0 {
            format!("{} at {} Mbit/s", s.discipline, s.bottleneck_mbps)
        } else {
            s.discipline.clone()
        },
    );
    let _ = writeln!(
        o,
        "{:>4}  {:<10} {:<28} {:>7} {:>7} {:>10} {:>7} {:>7}",
        "flow", "group", "cca", "rtt ms", "start s", "goodput", "drops", "lost"
    );
    for f in &r.flows {
        let drops: u64 = f.drops.iter().map(|(_, n)| n).sum::<u64>() + f.access_drops;
        let _ = writeln!(
            o,
            "{:>4}  {:<10} {:<28} {:>7.1} {:>7.2} {:>10} {:>7} {:>7}",
            f.id,
            clip(&f.group, 10),
            clip(&f.cca, 28),
            f.rtt_ms,
            f.start_s,
            measured(format!("{:.2}", f.goodput_mbps)),
            drops,
            f.lost_packets
        );
    }
    let _ = writeln!(
        o,
        "{:<16} {:>5} {:>12} {:>10} {:>7} {:>7}",
        "variant", "flows", "goodput", "mean/flow", "share", "JFI"
    );
    for v in &r.variants {
        let _ = writeln!(
            o,
            "{:<16} {:>5} {:>12} {:>10} {:>7} {:>7}",
            v.name,
            v.flows,
            measured(format!("{:.2}", v.goodput_mbps)),
            measured(format!("{:.2}", v.mean_mbps)),
            measured(format!("{:.1}%", v.share * 100.0)),
            opt(v.jain, 3)
        );
    }
    for p in &r.ports {
        let drops: Vec<String> = p.dropped.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let d = p.queue_delay_ms.as_ref();
        let classes = match (&p.queue_delay_l4s_ms, &p.queue_delay_classic_ms) {
            (Some(l), c) => format!(
                " (L4S p50 {:.2} p99 {:.2}, Classic p50 {} p99 {})",
                l.p50,
                l.p99,
                opt(c.as_ref().map(|d| d.p50), 2),
                opt(c.as_ref().map(|d| d.p99), 2)
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "port {}: util {}, drops [{}], queue delay p50 {} p99 {} ms{classes}, accounting {}",
            p.name,
            measured(format!("{:.1}%", p.utilization * 100.0)),
            drops.join(", "),
            opt(d.map(|d| d.p50), 2),
            opt(d.map(|d| d.p99), 2),
            if p.accounting_exact {
                "exact"
            } else {
                "MISMATCH"
            }
        );
    }
    if let Some(rr) = &r.rrmqs {
        let _ = writeln!(
            o,
            "rrmqs: J(V,V') measured {} real {} accuracy {}",
            opt(rr.mean_jain, 3),
            opt(rr.mean_jain_real, 3),
            opt(rr.accuracy.map(|a| a * 100.0), 1)
        );
    }
    if let Some(lost) = r.outside_losses_text() {
        let _ = writeln!(
            o,
            "lost outside the discipline: {lost}: fairness not reported"
        );
    }
    if s.window_empty {
        let _ = writeln!(
            o,
            "overall: not measured: the run stopped at {:.1} s, before the measurement window \
             (measure_from {:.1} s); goodput, fairness and utilization need a window",
            r.reached_s, s.measure_from_s
        );
        return o;
    }
    let utilization = if r.ports.is_empty() {
        String::new()
    } else {
        format!("  utilization {:.1}%", s.utilization * 100.0)
    };
    let _ = writeln!(
        o,
        "overall: JFI {}  fairness ratio {}{utilization}  goodput {:.2} Mbit/s  time to ratio {}: {}",
        opt(s.jain, 3),
        opt(s.fairness_ratio, 2),
        s.total_goodput_mbps,
        s.target_fairness_ratio,
        s.time_to_target_s
            .map_or_else(|| "not reached".to_string(), |t| format!("{t:.2} s"))
    );
    o
}

/// `text` cut to `width` characters for a table column, `~` marking a cut.
pub(crate) fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('~');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::engine::FlowRecord;

    #[test]
    fn a_cumulative_count_that_goes_backwards_is_no_progress_not_a_panic() {
        // `tollgate load` once sampled a TCP upload's kernel bytes_acked and
        // then the server's older progress count: 100, 50, 150 ... bytes.
        let text = "name = \"t\"\nduration = \"3s\"\n[topology]\nkind = \"dumbbell\"\n\
                    bottleneck = { rate = \"100Mbit\", delay = \"1ms\" }\n\
                    [metrics]\nmeasure_from = \"0s\"\n\
                    [[flows]]\ncca = \"newreno\"\nrtt = \"10ms\"\n";
        let s = crate::scenario::parse_plan(text).unwrap().runs.remove(0);
        let spec = crate::sim::topology::flows(&s).remove(0);
        let rx = vec![125_000u64, 62_500, 250_000];
        let d = RunData {
            t: vec![1.0, 2.0, 3.0],
            flows: vec![FlowRecord {
                rx,
                capacity_mbps: Vec::new(),
                drops: [0; DropReason::COUNT],
                access_drops: 0,
                loss_drops: 0,
                port_bytes: Vec::new(),
                fin_at: None,
                acked_at: None,
                report: None,
                receiver_report: None,
                injected_drops: 0,
                error: None,
                spec,
            }],
            ports: Vec::new(),
            packets_sent: 0,
            events: 0,
            partial: false,
            reached_s: 3.0,
            lps: 1,
        };
        let r = build(&s, &d);
        let g = &r.series.flow_goodput_mbps[0];
        assert_eq!(g.len(), 3);
        assert!((g[0] - 1.0).abs() < 1e-9, "{g:?}");
        assert_eq!(g[1], 0.0);
        // Counted once: 250 kB in all, 125 kB of them in the third second.
        assert!((g[2] - 1.0).abs() < 1e-9, "{g:?}");
        assert!(r.flows[0].goodput_mbps.is_finite());
    }

    /// The input the `results_json` fuzzer found: a results.json whose
    /// second flow's goodput series is shorter than `series.t_s` made `csv`
    /// (which `tollgate testbed` runs on a remote host's results.json) index
    /// out of bounds.
    #[test]
    fn a_series_shorter_than_its_samples_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("tollgate-shape-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("results.json");
        std::fs::write(
            &path,
            include_str!("../../fuzz/corpus/results_json/crash-series-shorter-than-samples"),
        )
        .unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(
            e.contains("series.flow_goodput_mbps[1] has 5 values where series.t_s has 10"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
