//! Statistics: a snapshot of every device and egress pipeline, printed as a
//! table, rendered as Prometheus (OpenMetrics) text, and checked for exact
//! accounting; and [`Published`], which hands snapshots from the
//! forwarding loop to the threads that format them.
//!
//! Accounting, over the whole router:
//! `rx = tx + dropped + queued`, where `rx` counts frames taken from RX
//! queues, `tx` frames accepted by TX queues, `dropped` every drop (library
//! reasons per egress pipeline, plus `tx_full` when a TX queue refused a
//! frame and the ingress reasons `no_route`, `not_ip`, `ttl`, `local`), and
//! `queued` the frames still inside the pipelines.

use std::cell::UnsafeCell;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelValue, EncodeMetric, LabelValueEncoder,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tollgate_cca::{Time, VariantId};
use tollgate_router::packet::ParseStats;
use tollgate_router::rrmqs::Feedback;
use tollgate_router::{Counters, DropReason};

use crate::l3::NeighbourStats;

/// `a += b`, field by field.
pub fn add_counters(a: &mut Counters, b: &Counters) {
    a.received += b.received;
    a.received_bytes += b.received_bytes;
    a.dequeued += b.dequeued;
    a.dequeued_bytes += b.dequeued_bytes;
    a.marked += b.marked;
    for (x, y) in a.dropped.iter_mut().zip(b.dropped) {
        *x += y;
    }
    for (x, y) in a.dropped_bytes.iter_mut().zip(b.dropped_bytes) {
        *x += y;
    }
}

/// `a += b`, field by field.
pub fn add_parse(a: &mut ParseStats, b: &ParseStats) {
    a.ok += b.ok;
    a.truncated += b.truncated;
    a.not_ip += b.not_ip;
    a.fragment += b.fragment;
    a.malformed += b.malformed;
}

/// Ingress drop reasons (before an egress pipeline).
pub const INGRESS_REASONS: [&str; 4] = ["no_route", "not_ip", "ttl", "local"];

/// One egress pipeline.
#[derive(Clone, Debug, Default)]
pub struct LaneSnap {
    /// Egress device.
    pub egress: String,
    /// Discipline name.
    pub discipline: &'static str,
    /// Shaper rate, bit/s.
    pub rate_bps: f64,
    /// Pipeline counters (`dequeued` = handed to TX).
    pub counters: Counters,
    /// Parse outcomes.
    pub parse: ParseStats,
    /// Packets in delay line + discipline + TX slot.
    pub in_flight: u64,
    /// Packets in the discipline.
    pub qlen: u64,
    /// Bytes in the discipline.
    pub qbytes: u64,
    /// Frames accepted by the TX queue (pipeline and bypass).
    pub tx_sent: u64,
    /// Frames the TX queue refused (freed).
    pub tx_full: u64,
    /// Pipeline mode: frames a worker could not hand over because the ring
    /// to this egress was full (freed, counted as dropped; they never
    /// reached the pipeline, so they are not in `counters.received`).
    pub ring_full: u64,
    /// Pipeline mode: frames in the rings to this egress at the snapshot
    /// (queued, not yet received by the pipeline; 0 after shutdown).
    pub ring_queued: u64,
    /// Time the lane went unpolled beyond the 100 us the default shaper
    /// bucket covers, ns (see `dataplane::LaneCounters::stalled_ns`).
    pub stalled_ns: u64,
    /// Non-IP frames forwarded around the discipline (L2 ARP etc.).
    pub bypass: u64,
    /// Transmitted bytes per variant (DSCP index).
    pub variant_tx_bytes: Vec<u64>,
    /// Discipline gauges as numbers, copied by the forwarding core.
    pub disc: DisciplineGauges,
    /// Discipline gauges as text: (metric suffix, labels, value), rendered
    /// from `disc` by the reading thread ([`Snapshot::render_gauges`]).
    pub gauges: Vec<(String, String, f64)>,
}

/// Most RRMQS variants a snapshot carries (RRMQS allows up to 64).
pub const MAX_GAUGE_VARIANTS: usize = 64;

/// One RRMQS variant's gauges.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RrmqsVariantGauges {
    /// The variant.
    pub variant: VariantId,
    /// `i = v / v'` in the last window.
    pub index: Option<f64>,
    /// Main-queue packets in the last window.
    pub main_packets: u64,
    /// Main-queue flows in the last window.
    pub main_flows: u64,
    /// Feedback in force.
    pub feedback: Feedback,
}

impl Default for RrmqsVariantGauges {
    fn default() -> Self {
        RrmqsVariantGauges {
            variant: VariantId::UNMARKED,
            index: None,
            main_packets: 0,
            main_flows: 0,
            feedback: Feedback::default(),
        }
    }
}

/// The discipline-specific numbers of a lane, in a fixed-size `Copy` form
/// so that the forwarding core copies them without allocating; the labels
/// and names are made by the reader ([`Snapshot::render_gauges`]).
// RRMQS's variant is large (2.5 KiB), but boxing it would allocate at every
// stats tick, which is what this type avoids; it is copied in place.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum DisciplineGauges {
    /// DropTail (nothing specific), or not filled.
    #[default]
    None,
    /// RED: average queue and current `max_p`.
    Red {
        /// Average queue.
        average: f64,
        /// Current `max_p`.
        max_p: f64,
    },
    /// CHOKe: RED's average queue.
    Choke {
        /// Average queue.
        average: f64,
    },
    /// Cebinae: the last evaluation.
    Cebinae {
        /// The port was saturated.
        saturated: bool,
        /// Top flows.
        top_flows: u64,
        /// Bytes of the top flows.
        top_bytes: u64,
        /// Rate installed for the top flows.
        top_rate_bps: f64,
        /// Rate installed for the others.
        bot_rate_bps: f64,
    },
    /// RRMQS: the last closed window.
    Rrmqs {
        /// Variants in use in `variants`.
        n: usize,
        /// Per variant.
        variants: [RrmqsVariantGauges; MAX_GAUGE_VARIANTS],
        /// Jain's index over the variants.
        jain: Option<f64>,
    },
    /// DualPI2: the PI controller's base probability and the two queues.
    DualPi2 {
        /// The base probability `p'` (Classic `p_C = p'^2`, coupled L4S
        /// `p_CL = k p'`).
        p_prime: f64,
        /// Packets in the L4S queue.
        l_packets: u64,
        /// Packets in the Classic queue.
        c_packets: u64,
    },
}

impl DisciplineGauges {
    /// The (metric suffix, labels, value) rows of the table and the metrics.
    pub fn render_into(&self, out: &mut Vec<(String, String, f64)>) {
        out.clear();
        let mut g = |n: &str, lab: String, v: f64| out.push((n.to_string(), lab, v));
        match self {
            DisciplineGauges::None => {}
            DisciplineGauges::Red { average, max_p } => {
                g("red_average", String::new(), *average);
                g("red_max_p", String::new(), *max_p);
            }
            DisciplineGauges::Choke { average } => g("red_average", String::new(), *average),
            DisciplineGauges::Cebinae {
                saturated,
                top_flows,
                top_bytes,
                top_rate_bps,
                bot_rate_bps,
            } => {
                g(
                    "cebinae_saturated",
                    String::new(),
                    f64::from(u8::from(*saturated)),
                );
                g("cebinae_top_flows", String::new(), *top_flows as f64);
                g("cebinae_top_bytes", String::new(), *top_bytes as f64);
                g("cebinae_top_rate_bps", String::new(), *top_rate_bps);
                g("cebinae_bot_rate_bps", String::new(), *bot_rate_bps);
            }
            DisciplineGauges::Rrmqs { n, variants, jain } => {
                for v in &variants[..(*n).min(MAX_GAUGE_VARIANTS)] {
                    let lab = format!("variant=\"{}\"", v.variant);
                    if let Some(i) = v.index {
                        g("rrmqs_index", lab.clone(), i);
                    }
                    g("rrmqs_main_packets", lab.clone(), v.main_packets as f64);
                    g("rrmqs_main_flows", lab.clone(), v.main_flows as f64);
                    g(
                        "rrmqs_feedback",
                        format!("{lab},state=\"{:?}\"", v.feedback),
                        1.0,
                    );
                }
                if let Some(j) = jain {
                    g("rrmqs_jain", String::new(), *j);
                }
            }
            DisciplineGauges::DualPi2 {
                p_prime,
                l_packets,
                c_packets,
            } => {
                g("dualpi2_p", String::new(), *p_prime);
                g("dualpi2_l_packets", String::new(), *l_packets as f64);
                g("dualpi2_c_packets", String::new(), *c_packets as f64);
            }
        }
    }
}

/// One device.
#[derive(Clone, Debug, Default)]
pub struct DevSnap {
    /// Device name.
    pub name: String,
    /// Frames received.
    pub rx: u64,
    /// Ingress drops per [`INGRESS_REASONS`].
    pub ingress_drops: [u64; 4],
    /// Device counters: ipackets, opackets, ibytes, obytes, imissed, ierrors, oerrors, rx_nombuf.
    pub hw: [u64; 8],
}

/// Everything at one instant.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// When.
    pub at: Time,
    /// Devices.
    pub devs: Vec<DevSnap>,
    /// Egress pipelines.
    pub lanes: Vec<LaneSnap>,
    /// Free mbufs in the pool.
    pub pool_free: u64,
    /// L3 mode: the neighbour table's counters.
    pub neighbours: Option<NeighbourStats>,
}

/// The accounting totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Received frames.
    pub rx: u64,
    /// Transmitted frames.
    pub tx: u64,
    /// Dropped frames.
    pub dropped: u64,
    /// Frames still queued.
    pub queued: u64,
}

impl Totals {
    /// Whether `rx == tx + dropped + queued`.
    pub fn exact(&self) -> bool {
        self.rx == self.tx + self.dropped + self.queued
    }
}

impl Snapshot {
    /// Render every lane's [`DisciplineGauges`] into its text `gauges`
    /// (reader side; [`Published`] does it before handing a snapshot out).
    pub fn render_gauges(&mut self) {
        for l in &mut self.lanes {
            l.disc.render_into(&mut l.gauges);
        }
    }

    /// Add the counters of `part`, another lcore's snapshot of the same
    /// router (same devices and lanes, in the same order), to this one.
    ///
    /// In pipeline mode every lcore publishes only what it owns: a worker
    /// its RX counts, ingress drops and per-egress `ring_full` and
    /// unparsable frames; a scheduler its lanes. The reader merges the
    /// parts: counters and queue sizes add up (each is counted by exactly
    /// one lcore), names and gauges come from the part that has them.
    pub fn absorb(&mut self, part: &Snapshot) {
        self.at = self.at.max(part.at);
        self.pool_free = self.pool_free.max(part.pool_free);
        if self.neighbours.is_none() {
            self.neighbours = part.neighbours;
        }
        if self.devs.len() < part.devs.len() {
            self.devs.resize_with(part.devs.len(), DevSnap::default);
        }
        for (o, d) in self.devs.iter_mut().zip(&part.devs) {
            if o.name.is_empty() {
                o.name.clone_from(&d.name);
            }
            o.rx += d.rx;
            for (a, b) in o.ingress_drops.iter_mut().zip(d.ingress_drops) {
                *a += b;
            }
            for (a, b) in o.hw.iter_mut().zip(d.hw) {
                *a = (*a).max(b);
            }
        }
        if self.lanes.len() < part.lanes.len() {
            self.lanes.resize_with(part.lanes.len(), LaneSnap::default);
        }
        for (o, l) in self.lanes.iter_mut().zip(&part.lanes) {
            if o.egress.is_empty() {
                o.egress.clone_from(&l.egress);
            }
            if o.discipline.is_empty() {
                o.discipline = l.discipline;
            }
            if o.rate_bps == 0.0 {
                o.rate_bps = l.rate_bps;
            }
            add_counters(&mut o.counters, &l.counters);
            add_parse(&mut o.parse, &l.parse);
            o.in_flight += l.in_flight;
            o.qlen += l.qlen;
            o.qbytes += l.qbytes;
            o.tx_sent += l.tx_sent;
            o.tx_full += l.tx_full;
            o.ring_full += l.ring_full;
            o.ring_queued += l.ring_queued;
            o.stalled_ns += l.stalled_ns;
            o.bypass += l.bypass;
            if o.variant_tx_bytes.len() < l.variant_tx_bytes.len() {
                o.variant_tx_bytes.resize(l.variant_tx_bytes.len(), 0);
            }
            for (a, b) in o.variant_tx_bytes.iter_mut().zip(&l.variant_tx_bytes) {
                *a += b;
            }
            if o.disc == DisciplineGauges::None {
                o.disc = l.disc;
            }
        }
    }

    /// Whole-router totals.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for d in &self.devs {
            t.rx += d.rx;
            t.dropped += d.ingress_drops.iter().sum::<u64>();
        }
        for l in &self.lanes {
            t.tx += l.tx_sent;
            t.dropped += l.counters.dropped_total() + l.tx_full + l.ring_full;
            t.queued += l.in_flight + l.ring_queued;
        }
        t
    }

    /// Per-pipeline check: `received == dequeued + dropped + in_flight`.
    pub fn lanes_exact(&self) -> bool {
        self.lanes.iter().all(|l| {
            l.counters.received == l.counters.dequeued + l.counters.dropped_total() + l.in_flight
        })
    }

    /// A human-readable table; rates against `prev`.
    pub fn render_text(&self, prev: Option<&Snapshot>) -> String {
        let mut s = String::new();
        let dt = prev
            .map(|p| self.at.saturating_since(p.at).as_secs_f64())
            .unwrap_or(0.0);
        let _ = writeln!(
            s,
            "--- t={:.3}s pool_free={}",
            self.at.as_secs_f64(),
            self.pool_free
        );
        for (i, d) in self.devs.iter().enumerate() {
            let rate = match prev.and_then(|p| p.devs.get(i)) {
                Some(p) if dt > 0.0 => (d.rx - p.rx.min(d.rx)) as f64 / dt / 1e6,
                _ => 0.0,
            };
            let _ = writeln!(
                s,
                "dev {:<18} rx={:<12} rx_mpps={:<8.3} ingress_drops[no_route={} not_ip={} ttl={} local={}] hw[imissed={} ierrors={} oerrors={} rx_nombuf={}]",
                d.name, d.rx, rate, d.ingress_drops[0], d.ingress_drops[1], d.ingress_drops[2], d.ingress_drops[3], d.hw[4], d.hw[5], d.hw[6], d.hw[7]
            );
        }
        if let Some(n) = &self.neighbours {
            let _ = writeln!(s, "{}", n.line());
        }
        for (i, l) in self.lanes.iter().enumerate() {
            let p = prev.and_then(|p| p.lanes.get(i));
            let tx_mbps = match p {
                Some(p) if dt > 0.0 => {
                    (l.counters.dequeued_bytes
                        - p.counters.dequeued_bytes.min(l.counters.dequeued_bytes))
                        as f64
                        * 8.0
                        / dt
                        / 1e6
                }
                _ => 0.0,
            };
            let _ = write!(
                s,
                "egress {:<15} {:<8} rate={:.0}Mbit rx={} tx={} tx_mbit_s={:.2} queue={}p/{}B in_flight={} bypass={} drops[",
                l.egress,
                l.discipline,
                l.rate_bps / 1e6,
                l.counters.received,
                l.tx_sent,
                tx_mbps,
                l.qlen,
                l.qbytes,
                l.in_flight,
                l.bypass
            );
            for r in DropReason::ALL {
                let n = l.counters.dropped_for(r);
                if n > 0 {
                    let _ = write!(s, "{}={} ", r.name(), n);
                }
            }
            if l.ring_full > 0 {
                let _ = write!(s, "ring_full={} ", l.ring_full);
            }
            let _ = writeln!(
                s,
                "tx_full={}] marked={} stalled_ms={:.3}",
                l.tx_full,
                l.counters.marked,
                l.stalled_ns as f64 / 1e6
            );
            if dt > 0.0 {
                if let Some(p) = p {
                    let mut parts = Vec::new();
                    for (v, (&b, &pb)) in l
                        .variant_tx_bytes
                        .iter()
                        .zip(&p.variant_tx_bytes)
                        .enumerate()
                    {
                        if b > pb {
                            let name = VariantId::from_dscp(v as u8)
                                .map(|v| v.to_string())
                                .unwrap_or_default();
                            parts.push(format!(
                                "{name}={:.2}Mbit/s",
                                (b - pb) as f64 * 8.0 / dt / 1e6
                            ));
                        }
                    }
                    if !parts.is_empty() {
                        let _ = writeln!(s, "  variants: {}", parts.join(" "));
                    }
                }
            }
            if !l.gauges.is_empty() {
                let g: Vec<String> = l
                    .gauges
                    .iter()
                    .map(|(n, lab, v)| format!("{n}{{{lab}}}={v:.3}"))
                    .collect();
                let _ = writeln!(s, "  {}: {}", l.discipline, g.join(" "));
            }
        }
        s
    }

    /// The metrics in the OpenMetrics text format (which Prometheus
    /// scrapes; served with [`OPENMETRICS_CONTENT_TYPE`]), encoded by
    /// `prometheus-client`: `# HELP` and `# TYPE` for every family, counters
    /// as counters (samples `NAME_total`), gauges as gauges, label values
    /// escaped (`\\`, `\"`, `\n`), and `# EOF` at the end.
    pub fn render_prometheus(&self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(SnapshotMetrics(self.clone())));
        let mut out = String::new();
        // Writing into a String cannot fail; an encoder error would leave a
        // truncated body, which the scraper reports.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}

/// The `Content-Type` of [`Snapshot::render_prometheus`]'s output (defined
/// by the metrics server).
pub use tollgate_metrics_http::OPENMETRICS_CONTENT_TYPE;

/// A label value written with the text format's escapes: backslash, double
/// quote and newline become `\\`, `\"` and `\n`. (prometheus-client 0.24
/// writes `&str` label values verbatim, so every label goes through this.)
#[derive(Clone, Copy, Debug)]
pub struct Escaped<'a>(pub &'a str);

impl EncodeLabelValue for Escaped<'_> {
    fn encode(&self, enc: &mut LabelValueEncoder) -> std::fmt::Result {
        let mut rest = self.0;
        while let Some(i) = rest.find(['\\', '"', '\n']) {
            enc.write_str(&rest[..i])?;
            enc.write_str(match rest.as_bytes()[i] {
                b'\\' => "\\\\",
                b'"' => "\\\"",
                _ => "\\n",
            })?;
            rest = &rest[i + 1..];
        }
        enc.write_str(rest)
    }
}

type Labels<'a> = Vec<(&'a str, Escaped<'a>)>;

/// One metric family's samples.
enum Values<'a> {
    Counter(Vec<(Labels<'a>, u64)>),
    Gauge(Vec<(Labels<'a>, f64)>),
}

fn family(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    values: Values<'_>,
) -> std::fmt::Result {
    match values {
        Values::Counter(v) => {
            let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
            if let [(labels, x)] = v.as_slice() {
                if labels.is_empty() {
                    return ConstCounter::new(*x).encode(m);
                }
            }
            for (labels, x) in v {
                ConstCounter::new(x).encode(m.encode_family(&labels)?)?;
            }
        }
        Values::Gauge(v) => {
            let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
            if let [(labels, x)] = v.as_slice() {
                if labels.is_empty() {
                    return ConstGauge::new(*x).encode(m);
                }
            }
            for (labels, x) in v {
                ConstGauge::new(x).encode(m.encode_family(&labels)?)?;
            }
        }
    }
    Ok(())
}

/// `key="value",key2="value2"` (the label text of [`LaneSnap::gauges`],
/// with `\\`, `\"`, `\n` escapes) as pairs; malformed text ends the list.
pub fn parse_labels(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once("=\"") else {
            break;
        };
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => break,
                },
                '"' => {
                    end = Some(i + 1);
                    break;
                }
                c => value.push(c),
            }
        }
        let Some(end) = end else { break };
        out.push((key.trim().trim_start_matches(',').trim().to_string(), value));
        rest = after[end..].trim_start_matches(',').trim();
    }
    out
}

/// Help text of a discipline gauge (see `discipline_gauges` in dataplane.rs).
fn gauge_help(name: &str) -> &'static str {
    match name {
        "rrmqs_index" => "RRMQS: the variant's index over the latest meter window.",
        "rrmqs_main_packets" => "RRMQS: packets the variant put in the main queue in the latest window.",
        "rrmqs_main_flows" => "RRMQS: distinct flows of the variant in the main queue in the latest window.",
        "rrmqs_feedback" => "RRMQS: the feedback state in force for the variant (1 for the state named by the label).",
        "rrmqs_jain" => "RRMQS: Jain's fairness index over the variants in the latest window.",
        "cebinae_saturated" => "Cebinae: 1 if the port was saturated at the last reconfiguration.",
        "cebinae_top_flows" => "Cebinae: flows classified top at the last reconfiguration.",
        "cebinae_top_bytes" => "Cebinae: bytes the top flows sent over the last P rounds.",
        "cebinae_top_rate_bps" => "Cebinae: rate installed for the top class, bit/s.",
        "cebinae_bot_rate_bps" => "Cebinae: rate installed for the bottom class, bit/s.",
        "red_average" => "RED: average queue length (EWMA).",
        "red_max_p" => "RED: current max_p (changes under adaptive RED).",
        "dualpi2_p" => "DualPI2: the PI controller's base probability p' (Classic p'^2, L4S coupled k p').",
        "dualpi2_l_packets" => "DualPI2: packets in the L4S queue.",
        "dualpi2_c_packets" => "DualPI2: packets in the Classic queue.",
        _ => "Discipline gauge.",
    }
}

/// A snapshot as a prometheus-client collector: every family is encoded
/// from the snapshot's numbers at scrape time.
#[derive(Debug)]
struct SnapshotMetrics(Snapshot);

fn lane_labels(l: &LaneSnap) -> Labels<'_> {
    vec![
        ("port", Escaped(&l.egress)),
        ("discipline", Escaped(l.discipline)),
    ]
}

impl Collector for SnapshotMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        use Values::{Counter, Gauge};
        let s = &self.0;
        let t = s.totals();
        let enc = &mut enc;
        let none = || Vec::new();
        family(
            enc,
            "tollgate_rx_packets",
            "Frames received by the router.",
            Counter(vec![(none(), t.rx)]),
        )?;
        family(
            enc,
            "tollgate_tx_packets",
            "Frames accepted by TX queues.",
            Counter(vec![(none(), t.tx)]),
        )?;
        family(
            enc,
            "tollgate_dropped_packets",
            "Frames dropped, every reason (ingress, discipline, delay line, TX queue full).",
            Counter(vec![(none(), t.dropped)]),
        )?;
        family(
            enc,
            "tollgate_queued_packets",
            "Frames inside the pipelines (delay lines, disciplines, TX slots).",
            Gauge(vec![(none(), t.queued as f64)]),
        )?;
        family(
            enc,
            "tollgate_mempool_free",
            "Free mbufs in the packet pool.",
            Gauge(vec![(none(), s.pool_free as f64)]),
        )?;
        let dev = |f: &dyn Fn(&DevSnap) -> u64| -> Values<'_> {
            Counter(
                s.devs
                    .iter()
                    .map(|d| (vec![("port", Escaped(&d.name))], f(d)))
                    .collect(),
            )
        };
        family(
            enc,
            "tollgate_port_rx_packets",
            "Frames received on the device.",
            dev(&|d| d.rx),
        )?;
        family(
            enc,
            "tollgate_port_ingress_dropped",
            "Frames dropped before any egress pipeline, by reason.",
            Counter(
                s.devs
                    .iter()
                    .flat_map(|d| {
                        INGRESS_REASONS.iter().zip(d.ingress_drops).map(|(r, n)| {
                            (vec![("port", Escaped(&d.name)), ("reason", Escaped(r))], n)
                        })
                    })
                    .collect(),
            ),
        )?;
        family(
            enc,
            "tollgate_port_imissed",
            "Frames the device dropped because RX queues were full (device counter).",
            dev(&|d| d.hw[4]),
        )?;
        family(
            enc,
            "tollgate_port_ierrors",
            "Erroneous received frames (device counter).",
            dev(&|d| d.hw[5]),
        )?;
        family(
            enc,
            "tollgate_port_oerrors",
            "Failed transmissions (device counter).",
            dev(&|d| d.hw[6]),
        )?;
        family(
            enc,
            "tollgate_port_rx_nombuf",
            "RX mbuf allocation failures (device counter).",
            dev(&|d| d.hw[7]),
        )?;

        let lc = |f: &dyn Fn(&LaneSnap) -> u64| -> Values<'_> {
            Counter(s.lanes.iter().map(|l| (lane_labels(l), f(l))).collect())
        };
        let lg = |f: &dyn Fn(&LaneSnap) -> f64| -> Values<'_> {
            Gauge(s.lanes.iter().map(|l| (lane_labels(l), f(l))).collect())
        };
        family(
            enc,
            "tollgate_egress_received_packets",
            "Frames entering the egress pipeline.",
            lc(&|l| l.counters.received),
        )?;
        family(
            enc,
            "tollgate_egress_tx_packets",
            "Frames accepted by the egress TX queue (pipeline and bypass).",
            lc(&|l| l.tx_sent),
        )?;
        family(
            enc,
            "tollgate_egress_tx_bytes",
            "Bytes dequeued from the discipline to TX.",
            lc(&|l| l.counters.dequeued_bytes),
        )?;
        family(
            enc,
            "tollgate_egress_tx_full",
            "Frames the TX queue refused (freed and counted as dropped).",
            lc(&|l| l.tx_full),
        )?;
        family(
            enc,
            "tollgate_egress_ring_full",
            "Pipeline mode: frames dropped because the ring from an RX worker to this egress was full.",
            lc(&|l| l.ring_full),
        )?;
        family(
            enc,
            "tollgate_egress_bypass_packets",
            "Non-IP frames forwarded around the discipline.",
            lc(&|l| l.bypass),
        )?;
        family(
            enc,
            "tollgate_egress_marked_packets",
            "Packets ECN-marked (CE) by the discipline.",
            lc(&|l| l.counters.marked),
        )?;
        family(
            enc,
            "tollgate_egress_queue_packets",
            "Packets in the discipline.",
            lg(&|l| l.qlen as f64),
        )?;
        family(
            enc,
            "tollgate_egress_queue_bytes",
            "Bytes in the discipline.",
            lg(&|l| l.qbytes as f64),
        )?;
        family(
            enc,
            "tollgate_egress_in_flight_packets",
            "Packets in the delay line, discipline and TX slot.",
            lg(&|l| l.in_flight as f64),
        )?;
        family(
            enc,
            "tollgate_egress_shaper_rate_bps",
            "Shaper rate, bit/s.",
            lg(&|l| l.rate_bps),
        )?;
        family(
            enc,
            "tollgate_egress_dropped_packets",
            "Packets dropped in the egress pipeline, by reason.",
            Counter(
                s.lanes
                    .iter()
                    .flat_map(|l| {
                        DropReason::ALL.into_iter().map(move |r| {
                            let mut lab = lane_labels(l);
                            lab.push(("reason", Escaped(r.name())));
                            (lab, l.counters.dropped_for(r))
                        })
                    })
                    .collect(),
            ),
        )?;
        let names: Vec<String> = (0..64u8)
            .map(|v| {
                VariantId::from_dscp(v)
                    .map(|v| v.to_string())
                    .unwrap_or_default()
            })
            .collect();
        family(
            enc,
            "tollgate_egress_variant_tx_bytes",
            "Bytes transmitted per congestion-control variant (from DSCP or rules).",
            Counter(
                s.lanes
                    .iter()
                    .flat_map(|l| {
                        l.variant_tx_bytes
                            .iter()
                            .zip(&names)
                            .filter(|(&b, _)| b > 0)
                            .map(|(&b, name)| {
                                (
                                    vec![("port", Escaped(&l.egress)), ("variant", Escaped(name))],
                                    b,
                                )
                            })
                    })
                    .collect(),
            ),
        )?;
        if let Some(n) = &s.neighbours {
            family(
                enc,
                "tollgate_l3_neighbours",
                "Entries in the L3 neighbour table, by kind.",
                Gauge(vec![
                    (vec![("kind", Escaped("static"))], n.statics as f64),
                    (vec![("kind", Escaped("learned"))], n.learned as f64),
                ]),
            )?;
            family(
                enc,
                "tollgate_l3_neighbours_expired",
                "Learned neighbours removed after the timeout without refresh.",
                Counter(vec![(Vec::new(), n.expired)]),
            )?;
            family(
                enc,
                "tollgate_l3_neighbour_refused",
                "ARP / ND packets not learned from, by reason.",
                Counter(vec![
                    (
                        vec![("reason", Escaped("table_full"))],
                        n.refused_table_full,
                    ),
                    (
                        vec![("reason", Escaped("not_for_us"))],
                        n.refused_not_for_us,
                    ),
                    (vec![("reason", Escaped("off_link"))], n.refused_off_link),
                ]),
            )?;
        }
        // Discipline gauges: (suffix, label text, value) per lane.
        let parsed: Vec<Vec<(String, String)>> = s
            .lanes
            .iter()
            .flat_map(|l| l.gauges.iter().map(|(_, lab, _)| parse_labels(lab)))
            .collect();
        let mut names: Vec<&str> = Vec::new();
        for l in &s.lanes {
            for (n, _, _) in &l.gauges {
                if !names.contains(&n.as_str()) {
                    names.push(n);
                }
            }
        }
        for n in names {
            let mut samples = Vec::new();
            let mut k = 0;
            for l in &s.lanes {
                for (gn, _, v) in &l.gauges {
                    if gn == n {
                        let mut lab = vec![("port", Escaped(&l.egress))];
                        lab.extend(parsed[k].iter().map(|(a, b)| (a.as_str(), Escaped(b))));
                        samples.push((lab, *v));
                    }
                    k += 1;
                }
            }
            family(enc, &format!("tollgate_{n}"), gauge_help(n), Gauge(samples))?;
        }
        Ok(())
    }
}

/// The hand-over of snapshots from the forwarding core to the threads that
/// format them, without locks on the forwarding side: a triple buffer.
///
/// Three snapshot buffers circulate: the producer's (being filled), the
/// consumer's (being read) and the middle one, whose index and a "fresh"
/// bit live in one atomic byte. [`Published::offer`] swaps the filled
/// snapshot into the producer's buffer and exchanges that buffer with the
/// middle one (one atomic swap: wait-free, no system call, no allocation
/// once the buffers have grown to size); readers take the middle buffer
/// when it is fresh. A reader never blocks the forwarding core and the
/// forwarding core never wakes a reader: readers poll every few
/// milliseconds ([`Published::wait_newer`]). Readers serialise among
/// themselves with a mutex only they use.
#[derive(Debug)]
pub struct Published {
    bufs: [UnsafeCell<Snapshot>; 3],
    /// Index of the middle buffer | [`FRESH`].
    middle: AtomicU8,
    /// Set while a producer call runs (a second producer skips or waits).
    producing: AtomicBool,
    /// The producer's buffer index (touched only with `producing` held).
    back: UnsafeCell<u8>,
    reader: Mutex<ReaderSide>,
    closed: AtomicBool,
}

/// The "fresh" bit of [`Published::middle`].
const FRESH: u8 = 4;

#[derive(Debug)]
struct ReaderSide {
    /// The consumer's buffer index.
    front: u8,
    /// Snapshots taken so far.
    seq: u64,
}

// SAFETY: each buffer is accessed by exactly one side at a time: the
// producer's (index `back`, under `producing`), the consumer's (index
// `front`, under the reader mutex), and the middle one by nobody until an
// AcqRel swap of `middle` hands it to one side, which also publishes the
// writes made to it.
unsafe impl Sync for Published {}

impl Default for Published {
    fn default() -> Self {
        Published {
            bufs: Default::default(),
            middle: AtomicU8::new(1),
            producing: AtomicBool::new(false),
            back: UnsafeCell::new(0),
            reader: Mutex::new(ReaderSide { front: 2, seq: 0 }),
            closed: AtomicBool::new(false),
        }
    }
}

impl Published {
    /// How often a waiting reader looks for a new snapshot.
    pub const POLL: Duration = Duration::from_millis(5);

    /// An empty hand-over.
    pub fn new() -> Arc<Published> {
        Arc::new(Published::default())
    }

    /// Forwarding core: publish `snap`. `snap` comes back holding an older
    /// snapshot, whose buffers the next tick reuses. Wait-free; returns
    /// false (and publishes nothing) only if another producer call is
    /// running at the same moment.
    pub fn offer(&self, snap: &mut Snapshot) -> bool {
        if self.producing.swap(true, Ordering::Acquire) {
            return false;
        }
        // SAFETY: `producing` is held, so `back` and its buffer are ours.
        unsafe {
            let back = &mut *self.back.get();
            std::ptr::swap(self.bufs[usize::from(*back)].get(), snap);
            *back = self.middle.swap(*back | FRESH, Ordering::AcqRel) & 3;
        }
        self.producing.store(false, Ordering::Release);
        true
    }

    /// Publish `snap` from any thread (not for the forwarding loop: it
    /// spins while another producer call runs).
    pub fn publish(&self, mut snap: Snapshot) {
        while !self.offer(&mut snap) {
            std::hint::spin_loop();
        }
    }

    /// Take the middle buffer if it is fresh; the consumer's buffer index.
    fn refresh(&self, r: &mut ReaderSide) {
        if self.middle.load(Ordering::Relaxed) & FRESH != 0 {
            r.front = self.middle.swap(r.front, Ordering::AcqRel) & 3;
            r.seq += 1;
        }
    }

    fn reader(&self) -> std::sync::MutexGuard<'_, ReaderSide> {
        self.reader.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The consumer's snapshot, with its discipline gauges rendered.
    fn front_copy(&self, r: &ReaderSide) -> Snapshot {
        // SAFETY: the reader mutex is held, so the `front` buffer is ours.
        let mut s = unsafe { (*self.bufs[usize::from(r.front)].get()).clone() };
        s.render_gauges();
        s
    }

    /// The latest snapshot (empty before the first).
    pub fn latest(&self) -> Snapshot {
        let mut r = self.reader();
        self.refresh(&mut r);
        self.front_copy(&r)
    }

    /// Wait until a snapshot newer than `seen` (a sequence number returned
    /// before, 0 at first) is published, and return it with its number;
    /// `None` once [`Published::close`] was called and nothing newer came.
    pub fn wait_newer(&self, seen: u64) -> Option<(u64, Snapshot)> {
        loop {
            let closed = self.closed.load(Ordering::Acquire);
            {
                let mut r = self.reader();
                self.refresh(&mut r);
                if r.seq > seen {
                    return Some((r.seq, self.front_copy(&r)));
                }
            }
            if closed {
                return None;
            }
            std::thread::sleep(Self::POLL);
        }
    }

    /// Make every [`Published::wait_newer`] return `None` once it has
    /// seen the last snapshot.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }
}

/// A sample of [`check_exposition`]'s output: name, labels, value.
pub type Sample = (String, Vec<(String, String)>, f64);

/// Check that `text` is well-formed OpenMetrics / Prometheus text as the
/// endpoint serves it, and return its samples: every sample's family has
/// `# HELP` and `# TYPE` lines before it (a counter `NAME` has samples
/// `NAME_total`), label values are quoted with only `\\`, `\"` and `\n`
/// escapes, values are numbers, and the text ends with `# EOF`. Used by the
/// tests; the error names the first offending line.
pub fn check_exposition(text: &str) -> Result<Vec<Sample>, String> {
    use std::collections::HashMap;
    let mut help: HashMap<&str, ()> = HashMap::new();
    let mut types: HashMap<&str, &str> = HashMap::new();
    let mut samples = Vec::new();
    let mut eof = false;
    for (n, line) in text.lines().enumerate() {
        let bad = |why: &str| format!("line {}: {why}: {line:?}", n + 1);
        if eof {
            return Err(bad("text after # EOF"));
        }
        if line == "# EOF" {
            eof = true;
        } else if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or_default();
            help.insert(name, ());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split(' ');
            let (Some(name), Some(ty)) = (it.next(), it.next()) else {
                return Err(bad("TYPE without a type"));
            };
            if !help.contains_key(name) {
                return Err(bad("TYPE before HELP"));
            }
            types.insert(name, ty);
        } else if line.starts_with('#') {
            return Err(bad("unexpected comment"));
        } else {
            let name_end = line
                .find(['{', ' '])
                .ok_or_else(|| bad("sample without a value"))?;
            let name = &line[..name_end];
            let family = match types.get(name) {
                Some(&"gauge") => name,
                Some(t) => return Err(bad(&format!("sample named like a {t} family"))),
                None => match name.strip_suffix("_total") {
                    Some(f) if types.get(f) == Some(&"counter") => f,
                    _ => return Err(bad("sample without # HELP / # TYPE")),
                },
            };
            if !help.contains_key(family) {
                return Err(bad("sample without # HELP"));
            }
            let (labels, value) = if line[name_end..].starts_with('{') {
                let body = &line[name_end + 1..];
                // Find the closing brace outside quotes.
                let (mut quoted, mut esc, mut close) = (false, false, None);
                for (i, c) in body.char_indices() {
                    match (quoted, esc, c) {
                        (true, true, 'n' | '"' | '\\') => esc = false,
                        (true, true, _) => return Err(bad("bad escape in a label value")),
                        (true, false, '\\') => esc = true,
                        (true, false, '"') => quoted = false,
                        (false, _, '"') => quoted = true,
                        (false, _, '}') => {
                            close = Some(i);
                            break;
                        }
                        _ => {}
                    }
                }
                let close = close.ok_or_else(|| bad("unclosed label set"))?;
                let labels = parse_labels(&body[..close]);
                let pairs = body[..close].matches("=\"").count();
                if labels.len() != pairs {
                    return Err(bad("malformed label set"));
                }
                (labels, &body[close + 1..])
            } else {
                (Vec::new(), &line[name_end..])
            };
            let value = value
                .trim()
                .parse::<f64>()
                .map_err(|_| bad("value is not a number"))?;
            samples.push((name.to_string(), labels, value));
        }
    }
    if !eof {
        return Err("no # EOF at the end".into());
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WEIRD: &str = "net\"null\\0\nx";

    fn snapshot() -> Snapshot {
        let mut counters = Counters {
            received: 10,
            dequeued: 7,
            dequeued_bytes: 700,
            ..Counters::default()
        };
        counters.on_drop(DropReason::Overlimit, 64);
        let mut variant_tx_bytes = vec![0; 64];
        variant_tx_bytes[1] = 500;
        Snapshot {
            at: Time::from_nanos(1_000_000_000),
            devs: vec![DevSnap {
                name: WEIRD.into(),
                rx: 10,
                ingress_drops: [1, 0, 0, 0],
                hw: [0, 0, 0, 0, 3, 0, 0, 0],
            }],
            lanes: vec![LaneSnap {
                egress: WEIRD.into(),
                discipline: "rrmqs",
                rate_bps: 1e8,
                counters,
                in_flight: 2,
                qlen: 2,
                qbytes: 128,
                tx_sent: 7,
                variant_tx_bytes,
                gauges: vec![
                    (
                        "rrmqs_index".into(),
                        "variant=\"taxed(newreno)\"".into(),
                        0.5,
                    ),
                    (
                        "rrmqs_feedback".into(),
                        "variant=\"cubic\",state=\"Normal\"".into(),
                        1.0,
                    ),
                    ("rrmqs_jain".into(), String::new(), 0.9),
                ],
                ..LaneSnap::default()
            }],
            pool_free: 1000,
            neighbours: Some(NeighbourStats {
                learned: 3,
                statics: 1,
                refused_not_for_us: 5000,
                ..NeighbourStats::default()
            }),
        }
    }

    #[test]
    fn label_values_are_escaped() {
        let mut r = Registry::default();
        #[derive(Debug)]
        struct One;
        impl Collector for One {
            fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
                family(
                    &mut enc,
                    "x",
                    "X.",
                    Values::Gauge(vec![(vec![("dev", Escaped(WEIRD))], 1.0)]),
                )
            }
        }
        r.register_collector(Box::new(One));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &r).unwrap();
        assert!(out.contains(r#"x{dev="net\"null\\0\nx"} 1.0"#), "{out}");
        assert_eq!(
            parse_labels(r#"a="1\"2",b="x\\y\nz""#),
            [
                ("a".to_string(), "1\"2".to_string()),
                ("b".to_string(), "x\\y\nz".to_string())
            ]
        );
    }

    #[test]
    fn prometheus_text_parses_with_help_type_and_escaped_labels() {
        let text = snapshot().render_prometheus();
        let samples = check_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let get = |name: &str, want: &[(&str, &str)]| {
            samples
                .iter()
                .find(|(n, l, _)| {
                    n == name
                        && want
                            .iter()
                            .all(|(k, v)| l.iter().any(|(a, b)| a == k && b == v))
                })
                .map(|s| s.2)
                .unwrap_or_else(|| panic!("no {name} {want:?} in\n{text}"))
        };
        // Names as before; counters are counters, gauges gauges.
        assert!(
            text.contains("# TYPE tollgate_rx_packets counter"),
            "{text}"
        );
        assert!(text.contains("# TYPE tollgate_egress_queue_packets gauge"));
        assert!(text.contains("# HELP tollgate_egress_tx_packets "));
        assert_eq!(get("tollgate_rx_packets_total", &[]), 10.0);
        assert_eq!(
            get("tollgate_egress_tx_packets_total", &[("port", WEIRD)]),
            7.0
        );
        assert_eq!(
            get(
                "tollgate_egress_dropped_packets_total",
                &[
                    ("port", WEIRD),
                    ("discipline", "rrmqs"),
                    ("reason", "overlimit")
                ]
            ),
            1.0
        );
        assert_eq!(get("tollgate_port_imissed_total", &[("port", WEIRD)]), 3.0);
        assert_eq!(
            get(
                "tollgate_rrmqs_index",
                &[("port", WEIRD), ("variant", "taxed(newreno)")]
            ),
            0.5
        );
        assert_eq!(
            get(
                "tollgate_rrmqs_feedback",
                &[("variant", "cubic"), ("state", "Normal")]
            ),
            1.0
        );
        assert_eq!(get("tollgate_rrmqs_jain", &[("port", WEIRD)]), 0.9);
        assert_eq!(get("tollgate_l3_neighbours", &[("kind", "learned")]), 3.0);
        assert_eq!(
            get(
                "tollgate_l3_neighbour_refused_total",
                &[("reason", "not_for_us")]
            ),
            5000.0
        );
        assert_eq!(
            get("tollgate_egress_variant_tx_bytes_total", &[("port", WEIRD)]),
            500.0
        );
        // The raw text carries the escapes, never a bare quote or newline
        // inside a value.
        assert!(text.contains(r#"port="net\"null\\0\nx""#), "{text}");
    }

    #[test]
    fn dualpi2_gauges_render_with_their_help() {
        let mut out = Vec::new();
        DisciplineGauges::DualPi2 {
            p_prime: 0.25,
            l_packets: 3,
            c_packets: 40,
        }
        .render_into(&mut out);
        let names: Vec<(&str, f64)> = out.iter().map(|(n, _, v)| (n.as_str(), *v)).collect();
        assert_eq!(
            names,
            [
                ("dualpi2_p", 0.25),
                ("dualpi2_l_packets", 3.0),
                ("dualpi2_c_packets", 40.0)
            ]
        );
        for (n, _, _) in &out {
            assert!(gauge_help(n).starts_with("DualPI2: "), "{n}");
        }
    }

    #[test]
    fn exposition_checker_rejects_what_scrapers_reject() {
        let ok = "# HELP a A.\n# TYPE a counter\na_total 1\n# EOF\n";
        assert!(check_exposition(ok).is_ok());
        for bad in [
            "a_total 1\n# EOF\n",                                   // no HELP/TYPE
            "# HELP a A.\n# TYPE a counter\na_total 1\n",           // no EOF
            "# HELP a A.\n# TYPE a gauge\na{x=\"\"\"} 1\n# EOF\n",  // bare quote
            "# HELP a A.\n# TYPE a gauge\na{x=\"\\q\"} 1\n# EOF\n", // bad escape
            "# HELP a A.\n# TYPE a gauge\na{x=\"1\"} one\n# EOF\n", // value
        ] {
            assert!(check_exposition(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn concurrent_offers_and_reads_never_tear_a_snapshot() {
        // The producer writes snapshots whose fields all carry the same
        // number; a reader must only ever see whole snapshots, in order.
        let p = Published::new();
        let producer = {
            let p = p.clone();
            std::thread::spawn(move || {
                let mut s = Snapshot::default();
                for i in 1..=20_000u64 {
                    s.pool_free = i;
                    s.devs.resize_with(1 + (i % 3) as usize, DevSnap::default);
                    for d in &mut s.devs {
                        d.rx = i;
                        d.hw = [i; 8];
                    }
                    assert!(p.offer(&mut s));
                }
                p.close();
            })
        };
        let (mut seen, mut last) = (0, 0);
        while let Some((seq, s)) = p.wait_newer(seen) {
            seen = seq;
            let i = s.pool_free;
            assert!(i > last, "went back from {last} to {i}");
            last = i;
            assert_eq!(s.devs.len(), 1 + (i % 3) as usize);
            for d in &s.devs {
                assert_eq!((d.rx, d.hw), (i, [i; 8]), "torn snapshot");
            }
        }
        producer.join().unwrap();
        assert_eq!(last, 20_000, "the last snapshot reaches the reader");
    }

    #[test]
    fn offer_swaps_without_waiting_and_readers_see_the_latest() {
        let p = Published::new();
        assert_eq!(p.latest().devs.len(), 0);
        let mut s = snapshot();
        assert!(p.offer(&mut s));
        assert_eq!(s.devs.len(), 0, "the old (empty) snapshot comes back");
        assert_eq!(p.latest().devs[0].rx, 10);
        let (seq, got) = p.wait_newer(0).unwrap();
        assert_eq!((seq, got.pool_free), (1, 1000));
        // A reader holding its lock does not stop the forwarding core.
        let guard = p.reader.lock().unwrap();
        let mut t = snapshot();
        t.pool_free = 7;
        assert!(p.offer(&mut t));
        drop(guard);
        let (seq, got) = p.wait_newer(1).unwrap();
        assert_eq!((seq, got.pool_free), (2, 7));
        // Many offers between two reads: the reader sees the last one.
        for i in 0..10 {
            t.pool_free = 100 + i;
            assert!(p.offer(&mut t));
        }
        assert_eq!(p.wait_newer(2).unwrap().1.pool_free, 109);
        p.close();
        assert!(p.wait_newer(3).is_none());
    }
}
