//! DualPI2, the dual-queue coupled AQM of L4S (De Schepper, Briscoe &
//! White, RFC 9332, with the PI2 controller of its Appendix A), the
//! reference DualQ Coupled AQM that Linux ships as `sch_dualpi2`.
//!
//! - **Two queues**. An arrival whose ECN field is ECT(1) or CE (the L4S
//!   identifier of RFC 9331) joins the *L* queue; Not-ECT and ECT(0) join
//!   the *C* (Classic) queue. Each packet is stamped
//!   with its enqueue time (no clock is read). An arrival finding `limit`
//!   packets queued in the two together is dropped
//!   ([`DropReason::Overlimit`]).
//! - **The base PI controller** (Appendix A.1, Figure 6). Every `tupdate`
//!   (default 16 ms), with `curq` the sojourn time of the packet at the
//!   head of the C queue (0 when it is empty),
//!
//!   ```text
//!   p' = p' + alpha * (curq - target) + beta * (curq - prevq)    clamped to [0, 1]
//!   prevq = curq
//!   ```
//!
//!   (delays in seconds; `target` 15 ms, `alpha` 0.16 Hz, `beta` 3.2 Hz: the
//!   values Linux uses, RFC 9332's formulas `alpha = 0.1 Tupdate / RTT_max^2`
//!   and `beta = 0.3 / RTT_max` at `Tupdate` 16 ms and `RTT_max` 100 ms,
//!   rounded). The updates are computed on the grid `t0 + n tupdate` from the
//!   first event `t0`, lazily: each call first runs the updates due by its
//!   `now` (nothing changes the queues between two calls), so no timer is
//!   needed; [`Qdisc::poll`] runs them too.
//! - **Coupling** (Appendix A.1, Figure 6): the Classic drop/mark
//!   probability is `p_C = p'^2`, the coupled L4S marking probability is
//!   `p_CL = k p'` with the coupling factor `k` (`coupling_factor`, default
//!   2). Scalable senders (rate ~ 1/p) and Classic ones (rate ~ 1/sqrt(p))
//!   then get about equal rates.
//! - **Native L4S AQM**: a step. An L packet whose sojourn time is at least
//!   `step_thresh` (default 1 ms, Linux's default; RFC 9332 Appendix A.1's
//!   example is a ramp from 800 us over 400 us) has `p'_L = 1`, else 0. An L
//!   packet is marked CE with `p_L = max(p'_L, p_CL)`.
//! - **Scheduler**: a time-shifted FIFO, a conditional-priority scheduler
//!   as RFC 9332 asks for. When both queues hold packets, the C head goes
//!   first only if it was enqueued more than `tshift` (default 40 ms)
//!   before the L head; otherwise the L head goes.
//!   L has priority while the C queue's delay stays within `tshift` of the
//!   L queue's, and C is never starved: its delay is bounded by the L
//!   delay plus `tshift`.
//! - **Classic drops and marks** at dequeue: with probability `p_C` a C
//!   packet is marked CE if it is ECN-capable (ECT(0)) and `ecn` is on
//!   (the default), else dropped.
//! - **Overload** (Appendix A.2). With `p_Cmax = min(1/k^2, 1)`: once `p_C >= p_Cmax` ECN-capable C packets are dropped instead of
//!   marked; once `p_CL >= 1` (the L queue cannot be made to slow down by
//!   marking any harder) an L packet is dropped with probability `p_C` and
//!   the others are marked.
//!
//! The random decisions draw from a generator seeded with `seed`. Drops at
//! dequeue (Classic and overload drops) are counted under
//! [`DropReason::Early`] and handed back through [`Qdisc::take_dropped`];
//! marks count in [`Counters::marked`]. [`DualPi2::stats`] splits the
//! counts between the two queues.

use std::collections::VecDeque;
use std::time::Duration;

use tollgate_cca::rng::{self, SimRng};
use tollgate_cca::time::duration_nanos;
use tollgate_cca::Time;

use crate::codel::DropBox;
use crate::qdisc::{
    check, enqueue_then_dequeue, ConfigError, Counters, DropReason, PacketHandle, Qdisc, Verdict,
};

const NAME: &str = "dualpi2";

/// Updates run one by one in a call before the rest are computed in closed
/// form ([`DualPi2::fast_forward`]): 16 s at the default `tupdate`.
const FAST_FORWARD_AFTER: u32 = 1024;

/// DualPI2's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DualPi2Config {
    /// Packets queued in the two queues together. Default 10000 (Linux's).
    pub limit: u32,
    /// The Classic queue delay the PI controller holds. Default 15 ms.
    pub target: Duration,
    /// The PI controller's update interval. Default 16 ms.
    pub tupdate: Duration,
    /// Integral gain, Hz. Default 0.16.
    pub alpha: f64,
    /// Proportional gain, Hz. Default 3.2.
    pub beta: f64,
    /// The coupling factor `k`: `p_CL = k p'`. Default 2.
    pub coupling_factor: f64,
    /// L4S step marking threshold on an L packet's sojourn time. Default 1 ms.
    pub step_thresh: Duration,
    /// Time shift of the scheduler: a C head goes first only when it is
    /// older than the L head by more than this. Default 40 ms.
    pub tshift: Duration,
    /// Mark ECN-capable Classic packets instead of dropping them (below
    /// overload). Default true.
    pub ecn: bool,
    /// Seed of the drop and mark decisions. Default 1.
    pub seed: u64,
}

impl Default for DualPi2Config {
    fn default() -> Self {
        DualPi2Config {
            limit: 10_000,
            target: Duration::from_millis(15),
            tupdate: Duration::from_millis(16),
            alpha: 0.16,
            beta: 3.2,
            coupling_factor: 2.0,
            step_thresh: Duration::from_millis(1),
            tshift: Duration::from_millis(40),
            ecn: true,
            seed: 1,
        }
    }
}

impl DualPi2Config {
    /// Check every parameter.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::int(NAME, "limit", u64::from(self.limit), 1, 1 << 24)?;
        let time = |field: &'static str, d: Duration, zero_ok: bool| {
            if (d.is_zero() && !zero_ok) || d > Duration::from_secs(10) {
                let lo = if zero_ok { "[0" } else { "(0" };
                Err(ConfigError::new(
                    NAME,
                    field,
                    format!("{d:?}"),
                    format!("{lo}, 10s], e.g. \"15ms\""),
                ))
            } else {
                Ok(())
            }
        };
        time("target", self.target, false)?;
        time("tupdate", self.tupdate, false)?;
        time("step_thresh", self.step_thresh, true)?;
        time("tshift", self.tshift, true)?;
        check::open_closed(NAME, "alpha", self.alpha, 0.0, 100.0)?;
        check::range(NAME, "beta", self.beta, 0.0, 1000.0)?;
        check::open_closed(NAME, "coupling_factor", self.coupling_factor, 0.0, 100.0)?;
        Ok(())
    }
}

/// What happened to packets of each queue, beside [`Counters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DualPi2Stats {
    /// Arrivals classified to the L queue (dropped at the limit or not).
    pub l_received: u64,
    /// Arrivals classified to the C queue.
    pub c_received: u64,
    /// L packets sent.
    pub l_dequeued: u64,
    /// C packets sent.
    pub c_dequeued: u64,
    /// L packets marked CE (step or coupled marking, and overload marking).
    pub l_marked: u64,
    /// L packets marked at or above the step threshold.
    pub l_step_marked: u64,
    /// C packets marked CE (probability `p_C`).
    pub c_marked: u64,
    /// L packets dropped in overload (probability `p_C` while `p_CL >= 1`).
    pub l_dropped: u64,
    /// C packets dropped (probability `p_C`).
    pub c_dropped: u64,
    /// PI controller updates run.
    pub updates: u64,
}

/// The DualPI2 discipline.
#[derive(Debug)]
pub struct DualPi2<P> {
    l: VecDeque<(P, Time)>,
    c: VecDeque<(P, Time)>,
    bytes: u64,
    limit: usize,
    target: f64,
    tupdate: u64,
    alpha: f64,
    beta: f64,
    k: f64,
    p_cmax: f64,
    step_thresh: u64,
    tshift: u64,
    ecn: bool,
    /// The base probability `p'`.
    p: f64,
    /// `curq` at the last update, seconds.
    prevq: f64,
    /// When the next update is due (ns); `None` before the first event.
    next_update: Option<u64>,
    rng: SimRng,
    counters: Counters,
    stats: DualPi2Stats,
    dropped: DropBox<P>,
}

impl<P: PacketHandle> DualPi2<P> {
    /// Build from a validated configuration.
    pub fn new(config: &DualPi2Config) -> Result<Self, ConfigError> {
        config.validate()?;
        let limit = config.limit as usize;
        let k = config.coupling_factor;
        Ok(DualPi2 {
            l: VecDeque::with_capacity(limit),
            c: VecDeque::with_capacity(limit),
            bytes: 0,
            limit,
            target: config.target.as_secs_f64(),
            tupdate: duration_nanos(config.tupdate),
            alpha: config.alpha,
            beta: config.beta,
            k,
            p_cmax: (1.0 / (k * k)).min(1.0),
            step_thresh: duration_nanos(config.step_thresh),
            tshift: duration_nanos(config.tshift),
            ecn: config.ecn,
            p: 0.0,
            prevq: 0.0,
            next_update: None,
            rng: rng::seeded(config.seed),
            counters: Counters::default(),
            stats: DualPi2Stats::default(),
            dropped: DropBox::new(limit),
        })
    }

    /// The base probability `p'` after the last update.
    pub fn p_prime(&self) -> f64 {
        self.p
    }

    /// The Classic drop/mark probability `p_C = p'^2`.
    pub fn p_c(&self) -> f64 {
        self.p * self.p
    }

    /// The coupled L4S marking probability `p_CL = k p'` (may exceed 1:
    /// overload).
    pub fn p_cl(&self) -> f64 {
        self.k * self.p
    }

    /// Packets in the L queue.
    pub fn l_len(&self) -> usize {
        self.l.len()
    }

    /// Packets in the C queue.
    pub fn c_len(&self) -> usize {
        self.c.len()
    }

    /// Per-queue counts.
    pub fn stats(&self) -> &DualPi2Stats {
        &self.stats
    }

    /// Run the PI updates due at or before `now` (Figure 6 of RFC 9332's
    /// Appendix A.1), each with the C queue as it is now: no packet came or
    /// went since the previous call.
    #[inline]
    fn advance(&mut self, now: u64) {
        let mut next = match self.next_update {
            Some(t) => t,
            None => {
                self.next_update = Some(now.saturating_add(self.tupdate));
                return;
            }
        };
        let head = self.c.front().map(|(_, t)| t.as_nanos());
        let mut run = 0u32;
        while now >= next && next < u64::MAX {
            if head.is_none() && self.p == 0.0 && self.prevq == 0.0 {
                // Idle at rest: every update due would leave p' at 0.
                let missed = (now - next) / self.tupdate + 1;
                next = next.saturating_add(missed.saturating_mul(self.tupdate));
                break;
            }
            if run == FAST_FORWARD_AFTER {
                next = self.fast_forward(head, next, now);
                break;
            }
            let curq = head.map_or(0.0, |t| next.saturating_sub(t) as f64 * 1e-9);
            self.update(curq);
            next = next.saturating_add(self.tupdate);
            run += 1;
        }
        self.next_update = Some(next);
    }

    /// One update of `p'` with the Classic queue delay `curq` (seconds).
    #[inline]
    fn update(&mut self, curq: f64) {
        let p = self.p + self.alpha * (curq - self.target) + self.beta * (curq - self.prevq);
        self.p = p.clamp(0.0, 1.0);
        self.prevq = curq;
        self.stats.updates += 1;
    }

    /// The `n` updates due from `next` to `now` in closed form, for a call
    /// that comes more than [`FAST_FORWARD_AFTER`] updates after the last
    /// one (a stalled link, a jump of the clock). An empty C queue lowers
    /// `p'` by `alpha target` per update; a head packet that stays put
    /// makes `curq` grow by `tupdate` per update, so the increments grow
    /// and are summed (clamped once, at the end). Returns the next update
    /// time.
    fn fast_forward(&mut self, head: Option<u64>, next: u64, now: u64) -> u64 {
        let n = (now - next) / self.tupdate + 1;
        let nf = n as f64;
        let t = self.tupdate as f64 * 1e-9;
        match head {
            None => {
                let p = self.p - self.alpha * self.target - self.beta * self.prevq;
                self.p = (p.clamp(0.0, 1.0) - (nf - 1.0) * self.alpha * self.target).max(0.0);
                self.prevq = 0.0;
            }
            Some(h) => {
                let curq0 = next.saturating_sub(h) as f64 * 1e-9;
                let last = curq0 + (nf - 1.0) * t;
                let sum = self.alpha * (nf * (curq0 - self.target) + t * nf * (nf - 1.0) / 2.0)
                    + self.beta * (last - self.prevq);
                self.p = (self.p + sum).clamp(0.0, 1.0);
                self.prevq = last;
            }
        }
        self.stats.updates += n;
        next.saturating_add(n.saturating_mul(self.tupdate))
    }

    /// Whether the time-shifted FIFO serves the L queue next (both queues
    /// non-empty, or either).
    #[inline]
    fn l_next(&self) -> Option<bool> {
        match (self.l.front(), self.c.front()) {
            (None, None) => None,
            (Some(_), None) => Some(true),
            (None, Some(_)) => Some(false),
            (Some((_, tl)), Some((_, tc))) => {
                Some(tc.as_nanos().saturating_add(self.tshift) >= tl.as_nanos())
            }
        }
    }

    /// The dequeue decisions on `pkt`, enqueued at `enqueued` and taken
    /// from the L queue (`l4s`) or the C queue at `now_ns`: the packet to
    /// send, marked or not, or `None` if it was dropped (counted and held
    /// for [`Qdisc::take_dropped`]).
    #[inline]
    fn serve(&mut self, mut pkt: P, enqueued: Time, l4s: bool, now_ns: u64) -> Option<P> {
        let (p_c, p_cl) = (self.p_c(), self.p_cl());
        if l4s {
            let mark = if p_cl < 1.0 {
                if now_ns.saturating_sub(enqueued.as_nanos()) >= self.step_thresh {
                    self.stats.l_step_marked += 1;
                    true
                } else {
                    p_cl > 0.0 && rng::chance(&mut self.rng, p_cl)
                }
            } else if rng::chance(&mut self.rng, p_c) {
                // Overload: revert to Classic drop, mark the rest.
                self.stats.l_dropped += 1;
                self.drop_at_dequeue(pkt);
                return None;
            } else {
                true
            };
            if mark && pkt.set_ce() {
                self.counters.marked += 1;
                self.stats.l_marked += 1;
            }
            self.stats.l_dequeued += 1;
        } else {
            if p_c > 0.0 && rng::chance(&mut self.rng, p_c) {
                if !self.ecn || p_c >= self.p_cmax || !pkt.set_ce() {
                    self.stats.c_dropped += 1;
                    self.drop_at_dequeue(pkt);
                    return None;
                }
                self.counters.marked += 1;
                self.stats.c_marked += 1;
            }
            self.stats.c_dequeued += 1;
        }
        self.counters.on_dequeue(pkt.len_bytes());
        Some(pkt)
    }

    fn drop_at_dequeue(&mut self, p: P) {
        self.dropped.drop(&mut self.counters, DropReason::Early, p);
    }
}

impl<P: PacketHandle> Qdisc<P> for DualPi2<P> {
    fn enqueue(&mut self, packet: P, now: Time) -> Verdict<P> {
        self.advance(now.as_nanos());
        let len = packet.len_bytes();
        self.counters.on_receive(len);
        let l4s = packet.l4s();
        if l4s {
            self.stats.l_received += 1;
        } else {
            self.stats.c_received += 1;
        }
        if self.l.len() + self.c.len() >= self.limit {
            return self.counters.drop(DropReason::Overlimit, packet);
        }
        self.bytes += u64::from(len);
        if l4s {
            self.l.push_back((packet, now));
        } else {
            self.c.push_back((packet, now));
        }
        Verdict::Queued
    }

    fn dequeue(&mut self, now: Time) -> Option<P> {
        let now_ns = now.as_nanos();
        self.advance(now_ns);
        while let Some(l4s) = self.l_next() {
            let (pkt, t) = if l4s {
                self.l.pop_front()?
            } else {
                self.c.pop_front()?
            };
            self.bytes -= u64::from(pkt.len_bytes());
            if let Some(pkt) = self.serve(pkt, t, l4s, now_ns) {
                return Some(pkt);
            }
        }
        None
    }

    /// An empty discipline hands the arrival straight to the dequeue
    /// decisions (sojourn time 0), without queueing it.
    #[inline]
    fn enqueue_dequeue(&mut self, packet: P, now: Time) -> (Verdict<P>, Option<P>) {
        if !(self.l.is_empty() && self.c.is_empty()) {
            return enqueue_then_dequeue(self, packet, now);
        }
        let now_ns = now.as_nanos();
        self.advance(now_ns);
        self.counters.on_receive(packet.len_bytes());
        let l4s = packet.l4s();
        if l4s {
            self.stats.l_received += 1;
        } else {
            self.stats.c_received += 1;
        }
        // `limit` >= 1: an empty discipline takes the arrival.
        (Verdict::Queued, self.serve(packet, now, l4s, now_ns))
    }

    fn len(&self) -> usize {
        self.l.len() + self.c.len()
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }

    fn counters(&self) -> &Counters {
        &self.counters
    }

    fn poll(&mut self, now: Time) {
        self.advance(now.as_nanos());
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn reads_flow_hash(&self) -> bool {
        false
    }

    fn take_dropped(&mut self) -> Option<(P, DropReason)> {
        self.dropped.take()
    }

    fn acts_outside_verdicts(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Ecn;
    use crate::qdisc::PacketMeta;

    const MS: u64 = 1_000_000;

    fn pkt(ecn: Ecn, tag: u64) -> PacketMeta {
        PacketMeta {
            len: 1500,
            ecn,
            tag,
            ..PacketMeta::default()
        }
    }

    fn dualpi2(f: impl FnOnce(&mut DualPi2Config)) -> DualPi2<PacketMeta> {
        let mut c = DualPi2Config::default();
        f(&mut c);
        DualPi2::new(&c).unwrap()
    }

    fn at(ns: u64) -> Time {
        Time::from_nanos(ns)
    }

    #[test]
    fn ect1_and_ce_go_to_the_l_queue_the_rest_to_c() {
        let mut q = dualpi2(|_| {});
        for (i, ecn) in [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce]
            .into_iter()
            .enumerate()
        {
            assert_eq!(q.enqueue(pkt(ecn, i as u64), Time::ZERO), Verdict::Queued);
        }
        assert_eq!((q.l_len(), q.c_len(), q.len()), (2, 2, 4));
        let s = q.stats();
        assert_eq!((s.l_received, s.c_received), (2, 2));
        // The L queue goes first (same enqueue time), in its own order.
        let order: Vec<u64> = std::iter::from_fn(|| q.dequeue(Time::ZERO))
            .map(|p| p.tag)
            .collect();
        assert_eq!(order, [2, 3, 0, 1]);
    }

    #[test]
    fn the_pi_update_follows_figure_6() {
        // One Classic packet enqueued at 0 and left at the head: at the
        // update at 16 n ms, curq = 16 n ms.
        let mut q = dualpi2(|_| {});
        let _ = q.enqueue(pkt(Ecn::Ect0, 0), Time::ZERO);
        let (alpha, beta, target) = (0.16, 3.2, 0.015);
        let mut want = 0.0f64;
        let mut prevq = 0.0;
        for n in 1..=10u64 {
            q.poll(at(n * 16 * MS));
            let curq = (n * 16) as f64 * 1e-3;
            want = (want + alpha * (curq - target) + beta * (curq - prevq)).clamp(0.0, 1.0);
            prevq = curq;
            assert!(
                (q.p_prime() - want).abs() < 1e-12,
                "update {n}: p' = {}, want {want}",
                q.p_prime()
            );
        }
        assert_eq!(q.stats().updates, 10);
        // Updates between calls are all run, on the 16 ms grid.
        q.poll(at(1000 * MS));
        assert_eq!(q.stats().updates, 62);
        assert_eq!(q.p_prime(), 1.0, "a 1 s delay saturates p'");
        assert!((q.p_c() - 1.0).abs() < 1e-12 && (q.p_cl() - 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_long_gap_is_fast_forwarded_like_the_updates_one_by_one() {
        // The same history, polled every update (one by one) or once at
        // the end (beyond the fast-forward threshold), with the C queue
        // empty and with a packet stuck at its head.
        for stuck in [false, true] {
            let cfg = |c: &mut DualPi2Config| {
                c.alpha = 1e-6;
                c.beta = 1e-6;
            };
            let (mut a, mut b) = (dualpi2(cfg), dualpi2(cfg));
            for q in [&mut a, &mut b] {
                let _ = q.enqueue(pkt(Ecn::Ect0, 0), Time::ZERO);
                q.poll(at(1000 * 16 * MS));
                q.p = 0.5;
                if !stuck {
                    let _ = q.dequeue(at(1000 * 16 * MS));
                }
            }
            let end = 5000 * 16 * MS;
            let mut t = 1001 * 16 * MS;
            while t <= end {
                a.poll(at(t));
                t += 16 * MS;
            }
            b.poll(at(end));
            assert_eq!(a.stats().updates, b.stats().updates);
            assert!(
                (a.p_prime() - b.p_prime()).abs() < 1e-9,
                "stuck {stuck}: {} vs {}",
                a.p_prime(),
                b.p_prime()
            );
            assert!(a.p_prime() > 0.0 && a.p_prime() < 1.0, "{}", a.p_prime());
        }
        // A clock at the end of time does not hang.
        let mut q = dualpi2(|_| {});
        let _ = q.enqueue(pkt(Ecn::Ect0, 0), Time::ZERO);
        q.poll(at(u64::MAX));
        q.poll(at(u64::MAX));
        assert_eq!(q.p_prime(), 1.0);
    }

    /// A standing Classic queue of `backlog` ECT(0) packets, one in and one
    /// out every ms from `t0` to `t1`; returns p' after each update.
    fn standing(q: &mut DualPi2<PacketMeta>, backlog: usize, t0: u64, t1: u64) -> Vec<f64> {
        while q.c_len() < backlog {
            let _ = q.enqueue(pkt(Ecn::Ect0, 0), at(t0));
        }
        while q.c_len() > backlog {
            let _ = q.dequeue(at(t0));
        }
        let mut ps = Vec::new();
        let mut t = t0;
        while t < t1 {
            t += MS;
            let before = q.stats().updates;
            let _ = q.enqueue(pkt(Ecn::Ect0, 0), at(t));
            let _ = q.dequeue(at(t));
            if q.stats().updates > before {
                ps.push(q.p_prime());
            }
        }
        ps
    }

    #[test]
    fn p_rises_above_target_and_falls_below_it() {
        let mut q = dualpi2(|_| {});
        // 30 packets, one served per ms: about 30 ms of delay.
        let up = standing(&mut q, 30, 0, 1000 * MS);
        assert!(up.len() >= 60, "{}", up.len());
        for w in up.windows(2).skip(3) {
            assert!(w[1] > w[0], "p' must rise: {up:?}");
        }
        let high = q.p_prime();
        assert!(high > 0.1, "{high}");
        // 5 packets: about 5 ms, below the 15 ms target.
        let down = standing(&mut q, 5, 1000 * MS, 3000 * MS);
        for w in down.windows(2) {
            assert!(w[1] <= w[0], "p' must fall: {down:?}");
        }
        assert!(down[1] < high);
        assert_eq!(q.p_prime(), 0.0, "{down:?}");
        // ECT(0) packets were marked, not dropped (p_C stayed below p_Cmax).
        assert!(q.counters().marked > 0);
        assert_eq!(q.counters().dropped_total(), 0);
    }

    /// Send `n` packets with `ecn` one by one through a DualPI2 whose p'
    /// is fixed at `p` (all at time 0: no update runs, no sojourn);
    /// returns the fractions (marked, dropped).
    fn frequencies(p: f64, ecn: Ecn, n: u64, f: impl FnOnce(&mut DualPi2Config)) -> (f64, f64) {
        let mut q = dualpi2(f);
        let _ = q.enqueue(pkt(Ecn::NotEct, 0), Time::ZERO);
        let _ = q.dequeue(Time::ZERO);
        q.p = p;
        let (m0, d0) = (q.counters().marked, q.counters().dropped_total());
        for i in 0..n {
            let _ = q.enqueue(pkt(ecn, i), Time::ZERO);
            let _ = q.dequeue(Time::ZERO);
            while q.take_dropped().is_some() {}
        }
        assert_eq!(q.stats().updates, 0);
        let c = q.counters();
        (
            (c.marked - m0) as f64 / n as f64,
            (c.dropped_total() - d0) as f64 / n as f64,
        )
    }

    #[test]
    fn classic_probability_is_p_squared_and_coupled_l4s_is_k_p() {
        let n = 40_000;
        let close = |got: f64, want: f64| (got - want).abs() < 0.01;
        for p in [0.1, 0.3, 0.45] {
            let pc = p * p;
            // Classic ECT(0): marked with p^2, never dropped.
            let (m, d) = frequencies(p, Ecn::Ect0, n, |_| {});
            assert!(close(m, pc) && d == 0.0, "p' {p}: marked {m}, dropped {d}");
            // Not-ECT: dropped with p^2.
            let (m, d) = frequencies(p, Ecn::NotEct, n, |_| {});
            assert!(close(d, pc) && m == 0.0, "p' {p}: marked {m}, dropped {d}");
            // Classic ECN off: ECT(0) dropped too.
            let (m, d) = frequencies(p, Ecn::Ect0, n, |c| c.ecn = false);
            assert!(close(d, pc) && m == 0.0, "p' {p}: marked {m}, dropped {d}");
            // L4S: marked with k p' (below the step threshold).
            let (m, d) = frequencies(p, Ecn::Ect1, n, |_| {});
            assert!(close(m, 2.0 * p) && d == 0.0, "p' {p}: marked {m}");
            let (m, _) = frequencies(p, Ecn::Ect1, n, |c| c.coupling_factor = 1.0);
            assert!(close(m, p), "k = 1, p' {p}: marked {m}");
        }
        // p' = 0: nothing happens.
        assert_eq!(frequencies(0.0, Ecn::NotEct, n, |_| {}), (0.0, 0.0));
        assert_eq!(frequencies(0.0, Ecn::Ect1, n, |_| {}), (0.0, 0.0));
    }

    #[test]
    fn l4s_packets_are_marked_from_the_step_threshold() {
        let mut q = dualpi2(|_| {});
        for i in 0..10 {
            let _ = q.enqueue(pkt(Ecn::Ect1, i), Time::ZERO);
        }
        for _ in 0..5 {
            let p = q.dequeue(at(999_999)).unwrap();
            assert_eq!(p.ecn, Ecn::Ect1, "below the threshold: not marked");
        }
        for _ in 0..5 {
            let p = q.dequeue(at(MS)).unwrap();
            assert_eq!(p.ecn, Ecn::Ce, "at the threshold: marked");
        }
        assert_eq!((q.stats().l_step_marked, q.stats().l_marked), (5, 5));
        assert_eq!(q.counters().marked, 5);
        // A Classic packet waiting as long is not step-marked.
        let _ = q.enqueue(pkt(Ecn::Ect0, 11), at(MS));
        assert_eq!(q.dequeue(at(6 * MS)).unwrap().ecn, Ecn::Ect0);
    }

    #[test]
    fn the_l_queue_has_priority_but_the_c_queue_is_not_starved() {
        let mut q = dualpi2(|_| {});
        for i in 0..100 {
            let _ = q.enqueue(pkt(Ecn::NotEct, 1000 + i), Time::ZERO);
        }
        // L4S packets arrive at the link rate: one per ms, one served per ms.
        let mut c_out = Vec::new();
        let mut l_waits = Vec::new();
        for ms in 1..=400u64 {
            let t = ms * MS;
            let _ = q.enqueue(pkt(Ecn::Ect1, t), at(t));
            let p = q.dequeue(at(t)).unwrap();
            if p.tag >= 1000 && p.tag < 1100 {
                c_out.push(ms);
            } else {
                l_waits.push(ms - p.tag / MS);
            }
            while q.take_dropped().is_some() {}
        }
        // Until the Classic head has waited the 40 ms time shift, only L
        // goes out.
        assert!(c_out[0] > 40, "{c_out:?}");
        // Then Classic packets get out although L alone fills the link.
        // The burst of 100, all enqueued at 0, is older than any L head
        // by more than the shift from 41 ms on: it goes out back to back
        // (but for the few the PI controller drops: it waits > 15 ms).
        let dropped = q.stats().c_dropped as usize;
        assert!(dropped < 10, "{dropped}");
        assert_eq!(c_out, (41..141 - dropped as u64).collect::<Vec<_>>());
        // Meanwhile L waits, at most the length of that burst.
        assert!(l_waits.iter().all(|&w| w <= 100), "{l_waits:?}");
        // With no time shift the scheduler is one FIFO over both queues.
        let mut q = dualpi2(|c| c.tshift = Duration::ZERO);
        let _ = q.enqueue(pkt(Ecn::NotEct, 0), at(1));
        let _ = q.enqueue(pkt(Ecn::Ect1, 1), at(2));
        let _ = q.enqueue(pkt(Ecn::NotEct, 2), at(3));
        let order: Vec<u64> = std::iter::from_fn(|| q.dequeue(at(4)))
            .map(|p| p.tag)
            .collect();
        assert_eq!(order, [0, 1, 2]);
    }

    #[test]
    fn overload_drops_l4s_and_disables_classic_ecn() {
        let n = 40_000;
        // p' = 0.6: p_CL = 1.2 >= 1 and p_C = 0.36 >= p_Cmax = 1/4.
        let (m, d) = frequencies(0.6, Ecn::Ect1, n, |_| {});
        assert!((d - 0.36).abs() < 0.01, "L dropped {d}");
        assert!(
            (m - 0.64).abs() < 0.01,
            "the other L packets are marked: {m}"
        );
        let (m, d) = frequencies(0.6, Ecn::Ect0, n, |_| {});
        assert!((d - 0.36).abs() < 0.01 && m == 0.0, "C {m} {d}");
        // Just below overload (p' = 0.45, p_CL = 0.9, p_C = 0.2025): marks only.
        let (m, d) = frequencies(0.45, Ecn::Ect1, n, |_| {});
        assert!(d == 0.0 && (m - 0.9).abs() < 0.01, "{m} {d}");
        // p_Cmax follows k: k = 1 allows Classic marking up to p_C = 1.
        let (m, d) = frequencies(0.6, Ecn::Ect0, n, |c| c.coupling_factor = 1.0);
        assert!(d == 0.0 && (m - 0.36).abs() < 0.01, "{m} {d}");
        // The packet limit covers both queues.
        let mut q = dualpi2(|c| c.limit = 4);
        for ecn in [Ecn::Ect1, Ecn::NotEct, Ecn::Ect1, Ecn::Ect0] {
            assert_eq!(q.enqueue(pkt(ecn, 0), Time::ZERO), Verdict::Queued);
        }
        for ecn in [Ecn::Ect1, Ecn::NotEct] {
            assert_eq!(
                q.enqueue(pkt(ecn, 0), Time::ZERO).drop_reason(),
                Some(DropReason::Overlimit)
            );
        }
    }

    #[test]
    fn the_fused_call_on_an_empty_discipline_equals_the_two_calls() {
        // Every codepoint, below and in overload, with and without the step.
        for (p, step) in [(0.0, 1), (0.3, 1), (0.3, 0), (0.6, 1)] {
            let cfg = |c: &mut DualPi2Config| c.step_thresh = Duration::from_millis(step);
            let (mut a, mut b) = (dualpi2(cfg), dualpi2(cfg));
            a.p = p;
            b.p = p;
            for i in 0..4000u64 {
                let ecn = Ecn::from_bits(i as u8);
                let now = at(i * 1000);
                let fused = a.enqueue_dequeue(pkt(ecn, i), now);
                let twice = enqueue_then_dequeue(&mut b, pkt(ecn, i), now);
                assert_eq!(fused, twice, "p' {p}, packet {i}");
                assert_eq!(a.take_dropped(), b.take_dropped());
                assert_eq!(format!("{a:?}"), format!("{b:?}"));
            }
            let s = a.stats();
            if p > 0.0 {
                assert!(s.l_marked > 0 && s.c_marked + s.c_dropped > 0, "{s:?}");
            }
        }
    }

    #[test]
    fn counters_add_up() {
        let mut q = dualpi2(|c| c.limit = 200);
        let mut r = rng::seeded(7);
        let mut back = 0u64;
        let mut t = 0u64;
        for i in 0..60_000u64 {
            let ecn = [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce][rng::below(&mut r, 4) as usize];
            let p = PacketMeta {
                len: 64 + rng::below(&mut r, 1437) as u32,
                ..pkt(ecn, i)
            };
            // 1.5 arrivals per departure: overlimit, drops and marks.
            if let Verdict::Dropped { .. } = q.enqueue(p, at(t)) {
                back += 1;
            }
            if i % 3 != 0 && q.dequeue(at(t)).is_some() {
                back += 1;
            }
            while q.take_dropped().is_some() {
                back += 1;
            }
            t += 200_000;
            let c = q.counters();
            assert_eq!(c.received, c.dequeued + c.dropped_total() + q.len() as u64);
            assert_eq!(
                c.received_bytes,
                c.dequeued_bytes + c.dropped_bytes_total() + q.bytes()
            );
        }
        let (c, s) = (q.counters(), q.stats());
        assert_eq!(back, c.dequeued + c.dropped_total());
        assert_eq!(s.l_received + s.c_received, c.received);
        assert_eq!(s.l_dequeued + s.c_dequeued, c.dequeued);
        assert_eq!(s.l_marked + s.c_marked, c.marked);
        assert_eq!(s.l_dropped + s.c_dropped, c.dropped_for(DropReason::Early));
        assert!(c.dropped_for(DropReason::Overlimit) > 0, "{c:?}");
        assert!(s.c_dropped > 0 && s.c_marked > 0 && s.l_marked > 0, "{s:?}");
    }

    #[test]
    fn bad_parameters_name_the_field() {
        let bad = |f: fn(&mut DualPi2Config)| {
            let mut c = DualPi2Config::default();
            f(&mut c);
            c.validate().unwrap_err().field
        };
        assert_eq!(bad(|c| c.limit = 0), "limit");
        assert_eq!(bad(|c| c.target = Duration::ZERO), "target");
        assert_eq!(bad(|c| c.tupdate = Duration::ZERO), "tupdate");
        assert_eq!(bad(|c| c.alpha = 0.0), "alpha");
        assert_eq!(bad(|c| c.beta = f64::NAN), "beta");
        assert_eq!(bad(|c| c.coupling_factor = -1.0), "coupling_factor");
        assert_eq!(
            bad(|c| c.step_thresh = Duration::from_secs(11)),
            "step_thresh"
        );
        assert_eq!(bad(|c| c.tshift = Duration::from_secs(11)), "tshift");
        assert!(DualPi2Config {
            step_thresh: Duration::ZERO,
            tshift: Duration::ZERO,
            ..DualPi2Config::default()
        }
        .validate()
        .is_ok());
    }
}
