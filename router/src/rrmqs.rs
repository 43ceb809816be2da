//! RRMQS: Round-Robin Measuring Queue Set, flow meter and feedback loop.
//!
//! Source: L. He, "Ensuring Transport Fairness with Smart Networks", ETH
//! semester thesis, 2020.
//!
//! **Queues.** `m + 1` queues: one small measuring queue per configured
//! variant (at most `C_f` flows and `C_p` packets at any time) and one large
//! main queue. A packet of a new flow goes to its variant's measuring queue if
//! that queue has fewer than `C_f` flows (the flow is remembered), otherwise to
//! the main queue; packets of remembered flows keep going to the measuring
//! queue. A remembered flow is forgotten on TCP FIN/RST
//! ([`PacketHandle::flow_end`]) or after `flow_idle_timeout` without packets
//! (the thesis does not say when a flow leaves; this is our rule). Packets of
//! variants without a measuring queue (including unmarked traffic) use the
//! main queue and are not metered.
//!
//! **Dequeue.** With probability `p` try the measuring queues first
//! (round-robin over the `m` queues), else the main queue first; fall back to
//! the other when empty. By default `p = m C_p / (main_limit + m C_p)`: with
//! the thesis sizes (main = 50 x the measuring set) that is 1/51.
//!
//! **Flow meter.** Per window (0.5 s) and per variant, for the main queue and
//! for the measuring set separately: packets enqueued and distinct flows
//! (counted with a [`Bloom`] filter cleared each window). Packets per flow per
//! second are `v` (main) and `v'` (measuring); the slowdown index is
//! `i = v / v'` and `J(V, V') = (sum i)^2 / (m' * sum i^2)` over the `m'`
//! variants whose index is defined in the window. [`Rrmqs::latest_window`]
//! returns the last closed window.
//!
//! **Feedback** ([`crate::rrmqs_feedback`]). `feedback_mode = "drop"` (the
//! thesis): if `i > upper` (1.2) in the last window, every main-queue packet
//! of that variant is dropped in the next window ([`DropReason::Feedback`]);
//! if `i < lower` (0.8), its main-queue packets go to a priority band served
//! before the rest of the main queue. `"delay"`: an over-share variant's
//! main-queue packets go to a low band served after the rest instead, on a
//! smoothed index with hysteresis. `"probability"`: a fraction of them is
//! dropped that grows with the smoothed index's excess. Packets in the
//! measuring queues are never touched by feedback, so `v'` stays the fair
//! baseline (the thesis says "drop all j's packets"; we read it as the
//! main-queue packets).

use std::time::Duration;

use tollgate_cca::time::duration_nanos;
use tollgate_cca::{Time, VariantId};

use crate::bloom::Bloom;
use crate::flow::mix64;
use crate::qdisc::{
    check, enqueue_then_dequeue, ConfigError, Counters, DropReason, PacketHandle, Qdisc, Verdict,
};
use crate::ring::Fifo;
pub use crate::rrmqs_feedback::{Feedback, FeedbackLaw, FeedbackMode, LoopState};
use tollgate_cca::rng::{self, SimRng};

const NAME: &str = "rrmqs";
const NONE: u8 = u8::MAX;

/// The thesis's twelve variants (BIC, NewReno, HighSpeed, H-TCP, Hybla,
/// Illinois, LEDBAT, Scalable, Vegas, Veno, Westwood, YeAH).
pub const THESIS_VARIANTS: [VariantId; 12] = [
    VariantId::BIC,
    VariantId::NEWRENO,
    VariantId::HIGHSPEED,
    VariantId::HTCP,
    VariantId::HYBLA,
    VariantId::ILLINOIS,
    VariantId::LEDBAT,
    VariantId::SCALABLE,
    VariantId::VEGAS,
    VariantId::VENO,
    VariantId::WESTWOOD,
    VariantId::YEAH,
];

/// RRMQS parameters. Defaults: the thesis's "small" setting.
#[derive(Clone, Debug, PartialEq)]
pub struct RrmqsConfig {
    /// Variants with a measuring queue (`m` of them). Default [`THESIS_VARIANTS`].
    pub variants: Vec<VariantId>,
    /// `C_f`: flows per measuring queue. Default 2.
    pub flows_per_queue: usize,
    /// `C_p`: packets per measuring queue. Default 2.
    pub packets_per_queue: usize,
    /// Main queue limit, packets. Default 1200.
    pub main_limit: usize,
    /// Probability of trying the measuring set first. Default `None`:
    /// `m C_p / (main_limit + m C_p)`.
    pub rrmqs_probability: Option<f64>,
    /// Meter window. Default 500 ms.
    pub window: Duration,
    /// Feedback enabled. Default true.
    pub feedback: bool,
    /// What the feedback does to an over-share variant. Default
    /// [`FeedbackMode::Drop`] (the thesis).
    pub feedback_mode: FeedbackMode,
    /// Over-share threshold on `i`. Default 1.2.
    pub upper: f64,
    /// Under-share (priority) threshold on `i`. Default 0.8.
    pub lower: f64,
    /// `delay` and `probability` modes: weight of the newest window in the
    /// smoothed index.
    /// Default 0.3.
    pub smoothing: f64,
    /// A measuring flow idle this long is forgotten. Default 500 ms.
    pub flow_idle_timeout: Duration,
    /// Bits per Bloom filter. Default 2^16.
    pub bloom_bits: usize,
    /// Probes per key. Default 3.
    pub bloom_hashes: u32,
    /// Seed of the dequeue choice. Default 1.
    pub seed: u64,
}

impl Default for RrmqsConfig {
    fn default() -> Self {
        RrmqsConfig {
            variants: THESIS_VARIANTS.to_vec(),
            flows_per_queue: 2,
            packets_per_queue: 2,
            main_limit: 1200,
            rrmqs_probability: None,
            window: Duration::from_millis(500),
            feedback: true,
            feedback_mode: FeedbackMode::Drop,
            upper: 1.2,
            lower: 0.8,
            smoothing: 0.3,
            flow_idle_timeout: Duration::from_millis(500),
            bloom_bits: 1 << 16,
            bloom_hashes: 3,
            seed: 1,
        }
    }
}

impl RrmqsConfig {
    /// The feedback's control law.
    pub fn law(&self) -> FeedbackLaw {
        FeedbackLaw {
            mode: self.feedback_mode,
            upper: self.upper,
            lower: self.lower,
            smoothing: self.smoothing,
        }
    }

    /// The probability of serving the measuring set first.
    pub fn probability(&self) -> f64 {
        self.rrmqs_probability.unwrap_or_else(|| {
            let set = (self.variants.len() * self.packets_per_queue) as f64;
            set / (self.main_limit as f64 + set)
        })
    }

    /// Check every parameter.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::int(NAME, "variants (count)", self.variants.len() as u64, 1, 64)?;
        for (i, v) in self.variants.iter().enumerate() {
            if self.variants[..i].contains(v) {
                return Err(ConfigError::new(
                    NAME,
                    "variants",
                    v,
                    "distinct variant ids",
                ));
            }
        }
        check::int(
            NAME,
            "flows_per_queue",
            self.flows_per_queue as u64,
            1,
            1024,
        )?;
        check::int(
            NAME,
            "packets_per_queue",
            self.packets_per_queue as u64,
            1,
            1 << 20,
        )?;
        check::int(
            NAME,
            "main_limit",
            self.main_limit as u64,
            1,
            crate::droptail::MAX_SLOTS,
        )?;
        if let Some(p) = self.rrmqs_probability {
            check::range(NAME, "rrmqs_probability", p, 0.0, 1.0)?;
        }
        check::int(
            NAME,
            "window (ns)",
            duration_nanos(self.window),
            1_000,
            1 << 45,
        )?;
        check::range(NAME, "upper", self.upper, 0.0, 1e6)?;
        if !(self.lower.is_finite() && self.lower >= 0.0 && self.lower <= self.upper) {
            return Err(ConfigError::new(
                NAME,
                "lower",
                self.lower,
                format!("[0, upper = {}]", self.upper),
            ));
        }
        self.law().validate(NAME)?;
        check::int(NAME, "bloom_bits", self.bloom_bits as u64, 64, 1 << 30)?;
        check::int(NAME, "bloom_hashes", u64::from(self.bloom_hashes), 1, 16)?;
        Ok(())
    }
}

/// One variant's measurements in one window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VariantWindow {
    /// The variant.
    pub variant: VariantId,
    /// Packets enqueued to the main queue.
    pub main_packets: u64,
    /// Distinct flows seen in the main queue (Bloom estimate).
    pub main_flows: u64,
    /// Packets enqueued to the measuring queue.
    pub rrmqs_packets: u64,
    /// Distinct flows seen in the measuring queue.
    pub rrmqs_flows: u64,
    /// `v`: main-queue packets per flow per second.
    pub v: Option<f64>,
    /// `v'`: measuring-queue packets per flow per second.
    pub v_prime: Option<f64>,
    /// `i = v / v'`.
    pub index: Option<f64>,
    /// The feedback decided for the next window.
    pub feedback: Feedback,
}

/// The meter's report for one closed window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MeterWindow {
    /// Window start.
    pub start: Time,
    /// Window end.
    pub end: Time,
    /// One entry per configured variant, in configuration order.
    pub variants: Vec<VariantWindow>,
    /// `J(V, V')` over the variants with a defined index.
    pub jain: Option<f64>,
}

impl MeterWindow {
    /// The entry of `variant`.
    pub fn variant(&self, variant: VariantId) -> Option<&VariantWindow> {
        self.variants.iter().find(|v| v.variant == variant)
    }
}

/// A remembered measuring flow.
#[derive(Clone, Copy, Debug, Default)]
struct FlowSlot {
    hash: u64,
    last_seen: Time,
    used: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    main_packets: u64,
    main_flows: u64,
    rr_packets: u64,
    rr_flows: u64,
}

/// The RRMQS discipline.
#[derive(Debug)]
pub struct Rrmqs<P> {
    cfg: RrmqsConfig,
    index_of: [u8; 64],
    measuring: Vec<Fifo<P>>,
    /// Packets and bytes in all measuring queues, kept as running counts:
    /// `len` and `bytes` in O(1) instead of a sum over the `m` queues (the
    /// emulator's queue trace and the criterion benchmark ask per packet),
    /// and an empty measuring set skipped at dequeue without visiting them.
    measuring_len: usize,
    measuring_bytes: u64,
    slots: Vec<FlowSlot>,
    main_prio: Fifo<P>,
    main: Fifo<P>,
    /// `delay` mode: over-share variants' main-queue packets, served last.
    main_low: Fifo<P>,
    rr_next: usize,
    probability: f64,
    tally: Vec<Tally>,
    law: FeedbackLaw,
    loops: Vec<LoopState>,
    bloom_main: Bloom,
    bloom_rr: Bloom,
    window_start: Option<Time>,
    window_ns: u64,
    idle_ns: u64,
    latest: MeterWindow,
    rng: SimRng,
    counters: Counters,
}

impl<P: PacketHandle> Rrmqs<P> {
    /// Build from a configuration (validated here).
    pub fn new(config: &RrmqsConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let m = config.variants.len();
        let mut index_of = [NONE; 64];
        for (i, v) in config.variants.iter().enumerate() {
            index_of[usize::from(v.dscp() & 63)] = i as u8;
        }
        let empty = |v: &VariantId| VariantWindow {
            variant: *v,
            main_packets: 0,
            main_flows: 0,
            rrmqs_packets: 0,
            rrmqs_flows: 0,
            v: None,
            v_prime: None,
            index: None,
            feedback: Feedback::Normal,
        };
        Ok(Rrmqs {
            index_of,
            measuring: (0..m)
                .map(|_| Fifo::with_capacity(config.packets_per_queue))
                .collect(),
            measuring_len: 0,
            measuring_bytes: 0,
            slots: vec![FlowSlot::default(); m * config.flows_per_queue],
            main_prio: Fifo::with_capacity(config.main_limit),
            main: Fifo::with_capacity(config.main_limit),
            main_low: Fifo::with_capacity(config.main_limit),
            rr_next: 0,
            probability: config.probability(),
            tally: vec![Tally::default(); m],
            law: config.law(),
            loops: vec![LoopState::default(); m],
            bloom_main: Bloom::new(config.bloom_bits, config.bloom_hashes),
            bloom_rr: Bloom::new(config.bloom_bits, config.bloom_hashes),
            window_start: None,
            window_ns: duration_nanos(config.window),
            idle_ns: duration_nanos(config.flow_idle_timeout),
            latest: MeterWindow {
                variants: config.variants.iter().map(empty).collect(),
                ..MeterWindow::default()
            },
            rng: rng::seeded(config.seed),
            counters: Counters::default(),
            cfg: config.clone(),
        })
    }

    /// The meter's last closed window.
    pub fn latest_window(&self) -> &MeterWindow {
        &self.latest
    }

    /// The feedback in force for `variant` this window.
    pub fn feedback(&self, variant: VariantId) -> Feedback {
        match self.index_of[usize::from(variant.dscp() & 63)] {
            NONE => Feedback::Normal,
            k => self.loops[usize::from(k)].action,
        }
    }

    /// Flows currently remembered in `variant`'s measuring queue.
    pub fn measuring_flows(&self, variant: VariantId) -> usize {
        match self.index_of[usize::from(variant.dscp() & 63)] {
            NONE => 0,
            k => self
                .flow_slots(usize::from(k))
                .iter()
                .filter(|s| s.used)
                .count(),
        }
    }

    /// Packets in the main queue (both bands) and in `variant`'s measuring queue.
    pub fn queue_lens(&self, variant: VariantId) -> (usize, usize) {
        let main = self.main.len() + self.main_prio.len() + self.main_low.len();
        match self.index_of[usize::from(variant.dscp() & 63)] {
            NONE => (main, 0),
            k => (main, self.measuring[usize::from(k)].len()),
        }
    }

    /// The probability of serving the measuring set first.
    pub fn probability(&self) -> f64 {
        self.probability
    }

    fn flow_slots(&self, k: usize) -> &[FlowSlot] {
        let c = self.cfg.flows_per_queue;
        &self.slots[k * c..(k + 1) * c]
    }

    /// Whether the packet's flow measures in queue `k` (claiming a slot if free).
    fn measuring_slot(&mut self, k: usize, hash: u64, now: Time) -> Option<usize> {
        let c = self.cfg.flows_per_queue;
        let mut free = None;
        for i in k * c..(k + 1) * c {
            let s = self.slots[i];
            if s.used && s.hash == hash {
                return Some(i);
            }
            let expired =
                !s.used || now.as_nanos().saturating_sub(s.last_seen.as_nanos()) > self.idle_ns;
            if expired && free.is_none() {
                free = Some(i);
            }
        }
        let i = free?;
        self.slots[i] = FlowSlot {
            hash,
            last_seen: now,
            used: true,
        };
        Some(i)
    }

    fn advance(&mut self, now: Time) {
        let Some(start) = self.window_start else {
            self.window_start = Some(now);
            return;
        };
        let end = start.as_nanos().saturating_add(self.window_ns);
        if now.as_nanos() < end {
            return;
        }
        self.close_window(start, Time::from_nanos(end));
        let mut start = end;
        if now.as_nanos() >= start.saturating_add(self.window_ns) {
            // At least one whole window without traffic: report it empty.
            let skipped = (now.as_nanos() - start) / self.window_ns;
            let new_start = start + skipped * self.window_ns;
            self.close_window(
                Time::from_nanos(new_start - self.window_ns),
                Time::from_nanos(new_start),
            );
            start = new_start;
        }
        self.window_start = Some(Time::from_nanos(start));
    }

    fn close_window(&mut self, start: Time, end: Time) {
        let secs = end.saturating_since(start).as_secs_f64().max(1e-12);
        let per_flow =
            |pkts: u64, flows: u64| (flows > 0).then(|| pkts as f64 / flows as f64 / secs);
        let (mut sum, mut sum_sq, mut n) = (0.0, 0.0, 0u32);
        for (k, t) in self.tally.iter().enumerate() {
            let v = per_flow(t.main_packets, t.main_flows);
            let v_prime = per_flow(t.rr_packets, t.rr_flows);
            let index = match (v, v_prime) {
                (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                _ => None,
            };
            if let Some(i) = index {
                sum += i;
                sum_sq += i * i;
                n += 1;
            }
            self.latest.variants[k] = VariantWindow {
                variant: self.cfg.variants[k],
                main_packets: t.main_packets,
                main_flows: t.main_flows,
                rrmqs_packets: t.rr_packets,
                rrmqs_flows: t.rr_flows,
                v,
                v_prime,
                index,
                feedback: self.loops[k].action,
            };
        }
        // The feedback for the next window. `delay` and `probability` modes
        // act on each index relative to the window's mean index over the
        // variants that have one (rrmqs_feedback's module doc).
        if self.cfg.feedback {
            let mean_index = (n > 0 && sum > 0.0).then(|| sum / f64::from(n));
            for (k, w) in self.latest.variants.iter_mut().enumerate() {
                let acted_on = match mean_index {
                    Some(m) if self.law.mode.relative() => w.index.map(|i| i / m),
                    _ => w.index,
                };
                self.loops[k] = self.law.next(self.loops[k], acted_on);
                w.feedback = self.loops[k].action;
            }
        }
        self.latest.start = start;
        self.latest.end = end;
        self.latest.jain = (n > 0 && sum_sq > 0.0).then(|| sum * sum / (f64::from(n) * sum_sq));
        self.tally.fill(Tally::default());
        self.bloom_main.clear();
        self.bloom_rr.clear();
    }

    fn dequeue_measuring(&mut self) -> Option<P> {
        if self.measuring_len == 0 {
            return None;
        }
        let m = self.measuring.len();
        let mut k = self.rr_next;
        for _ in 0..m {
            if let Some(p) = self.measuring[k].pop() {
                self.left_measuring(k, p.len_bytes());
                return Some(p);
            }
            k = if k + 1 == m { 0 } else { k + 1 };
        }
        None
    }

    /// A packet of `len` bytes left measuring queue `k`: the round robin
    /// continues after `k`.
    #[inline]
    fn left_measuring(&mut self, k: usize, len: u32) {
        self.rr_next = if k + 1 == self.measuring.len() {
            0
        } else {
            k + 1
        };
        self.measuring_len -= 1;
        self.measuring_bytes -= u64::from(len);
    }

    fn dequeue_main(&mut self) -> Option<P> {
        self.main_prio
            .pop()
            .or_else(|| self.main.pop())
            .or_else(|| self.main_low.pop())
    }
}

/// A band of the main queue, served in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lane {
    /// Under-share variants.
    Priority,
    /// Everything else.
    Normal,
    /// Over-share variants in `delay` mode.
    Low,
}

/// Where an admitted packet is queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Band {
    /// The main queue, not metered (a variant without a measuring queue).
    Unmetered,
    /// The main queue's `lane`, metered for variant `k` under `flow_key`.
    Main { k: usize, flow_key: u64, lane: Lane },
    /// Variant `k`'s measuring queue.
    Measuring { k: usize, flow_key: u64 },
}

impl<P: PacketHandle> Rrmqs<P> {
    /// The band an arrival goes to at `now` (the windows already advanced),
    /// claiming or refreshing its measuring slot, or why it is dropped
    /// (before any queue is full; the push may still find one full).
    /// Always inlined, like [`Rrmqs::on_queued`]: out of line, the result
    /// came back through the stack and `enqueue` reloaded it with a wider
    /// load, a store-forwarding stall (criterion `enqueue_dequeue_64B/rrmqs`
    /// 24-39 ns against 15-31 inlined).
    #[inline(always)]
    fn place(&mut self, packet: &P, now: Time) -> Result<Band, DropReason> {
        let k = self.index_of[usize::from(packet.variant().dscp() & 63)];
        if k == NONE {
            return if self.main_full() {
                Err(DropReason::Overlimit)
            } else {
                Ok(Band::Unmetered)
            };
        }
        let k = usize::from(k);
        let hash = packet.flow_hash();
        let flow_key = mix64(hash ^ u64::from(packet.variant().get()));
        if let Some(slot) = self.measuring_slot(k, hash, now) {
            self.slots[slot].last_seen = now;
            if packet.flow_end() {
                self.slots[slot].used = false;
            }
            return Ok(Band::Measuring { k, flow_key });
        }
        let lane = match self.loops[k].action {
            Feedback::Drop => return Err(DropReason::Feedback),
            Feedback::Normal => Lane::Normal,
            Feedback::Priority => Lane::Priority,
            Feedback::Delay => Lane::Low,
            Feedback::Thin => {
                if rng::chance(&mut self.rng, self.loops[k].drop_probability) {
                    return Err(DropReason::Feedback);
                }
                Lane::Normal
            }
        };
        if self.main_full() {
            return Err(DropReason::Overlimit);
        }
        Ok(Band::Main { k, flow_key, lane })
    }

    /// Whether the main queue (all bands) holds `main_limit` packets.
    #[inline]
    fn main_full(&self) -> bool {
        self.main.len() + self.main_prio.len() + self.main_low.len() >= self.cfg.main_limit
    }

    /// Meter a packet of `len` bytes queued in `band`.
    #[inline(always)]
    fn on_queued(&mut self, band: Band, len: u32) {
        match band {
            Band::Unmetered => {}
            Band::Main { k, flow_key, .. } => {
                self.tally[k].main_packets += 1;
                self.tally[k].main_flows += u64::from(self.bloom_main.insert(flow_key));
            }
            Band::Measuring { k, flow_key } => {
                self.measuring_len += 1;
                self.measuring_bytes += u64::from(len);
                self.tally[k].rr_packets += 1;
                self.tally[k].rr_flows += u64::from(self.bloom_rr.insert(flow_key));
            }
        }
    }

    /// Whether this dequeue serves the measuring set first (a draw when the
    /// probability is not 0).
    #[inline]
    fn measuring_first(&mut self) -> bool {
        self.probability > 0.0 && rng::chance(&mut self.rng, self.probability)
    }
}

impl<P: PacketHandle> Qdisc<P> for Rrmqs<P> {
    fn enqueue(&mut self, packet: P, now: Time) -> Verdict<P> {
        let len = packet.len_bytes();
        self.counters.on_receive(len);
        self.advance(now);
        let band = match self.place(&packet, now) {
            Ok(band) => band,
            Err(reason) => return self.counters.drop(reason, packet),
        };
        let pushed = match band {
            Band::Unmetered
            | Band::Main {
                lane: Lane::Normal, ..
            } => self.main.push(packet),
            Band::Main {
                lane: Lane::Priority,
                ..
            } => self.main_prio.push(packet),
            Band::Main {
                lane: Lane::Low, ..
            } => self.main_low.push(packet),
            Band::Measuring { k, .. } => self.measuring[k].push(packet),
        };
        match pushed {
            Ok(()) => {
                self.on_queued(band, len);
                Verdict::Queued
            }
            Err(p) => self.counters.drop(DropReason::Overlimit, p),
        }
    }

    fn dequeue(&mut self, now: Time) -> Option<P> {
        self.advance(now);
        let p = if self.measuring_first() {
            self.dequeue_measuring().or_else(|| self.dequeue_main())
        } else {
            self.dequeue_main().or_else(|| self.dequeue_measuring())
        }?;
        self.counters.on_dequeue(p.len_bytes());
        Some(p)
    }

    /// With every queue empty, the dequeue takes the arrival whichever set
    /// it serves first; it still makes its draw, and a measuring-queue
    /// packet moves the round robin past its queue, as the two calls do.
    fn enqueue_dequeue(&mut self, packet: P, now: Time) -> (Verdict<P>, Option<P>) {
        if !self.is_empty() {
            return enqueue_then_dequeue(self, packet, now);
        }
        let len = packet.len_bytes();
        self.counters.on_receive(len);
        self.advance(now);
        let band = match self.place(&packet, now) {
            Ok(band) => band,
            Err(reason) => return (self.counters.drop(reason, packet), None),
        };
        // Empty queues take the packet (every limit is at least 1).
        self.on_queued(band, len);
        let _ = self.measuring_first();
        if let Band::Measuring { k, .. } = band {
            self.left_measuring(k, len);
        }
        self.counters.on_dequeue(len);
        (Verdict::Queued, Some(packet))
    }

    fn len(&self) -> usize {
        self.main.len() + self.main_prio.len() + self.main_low.len() + self.measuring_len
    }

    fn bytes(&self) -> u64 {
        self.main.bytes() + self.main_prio.bytes() + self.main_low.bytes() + self.measuring_bytes
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
