//! RED, gentle RED and Adaptive RED.
//!
//! Sources: Floyd & Jacobson, "Random Early Detection Gateways for Congestion
//! Avoidance", IEEE/ACM ToN 1993 (the average, the count correction, byte
//! mode, idle time); Floyd, "Recommendations on using the gentle variant of
//! RED", 2000; Floyd, Gummadi & Shenker, "Adaptive RED", 2001 (the `max_p`
//! controller and the automatic parameters).
//!
//! At each arrival, with `q` the instantaneous queue (packets, or bytes in
//! byte mode):
//!
//! ```text
//! avg = (1 - w) * avg + w * q                    (queue non-empty)
//! avg = (1 - w)^m * avg                          (queue empty; m = idle time / packet time,
//!                                                  packet time = mean_pkt * 8 / link rate)
//! min_th <= avg < max_th:  p_b = max_p * (avg - min_th) / (max_th - min_th)
//! gentle, max_th <= avg < 2 max_th:  p_b = max_p + (1 - max_p) * (avg - max_th) / max_th
//! byte mode:  p_b = p_b * len / mean_pkt
//! p_a = p_b / (1 - count * p_b)   (1 once count * p_b >= 1)
//! ```
//!
//! `count` is the number of packets since the last drop (it starts at -1 below
//! `min_th` and is incremented before use, as in the 1993 paper), so the
//! distance between drops is uniform rather than geometric. In the gentle
//! region `p_a = p_b` (no count correction: with `p_b >= 0.5` the correction
//! would drop every packet after the first, and the gentle ramp from `max_p`
//! to 1 would collapse to a cliff). Above `max_th` (or `2 max_th` when gentle)
//! every arrival is dropped ([`DropReason::Forced`]).
//!
//! With `ecn`, an ECN-capable packet that RED selects is marked CE and queued
//! instead ([`Verdict::Marked`]); in the forced region too unless `harddrop`
//! (as Linux `sch_red`). The hard `limit` always drops ([`DropReason::Overlimit`]).
//!
//! Adaptive RED, every `adapt_interval` (0.5 s), with `D = max_th - min_th`:
//! `avg > min_th + 0.6 D` and `max_p <= 0.5`: `max_p += min(0.01, max_p / 4)`;
//! `avg < min_th + 0.4 D` and `max_p >= 0.01`: `max_p *= 0.9`.
//! [`RedConfig::auto`] applies the automatic settings `w = 1 - exp(-1 / C)`,
//! `min_th = max(5, target_delay * C / 2)`, `max_th = 3 min_th` (C = link
//! capacity in packets per second).

use std::time::Duration;

use tollgate_cca::Time;

use crate::qdisc::{
    check, enqueue_then_dequeue, ConfigError, Counters, DropReason, PacketHandle, Qdisc, Verdict,
};
use crate::ring::Fifo;
use tollgate_cca::rng::{self, SimRng};

const NAME: &str = "red";

/// RED parameters (also the RED part of CHOKe).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RedConfig {
    /// Hard limit in packets. Default 1000.
    pub limit: u32,
    /// Lower threshold (packets, or bytes in byte mode). Default 5.
    pub min_th: f64,
    /// Upper threshold (packets, or bytes in byte mode). Default 15.
    pub max_th: f64,
    /// Drop probability at `max_th` (ARED's initial value). Default 0.1.
    pub max_p: f64,
    /// EWMA weight `w` of the average. Default 0.002 (Floyd 1993).
    pub weight: f64,
    /// Gentle mode. Default true (Floyd's recommendation).
    pub gentle: bool,
    /// Adaptive RED: adjust `max_p` every `adapt_interval`. Default false.
    pub adaptive: bool,
    /// ARED interval. Default 500 ms.
    pub adapt_interval: Duration,
    /// Byte mode: queue and thresholds in bytes, `p_b` scaled by `len / mean_pkt_bytes`. Default false.
    pub byte_mode: bool,
    /// Mean packet size (`avpkt`) in bytes, for idle decay and byte mode. Default 1000.
    pub mean_pkt_bytes: u32,
    /// Link rate in bit/s, for the idle-time decay. Default 100 Mbit/s.
    pub link_rate_bps: f64,
    /// Mark ECN-capable packets instead of dropping them. Default false.
    pub ecn: bool,
    /// With `ecn`: still drop in the forced region. Default false.
    pub harddrop: bool,
    /// Seed of the drop decisions. Default 1.
    pub seed: u64,
}

impl Default for RedConfig {
    fn default() -> Self {
        RedConfig {
            limit: 1000,
            min_th: 5.0,
            max_th: 15.0,
            max_p: 0.1,
            weight: 0.002,
            gentle: true,
            adaptive: false,
            adapt_interval: Duration::from_millis(500),
            byte_mode: false,
            mean_pkt_bytes: 1000,
            link_rate_bps: 100e6,
            ecn: false,
            harddrop: false,
            seed: 1,
        }
    }
}

impl RedConfig {
    /// Adaptive RED with the automatic settings of Floyd, Gummadi & Shenker
    /// for a link of `link_rate_bps` and a target queueing delay.
    pub fn auto(
        link_rate_bps: f64,
        target_delay: Duration,
        mean_pkt_bytes: u32,
        limit: u32,
    ) -> Self {
        let c = link_rate_bps / (8.0 * f64::from(mean_pkt_bytes.max(1)));
        let min_th = (target_delay.as_secs_f64() * c / 2.0).max(5.0);
        RedConfig {
            limit,
            min_th,
            max_th: 3.0 * min_th,
            weight: 1.0 - (-1.0 / c).exp(),
            adaptive: true,
            mean_pkt_bytes,
            link_rate_bps,
            ..RedConfig::default()
        }
    }

    /// Check every parameter.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_as(NAME)
    }

    pub(crate) fn validate_as(&self, d: &'static str) -> Result<(), ConfigError> {
        check::int(
            d,
            "limit",
            u64::from(self.limit),
            1,
            crate::droptail::MAX_SLOTS,
        )?;
        check::range(d, "min_th", self.min_th, 0.0, 1e12)?;
        if !(self.max_th.is_finite() && self.max_th > self.min_th) {
            return Err(ConfigError::new(
                d,
                "max_th",
                self.max_th,
                format!("> min_th ({})", self.min_th),
            ));
        }
        check::open_closed(d, "max_p", self.max_p, 0.0, 1.0)?;
        check::open_closed(d, "weight", self.weight, 0.0, 1.0)?;
        check::int(
            d,
            "mean_pkt_bytes",
            u64::from(self.mean_pkt_bytes),
            1,
            65_535,
        )?;
        check::open_closed(d, "link_rate_bps", self.link_rate_bps, 0.0, 1e13)?;
        if self.adaptive && self.adapt_interval.is_zero() {
            return Err(ConfigError::new(
                d,
                "adapt_interval",
                "0s",
                "> 0 when adaptive",
            ));
        }
        Ok(())
    }
}

/// What RED decided for one arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedDecision {
    /// Admit.
    Pass,
    /// Probabilistic drop / mark.
    Early,
    /// Forced drop / mark (average above the forced threshold).
    Forced,
}

/// The RED state machine (average, count, ARED), without a queue: shared by
/// [`Red`] and [`crate::choke::Choke`].
#[derive(Clone, Debug)]
pub struct RedCore {
    cfg: RedConfig,
    avg: f64,
    count: i64,
    max_p: f64,
    idle_since: Option<Time>,
    next_adapt: Option<Time>,
    /// `ln(1 - w) / packet time (ns)`: the idle decay `(1 - w)^(idle / packet
    /// time)` is `exp(idle * this)`, an `exp` instead of a `powf` (half the
    /// cost, and the decay runs at most arrivals when the queue keeps
    /// emptying at line rate).
    ln_keep_per_ns: f64,
    /// `1 / (max_th - min_th)`, `1 / max_th`, `1 / mean_pkt_bytes`: the
    /// per-packet decision multiplies instead of dividing (two `divsd` were
    /// half of `decide` in the dataplane's profile).
    inv_range: f64,
    inv_max: f64,
    inv_mean: f64,
    rng: SimRng,
}

impl RedCore {
    /// State for a validated configuration.
    pub fn new(cfg: &RedConfig) -> Self {
        RedCore {
            cfg: *cfg,
            avg: 0.0,
            count: -1,
            max_p: cfg.max_p,
            idle_since: Some(Time::ZERO),
            next_adapt: None,
            ln_keep_per_ns: (1.0 - cfg.weight).ln()
                / (f64::from(cfg.mean_pkt_bytes) * 8.0 * 1e9 / cfg.link_rate_bps),
            inv_range: 1.0 / (cfg.max_th - cfg.min_th),
            inv_max: 1.0 / cfg.max_th,
            inv_mean: 1.0 / f64::from(cfg.mean_pkt_bytes),
            rng: rng::seeded(cfg.seed),
        }
    }

    /// The current average queue.
    pub fn average(&self) -> f64 {
        self.avg
    }

    /// The current `max_p` (moves under ARED).
    pub fn max_p(&self) -> f64 {
        self.max_p
    }

    /// The random generator (CHOKe draws its victim from it).
    pub fn rng(&mut self) -> &mut SimRng {
        &mut self.rng
    }

    /// The configuration.
    pub fn config(&self) -> &RedConfig {
        &self.cfg
    }

    /// Tell RED the queue became empty at `now` (starts the idle period).
    pub fn on_empty(&mut self, now: Time) {
        self.idle_since = Some(now);
    }

    /// Update the average for an arrival seeing `q_pkts` packets / `q_bytes` bytes.
    #[inline]
    pub fn update_average(&mut self, q_pkts: usize, q_bytes: u64, now: Time) {
        self.adapt(now);
        let w = self.cfg.weight;
        let q = if self.cfg.byte_mode {
            q_bytes as f64
        } else {
            q_pkts as f64
        };
        match self.idle_since.take() {
            // An average of zero stays zero: skip the `powf` (at line rate
            // the queue empties between most arrivals).
            Some(_) if q_pkts == 0 && self.avg == 0.0 => {}
            Some(since) if q_pkts == 0 => {
                let idle = now.saturating_since(since).as_nanos() as f64;
                // (1 - w)^(idle / packet time). `x` is NaN only for w = 1
                // and idle = 0, where the factor is 1: no change.
                let x = idle * self.ln_keep_per_ns;
                if x < 0.0 {
                    self.avg *= x.exp();
                }
            }
            _ => self.avg = (1.0 - w) * self.avg + w * q,
        }
    }

    /// The drop decision for a packet of `len` bytes, given the current average.
    pub fn decide(&mut self, len: u32) -> RedDecision {
        let (min, max) = (self.cfg.min_th, self.cfg.max_th);
        let avg = self.avg;
        let (p_b, corrected) = if avg < min {
            self.count = -1;
            return RedDecision::Pass;
        } else if avg < max {
            (self.max_p * (avg - min) * self.inv_range, true)
        } else if self.cfg.gentle && avg < 2.0 * max {
            (
                self.max_p + (1.0 - self.max_p) * (avg - max) * self.inv_max,
                false,
            )
        } else {
            self.count = 0;
            return RedDecision::Forced;
        };
        let p_b = if self.cfg.byte_mode {
            (p_b * f64::from(len) * self.inv_mean).min(1.0)
        } else {
            p_b
        };
        self.count += 1;
        // p_a = p_b / (1 - count * p_b) (1 once the denominator reaches 0),
        // tested as u * denom < p_b: one draw either way.
        let denom = 1.0 - self.count as f64 * p_b;
        let u = rng::uniform_f64(&mut self.rng);
        let early = if !corrected {
            u < p_b
        } else if denom <= 0.0 {
            true
        } else {
            u * denom < p_b
        };
        if early {
            self.count = 0;
            RedDecision::Early
        } else {
            RedDecision::Pass
        }
    }

    /// Adaptive RED's controller, run at most once per interval.
    fn adapt(&mut self, now: Time) {
        if !self.cfg.adaptive {
            return;
        }
        let interval = self.cfg.adapt_interval;
        let Some(next) = self.next_adapt else {
            self.next_adapt = Some(now + interval);
            return;
        };
        if now < next {
            return;
        }
        let (min, d) = (self.cfg.min_th, self.cfg.max_th - self.cfg.min_th);
        if self.avg > min + 0.6 * d && self.max_p <= 0.5 {
            self.max_p += (self.max_p / 4.0).min(0.01);
        } else if self.avg < min + 0.4 * d && self.max_p >= 0.01 {
            self.max_p *= 0.9;
        }
        self.next_adapt = Some(now + interval);
    }

    /// Whether a packet selected by RED should be marked instead of dropped.
    pub fn should_mark<P: PacketHandle>(&self, decision: RedDecision, p: &P) -> bool {
        self.cfg.ecn && p.ecn_capable() && !(decision == RedDecision::Forced && self.cfg.harddrop)
    }

    /// Decide on `packet` ([`RedCore::decide`]) and carry it out: the
    /// packet to queue and whether it was marked CE, or the drop verdict
    /// (counted in `counters`).
    #[inline]
    pub fn judge<P: PacketHandle>(
        &mut self,
        mut packet: P,
        counters: &mut Counters,
    ) -> Result<(P, bool), Verdict<P>> {
        let decision = self.decide(packet.len_bytes());
        if decision == RedDecision::Pass {
            return Ok((packet, false));
        }
        if self.should_mark(decision, &packet) && packet.set_ce() {
            return Ok((packet, true));
        }
        let reason = if decision == RedDecision::Early {
            DropReason::Early
        } else {
            DropReason::Forced
        };
        Err(counters.drop(reason, packet))
    }

    /// An admitted arrival ([`RedCore::judge`]'s `Ok`) that found the
    /// queue empty and leaves at once, as RED's and CHOKe's
    /// `enqueue_dequeue` have it: counted as queued and dequeued, and the
    /// queue, empty again, starts its idle period at `now`.
    #[inline]
    pub fn pass<P: PacketHandle>(
        &mut self,
        (packet, marked): (P, bool),
        counters: &mut Counters,
        now: Time,
    ) -> (Verdict<P>, Option<P>) {
        let verdict = counters.queued(marked);
        self.on_leave(packet.len_bytes(), true, now, counters);
        (verdict, Some(packet))
    }

    /// A packet of `len` bytes left the queue at `now` (RED's and CHOKe's
    /// dequeue): count it, and start the idle period if the queue is now
    /// `empty`.
    #[inline]
    pub fn on_leave(&mut self, len: u32, empty: bool, now: Time, counters: &mut Counters) {
        counters.on_dequeue(len);
        if empty {
            self.on_empty(now);
        }
    }
}

/// The RED discipline over a FIFO.
#[derive(Debug)]
pub struct Red<P> {
    core: RedCore,
    q: Fifo<P>,
    counters: Counters,
}

impl<P: PacketHandle> Red<P> {
    /// Build from a configuration (validated here).
    pub fn new(config: &RedConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Red {
            core: RedCore::new(config),
            q: Fifo::with_capacity(config.limit as usize),
            counters: Counters::default(),
        })
    }

    /// The RED state (average, `max_p`).
    pub fn core(&self) -> &RedCore {
        &self.core
    }
}

impl<P: PacketHandle> Red<P> {
    /// RED's decision on an arrival (after counting it as received): the
    /// packet to queue and whether it was marked, or the drop verdict.
    #[inline]
    fn admit(&mut self, packet: P, now: Time) -> Result<(P, bool), Verdict<P>> {
        self.counters.on_receive(packet.len_bytes());
        self.core.update_average(self.q.len(), self.q.bytes(), now);
        self.core.judge(packet, &mut self.counters)
    }
}

impl<P: PacketHandle> Qdisc<P> for Red<P> {
    fn enqueue(&mut self, packet: P, now: Time) -> Verdict<P> {
        let (packet, marked) = match self.admit(packet, now) {
            Ok(admitted) => admitted,
            Err(dropped) => return dropped,
        };
        match self.q.push(packet) {
            Ok(()) => self.counters.queued(marked),
            Err(packet) => self.counters.drop(DropReason::Overlimit, packet),
        }
    }

    fn dequeue(&mut self, now: Time) -> Option<P> {
        let p = self.q.pop()?;
        let empty = self.q.is_empty();
        self.core
            .on_leave(p.len_bytes(), empty, now, &mut self.counters);
        Some(p)
    }

    /// On an empty queue an admitted arrival leaves at once, and the queue
    /// is empty again after it (RED's idle period starts at `now`).
    #[inline]
    fn enqueue_dequeue(&mut self, packet: P, now: Time) -> (Verdict<P>, Option<P>) {
        if !self.q.is_empty() {
            return enqueue_then_dequeue(self, packet, now);
        }
        // An empty queue takes the packet (`limit` >= 1).
        match self.admit(packet, now) {
            Ok(admitted) => self.core.pass(admitted, &mut self.counters, now),
            Err(dropped) => (dropped, None),
        }
    }

    fn len(&self) -> usize {
        self.q.len()
    }

    fn bytes(&self) -> u64 {
        self.q.bytes()
    }

    fn counters(&self) -> &Counters {
        &self.counters
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn reads_flow_hash(&self) -> bool {
        false
    }
}
