//! BBR v1 (N. Cardwell, Y. Cheng, C. S. Gunn, S. H. Yeganeh, V. Jacobson,
//! "BBR: Congestion-Based Congestion Control", ACM Queue 14(5), 2016;
//! draft-cardwell-iccrg-bbr-congestion-control-00; delivery-rate sampling from
//! draft-cheng-iccrg-delivery-rate-estimation-00; Linux `tcp_bbr`).
//!
//! BBR models the path by two numbers and paces at the first:
//!
//! - `BtlBw`: the maximum delivery-rate sample over the last `bw_window` (10)
//!   round trips;
//! - `RTprop`: the minimum RTT over the last `min_rtt_window` (10 s).
//!
//! `BDP = BtlBw * RTprop`; `pacing_rate = pacing_gain * BtlBw`;
//! `cwnd target = cwnd_gain * BDP + 3 send_quantum` (quantization budget;
//! the send quantum is one segment below 1.2 Mbit/s of pacing, two below
//! 24 Mbit/s, else 1 ms at the pacing rate up to 64 kB). The window
//! grows by the bytes acknowledged up to the target (before the pipe is full:
//! without limit while below the target), never below 4 segments.
//!
//! **States.**
//! - *Startup*: `pacing_gain = cwnd_gain = 2/ln 2 ≈ 2.885`. The pipe is full
//!   when `BtlBw` has grown less than 25 % for 3 rounds.
//! - *Drain*: `pacing_gain = 1/2.885` until bytes in flight ≤ `BDP + 3 send_quantum`.
//! - *ProbeBW*: `cwnd_gain = 2`; `pacing_gain` cycles through
//!   `[1.25, 0.75, 1, 1, 1, 1, 1, 1]`, each phase at least `RTprop` long; the
//!   1.25 phase also waits until in flight reaches `1.25 BDP` (or a loss), the
//!   0.75 phase ends early once in flight ≤ `BDP`. The first phase is chosen
//!   at random among all but 0.75 (seeded, `seed`, so runs are reproducible).
//! - *ProbeRTT*: entered when `RTprop` has not been lowered for
//!   `min_rtt_window` (Linux semantics: only a strictly smaller sample renews
//!   it). `cwnd = 4 segments` until that is all in flight, then for
//!   `max(probe_rtt_duration, 1 round)`; then the stamp is renewed, the
//!   window restored and BBR returns to ProbeBW (or Startup if the pipe was
//!   never full).
//!
//! **Loss** (once per recovery period): save the window, `cwnd = in flight + 1
//! mss` and packet conservation (`cwnd >= in flight + acked`) for one round;
//! lost bytes are taken off the window; leaving recovery (the first ACK of a
//! packet sent after it began) restores the saved window. BBR v1 ignores
//! ECN-CE. Persistent congestion: save the window and restart from 4
//! segments. There is no idle-restart handling (the trait has no idle
//! signal; an idle sender's `app_limited` ACKs keep their samples out of the
//! max filter unless larger).
//!
//! **Delivery-rate samples** come from the shared
//! [`DeliverySampler`] (draft-cheng; a
//! fixed ring of `ring` send records, see [`delivery`](crate::delivery));
//! packets sent during ProbeRTT are marked app-limited, so their samples
//! count only if they raise `BtlBw`. Samples whose interval is shorter than
//! the minimum RTT are discarded (ACK compression), as Linux does. A round
//! trip ends when a packet sent after the previous round ended
//! (`delivered_at_send >= next_round_delivered`) is acknowledged.

use std::time::Duration;

use crate::delivery::DeliverySampler;
use crate::registry::{Algorithm, Env};
use crate::rng::{self, SimRng};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{
    Ack, AckBatch, CongestionControl, CongestionEvent, CongestionKind, SentPacket, StatValue,
    Stats, Time, VariantId,
};

/// BBR's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BbrConfig {
    /// Startup pacing and window gain.
    pub high_gain: f64,
    /// ProbeBW window gain.
    pub cwnd_gain: f64,
    /// ProbeBW probing pacing gain (first phase).
    pub probe_gain: f64,
    /// ProbeBW draining pacing gain (second phase).
    pub drain_probe_gain: f64,
    /// Length of the BtlBw max filter, round trips.
    pub bw_window: u64,
    /// Length of the RTprop min filter.
    pub min_rtt_window: Duration,
    /// Time at the minimum window in ProbeRTT.
    pub probe_rtt_duration: Duration,
    /// Smallest window, segments.
    pub min_cwnd: u64,
    /// Slots of the per-packet send-state ring.
    pub ring: usize,
    /// Seed of the generator picking the first ProbeBW phase.
    pub seed: u64,
}

/// Largest BtlBw filter length, round trips.
const MAX_BW_WINDOW: usize = 32;
/// ProbeBW gain cycle length.
const CYCLE_LEN: usize = 8;

const PARAMS: &[Param] = &[
    Param {
        name: "high_gain",
        kind: Kind::Float {
            min: 1.0,
            max: 10.0,
        },
        default: "2.885",
        help: "Startup pacing/cwnd gain (2/ln 2)",
    },
    Param {
        name: "cwnd_gain",
        kind: Kind::Float {
            min: 1.0,
            max: 10.0,
        },
        default: "2",
        help: "ProbeBW cwnd gain",
    },
    Param {
        name: "probe_gain",
        kind: Kind::Float { min: 1.0, max: 4.0 },
        default: "1.25",
        help: "ProbeBW probing pacing gain",
    },
    Param {
        name: "drain_probe_gain",
        kind: Kind::Float { min: 0.1, max: 1.0 },
        default: "0.75",
        help: "ProbeBW pacing gain after probing",
    },
    Param {
        name: "bw_window",
        kind: Kind::Int {
            min: 1,
            max: MAX_BW_WINDOW as u64,
        },
        default: "10",
        help: "BtlBw max filter length (round trips)",
    },
    Param {
        name: "min_rtt_window",
        kind: Kind::Duration,
        default: "10s",
        help: "RTprop min filter length; ProbeRTT when it expires",
    },
    Param {
        name: "probe_rtt_duration",
        kind: Kind::Duration,
        default: "200ms",
        help: "time at 4 segments in ProbeRTT",
    },
    Param {
        name: "min_cwnd",
        kind: Kind::Int { min: 2, max: 1000 },
        default: "4",
        help: "smallest window (segments)",
    },
    Param {
        name: "ring",
        kind: Kind::Int {
            min: 16,
            max: 65536,
        },
        default: "1024",
        help: "per-packet send-state ring slots",
    },
    Param {
        name: "seed",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
        },
        default: "1",
        help: "seed for the random first ProbeBW phase",
    },
];

impl BbrConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(BbrConfig {
            high_gain: args.float("high_gain")?,
            cwnd_gain: args.float("cwnd_gain")?,
            probe_gain: args.float("probe_gain")?,
            drain_probe_gain: args.float("drain_probe_gain")?,
            bw_window: args.int("bw_window")?,
            min_rtt_window: args.duration("min_rtt_window")?,
            probe_rtt_duration: args.duration("probe_rtt_duration")?,
            min_cwnd: args.int("min_cwnd")?,
            ring: args.int("ring")? as usize,
            seed: args.int("seed")?,
        })
    }
}

impl Default for BbrConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("bbr", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "bbr",
    variant: VariantId::BBR,
    summary:
        "model-based: pace at max delivery rate, cwnd 2 BDP, gain cycle 1.25/0.75/1x6, ProbeRTT",
    source: "Cardwell et al., BBR, ACM Queue 2016; draft-cardwell-iccrg-bbr-congestion-control-00",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| Ok(Box::new(Bbr::new(BbrConfig::from_args(args)?, env))),
};

/// BBR's state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BbrMode {
    /// Exponential search for the bottleneck bandwidth.
    Startup,
    /// Drain the queue built in Startup.
    Drain,
    /// Steady state: gain cycling.
    ProbeBw,
    /// Minimum window to measure the propagation RTT.
    ProbeRtt,
}

impl BbrMode {
    /// Label used in stats.
    pub fn label(self) -> &'static str {
        match self {
            BbrMode::Startup => "startup",
            BbrMode::Drain => "drain",
            BbrMode::ProbeBw => "probe_bw",
            BbrMode::ProbeRtt => "probe_rtt",
        }
    }
}

/// A delivery-rate sample.
#[derive(Clone, Copy, Debug)]
struct RateSample {
    /// Bytes per second.
    rate: f64,
    app_limited: bool,
}

/// BBR v1 congestion control.
#[derive(Clone, Debug)]
pub struct Bbr {
    config: BbrConfig,
    mss: u64,
    init_cwnd: u64,
    sampler: DeliverySampler,
    in_flight: u64,
    // Round counting.
    next_round_delivered: u64,
    round_count: u64,
    round_start: bool,
    // BtlBw max filter: per-round maxima, `(round, bytes/s)`.
    bw_slots: [(u64, f64); MAX_BW_WINDOW],
    btl_bw: f64,
    // RTprop min filter.
    rt_prop: Duration,
    rt_prop_stamp: Time,
    rt_prop_expired: bool,
    // State machine.
    mode: BbrMode,
    pacing_gain: f64,
    cwnd_gain: f64,
    filled_pipe: bool,
    full_bw: f64,
    full_bw_count: u32,
    cycle_index: usize,
    cycle_stamp: Time,
    probe_rtt_done_stamp: Option<Time>,
    probe_rtt_round_done: bool,
    probe_rtt_count: u64,
    // Controls.
    cwnd: u64,
    prior_cwnd: u64,
    pacing_rate: f64,
    has_seen_rtt: bool,
    // Loss recovery.
    recovery_start: Option<Time>,
    in_recovery: bool,
    packet_conservation: bool,
    conservation_round: u64,
    lost_pending: u64,
    lost_since_ack: bool,
    rng: SimRng,
}

impl Bbr {
    /// BBR with `config` for a sender described by `env`.
    pub fn new(config: BbrConfig, env: &Env) -> Self {
        let mut bbr = Bbr {
            config,
            mss: env.mss,
            init_cwnd: env.initial_window,
            sampler: DeliverySampler::new(config.ring),
            in_flight: 0,
            next_round_delivered: 0,
            round_count: 0,
            round_start: false,
            bw_slots: [(0, 0.0); MAX_BW_WINDOW],
            btl_bw: 0.0,
            rt_prop: Duration::MAX,
            rt_prop_stamp: Time::ZERO,
            rt_prop_expired: false,
            mode: BbrMode::Startup,
            pacing_gain: config.high_gain,
            cwnd_gain: config.high_gain,
            filled_pipe: false,
            full_bw: 0.0,
            full_bw_count: 0,
            cycle_index: 0,
            cycle_stamp: Time::ZERO,
            probe_rtt_done_stamp: None,
            probe_rtt_round_done: false,
            probe_rtt_count: 0,
            cwnd: env.initial_window,
            prior_cwnd: env.initial_window,
            pacing_rate: 0.0,
            has_seen_rtt: false,
            recovery_start: None,
            in_recovery: false,
            packet_conservation: false,
            conservation_round: 0,
            lost_pending: 0,
            lost_since_ack: false,
            rng: rng::seeded(config.seed),
        };
        // No RTT yet: assume 1 ms (draft: nominal bandwidth InitialCwnd / 1ms).
        bbr.pacing_rate = config.high_gain * bbr.init_cwnd as f64 / 1e-3;
        bbr.cwnd = bbr.cwnd.max(bbr.min_cwnd());
        bbr
    }

    /// The current state.
    pub fn mode(&self) -> BbrMode {
        self.mode
    }

    /// The bottleneck-bandwidth estimate, bytes per second.
    pub fn btl_bw(&self) -> f64 {
        self.btl_bw
    }

    /// The propagation-RTT estimate, if any sample was seen.
    pub fn rt_prop(&self) -> Option<Duration> {
        (self.rt_prop != Duration::MAX).then_some(self.rt_prop)
    }

    /// The current pacing gain.
    pub fn pacing_gain(&self) -> f64 {
        self.pacing_gain
    }

    /// The ProbeBW gain-cycle phase (0 = probing phase).
    pub fn cycle_index(&self) -> usize {
        self.cycle_index
    }

    fn min_cwnd(&self) -> u64 {
        self.config.min_cwnd * self.mss
    }

    fn cycle_gain(&self, index: usize) -> f64 {
        match index {
            0 => self.config.probe_gain,
            1 => self.config.drain_probe_gain,
            _ => 1.0,
        }
    }

    /// `gain * BDP + 3 send quanta` in bytes (the initial window before any
    /// estimate).
    fn inflight(&self, gain: f64) -> u64 {
        if self.rt_prop == Duration::MAX || self.btl_bw <= 0.0 {
            return self.init_cwnd;
        }
        let bdp = self.btl_bw * self.rt_prop.as_secs_f64();
        (gain * bdp) as u64 + 3 * self.send_quantum()
    }

    /// The send quantum of the draft's `BBRSetSendQuantum`: one segment
    /// below 1.2 Mbit/s of pacing, two below 24 Mbit/s, above that 1 ms of
    /// data at the pacing rate, at most 64 kB (Linux's TSO autosizing, whose
    /// floor is two segments above 1.2 Mbit/s).
    fn send_quantum(&self) -> u64 {
        let bits_per_s = self.pacing_rate * 8.0;
        if bits_per_s < 1.2e6 {
            self.mss
        } else if bits_per_s < 24e6 {
            2 * self.mss
        } else {
            ((self.pacing_rate * 1e-3) as u64)
                .min(64_000)
                .max(2 * self.mss)
        }
    }

    fn save_cwnd(&self) -> u64 {
        if !self.in_recovery && self.mode != BbrMode::ProbeRtt {
            self.cwnd
        } else {
            self.prior_cwnd.max(self.cwnd)
        }
    }

    fn restore_cwnd(&mut self) {
        self.cwnd = self.cwnd.max(self.prior_cwnd);
    }

    /// Count the ACK as delivered and compute its rate sample.
    fn sample(&mut self, now: Time, ack: &Ack) -> Option<RateSample> {
        let Some(sample) = self.sampler.on_ack(now, ack) else {
            self.round_start = false;
            return None;
        };
        self.round_start = sample.packet.delivered >= self.next_round_delivered;
        if self.round_start {
            self.next_round_delivered = self.sampler.delivered();
            self.round_count += 1;
        }
        Some(RateSample {
            rate: sample.rate?,
            app_limited: sample.app_limited,
        })
    }

    fn update_btl_bw(&mut self, sample: Option<RateSample>) {
        let Some(s) = sample else { return };
        if s.app_limited && s.rate < self.btl_bw {
            return;
        }
        let len = self.config.bw_window as usize;
        let round = self.round_count;
        let slot = &mut self.bw_slots[(round % len as u64) as usize];
        if slot.0 != round {
            *slot = (round, s.rate);
        } else {
            slot.1 = slot.1.max(s.rate);
        }
        self.btl_bw = self.bw_slots[..len]
            .iter()
            .filter(|(r, _)| r + len as u64 > round)
            .map(|&(_, bw)| bw)
            .fold(0.0, f64::max);
    }

    fn enter_startup(&mut self) {
        self.mode = BbrMode::Startup;
        self.pacing_gain = self.config.high_gain;
        self.cwnd_gain = self.config.high_gain;
    }

    fn enter_probe_bw(&mut self, now: Time) {
        self.mode = BbrMode::ProbeBw;
        self.pacing_gain = 1.0;
        self.cwnd_gain = self.config.cwnd_gain;
        let r = rng::below(&mut self.rng, CYCLE_LEN as u64 - 1) as usize;
        self.cycle_index = CYCLE_LEN - 1 - r;
        self.advance_cycle_phase(now);
    }

    fn advance_cycle_phase(&mut self, now: Time) {
        self.cycle_index = (self.cycle_index + 1) % CYCLE_LEN;
        self.cycle_stamp = now;
        self.pacing_gain = self.cycle_gain(self.cycle_index);
    }

    fn is_next_cycle_phase(&self, now: Time, prior_in_flight: u64) -> bool {
        let full_length =
            self.rt_prop != Duration::MAX && now.saturating_since(self.cycle_stamp) > self.rt_prop;
        if self.pacing_gain > 1.0 {
            full_length
                && (self.lost_since_ack || prior_in_flight >= self.inflight(self.pacing_gain))
        } else if self.pacing_gain < 1.0 {
            full_length || prior_in_flight <= self.inflight(1.0)
        } else {
            full_length
        }
    }

    fn check_full_pipe(&mut self, sample: Option<RateSample>) {
        if self.filled_pipe || !self.round_start || sample.is_some_and(|s| s.app_limited) {
            return;
        }
        if self.btl_bw >= self.full_bw * 1.25 {
            self.full_bw = self.btl_bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        if self.full_bw_count >= 3 {
            self.filled_pipe = true;
        }
    }

    fn check_drain(&mut self, now: Time) {
        if self.mode == BbrMode::Startup && self.filled_pipe {
            self.mode = BbrMode::Drain;
            self.pacing_gain = 1.0 / self.config.high_gain;
            self.cwnd_gain = self.config.high_gain;
        }
        if self.mode == BbrMode::Drain && self.in_flight <= self.inflight(1.0) {
            self.enter_probe_bw(now);
        }
    }

    fn update_rt_prop(&mut self, now: Time, rtt: Duration) {
        self.rt_prop_expired =
            self.rt_prop != Duration::MAX && now > self.rt_prop_stamp + self.config.min_rtt_window;
        if !rtt.is_zero() && (rtt < self.rt_prop || self.rt_prop_expired) {
            self.rt_prop = rtt;
            self.rt_prop_stamp = now;
        }
    }

    fn check_probe_rtt(&mut self, now: Time) {
        if self.mode != BbrMode::ProbeRtt && self.rt_prop_expired {
            self.prior_cwnd = self.save_cwnd();
            self.mode = BbrMode::ProbeRtt;
            self.pacing_gain = 1.0;
            self.cwnd_gain = 1.0;
            self.probe_rtt_done_stamp = None;
            self.probe_rtt_count += 1;
        }
        if self.mode != BbrMode::ProbeRtt {
            return;
        }
        match self.probe_rtt_done_stamp {
            None if self.in_flight <= self.min_cwnd() => {
                self.probe_rtt_done_stamp = Some(now + self.config.probe_rtt_duration);
                self.probe_rtt_round_done = false;
                self.next_round_delivered = self.sampler.delivered();
            }
            Some(done) => {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done && now > done {
                    self.rt_prop_stamp = now;
                    self.restore_cwnd();
                    if self.filled_pipe {
                        self.enter_probe_bw(now);
                    } else {
                        self.enter_startup();
                    }
                }
            }
            None => {}
        }
    }

    fn set_pacing_rate(&mut self) {
        if self.btl_bw <= 0.0 {
            return;
        }
        let rate = self.pacing_gain * self.btl_bw;
        if self.filled_pipe || rate > self.pacing_rate {
            self.pacing_rate = rate;
        }
    }

    fn set_cwnd(&mut self, acked: u64) {
        let target = self.inflight(self.cwnd_gain);
        if self.lost_pending > 0 {
            self.cwnd = self.cwnd.saturating_sub(self.lost_pending).max(self.mss);
            self.lost_pending = 0;
        }
        if self.packet_conservation {
            self.cwnd = self.cwnd.max(self.in_flight + acked);
        } else {
            if self.filled_pipe {
                self.cwnd = (self.cwnd + acked).min(target);
            } else if self.cwnd < target || self.sampler.delivered() < self.init_cwnd {
                self.cwnd += acked;
            }
            self.cwnd = self.cwnd.max(self.min_cwnd());
        }
        if self.mode == BbrMode::ProbeRtt {
            self.cwnd = self.cwnd.min(self.min_cwnd());
        }
    }
}

impl CongestionControl for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }

    fn variant(&self) -> VariantId {
        VariantId::BBR
    }

    fn on_packet_sent(&mut self, now: Time, sent: &SentPacket) {
        self.in_flight = sent.bytes_in_flight;
        self.sampler
            .on_packet_sent(now, sent, self.mode == BbrMode::ProbeRtt);
    }

    fn on_ack(&mut self, now: Time, ack: &Ack) {
        let prior_in_flight = self.in_flight;
        self.in_flight = self.in_flight.saturating_sub(ack.bytes);
        let rtt = ack.rtt.latest;
        if !self.has_seen_rtt && !rtt.is_zero() {
            self.has_seen_rtt = true;
            self.pacing_rate = self.config.high_gain * self.init_cwnd as f64 / rtt.as_secs_f64();
        }

        let sample = self.sample(now, ack);
        if self.in_recovery
            && self
                .recovery_start
                .is_some_and(|start| ack.sent_time > start)
        {
            self.in_recovery = false;
            self.packet_conservation = false;
            self.restore_cwnd();
        }
        if self.packet_conservation
            && self.round_start
            && self.round_count > self.conservation_round
        {
            self.packet_conservation = false;
        }

        self.update_btl_bw(sample);
        if self.mode == BbrMode::ProbeBw && self.is_next_cycle_phase(now, prior_in_flight) {
            self.advance_cycle_phase(now);
        }
        self.check_full_pipe(sample);
        self.check_drain(now);
        self.update_rt_prop(now, rtt);
        self.check_probe_rtt(now);
        self.set_pacing_rate();
        self.set_cwnd(ack.bytes);
        self.lost_since_ack = false;
    }

    fn on_ack_batch_end(&mut self, now: Time, batch: &AckBatch) {
        self.in_flight = batch.bytes_in_flight;
        // In-flight may have dropped below the thresholds only now.
        if self.mode == BbrMode::Drain {
            self.check_drain(now);
        }
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        self.in_flight = self.in_flight.saturating_sub(event.lost_bytes);
        if event.kind == CongestionKind::EcnCe {
            return; // BBR v1 does not react to ECN.
        }
        self.lost_pending += event.lost_bytes;
        self.lost_since_ack = true;
        let new_period = match self.recovery_start {
            Some(start) => event.sent_time > start,
            None => true,
        };
        if new_period {
            self.prior_cwnd = self.save_cwnd();
            self.recovery_start = Some(now);
            self.in_recovery = true;
            self.packet_conservation = true;
            self.conservation_round = self.round_count;
            self.cwnd = (self.in_flight + self.mss)
                .max(self.min_cwnd())
                .min(self.cwnd.max(self.min_cwnd()));
        }
        if event.persistent_congestion {
            self.prior_cwnd = self.save_cwnd();
            self.cwnd = self.min_cwnd();
            self.packet_conservation = false;
        }
    }

    fn on_mtu_change(&mut self, _now: Time, mss: u64) {
        self.mss = mss;
        self.cwnd = self.cwnd.max(self.min_cwnd());
    }

    fn impose_window(&mut self, _now: Time, window: u64) {
        // Lower the window and the saved window, so neither leaving recovery
        // nor leaving ProbeRTT restores the pre-imposed value.
        self.cwnd = self.cwnd.min(window).max(self.min_cwnd());
        self.prior_cwnd = self.prior_cwnd.min(self.cwnd);
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    fn pacing_rate(&self) -> Option<u64> {
        Some((self.pacing_rate as u64).max(1))
    }

    fn stats(&self) -> Stats {
        Stats {
            window: self.cwnd,
            ssthresh: None,
            pacing_rate: self.pacing_rate(),
            details: vec![
                ("mode", StatValue::Text(self.mode.label())),
                ("btl_bw_Bps", StatValue::Num(self.btl_bw)),
                (
                    "rt_prop_s",
                    StatValue::Num(self.rt_prop().map_or(0.0, |d| d.as_secs_f64())),
                ),
                ("pacing_gain", StatValue::Num(self.pacing_gain)),
                ("cwnd_gain", StatValue::Num(self.cwnd_gain)),
                ("cycle_index", StatValue::Num(self.cycle_index as f64)),
                ("round_count", StatValue::Num(self.round_count as f64)),
                (
                    "filled_pipe",
                    StatValue::Num(f64::from(u8::from(self.filled_pipe))),
                ),
                (
                    "probe_rtt_count",
                    StatValue::Num(self.probe_rtt_count as f64),
                ),
                (
                    "unsampled_packets",
                    StatValue::Num(self.sampler.unsampled() as f64),
                ),
            ],
        }
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}
