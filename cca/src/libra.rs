//! TCP Libra (Marfia, Palazzi, Pau, Gerla, Sanadidi, Roccetti: "TCP Libra:
//! Exploring RTT-Fair TCP Congestion Control"). NewReno except for the window
//! rule, which makes the equilibrium rate independent of the RTT.
//!
//! Per ACK of new data in congestion avoidance (window `w` in packets, `T` the
//! current RTT in seconds):
//!
//! ```text
//! w += (1 / w) * alpha * T^2 / (T + T0)          alpha = S * P
//! S  = k1 * C                                    C: bottleneck capacity, Mbit/s
//! P  = exp(-k2 * (T - Tmin) / (Tmax - Tmin))     (P = 1 while Tmax == Tmin)
//! ```
//!
//! so the window grows `alpha * T^2 / (T + T0)` packets per RTT and the *rate*
//! grows `alpha / (T + T0)` packets/s per second, nearly RTT-free for `T << T0`.
//! On a congestion event `w = w * T1 / (2 (T + T0))` and `ssthresh = w`
//! (our reading of the paper's garbled decrease; its
//! fluid model's decrease amount is `w - T1 w / (2 (T + T0))`). With
//! `T << T0` the equilibrium rate is `x = sqrt(alpha (1 - p) / p)`, independent
//! of the RTT. Paper defaults: `T0 = T1 = 1 s`, `k1 = k2 = 2`.
//!
//! ## Where `C` comes from
//! In order of preference, exposed as `capacity_source` in [`Stats::details`]:
//! 1. `configured`: the `capacity` parameter, if not `auto`;
//! 2. `capprobe`: [`CapProbe`] once a run of `probe_run` pairs has converged
//!    (`probe_tolerance`: see the convergence test there); the median of the
//!    last converged runs. Pairs are two consecutive packet numbers sent at
//!    most `pair_gap` apart; the dispersion is the gap between their ACKs'
//!    `now`s, so the driver must ACK probe packets individually (both packets
//!    acknowledged by one ACK give zero dispersion and are rejected as
//!    `shared_ack`). Estimates above `link_rate` (default: the sender's link
//!    rate from [`Env::link_rate_bps`]) are rejected. At most 8 pairs are
//!    pending at once; a new pair starts only when a slot is free, and a pair
//!    still pending after `4 * srtt` (at least 1 s) is presumed lost and its
//!    slot reused. Stats: `capprobe_pairs`, `capprobe_runs`,
//!    `capprobe_converged_runs`, `capprobe_rejected` and one
//!    `capprobe_rejected_<reason>` per [`Reject`] reason;
//! 3. `delivery-rate` (fallback until a pair converges): the largest rate of
//!    acknowledged bytes over one smoothed-RTT interval seen in the flow's
//!    lifetime. It measures the flow's own share, not the link, so it
//!    under-estimates `C` on a shared link and favours flows that already got
//!    more. It never decreases: a windowed maximum would fall after each
//!    loss, shrinking alpha, slowing growth and lowering the rate again, a
//!    spiral seen in `tollgate cca trace libra` on an uncongested path;
//! 4. `window`: `cwnd / srtt`, before the first delivery-rate interval completes.

use std::time::Duration;

use crate::capprobe::{CapProbe, CapProbeConfig, PairSample, Reject};
use crate::newreno::RenoCore;
use crate::registry::{Algorithm, Env};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{
    Ack, CongestionControl, CongestionEvent, SentPacket, StatValue, Stats, Time, VariantId,
};

/// Libra's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LibraConfig {
    /// `T0`: RTT sensitivity, seconds.
    pub t0: f64,
    /// `T1`: multiplicative-decrease scale, seconds.
    pub t1: f64,
    /// `k1`: `S = k1 * C`.
    pub k1: f64,
    /// `k2`: penalty exponent.
    pub k2: f64,
    /// Bottleneck capacity in bit/s, or `None` to estimate it.
    pub capacity_bps: Option<f64>,
    /// Largest send gap for two consecutive packets to form a CapProbe pair.
    pub pair_gap: Duration,
    /// CapProbe convergence slack, as a fraction of the kept pair's dispersion.
    pub probe_tolerance: f64,
    /// Accepted pairs per CapProbe run (0 = one run forever).
    pub probe_run: u64,
    /// The sender's link rate bounding CapProbe, bit/s; `None` takes the
    /// driver's ([`Env::link_rate_bps`]).
    pub link_rate_bps: Option<f64>,
}

const PARAMS: &[Param] = &[
    Param {
        name: "t0",
        kind: Kind::Duration,
        default: "1s",
        help: "T0: RTT sensitivity of the increase",
    },
    Param {
        name: "t1",
        kind: Kind::Duration,
        default: "1s",
        help: "T1: scale of the multiplicative decrease",
    },
    Param {
        name: "k1",
        kind: Kind::Float {
            min: 0.0001,
            max: 1e6,
        },
        default: "2",
        help: "S = k1 * C (C in Mbit/s)",
    },
    Param {
        name: "k2",
        kind: Kind::Float {
            min: 0.0,
            max: 100.0,
        },
        default: "2",
        help: "penalty P = exp(-k2 (T - Tmin) / (Tmax - Tmin))",
    },
    Param {
        name: "capacity",
        kind: Kind::Rate { auto_allowed: true },
        default: "auto",
        help: "bottleneck capacity C; auto = CapProbe, delivery-rate fallback",
    },
    Param {
        name: "pair_gap",
        kind: Kind::Duration,
        default: "100us",
        help: "max send gap of a CapProbe packet pair",
    },
    Param {
        name: "probe_tolerance",
        kind: Kind::Float { min: 0.0, max: 1.0 },
        default: "0.1",
        help: "CapProbe convergence: kept pair's delay sum above min(d1)+min(d2) by at most this fraction of its dispersion",
    },
    Param {
        name: "probe_run",
        kind: Kind::Int {
            min: 0,
            max: 1_000_000,
        },
        default: "100",
        help: "accepted pairs per CapProbe run; the estimate is the median of the last 21 converged runs (0 = one run forever)",
    },
    Param {
        name: "link_rate",
        kind: Kind::Rate { auto_allowed: true },
        default: "auto",
        help: "the sender's own link rate; CapProbe rejects estimates above it (auto = the interface or access rate the driver reports, if any)",
    },
];

impl LibraConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(LibraConfig {
            t0: args.duration("t0")?.as_secs_f64(),
            t1: args.duration("t1")?.as_secs_f64(),
            k1: args.float("k1")?,
            k2: args.float("k2")?,
            capacity_bps: args.rate_bps("capacity")?,
            pair_gap: args.duration("pair_gap")?,
            probe_tolerance: args.float("probe_tolerance")?,
            probe_run: args.int("probe_run")?,
            link_rate_bps: args.rate_bps("link_rate")?,
        })
    }
}

impl Default for LibraConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("libra", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "libra",
    variant: VariantId::LIBRA,
    summary: "RTT-fair window rule w += alpha T^2/((T+T0) w), capacity from CapProbe",
    source: "Marfia et al., TCP Libra",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| Ok(Box::new(Libra::new(LibraConfig::from_args(args)?, env))),
};

/// Where Libra's capacity figure currently comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapacitySource {
    /// The `capacity` parameter.
    Configured,
    /// A converged CapProbe estimate.
    CapProbe,
    /// The delivery-rate max filter (fallback).
    DeliveryRate,
    /// `cwnd / srtt` (before any delivery-rate interval).
    Window,
}

impl CapacitySource {
    /// Label used in stats.
    pub fn label(self) -> &'static str {
        match self {
            CapacitySource::Configured => "configured",
            CapacitySource::CapProbe => "capprobe",
            CapacitySource::DeliveryRate => "delivery-rate",
            CapacitySource::Window => "window",
        }
    }
}

/// A probe pair waiting for its ACKs.
#[derive(Clone, Copy, Debug)]
struct PendingPair {
    first: u64,
    sent: Time,
    /// Send gap between the two packets.
    send_gap: Duration,
    first_bytes: u64,
    /// `(ack time, rtt)` of the first packet once acknowledged.
    first_ack: Option<(Time, Duration)>,
}

const PENDING_PAIRS: usize = 8;

/// Lifetime maximum of acknowledged bits per second over smoothed-RTT intervals.
#[derive(Clone, Debug, Default)]
struct DeliveryRate {
    start: Option<Time>,
    bytes: u64,
    max_bps: f64,
}

impl DeliveryRate {
    fn on_ack(&mut self, now: Time, bytes: u64, srtt: Duration) {
        let start = *self.start.get_or_insert(now);
        self.bytes += bytes;
        let elapsed = now.saturating_since(start);
        if elapsed >= srtt.max(Duration::from_millis(1)) {
            self.max_bps = self
                .max_bps
                .max(self.bytes as f64 * 8.0 / elapsed.as_secs_f64());
            self.start = Some(now);
            self.bytes = 0;
        }
    }

    fn max_bps(&self) -> Option<f64> {
        (self.max_bps > 0.0).then_some(self.max_bps)
    }
}

/// TCP Libra congestion control.
#[derive(Clone, Debug)]
pub struct Libra {
    config: LibraConfig,
    core: RenoCore,
    /// Fractional window growth not yet applied, bytes.
    growth_carry: f64,
    latest_rtt: Duration,
    srtt: Duration,
    t_min: Duration,
    t_max: Duration,
    probe: CapProbe,
    pending: [Option<PendingPair>; PENDING_PAIRS],
    /// Packet number, send time and size of the last packet sent.
    last_sent: Option<(u64, Time, u64)>,
    delivery: DeliveryRate,
}

impl Libra {
    /// Libra with `config` for a sender described by `env`.
    pub fn new(config: LibraConfig, env: &Env) -> Self {
        Libra {
            config,
            core: RenoCore::new(env),
            growth_carry: 0.0,
            latest_rtt: Duration::ZERO,
            srtt: Duration::ZERO,
            t_min: Duration::MAX,
            t_max: Duration::ZERO,
            probe: CapProbe::new(CapProbeConfig {
                tolerance: config.probe_tolerance,
                run_pairs: config.probe_run,
                link_rate_bps: config.link_rate_bps.or(env.link_rate_bps),
            }),
            pending: [None; PENDING_PAIRS],
            last_sent: None,
            delivery: DeliveryRate::default(),
        }
    }

    /// The capacity in bit/s used for `S`, and its source.
    pub fn capacity(&self) -> (f64, CapacitySource) {
        if let Some(c) = self.config.capacity_bps {
            return (c, CapacitySource::Configured);
        }
        if let Some(c) = self.probe.capacity_bps() {
            return (c, CapacitySource::CapProbe);
        }
        if let Some(c) = self.delivery.max_bps() {
            return (c, CapacitySource::DeliveryRate);
        }
        let srtt = self.srtt.max(Duration::from_millis(1)).as_secs_f64();
        (self.core.cwnd as f64 * 8.0 / srtt, CapacitySource::Window)
    }

    /// The penalty factor `P` for the current RTT.
    pub fn penalty(&self) -> f64 {
        if self.t_max <= self.t_min {
            return 1.0;
        }
        let span = (self.t_max - self.t_min).as_secs_f64();
        let backlog = self.latest_rtt.saturating_sub(self.t_min).as_secs_f64();
        (-self.config.k2 * backlog / span).exp()
    }

    /// `alpha = k1 * C[Mbit/s] * P`.
    pub fn alpha(&self) -> f64 {
        self.config.k1 * self.capacity().0 / 1e6 * self.penalty()
    }

    /// The CapProbe estimator (for inspection).
    pub fn capprobe(&self) -> &CapProbe {
        &self.probe
    }

    fn track_pair_ack(&mut self, now: Time, ack: &Ack) {
        let rtt = now.saturating_since(ack.sent_time);
        for slot in self.pending.iter_mut() {
            let Some(pair) = slot else { continue };
            if ack.packet_number == pair.first {
                pair.first_ack = Some((now, rtt));
            } else if ack.packet_number == pair.first + 1 {
                if let Some((first_time, d1)) = pair.first_ack {
                    self.probe.on_pair(PairSample {
                        d1,
                        d2: rtt,
                        dispersion: now.saturating_since(first_time),
                        send_gap: pair.send_gap,
                        first_bytes: pair.first_bytes,
                        bytes: ack.bytes,
                    });
                }
                *slot = None;
            }
        }
    }
}

impl CongestionControl for Libra {
    fn name(&self) -> &'static str {
        "libra"
    }

    fn variant(&self) -> VariantId {
        VariantId::LIBRA
    }

    fn on_packet_sent(&mut self, now: Time, sent: &SentPacket) {
        if self.config.capacity_bps.is_none() {
            if let Some((prev, at, prev_bytes)) = self.last_sent {
                let back_to_back = sent.packet_number == prev + 1
                    && now.saturating_since(at) <= self.config.pair_gap;
                // `prev` must not already be the second packet of a pair.
                let prev_is_free = self.pending.iter().flatten().all(|p| p.first + 1 != prev);
                let expiry = (4 * self.srtt).max(Duration::from_secs(1));
                let free_slot = self
                    .pending
                    .iter_mut()
                    .find(|slot| slot.is_none_or(|p| now.saturating_since(p.sent) > expiry));
                if let (true, true, Some(slot)) = (back_to_back, prev_is_free, free_slot) {
                    *slot = Some(PendingPair {
                        first: prev,
                        sent: at,
                        send_gap: now.saturating_since(at),
                        first_bytes: prev_bytes,
                        first_ack: None,
                    });
                }
            }
        }
        self.last_sent = Some((sent.packet_number, now, sent.bytes));
    }

    fn on_ack(&mut self, now: Time, ack: &Ack) {
        self.latest_rtt = ack.rtt.latest;
        self.srtt = ack.rtt.smoothed;
        if !ack.rtt.latest.is_zero() {
            self.t_min = self.t_min.min(ack.rtt.latest);
            self.t_max = self.t_max.max(ack.rtt.latest);
        }
        if self.config.capacity_bps.is_none() {
            self.track_pair_ack(now, ack);
            self.delivery.on_ack(now, ack.bytes, ack.rtt.smoothed);
        }
        let rest = self.core.congestion_avoidance_bytes(ack);
        if rest > 0 {
            // Per acked packet: w += (1/w) * alpha * T^2 / (T + T0), in packets.
            let t = self.latest_rtt.as_secs_f64();
            let mss = self.core.mss as f64;
            let w_packets = self.core.cwnd as f64 / mss;
            let acked_packets = rest as f64 / mss;
            let growth_packets =
                acked_packets / w_packets * self.alpha() * t * t / (t + self.config.t0);
            self.growth_carry += growth_packets * mss;
            let whole = self.growth_carry.floor();
            self.growth_carry -= whole;
            self.core.cwnd += whole as u64;
        }
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        if self.core.enter_recovery(now, event) {
            let t = self.latest_rtt.as_secs_f64();
            let factor = self.config.t1 / (2.0 * (t + self.config.t0));
            self.core.reduce_to((self.core.cwnd as f64 * factor) as u64);
            self.growth_carry = 0.0;
        }
        if event.persistent_congestion {
            self.core.persistent_congestion();
        }
    }

    fn on_mtu_change(&mut self, _now: Time, mss: u64) {
        self.core.set_mss(mss);
    }

    fn impose_window(&mut self, _now: Time, window: u64) {
        self.core.impose(window);
    }

    fn window(&self) -> u64 {
        self.core.cwnd
    }

    fn stats(&self) -> Stats {
        let (capacity, source) = self.capacity();
        let mut details = vec![
            ("alpha", StatValue::Num(self.alpha())),
            ("penalty", StatValue::Num(self.penalty())),
            (crate::CAPACITY_MBPS, StatValue::Num(capacity / 1e6)),
            ("capacity_source", StatValue::Text(source.label())),
            ("capprobe_pairs", StatValue::Num(self.probe.pairs() as f64)),
            (
                "capprobe_rejected",
                StatValue::Num(self.probe.rejected() as f64),
            ),
            ("capprobe_runs", StatValue::Num(self.probe.runs().0 as f64)),
            (
                "capprobe_converged_runs",
                StatValue::Num(self.probe.runs().1 as f64),
            ),
        ];
        for reason in Reject::ALL {
            details.push((
                reason.stat_key(),
                StatValue::Num(self.probe.rejected_for(reason) as f64),
            ));
        }
        // The kept pair, once there is one: its ACK gap and how far its delay
        // sum lies above the floor (a pair far above it carried queueing or
        // timing noise, and so does its gap).
        if let (Some(gap), Some(excess)) = (self.probe.kept_dispersion(), self.probe.kept_excess())
        {
            details.push((
                "capprobe_dispersion_us",
                StatValue::Num(gap.as_secs_f64() * 1e6),
            ));
            details.push((
                "capprobe_excess_us",
                StatValue::Num(excess.as_secs_f64() * 1e6),
            ));
        }
        self.core.stats(details)
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}
