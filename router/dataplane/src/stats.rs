//! Statistics: a snapshot of every device and egress pipeline, printed as a
//! table, rendered as Prometheus text, and checked for exact accounting.
//!
//! Accounting (DESIGN.md decision 5), over the whole router:
//! `rx = tx + dropped + queued`, where `rx` counts frames taken from RX
//! queues, `tx` frames accepted by TX queues, `dropped` every drop (library
//! reasons per egress pipeline, plus `tx_full` when a TX queue refused a
//! frame and the ingress reasons `no_route`, `not_ip`, `ttl`, `local`), and
//! `queued` the frames still inside the pipelines.

use std::fmt::Write as _;

use tollgate_cca::{Time, VariantId};
use tollgate_router::packet::ParseStats;
use tollgate_router::{Counters, DropReason};

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
    /// Non-IP frames forwarded around the discipline (L2 ARP etc.).
    pub bypass: u64,
    /// Transmitted bytes per variant (DSCP index).
    pub variant_tx_bytes: Vec<u64>,
    /// Discipline gauges: (metric suffix, labels, value).
    pub gauges: Vec<(String, String, f64)>,
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
    /// Whole-router totals.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for d in &self.devs {
            t.rx += d.rx;
            t.dropped += d.ingress_drops.iter().sum::<u64>();
        }
        for l in &self.lanes {
            t.tx += l.tx_sent;
            t.dropped += l.counters.dropped_total() + l.tx_full;
            t.queued += l.in_flight;
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
            let _ = writeln!(s, "tx_full={}] marked={}", l.tx_full, l.counters.marked);
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

    /// Prometheus text exposition format (version 0.0.4).
    pub fn render_prometheus(&self) -> String {
        let mut s = String::new();
        let t = self.totals();
        let _ = writeln!(s, "# HELP tollgate_rx_packets_total Frames received by the router.\n# TYPE tollgate_rx_packets_total counter\ntollgate_rx_packets_total {}", t.rx);
        let _ = writeln!(
            s,
            "# TYPE tollgate_tx_packets_total counter\ntollgate_tx_packets_total {}",
            t.tx
        );
        let _ = writeln!(
            s,
            "# TYPE tollgate_dropped_packets_total counter\ntollgate_dropped_packets_total {}",
            t.dropped
        );
        let _ = writeln!(
            s,
            "# TYPE tollgate_queued_packets gauge\ntollgate_queued_packets {}",
            t.queued
        );
        let _ = writeln!(
            s,
            "# TYPE tollgate_mempool_free gauge\ntollgate_mempool_free {}",
            self.pool_free
        );
        let _ = writeln!(s, "# TYPE tollgate_port_rx_packets_total counter");
        for d in &self.devs {
            let _ = writeln!(
                s,
                "tollgate_port_rx_packets_total{{port=\"{}\"}} {}",
                d.name, d.rx
            );
        }
        let _ = writeln!(s, "# TYPE tollgate_port_ingress_dropped_total counter");
        for d in &self.devs {
            for (r, n) in INGRESS_REASONS.iter().zip(d.ingress_drops) {
                let _ = writeln!(
                    s,
                    "tollgate_port_ingress_dropped_total{{port=\"{}\",reason=\"{r}\"}} {n}",
                    d.name
                );
            }
        }
        let _ = writeln!(s, "# TYPE tollgate_port_imissed_total counter");
        for d in &self.devs {
            let _ = writeln!(
                s,
                "tollgate_port_imissed_total{{port=\"{}\"}} {}",
                d.name, d.hw[4]
            );
        }
        let lane = |s: &mut String, name: &str, kind: &str, f: &dyn Fn(&LaneSnap) -> f64| {
            let _ = writeln!(s, "# TYPE tollgate_egress_{name} {kind}");
            for l in &self.lanes {
                let _ = writeln!(
                    s,
                    "tollgate_egress_{name}{{port=\"{}\",discipline=\"{}\"}} {}",
                    l.egress,
                    l.discipline,
                    f(l)
                );
            }
        };
        lane(&mut s, "received_packets_total", "counter", &|l| {
            l.counters.received as f64
        });
        lane(&mut s, "tx_packets_total", "counter", &|l| l.tx_sent as f64);
        lane(&mut s, "tx_bytes_total", "counter", &|l| {
            l.counters.dequeued_bytes as f64
        });
        lane(&mut s, "tx_full_total", "counter", &|l| l.tx_full as f64);
        lane(&mut s, "bypass_packets_total", "counter", &|l| {
            l.bypass as f64
        });
        lane(&mut s, "marked_packets_total", "counter", &|l| {
            l.counters.marked as f64
        });
        lane(&mut s, "queue_packets", "gauge", &|l| l.qlen as f64);
        lane(&mut s, "queue_bytes", "gauge", &|l| l.qbytes as f64);
        lane(&mut s, "in_flight_packets", "gauge", &|l| {
            l.in_flight as f64
        });
        lane(&mut s, "shaper_rate_bps", "gauge", &|l| l.rate_bps);
        let _ = writeln!(s, "# TYPE tollgate_egress_dropped_packets_total counter");
        for l in &self.lanes {
            for r in DropReason::ALL {
                let _ = writeln!(
                    s,
                    "tollgate_egress_dropped_packets_total{{port=\"{}\",discipline=\"{}\",reason=\"{}\"}} {}",
                    l.egress,
                    l.discipline,
                    r.name(),
                    l.counters.dropped_for(r)
                );
            }
        }
        let _ = writeln!(s, "# TYPE tollgate_egress_variant_tx_bytes_total counter");
        for l in &self.lanes {
            for (v, &b) in l.variant_tx_bytes.iter().enumerate() {
                if b > 0 {
                    let name = VariantId::from_dscp(v as u8)
                        .map(|v| v.to_string())
                        .unwrap_or_default();
                    let _ = writeln!(s, "tollgate_egress_variant_tx_bytes_total{{port=\"{}\",variant=\"{name}\"}} {b}", l.egress);
                }
            }
        }
        let mut names: Vec<&str> = Vec::new();
        for l in &self.lanes {
            for (n, _, _) in &l.gauges {
                if !names.contains(&n.as_str()) {
                    names.push(n);
                }
            }
        }
        for n in names {
            let _ = writeln!(s, "# TYPE tollgate_{n} gauge");
            for l in &self.lanes {
                for (_, lab, v) in l.gauges.iter().filter(|g| g.0 == n) {
                    let sep = if lab.is_empty() { "" } else { "," };
                    let _ = writeln!(s, "tollgate_{n}{{port=\"{}\"{sep}{lab}}} {v}", l.egress);
                }
            }
        }
        s
    }
}
