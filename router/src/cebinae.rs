//! Cebinae: taxing the heaviest flows of a saturated port.
//!
//! Source: Yu et al., "Cebinae: Scalable In-network Fairness Augmentation",
//! SIGCOMM 2022, and its public ns-3 queue disc.
//!
//! Per egress port there are two drop-tail queues served by strict priority,
//! *head* and *tail*, whose roles swap every round of `dT`. Flows are in two
//! classes, *top* (the heaviest, bottlenecked flows) and *bot* (everything
//! else); each class has one byte counter and one rate per queue. All top
//! flows share one aggregate leaky-bucket filter (LBF): no per-flow rate state.
//!
//! **Top-flow detector.** A two-stage hash table (`cache_slots` slots per
//! stage, first come first served, no eviction) counts bytes per flow at
//! dequeue. At evaluation, top flows are the slots with
//! `bytes > max_bytes * (1 - delta_flow)`; their tags are copied into a
//! same-shaped top table that enqueue consults in O(1).
//!
//! **Enqueue.** With `e` the class's entitlement since the round base
//! (`rate_head * t`, plus `rate_tail * (t - dT)` past one round; `t` quantised
//! down to a multiple of `vdT`) and `b` its byte counter before the packet:
//! `b < rate_head * dT` -> head queue; else `b < (rate_head + rate_tail) * dT`
//! -> tail queue; else drop ([`DropReason::Tax`]). A full queue drops
//! ([`DropReason::Overlimit`]). Then `b = max(b, e) + len`.
//!
//! **ROTATE** (every `dT`): for each class `b = max(0, b - rate_head * dT)`;
//! the rates computed at the last RECONFIG are installed on the head queue,
//! which then swaps roles with the tail; the round base advances by `dT`.
//! A computed rate thus governs the tail for one round and reaches the head
//! one round later, as in the artifact's queue disc, where ROTATE writes
//! the rates into the queue that becomes the tail only.
//!
//! **RECONFIG** (at `dT - L` after each rotate): dequeue priority goes to the
//! queue that will become head. Every `P` rounds: if
//! `port_bytes * 8 > line_rate * P * dT * (1 - delta_port)` the port is
//! saturated and `top_rate = min(sum(top_bytes) * (1 - tau) * 8 / (P dT),
//! line_rate * (1 - tau))`, `bot_rate = line_rate - top_rate`; otherwise
//! there are no top flows, `top_rate = 0` and `bot_rate = line_rate` (the
//! artifact's values; both queues start with them). Then the flow cache and
//! the port byte count are cleared. Bot flows thus receive all capacity not
//! given to top flows: the tax is redistributed implicitly. A flow that
//! becomes top finds the head's top rate still 0 from the unsaturated
//! rounds before: its first round's packets go to the tail, at the rate just
//! computed.
//!
//! **One deviation from the artifact:** the artifact sets `b` on every
//! arrival, dropped or not; Tollgate only on an admitted one. Counting drops,
//! a class offered more than its rate (an unresponsive flood) would raise
//! `b` by more per round than a ROTATE takes off, and the class would stay
//! closed to all its flows while the flood lasts. On the artifact's two-flow scenario the difference moves
//! throughput by 0.6 Mbit/s (router/README.md, "Cebinae's rate
//! installation").
//!
//! The control loop runs inside `enqueue` / `dequeue` and [`Qdisc::poll`],
//! driven only by `now`; no threads or timers. After a long idle gap the
//! missed rounds are skipped in O(1) (they would find an idle, unsaturated port).

use std::time::Duration;

use tollgate_cca::time::duration_nanos;
use tollgate_cca::Time;

use crate::flow::mix64;
use crate::qdisc::{
    check, enqueue_then_dequeue, ConfigError, Counters, DropReason, PacketHandle, Qdisc, Verdict,
};
use crate::ring::Fifo;

const NAME: &str = "cebinae";
const TOP: usize = 0;
const BOT: usize = 1;

/// Cebinae parameters. Defaults are the ns-3 queue disc's except `dt`, `l`
/// and `tau`, which are the ones that let Cebinae protect a TCP flow from an
/// unresponsive flood on the namespace testbed (router/README.md, "Cebinae
/// defaults"): `dt = 2^24 ns`, `l = 100 us`, `tau = 0.5`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CebinaeConfig {
    /// Port line rate, bit/s. Default 100 Mbit/s.
    pub line_rate_bps: f64,
    /// Packets per queue (head and tail each). Default 1000.
    pub max_size: u32,
    /// Round length `dT`. Default 2^24 ns (ns-3: 2^20 ns).
    pub dt: Duration,
    /// Time quantum `vdT` of the entitlement. Default 1024 ns.
    pub vdt: Duration,
    /// Lead `L` of RECONFIG before the next rotate. Default 100 us (ns-3: 65536 ns).
    pub l: Duration,
    /// Rounds `P` per evaluation. Default 1.
    pub p: u32,
    /// Tax rate `tau`. Default 0.5 (ns-3: 0.05).
    pub tau: f64,
    /// Port saturation slack `delta_port`. Default 0.05.
    pub delta_port: f64,
    /// Top-flow slack `delta_flow`. Default 0.05.
    pub delta_flow: f64,
    /// Slots per detector stage (power of two). Default 2^11.
    pub cache_slots: usize,
    /// Seed of the detector's stage hashes. Default 1.
    pub seed: u64,
}

impl Default for CebinaeConfig {
    fn default() -> Self {
        CebinaeConfig {
            line_rate_bps: 100e6,
            max_size: 1000,
            dt: Duration::from_nanos(1 << 24),
            vdt: Duration::from_nanos(1024),
            l: Duration::from_micros(100),
            p: 1,
            tau: 0.5,
            delta_port: 0.05,
            delta_flow: 0.05,
            cache_slots: 1 << 11,
            seed: 1,
        }
    }
}

impl CebinaeConfig {
    /// Check every parameter.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::open_closed(NAME, "line_rate_bps", self.line_rate_bps, 0.0, 1e13)?;
        check::int(
            NAME,
            "max_size",
            u64::from(self.max_size),
            1,
            crate::droptail::MAX_SLOTS,
        )?;
        let dt = duration_nanos(self.dt);
        check::int(NAME, "dt (ns)", dt, 1_000, 1 << 40)?;
        check::int(NAME, "vdt (ns)", duration_nanos(self.vdt), 1, dt)?;
        check::int(NAME, "l (ns)", duration_nanos(self.l), 0, dt - 1)?;
        check::int(NAME, "p", u64::from(self.p), 1, 1 << 20)?;
        check::range(NAME, "tau", self.tau, 0.0, 0.999)?;
        check::range(NAME, "delta_port", self.delta_port, 0.0, 0.999)?;
        check::range(NAME, "delta_flow", self.delta_flow, 0.0, 0.999)?;
        // The flow cache counts a flow's bytes of one evaluation window
        // (`p` rounds) in 32 bits: at line rate, with the two rounds the
        // class counters may admit ahead, they must fit.
        let window_bytes =
            self.line_rate_bps / 8.0 * (dt as f64 * 1e-9) * (f64::from(self.p) + 2.0);
        if window_bytes > f64::from(u32::MAX) {
            return Err(ConfigError::new(
                NAME,
                "p",
                self.p,
                format!(
                    "(p + 2) x dt x line_rate_bps / 8 (the bytes one flow can send in an \
                     evaluation window, {window_bytes:.3e} here) at most 2^32 - 1, the flow \
                     cache's 32-bit count: lower p or dt"
                ),
            ));
        }
        let s = self.cache_slots as u64;
        if !(s.is_power_of_two() && (2..=1 << 20).contains(&s)) {
            return Err(ConfigError::new(
                NAME,
                "cache_slots",
                s,
                "a power of two in 2 ..= 2^20",
            ));
        }
        Ok(())
    }
}

/// What the last evaluation (RECONFIG every `P` rounds) found.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReconfigReport {
    /// When it ran (the scheduled time, not the call's `now`).
    pub at: Time,
    /// Whether the port was saturated.
    pub saturated: bool,
    /// Bytes dequeued from the port over the `P` rounds.
    pub port_bytes: u64,
    /// Flows classified top (0 when unsaturated).
    pub top_flows: usize,
    /// Bytes the top flows sent over the `P` rounds.
    pub top_bytes: u64,
    /// Top-class rate installed, bit/s.
    pub top_rate_bps: f64,
    /// Bot-class rate installed, bit/s.
    pub bot_rate_bps: f64,
}

/// One slot of the flow cache: the flow's tag and its bytes this
/// evaluation window. Eight bytes, so the default cache (2 x 2,048 slots)
/// is 32 KiB; the top table is a separate array of tags, read only for
/// flows that pass the top filter. One 32-byte slot holding both (session
/// 12's layout, when every enqueue looked the top table up) made the table
/// 128 KiB, four times the lines for the dequeue's count of every packet:
/// without the count Cebinae forwarded 0.52-0.54 of plain forwarding
/// against 0.46-0.50 with it. The 8-byte slot gave 0.449 -> 0.477 (1,024
/// flows) and 0.494 -> 0.507 (100,000) in six alternating rounds of
/// `tollgate-dpdk-bench`.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(8))]
struct Slot {
    tag: u32,
    /// Saturates at `u32::MAX`: [`CebinaeConfig::validate`] keeps a window
    /// below 4 GiB at line rate.
    bytes: u32,
}

/// The two-stage top-flow detector and the top table.
#[derive(Debug)]
struct Detector {
    slots: Vec<Slot>,
    /// The top table, slot for slot: the tag of an installed top flow, or 0.
    top: Vec<u32>,
    mask: usize,
    seed: u64,
    /// Slots of the installed top set; 0 while the port is unsaturated, and
    /// then [`Detector::is_top`] answers without touching the table.
    tops: usize,
    /// One bit per [`Detector::filter_bit`] value, set for every installed
    /// top flow: a clear bit answers "not top" from 512 bytes that stay in
    /// L1, instead of loading two lines of the top table. A set bit may
    /// be another flow's; the table decides, so the answer is exact. It
    /// pays where a few heavy flows share a saturated port with many
    /// light ones (`tollgate-dpdk-bench
    /// --rate 2Gbit --heavy 16:0.5`, 1,024 flows, rx 0.40-0.42 -> 0.43-0.45
    /// of forward). Boxed: inline, it would make every discipline enum
    /// value 1 KiB.
    top_filter: Box<[u64; FILTER_WORDS]>,
}

/// Words of [`Detector::top_filter`] (4,096 bits).
const FILTER_WORDS: usize = 64;

impl Detector {
    fn new(slots: usize, seed: u64) -> Self {
        Detector {
            slots: vec![Slot::default(); 2 * slots],
            top: vec![0; 2 * slots],
            mask: slots - 1,
            seed: mix64(seed ^ 0xCEB1),
            tops: 0,
            top_filter: Box::new([0; FILTER_WORDS]),
        }
    }

    /// The flow's bit in the top filter: `(word, mask)`, from bits 1-12 of
    /// its tag (the seeded flow hash; bit 0 of a tag is always set).
    #[inline]
    fn filter_bit(tag: u32) -> (usize, u64) {
        let b = (tag >> 1) as usize & (FILTER_WORDS * 64 - 1);
        (b / 64, 1 << (b % 64))
    }

    /// Mark `tag` as top in `filter`.
    fn mark_top(filter: &mut [u64; FILTER_WORDS], tag: u32) {
        let (w, m) = Self::filter_bit(tag);
        filter[w] |= m;
    }

    /// The low 32 bits of the seeded flow hash (all that the DPDK packet
    /// handle keeps), bit 0 set: 0 marks an empty slot. Two flows are
    /// confused only if they also share a slot.
    #[inline]
    fn tag(hash: u64) -> u32 {
        hash as u32 | 1
    }

    /// The flow's slot in each stage: the low and the high half of one
    /// seeded mix (`cache_slots` <= 2^20, so the halves do not overlap).
    #[inline]
    fn index(&self, hash: u64) -> [usize; 2] {
        let h = mix64(hash ^ self.seed);
        [
            (h as usize) & self.mask,
            self.mask + 1 + ((h >> 32) as usize & self.mask),
        ]
    }

    #[inline]
    fn count(&mut self, hash: u64, len: u32) {
        let tag = Self::tag(hash);
        for i in self.index(hash) {
            let s = &mut self.slots[i];
            if s.tag == tag || s.tag == 0 {
                s.tag = tag;
                s.bytes = s.bytes.saturating_add(len);
                return;
            }
        }
    }

    #[inline]
    fn is_top(&self, hash: u64) -> bool {
        if self.tops == 0 {
            return false;
        }
        let tag = Self::tag(hash);
        let (w, m) = Self::filter_bit(tag);
        if self.top_filter[w] & m == 0 {
            return false;
        }
        self.index(hash).iter().any(|&i| self.top[i] == tag)
    }

    /// Install the top set; returns (flows, bytes).
    fn select_top(&mut self, delta_flow: f64) -> (usize, u64) {
        let max = self.slots.iter().map(|s| s.bytes).max().unwrap_or(0);
        let threshold = f64::from(max) * (1.0 - delta_flow);
        let (mut n, mut sum) = (0, 0u64);
        let filter = &mut *self.top_filter;
        *filter = [0; FILTER_WORDS];
        for (s, t) in self.slots.iter().zip(&mut self.top) {
            let top = s.tag != 0 && s.bytes > 0 && f64::from(s.bytes) > threshold;
            *t = if top { s.tag } else { 0 };
            if top {
                n += 1;
                sum += u64::from(s.bytes);
                Self::mark_top(filter, s.tag);
            }
        }
        if n == 0 && max > 0 {
            // threshold == max when delta_flow == 0: the maximum itself is top.
            for (s, t) in self.slots.iter().zip(&mut self.top) {
                if s.bytes == max {
                    *t = s.tag;
                    n += 1;
                    sum += u64::from(max);
                    Self::mark_top(filter, s.tag);
                }
            }
        }
        self.tops = n;
        (n, sum)
    }

    fn clear_top(&mut self) {
        self.tops = 0;
        *self.top_filter = [0; FILTER_WORDS];
        self.top.fill(0);
    }

    fn clear_cache(&mut self) {
        self.slots.fill(Slot::default());
    }
}

/// The Cebinae discipline.
#[derive(Debug)]
pub struct Cebinae<P> {
    cfg: CebinaeConfig,
    queues: [Fifo<P>; 2],
    head: usize,
    /// RECONFIG has run this round: priority to the tail (next head).
    reconfigured: bool,
    /// Byte counter per class, relative to the round base.
    class_bytes: [f64; 2],
    /// Rate per class per queue, bytes per ns.
    rate: [[f64; 2]; 2],
    /// Per class, the admission thresholds of the current head, bytes:
    /// `[rate_head * dT, (rate_head + rate_tail) * dT]` (set with the rates).
    caps: [[f64; 2]; 2],
    /// Rates computed at the last evaluation, bytes per ns.
    computed: [f64; 2],
    base: Option<Time>,
    /// [`Cebinae::advance`] has nothing to do before this (ns).
    next_due: u64,
    rounds_since_eval: u32,
    port_bytes: u64,
    detector: Detector,
    report: ReconfigReport,
    line: f64,
    dt: u64,
    vdt: u64,
    l: u64,
    counters: Counters,
}

impl<P: PacketHandle> Cebinae<P> {
    /// Build from a configuration (validated here).
    pub fn new(config: &CebinaeConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let line = config.line_rate_bps / 8e9;
        let size = config.max_size as usize;
        let mut c = Cebinae {
            cfg: *config,
            queues: [Fifo::with_capacity(size), Fifo::with_capacity(size)],
            head: 0,
            reconfigured: false,
            class_bytes: [0.0; 2],
            rate: [[0.0; 2]; 2],
            caps: [[0.0; 2]; 2],
            computed: [0.0; 2],
            base: None,
            next_due: 0,
            rounds_since_eval: 0,
            port_bytes: 0,
            detector: Detector::new(config.cache_slots, config.seed),
            report: ReconfigReport::default(),
            line,
            dt: duration_nanos(config.dt),
            vdt: duration_nanos(config.vdt),
            l: duration_nanos(config.l),
            counters: Counters::default(),
        };
        c.reset_rates();
        Ok(c)
    }

    /// The per-class rates of an unsaturated port, bytes per ns: no flow is
    /// top, so the top class gets 0 (as in the artifact) and the bot class
    /// the line rate.
    fn unsaturated(&self) -> [f64; 2] {
        [0.0, self.line]
    }

    /// The rates of an unsaturated port, computed and installed on both
    /// queues (at the start, and after a long idle gap).
    fn reset_rates(&mut self) {
        self.computed = self.unsaturated();
        self.rate = self.computed.map(|r| [r; 2]);
        self.set_caps();
    }

    /// The admission thresholds that follow from the rates and the head.
    fn set_caps(&mut self) {
        let dt = self.dt as f64;
        for c in [TOP, BOT] {
            let (head, tail) = (self.rate[c][self.head], self.rate[c][1 - self.head]);
            self.caps[c] = [head * dt, (head + tail) * dt];
        }
    }

    /// Whether the flow with this hash is currently classified top.
    pub fn is_top(&self, flow_hash: u64) -> bool {
        self.detector.is_top(flow_hash)
    }

    /// The last evaluation.
    pub fn last_report(&self) -> &ReconfigReport {
        &self.report
    }

    /// `(top, bot)` rates on the head queue, bit/s (the top rate is 0 while
    /// the port is unsaturated).
    pub fn head_rates_bps(&self) -> (f64, f64) {
        (
            self.rate[TOP][self.head] * 8e9,
            self.rate[BOT][self.head] * 8e9,
        )
    }

    /// Packets in `(head, tail)`.
    pub fn queue_lens(&self) -> (usize, usize) {
        (
            self.queues[self.head].len(),
            self.queues[1 - self.head].len(),
        )
    }

    /// Run the control loop up to `now`. Inlined check, out-of-line work:
    /// at line rate almost every call falls between two events.
    #[inline]
    fn advance(&mut self, now: Time) {
        if now.as_nanos() < self.next_due {
            return;
        }
        self.advance_slow(now);
    }

    /// When [`Cebinae::advance`] next has something to do: RECONFIG if this
    /// round has not had it, else ROTATE.
    fn due_after(&self, base: Time) -> u64 {
        let b = base.as_nanos();
        if self.reconfigured {
            b.saturating_add(self.dt)
        } else {
            b.saturating_add(self.dt - self.l)
        }
    }

    #[inline(never)]
    fn advance_slow(&mut self, now: Time) {
        let Some(mut base) = self.base else {
            self.base = Some(now);
            self.next_due = self.due_after(now);
            return;
        };
        let dt = self.dt;
        let mut steps = 0;
        loop {
            let reconfig_at = base.as_nanos().saturating_add(dt - self.l);
            let rotate_at = base.as_nanos().saturating_add(dt);
            if !self.reconfigured && now.as_nanos() >= reconfig_at {
                self.reconfig(Time::from_nanos(reconfig_at));
                continue;
            }
            if now.as_nanos() < rotate_at {
                break;
            }
            self.rotate();
            base = Time::from_nanos(rotate_at);
            steps += 1;
            if steps >= 2 * self.cfg.p as usize + 2
                && now.as_nanos() >= rotate_at.saturating_add(dt)
            {
                // Long idle gap: every missed round would see an idle port.
                let skipped = (now.as_nanos() - rotate_at) / dt;
                base = Time::from_nanos(rotate_at + skipped * dt);
                self.class_bytes = [0.0; 2];
                self.reset_rates();
                self.detector.clear_top();
                self.detector.clear_cache();
                self.port_bytes = 0;
                self.rounds_since_eval = 0;
            }
        }
        self.base = Some(base);
        self.next_due = self.due_after(base);
    }

    fn reconfig(&mut self, at: Time) {
        self.reconfigured = true;
        self.rounds_since_eval += 1;
        if self.rounds_since_eval < self.cfg.p {
            return;
        }
        self.rounds_since_eval = 0;
        let window_ns = self.dt as f64 * f64::from(self.cfg.p);
        let capacity = self.line * window_ns;
        let saturated = self.port_bytes as f64 > capacity * (1.0 - self.cfg.delta_port);
        let (flows, top_bytes) = if saturated {
            let (n, bytes) = self.detector.select_top(self.cfg.delta_flow);
            let top = (bytes as f64 * (1.0 - self.cfg.tau) / window_ns)
                .min(self.line * (1.0 - self.cfg.tau));
            self.computed = [top, self.line - top];
            (n, bytes)
        } else {
            self.detector.clear_top();
            self.computed = self.unsaturated();
            (0, 0)
        };
        self.report = ReconfigReport {
            at,
            saturated,
            port_bytes: self.port_bytes,
            top_flows: flows,
            top_bytes,
            top_rate_bps: if saturated {
                self.computed[TOP] * 8e9
            } else {
                0.0
            },
            bot_rate_bps: self.computed[BOT] * 8e9,
        };
        self.detector.clear_cache();
        self.port_bytes = 0;
    }

    fn rotate(&mut self) {
        for c in [TOP, BOT] {
            // `caps[c][0]` is the head's `rate_head * dT`.
            self.class_bytes[c] = (self.class_bytes[c] - self.caps[c][0]).max(0.0);
            // Into the queue that becomes the tail; the new head keeps the
            // rates it got a round ago.
            self.rate[c][self.head] = self.computed[c];
        }
        self.head = 1 - self.head;
        self.set_caps();
        self.reconfigured = false;
    }
}

impl<P: PacketHandle> Cebinae<P> {
    /// The admission decision for a packet of `len` bytes of the flow with
    /// `flow_hash` at `now` (the control loop already advanced): the queue
    /// it goes to, its class and that class's byte counter once it is queued;
    /// `None`: taxed.
    #[inline]
    fn admit(&self, flow_hash: u64, len: u32, now: Time) -> Option<(usize, usize, f64)> {
        let class = if self.detector.is_top(flow_hash) {
            TOP
        } else {
            BOT
        };
        let (head, tail) = (self.head, 1 - self.head);
        let base = self.base.unwrap_or(now);
        let elapsed = now.as_nanos().saturating_sub(base.as_nanos());
        // `advance` has run up to `now`, so `now` is within the current
        // round (`t < dT`) and the entitlement's tail term,
        // `rate_tail * (t - dT)` past one round, is zero.
        debug_assert!(elapsed < self.dt, "admit before advance");
        // Whole quanta of vdT; a mask when vdT is a power of two (the
        // default 1024 ns): no 64-bit division per packet. Below dT (at
        // most 2^40 ns), so the signed conversion (one instruction, where
        // an unsigned one takes four) is exact.
        let t = if self.vdt.is_power_of_two() {
            elapsed & !(self.vdt - 1)
        } else {
            elapsed - elapsed % self.vdt
        } as i64 as f64;
        let entitlement = self.rate[class][head] * t;
        let [head_cap, both_cap] = self.caps[class];
        let b = self.class_bytes[class];
        let target = if b < head_cap {
            head
        } else if b < both_cap {
            tail
        } else {
            return None;
        };
        Some((target, class, b.max(entitlement) + f64::from(len)))
    }

    /// Count a packet leaving the port: the port's and its flow's bytes.
    #[inline]
    fn on_leave(&mut self, flow_hash: u64, len: u32) {
        self.port_bytes += u64::from(len);
        self.detector.count(flow_hash, len);
        self.counters.on_dequeue(len);
    }
}

impl<P: PacketHandle> Qdisc<P> for Cebinae<P> {
    fn enqueue(&mut self, packet: P, now: Time) -> Verdict<P> {
        let len = packet.len_bytes();
        self.counters.on_receive(len);
        self.advance(now);
        let Some((target, class, bytes)) = self.admit(packet.flow_hash(), len, now) else {
            return self.counters.drop(DropReason::Tax, packet);
        };
        match self.queues[target].push(packet) {
            Ok(()) => {
                self.class_bytes[class] = bytes;
                Verdict::Queued
            }
            Err(packet) => self.counters.drop(DropReason::Overlimit, packet),
        }
    }

    fn dequeue(&mut self, now: Time) -> Option<P> {
        self.advance(now);
        let first = if self.reconfigured {
            1 - self.head
        } else {
            self.head
        };
        let p = match self.queues[first].pop() {
            Some(p) => p,
            None => self.queues[1 - first].pop()?,
        };
        self.on_leave(p.flow_hash(), p.len_bytes());
        Some(p)
    }

    /// With both queues empty, an admitted packet is the one the dequeue
    /// takes (whichever queue has priority), and the dequeue's `advance`
    /// at the same `now` has nothing left to do: the packet skips the queue.
    #[inline]
    fn enqueue_dequeue(&mut self, packet: P, now: Time) -> (Verdict<P>, Option<P>) {
        if !self.is_empty() {
            return enqueue_then_dequeue(self, packet, now);
        }
        let len = packet.len_bytes();
        self.counters.on_receive(len);
        self.advance(now);
        let hash = packet.flow_hash();
        let Some((_, class, bytes)) = self.admit(hash, len, now) else {
            return (self.counters.drop(DropReason::Tax, packet), None);
        };
        // An empty queue takes the packet (`max_size` >= 1).
        self.class_bytes[class] = bytes;
        self.on_leave(hash, len);
        (Verdict::Queued, Some(packet))
    }

    fn len(&self) -> usize {
        self.queues[0].len() + self.queues[1].len()
    }

    fn bytes(&self) -> u64 {
        self.queues[0].bytes() + self.queues[1].bytes()
    }

    fn counters(&self) -> &Counters {
        &self.counters
    }

    fn poll(&mut self, now: Time) {
        self.advance(now);
    }

    fn name(&self) -> &'static str {
        NAME
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::PacketMeta;

    /// The admission rule of the module doc, with the rates a ROTATE
    /// installs: below `rate_head * dT` the head queue, below
    /// `(rate_head + rate_tail) * dT` the tail, beyond it taxed; then
    /// `b = max(b, e) + len` with `e = rate_head * t`, `t` in whole `vdT`.
    #[test]
    fn admission_follows_the_installed_rates() {
        let cfg = CebinaeConfig {
            line_rate_bps: 1e9,
            ..CebinaeConfig::default()
        };
        let mut q = Cebinae::<PacketMeta>::new(&cfg).unwrap();
        let base = Time::from_nanos(5_000);
        q.advance(base);
        // A saturated evaluation gave the bot class 3/4 of the line.
        // Two rotations install it on both queues.
        let bot = q.line * 0.75;
        q.computed = [q.line - bot, bot];
        q.rotate();
        q.rotate();
        let (head, tail) = (q.head, 1 - q.head);
        let cap = bot * q.dt as f64;
        let (hash, len) = (mix64(5), 100);
        let now = Time::from_nanos(base.as_nanos() + 10_000);
        let e = bot * 9_216.0; // 10,000 ns in whole 1,024-ns quanta
        let admit = |q: &mut Cebinae<PacketMeta>, b: f64| {
            q.class_bytes[BOT] = b;
            q.admit(hash, len, now)
        };
        assert_eq!(admit(&mut q, 0.0), Some((head, BOT, e + 100.0)));
        assert_eq!(
            admit(&mut q, cap - 1.0),
            Some((head, BOT, cap - 1.0 + 100.0))
        );
        assert_eq!(admit(&mut q, cap + 1.0), Some((tail, BOT, cap + 101.0)));
        assert_eq!(admit(&mut q, 2.0 * cap - 1.0).map(|a| a.0), Some(tail));
        assert_eq!(admit(&mut q, 2.0 * cap + 1.0), None);
    }

    /// ROTATE installs the computed rates into the queue that becomes the
    /// tail: the head gets them one round later. While nothing is top the
    /// top rate is 0 on both queues.
    #[test]
    fn computed_rates_reach_the_tail_first_and_the_head_a_round_later() {
        let mut q = Cebinae::<PacketMeta>::new(&CebinaeConfig::default()).unwrap();
        let line = q.line;
        assert_eq!(q.rate, [[0.0; 2], [line; 2]]);
        q.advance(Time::from_nanos(1));
        let (top, bot) = (line * 0.25, line * 0.75);
        q.computed = [top, bot];
        let old_head = q.head;
        q.rotate();
        assert_eq!(q.head, 1 - old_head);
        let (head, tail) = (q.head, 1 - q.head);
        assert_eq!((q.rate[TOP][tail], q.rate[BOT][tail]), (top, bot));
        assert_eq!((q.rate[TOP][head], q.rate[BOT][head]), (0.0, line));
        let dt = q.dt as f64;
        assert_eq!(q.caps[BOT], [line * dt, (line + bot) * dt]);
        assert_eq!(q.caps[TOP], [0.0, top * dt]);
        assert_eq!(q.head_rates_bps(), (0.0, line * 8e9));
        q.rotate();
        assert_eq!(q.head_rates_bps(), (top * 8e9, bot * 8e9));
        assert_eq!(q.caps[TOP], [top * dt, 2.0 * top * dt]);
    }

    /// A count past 32 bits saturates: the flow stays the largest, and top.
    #[test]
    fn a_count_beyond_32_bits_saturates_and_stays_top() {
        let mut d = Detector::new(16, 3);
        let (heavy, light) = (mix64(1), mix64(2));
        for _ in 0..3 {
            d.count(heavy, u32::MAX / 2);
        }
        d.count(light, 1500);
        let i = d.index(heavy);
        let tag = Detector::tag(heavy);
        let slot = i
            .iter()
            .map(|&i| d.slots[i])
            .find(|s| s.tag == tag)
            .unwrap();
        assert_eq!(slot.bytes, u32::MAX);
        let (n, bytes) = d.select_top(0.05);
        assert_eq!((n, bytes), (1, u64::from(u32::MAX)));
        assert!(d.is_top(heavy) && !d.is_top(light));
    }

    /// The top filter only skips table loads: `is_top` answers as a scan
    /// of the installed top set does, for top flows, for light flows whose
    /// filter bit a top flow also sets, and for the rest.
    #[test]
    fn the_top_filter_never_changes_the_answer() {
        let mut d = Detector::new(2048, 7);
        let hashes: Vec<u64> = (0..3000u64)
            .map(|i| mix64(i.wrapping_mul(0x9E37)))
            .collect();
        // 20 heavy flows send 100 times the bytes of the others.
        for (i, &h) in hashes.iter().enumerate() {
            d.count(h, if i < 20 { 150_000 } else { 1500 });
        }
        let (n, _) = d.select_top(0.01);
        assert!(n >= 15, "the cached heavy flows are top: {n}");
        let scan = |d: &Detector, h: u64| {
            let tag = Detector::tag(h);
            d.top.iter().any(|&t| t == tag && t != 0)
        };
        let shared_bit = |d: &Detector, h: u64| {
            let (w, m) = Detector::filter_bit(Detector::tag(h));
            d.top_filter[w] & m != 0
        };
        let (mut top, mut passed_filter_not_top) = (0, 0);
        for &h in &hashes {
            assert_eq!(d.is_top(h), scan(&d, h), "flow {h:#x}");
            top += usize::from(scan(&d, h));
            passed_filter_not_top += usize::from(shared_bit(&d, h) && !scan(&d, h));
        }
        assert_eq!(top, n);
        assert!(
            passed_filter_not_top > 0,
            "some light flows share a top flow's bit"
        );
        d.clear_top();
        assert!(hashes.iter().all(|&h| !d.is_top(h)));
        assert_eq!(*d.top_filter, [0; FILTER_WORDS]);
    }
}
