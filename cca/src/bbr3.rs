//! BBRv3, written from the IETF CCWG draft: N. Cardwell, I. Swett, J. Beshay
//! (eds.), "BBR Congestion Control", draft-ietf-ccwg-bbr-06 (the version that
//! describes BBRv3; section numbers below are that draft's). The draft's
//! `inflight_longterm`, `inflight_shortterm` and `bw_shortterm` are the
//! `inflight_hi`, `inflight_lo` and `bw_lo` of earlier drafts and of Linux.
//!
//! **Model** (§2.9, §5.5). `max_bw` is the maximum delivery rate over the
//! current and the previous ProbeBW cycle (a two-slot max filter advanced one
//! round after each bandwidth probe, §5.5.6); `min_rtt` is the minimum RTT over
//! 10 s, refreshed through `probe_rtt_min_delay`, the minimum over the last 5 s
//! (§5.3.4.3). `bw = min(max_bw, bw_shortterm)`, `bdp = bw * min_rtt`.
//!
//! **Controls** (§5.6). `pacing_rate = pacing_gain * bw * (1 - 1 %)` (the
//! pacing margin; before the pipe is full it is only ever raised; before the
//! first bandwidth sample it is `2.77 * initial window / srtt`).
//! `max_inflight = max(cwnd_gain * bdp + extra_acked, send_quantum, 4 mss)`
//! (+2 mss in ProbeBW_UP), with `send_quantum = pacing_rate * 1 ms` clamped
//! to `2 mss..64 KiB` (the QUIC offload budget, §5.5.8.2) and `extra_acked`
//! the ACK-aggregation estimate (§5.5.9, max over 10 rounds, 1 in Startup).
//! The window grows by the bytes acknowledged up to `max_inflight` (without
//! that limit before the pipe is full), never below `MinPipeCwnd = 4 mss`, and
//! is then capped by the bounds (§5.6.4.7): `inflight_longterm` in ProbeBW
//! DOWN/REFILL/UP, `(1 - Headroom) * inflight_longterm` in CRUISE and
//! ProbeRTT, `inflight_shortterm` everywhere.
//!
//! **States and gains** (§5.6.1):
//!
//! | state | pacing gain | cwnd gain | leaves when |
//! |---|---|---|---|
//! | Startup | 2.77 (4 ln 2) | 2 | `max_bw` plateau: 3 non-app-limited rounds with < 25 % growth of the delivery rate (§5.3.1.2); or too much loss (§5.3.1.3) |
//! | Drain | 0.5 | 2 | in flight ≤ `Inflight(1.0)`, or 3 rounds after entry (§5.3.2) |
//! | ProbeBW_DOWN | 0.9 | 2 | in flight ≤ both `(1 - 0.15) * inflight_longterm` and `bdp` → CRUISE; probe time → REFILL (§5.3.3.1) |
//! | ProbeBW_CRUISE | 1.0 | 2 | probe time → REFILL (§5.3.3.2) |
//! | ProbeBW_REFILL | 1.0 | 2 | one round → UP (§5.3.3.3) |
//! | ProbeBW_UP | 1.25 | 2.25 | delivery-rate plateau, loss > 2 %, or (after a probe that went too high) in flight reaches `inflight_longterm` → DOWN (§5.3.3.7) |
//! | ProbeRTT | 1.0 | 0.5 | 200 ms and a round at ≤ `max(0.5 bdp, 4 mss)` in flight → ProbeBW_CRUISE (or Startup) (§5.3.4) |
//!
//! ProbeRTT is entered from any state when `probe_rtt_min_delay` has not been
//! lowered for `ProbeRTTInterval = 5 s`. **Probe time** (§5.3.3.8): DOWN and
//! CRUISE last until `bw_probe_wait = 2 s + U(0, 1) s` of wall-clock time has
//! passed since the cycle began, or `rounds_since_probe_up ≥ min(bdp in
//! packets, 63)` (Reno coexistence; `rounds_since_probe_up` starts at a random
//! 0 or 1). The draws come from the CCA's own seeded generator (`seed`), so a
//! run is reproducible.
//!
//! **Loss response** (§5.5.10). `LossThresh = 2 %`, `Beta = 0.7`,
//! `Headroom = 0.15`.
//! - While probing (REFILL/UP samples), a loss event whose packet saw more than
//!   2 % of its `tx_in_flight` lost since it was sent means the probe went too
//!   high: `inflight_longterm = max(inflight_at_loss, Beta * min(bdp, cwnd))`
//!   (the in-flight at which the loss rate crossed 2 %), and UP ends (→ DOWN).
//!   When a round's losses stay under 2 %, `inflight_longterm` rises to the
//!   `tx_in_flight` of ACKed packets and, in UP while cwnd-limited, by 1, 2,
//!   4, ... mss per round (§5.3.3.9).
//! - When not probing (Drain, DOWN, CRUISE, ProbeRTT), at the end of each round
//!   with loss: `bw_shortterm = max(bw_latest, Beta * bw_shortterm)`,
//!   `inflight_shortterm = max(inflight_latest, Beta * inflight_shortterm)`
//!   (first set to `max_bw` and `cwnd`). REFILL and leaving ProbeRTT reset them
//!   to infinity.
//! - Startup ends on loss when a round with loss (the round that begins at
//!   its first loss) lost more than 2 % of the data it delivered and lost, in
//!   at least 6 loss events (`BBRStartupFullLossCnt`; the trait reports loss
//!   events, not sequence ranges). Then `inflight_longterm = max(bdp,
//!   inflight_latest)` and BBR drains.
//! - Recovery: the window is saved when a recovery period begins and restored
//!   (then bounded by the model) when an ACK for a packet sent after that
//!   arrives (§5.6.4.4); persistent congestion (the RTO case) sets
//!   `cwnd = in flight + 1 mss`.
//!
//! **ECN** (§3.7 requires CE marks to be treated as congestion and leaves the
//! response open; this follows Linux's BBRv3, `tcp_bbr.c` on google/bbr
//! branch v3): `ecn_alpha` is an EWMA (gain 1/16, start 1) of the fraction of
//! delivered bytes that were CE-marked per round. When the fraction exceeds
//! `ECNThresh = 50 %` in 2 consecutive Startup rounds, Startup ends
//! (`inflight_longterm = bdp`); in a probing round it counts as a probe that
//! went too high; in a non-probing round `inflight_shortterm` is cut to
//! `(1 - ecn_alpha / 3) * inflight_shortterm`. The trait reports a CE increase
//! without a count, so the bytes of the ACK frame that carried it count as
//! marked. `ecn=off` ignores CE marks.
//!
//! **Not modelled.** Undo after spurious loss recovery (§5.5.11: the trait has
//! no such signal); idle restart (§5.4) is detected when a packet is sent into
//! an empty pipe after an app-limited ACK.
//!
//! Delivery-rate samples come from the shared
//! [`DeliverySampler`].

use std::time::Duration;

use crate::delivery::{DeliverySampler, Sample};
use crate::registry::{Algorithm, Env};
use crate::rng::{self, SimRng};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{
    Ack, AckBatch, CongestionControl, CongestionEvent, CongestionKind, SentPacket, StatValue,
    Stats, Time, VariantId,
};

/// BBRv3's parameters (defaults from draft-ietf-ccwg-bbr-06).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bbr3Config {
    /// Startup pacing gain, `BBR.StartupPacingGain` (4 ln 2 ≈ 2.77).
    pub startup_pacing_gain: f64,
    /// Drain pacing gain, `BBR.DrainPacingGain` (0.5).
    pub drain_pacing_gain: f64,
    /// Window gain in every state but UP and ProbeRTT, `BBR.DefaultCwndGain` (2).
    pub cwnd_gain: f64,
    /// ProbeBW_UP pacing gain (1.25).
    pub up_pacing_gain: f64,
    /// ProbeBW_UP window gain (2.25).
    pub up_cwnd_gain: f64,
    /// ProbeBW_DOWN pacing gain (0.9).
    pub down_pacing_gain: f64,
    /// Pacing margin: pace at `(1 - margin) * gain * bw` (0.01).
    pub pacing_margin: f64,
    /// `BBR.LossThresh` (0.02).
    pub loss_thresh: f64,
    /// `BBR.Beta` (0.7).
    pub beta: f64,
    /// `BBR.Headroom` (0.15).
    pub headroom: f64,
    /// Loss events in a round needed for the Startup loss exit (6).
    pub startup_full_loss_count: u64,
    /// `BBR.MinRTTFilterLen` (10 s).
    pub min_rtt_window: Duration,
    /// `BBR.ProbeRTTInterval` (5 s).
    pub probe_rtt_interval: Duration,
    /// `BBR.ProbeRTTDuration` (200 ms).
    pub probe_rtt_duration: Duration,
    /// `BBR.ProbeRTTCwndGain` (0.5).
    pub probe_rtt_cwnd_gain: f64,
    /// Whether CE marks are a congestion signal.
    pub ecn: bool,
    /// CE fraction above which a round counts as congested (0.5).
    pub ecn_thresh: f64,
    /// EWMA gain of `ecn_alpha` (1/16).
    pub ecn_alpha_gain: f64,
    /// Share of `ecn_alpha` cut from `inflight_shortterm` (1/3).
    pub ecn_factor: f64,
    /// `BBR.MinPipeCwnd`, segments (4).
    pub min_cwnd: u64,
    /// Slots of the per-packet send-state ring.
    pub ring: usize,
    /// Seed of the generator timing the bandwidth probes.
    pub seed: u64,
}

const fn float(
    name: &'static str,
    min: f64,
    max: f64,
    default: &'static str,
    help: &'static str,
) -> Param {
    Param {
        name,
        kind: Kind::Float { min, max },
        default,
        help,
    }
}

const PARAMS: &[Param] = &[
    float(
        "startup_gain",
        1.0,
        10.0,
        "2.77",
        "Startup pacing gain (4 ln 2)",
    ),
    float("drain_gain", 0.1, 1.0, "0.5", "Drain pacing gain"),
    float(
        "cwnd_gain",
        1.0,
        10.0,
        "2",
        "cwnd gain (all states but ProbeBW_UP, ProbeRTT)",
    ),
    float("up_pacing_gain", 1.0, 4.0, "1.25", "ProbeBW_UP pacing gain"),
    float("up_cwnd_gain", 1.0, 10.0, "2.25", "ProbeBW_UP cwnd gain"),
    float(
        "down_pacing_gain",
        0.1,
        1.0,
        "0.9",
        "ProbeBW_DOWN pacing gain",
    ),
    float(
        "pacing_margin",
        0.0,
        0.5,
        "0.01",
        "pace this fraction below gain * bw",
    ),
    float(
        "loss_thresh",
        0.0,
        1.0,
        "0.02",
        "loss rate per round that ends a probe",
    ),
    float(
        "beta",
        0.0,
        1.0,
        "0.7",
        "multiplicative decrease of the bounds per lossy round",
    ),
    float(
        "headroom",
        0.0,
        1.0,
        "0.15",
        "share of inflight_longterm left free in CRUISE",
    ),
    Param {
        name: "full_loss_count",
        kind: Kind::Int { min: 1, max: 1000 },
        default: "6",
        help: "loss events in a round for the Startup loss exit",
    },
    Param {
        name: "min_rtt_window",
        kind: Kind::Duration,
        default: "10s",
        help: "min_rtt filter length",
    },
    Param {
        name: "probe_rtt_interval",
        kind: Kind::Duration,
        default: "5s",
        help: "ProbeRTT when the RTT minimum is this old",
    },
    Param {
        name: "probe_rtt_duration",
        kind: Kind::Duration,
        default: "200ms",
        help: "time at the reduced window in ProbeRTT",
    },
    float(
        "probe_rtt_cwnd_gain",
        0.0,
        1.0,
        "0.5",
        "ProbeRTT window, in BDPs",
    ),
    Param {
        name: "ecn",
        kind: Kind::Bool,
        default: "on",
        help: "treat ECN-CE marks as congestion",
    },
    float(
        "ecn_thresh",
        0.0,
        1.0,
        "0.5",
        "CE fraction per round that counts as too high",
    ),
    float(
        "ecn_alpha_gain",
        0.0,
        1.0,
        "0.0625",
        "EWMA gain of the CE fraction",
    ),
    float(
        "ecn_factor",
        0.0,
        1.0,
        "0.333",
        "inflight_shortterm cut per unit of ecn_alpha",
    ),
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
        help: "seed for the randomised bandwidth-probe timing",
    },
];

impl Bbr3Config {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(Bbr3Config {
            startup_pacing_gain: args.float("startup_gain")?,
            drain_pacing_gain: args.float("drain_gain")?,
            cwnd_gain: args.float("cwnd_gain")?,
            up_pacing_gain: args.float("up_pacing_gain")?,
            up_cwnd_gain: args.float("up_cwnd_gain")?,
            down_pacing_gain: args.float("down_pacing_gain")?,
            pacing_margin: args.float("pacing_margin")?,
            loss_thresh: args.float("loss_thresh")?,
            beta: args.float("beta")?,
            headroom: args.float("headroom")?,
            startup_full_loss_count: args.int("full_loss_count")?,
            min_rtt_window: args.duration("min_rtt_window")?,
            probe_rtt_interval: args.duration("probe_rtt_interval")?,
            probe_rtt_duration: args.duration("probe_rtt_duration")?,
            probe_rtt_cwnd_gain: args.float("probe_rtt_cwnd_gain")?,
            ecn: args.bool("ecn")?,
            ecn_thresh: args.float("ecn_thresh")?,
            ecn_alpha_gain: args.float("ecn_alpha_gain")?,
            ecn_factor: args.float("ecn_factor")?,
            min_cwnd: args.int("min_cwnd")?,
            ring: args.int("ring")? as usize,
            seed: args.int("seed")?,
        })
    }
}

impl Default for Bbr3Config {
    fn default() -> Self {
        Self::from_args(&Args::defaults("bbr3", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "bbr3",
    variant: VariantId::BBR3,
    summary: "BBRv3: max_bw/min_rtt model with loss/ECN bounds, ProbeBW DOWN/CRUISE/REFILL/UP, ProbeRTT every 5 s",
    source: "Cardwell, Swett, Beshay, draft-ietf-ccwg-bbr-06 (BBR Congestion Control)",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| Ok(Box::new(Bbr3::new(Bbr3Config::from_args(args)?, env))),
};

/// BBRv3's states (§5.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bbr3State {
    /// Exponential search for the bandwidth.
    Startup,
    /// Drain the Startup queue.
    Drain,
    /// Decelerate: pace at 0.9 bw until the queue and headroom are clear.
    ProbeBwDown,
    /// Cruise at bw until it is time to probe.
    ProbeBwCruise,
    /// One round at bw to refill the pipe before probing.
    ProbeBwRefill,
    /// Accelerate: probe for more bandwidth.
    ProbeBwUp,
    /// Reduced window to re-measure min_rtt.
    ProbeRtt,
}

impl Bbr3State {
    /// Label used in stats.
    pub fn label(self) -> &'static str {
        match self {
            Bbr3State::Startup => "startup",
            Bbr3State::Drain => "drain",
            Bbr3State::ProbeBwDown => "probe_bw_down",
            Bbr3State::ProbeBwCruise => "probe_bw_cruise",
            Bbr3State::ProbeBwRefill => "probe_bw_refill",
            Bbr3State::ProbeBwUp => "probe_bw_up",
            Bbr3State::ProbeRtt => "probe_rtt",
        }
    }

    fn is_probe_bw(self) -> bool {
        matches!(
            self,
            Bbr3State::ProbeBwDown
                | Bbr3State::ProbeBwCruise
                | Bbr3State::ProbeBwRefill
                | Bbr3State::ProbeBwUp
        )
    }

    fn is_probing_bw(self) -> bool {
        matches!(
            self,
            Bbr3State::Startup | Bbr3State::ProbeBwRefill | Bbr3State::ProbeBwUp
        )
    }
}

/// What the ACKs say about bandwidth probing (`BBR.ack_phase`, §2.14).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AckPhase {
    Init,
    Refilling,
    ProbeStarting,
    ProbeFeedback,
    ProbeStopping,
}

/// Why Startup ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartupExit {
    /// Still in Startup (or never left it).
    None,
    /// Delivery-rate plateau.
    BandwidthPlateau,
    /// Too much loss.
    Loss,
    /// Too many CE marks.
    Ecn,
}

impl StartupExit {
    fn label(self) -> &'static str {
        match self {
            StartupExit::None => "none",
            StartupExit::BandwidthPlateau => "bw_plateau",
            StartupExit::Loss => "loss",
            StartupExit::Ecn => "ecn",
        }
    }
}

/// Rounds kept by the `extra_acked` max filter (`BBR.ExtraAckedFilterLen`).
const EXTRA_ACKED_ROUNDS: usize = 10;
/// `rounds_since_probe_up` cap for Reno coexistence (§5.3.3.8.3).
const MAX_PROBE_ROUNDS: u64 = 63;
/// Largest send quantum (§5.6.3).
const MAX_SEND_QUANTUM: u64 = 64 * 1024;
/// Consecutive high-CE Startup rounds that end Startup (Linux `bbr_full_ecn_cnt`).
const STARTUP_ECN_ROUNDS: u32 = 2;

/// BBRv3 congestion control.
#[derive(Clone, Debug)]
pub struct Bbr3 {
    config: Bbr3Config,
    mss: u64,
    init_cwnd: u64,
    sampler: DeliverySampler,
    in_flight: u64,
    prior_in_flight: u64,
    app_limited: bool,
    rng: SimRng,
    // Rounds (§5.5.1).
    next_round_delivered: u64,
    round_count: u64,
    round_start: bool,
    rounds_since_probe_up: u64,
    // Bandwidth model.
    bw_slots: [f64; 2],
    cycle_count: u64,
    max_bw: f64,
    bw_shortterm: f64,
    bw: f64,
    // Volume model (u64::MAX is infinity).
    inflight_longterm: u64,
    inflight_shortterm: u64,
    extra_acked_slots: [(u64, f64); EXTRA_ACKED_ROUNDS],
    extra_acked: f64,
    extra_acked_interval_start: Time,
    extra_acked_delivered: u64,
    // Congestion signals (§5.5.10.3).
    bw_latest: f64,
    inflight_latest: u64,
    loss_round_delivered: u64,
    loss_round_start: bool,
    is_loss_in_round: bool,
    loss_events_in_round: u64,
    lost_in_round: u64,
    delivered_in_round: u64,
    startup_loss_too_high: bool,
    // ECN.
    ecn_seen: bool,
    ecn_in_round: bool,
    ecn_alpha: f64,
    ce_in_round: u64,
    ce_round_too_high: bool,
    startup_ecn_rounds: u32,
    acked_since_batch: u64,
    last_batch_acked: u64,
    // min_rtt and ProbeRTT (§5.3.4.3).
    min_rtt: Duration,
    min_rtt_stamp: Time,
    probe_rtt_min_delay: Duration,
    probe_rtt_min_stamp: Time,
    probe_rtt_expired: bool,
    probe_rtt_done_stamp: Option<Time>,
    probe_rtt_round_done: bool,
    probe_rtt_count: u64,
    idle_restart: bool,
    // State machine.
    state: Bbr3State,
    pacing_gain: f64,
    cwnd_gain: f64,
    full_bw_reached: bool,
    full_bw_now: bool,
    full_bw: f64,
    full_bw_count: u32,
    startup_exit: StartupExit,
    drain_start_round: u64,
    // ProbeBW (§2.14).
    ack_phase: AckPhase,
    is_bw_probe_sample: bool,
    bw_probe_up_acked: u64,
    probe_up_acked_per_inc: u64,
    bw_probe_up_rounds: u32,
    bw_probe_wait: Duration,
    cycle_stamp: Time,
    prev_probe_too_high: bool,
    prev_probe_precautionary: bool,
    cwnd_limited_this_round: bool,
    cwnd_limited_last_round: bool,
    // Controls.
    cwnd: u64,
    prior_cwnd: u64,
    pacing_rate: f64,
    has_seen_rtt: bool,
    recovery_start: Option<Time>,
    in_recovery: bool,
}

impl Bbr3 {
    /// BBRv3 with `config` for a sender described by `env` (`OnInit`, §5.2.1).
    pub fn new(config: Bbr3Config, env: &Env) -> Self {
        let mut bbr = Bbr3 {
            config,
            mss: env.mss,
            init_cwnd: env.initial_window,
            sampler: DeliverySampler::new(config.ring),
            in_flight: 0,
            prior_in_flight: 0,
            app_limited: false,
            rng: rng::seeded(config.seed),
            next_round_delivered: 0,
            round_count: 0,
            round_start: false,
            rounds_since_probe_up: 0,
            bw_slots: [0.0; 2],
            cycle_count: 0,
            max_bw: 0.0,
            bw_shortterm: f64::INFINITY,
            bw: 0.0,
            inflight_longterm: u64::MAX,
            inflight_shortterm: u64::MAX,
            extra_acked_slots: [(0, 0.0); EXTRA_ACKED_ROUNDS],
            extra_acked: 0.0,
            extra_acked_interval_start: Time::ZERO,
            extra_acked_delivered: 0,
            bw_latest: 0.0,
            inflight_latest: 0,
            loss_round_delivered: 0,
            loss_round_start: false,
            is_loss_in_round: false,
            loss_events_in_round: 0,
            lost_in_round: 0,
            delivered_in_round: 0,
            startup_loss_too_high: false,
            ecn_seen: false,
            ecn_in_round: false,
            ecn_alpha: 1.0,
            ce_in_round: 0,
            ce_round_too_high: false,
            startup_ecn_rounds: 0,
            acked_since_batch: 0,
            last_batch_acked: 0,
            min_rtt: Duration::MAX,
            min_rtt_stamp: Time::ZERO,
            probe_rtt_min_delay: Duration::MAX,
            probe_rtt_min_stamp: Time::ZERO,
            probe_rtt_expired: false,
            probe_rtt_done_stamp: None,
            probe_rtt_round_done: false,
            probe_rtt_count: 0,
            idle_restart: false,
            state: Bbr3State::Startup,
            pacing_gain: config.startup_pacing_gain,
            cwnd_gain: config.cwnd_gain,
            full_bw_reached: false,
            full_bw_now: false,
            full_bw: 0.0,
            full_bw_count: 0,
            startup_exit: StartupExit::None,
            drain_start_round: 0,
            ack_phase: AckPhase::Init,
            is_bw_probe_sample: false,
            bw_probe_up_acked: 0,
            probe_up_acked_per_inc: u64::MAX,
            bw_probe_up_rounds: 0,
            bw_probe_wait: Duration::ZERO,
            cycle_stamp: Time::ZERO,
            prev_probe_too_high: false,
            prev_probe_precautionary: false,
            cwnd_limited_this_round: false,
            cwnd_limited_last_round: false,
            cwnd: env.initial_window,
            prior_cwnd: 0,
            pacing_rate: 0.0,
            has_seen_rtt: false,
            recovery_start: None,
            in_recovery: false,
        };
        // InitPacingRate without an RTT sample: nominal bandwidth InitialCwnd / 1 ms.
        bbr.pacing_rate = config.startup_pacing_gain * bbr.init_cwnd as f64 / 1e-3;
        bbr.cwnd = bbr.cwnd.max(bbr.min_pipe_cwnd());
        bbr.enter_startup();
        bbr
    }

    /// The current state.
    pub fn state(&self) -> Bbr3State {
        self.state
    }

    /// `BBR.max_bw`, bytes per second.
    pub fn max_bw(&self) -> f64 {
        self.max_bw
    }

    /// `BBR.bw = min(max_bw, bw_shortterm)`, bytes per second.
    pub fn bw(&self) -> f64 {
        self.bw
    }

    /// `BBR.bw_shortterm` (`bw_lo`), bytes per second; infinite when unset.
    pub fn bw_shortterm(&self) -> f64 {
        self.bw_shortterm
    }

    /// `BBR.inflight_longterm` (`inflight_hi`), bytes; `None` when unset.
    pub fn inflight_longterm(&self) -> Option<u64> {
        (self.inflight_longterm != u64::MAX).then_some(self.inflight_longterm)
    }

    /// `BBR.inflight_shortterm` (`inflight_lo`), bytes; `None` when unset.
    pub fn inflight_shortterm(&self) -> Option<u64> {
        (self.inflight_shortterm != u64::MAX).then_some(self.inflight_shortterm)
    }

    /// `BBR.min_rtt`, if any sample was seen.
    pub fn min_rtt(&self) -> Option<Duration> {
        (self.min_rtt != Duration::MAX).then_some(self.min_rtt)
    }

    /// The current pacing gain.
    pub fn pacing_gain(&self) -> f64 {
        self.pacing_gain
    }

    /// The current window gain.
    pub fn cwnd_gain(&self) -> f64 {
        self.cwnd_gain
    }

    /// Packet-timed rounds so far.
    pub fn round_count(&self) -> u64 {
        self.round_count
    }

    /// Why Startup ended.
    pub fn startup_exit(&self) -> StartupExit {
        self.startup_exit
    }

    /// The wall-clock wait before the next bandwidth probe (`BBR.bw_probe_wait`).
    pub fn bw_probe_wait(&self) -> Duration {
        self.bw_probe_wait
    }

    /// `BBR.rounds_since_probe_up`.
    pub fn rounds_since_probe_up(&self) -> u64 {
        self.rounds_since_probe_up
    }

    /// The CE-fraction EWMA `ecn_alpha`.
    pub fn ecn_alpha(&self) -> f64 {
        self.ecn_alpha
    }

    fn min_pipe_cwnd(&self) -> u64 {
        self.config.min_cwnd * self.mss
    }

    // ------------------------------------------------------------ volumes

    /// `BDPMultiple(bw, gain)`: `gain * bw * min_rtt`, or the initial window
    /// before any RTT sample.
    fn bdp_multiple(&self, bw: f64, gain: f64) -> u64 {
        if self.min_rtt == Duration::MAX {
            return self.init_cwnd;
        }
        (gain * bw * self.min_rtt.as_secs_f64()) as u64
    }

    fn send_quantum(&self) -> u64 {
        ((self.pacing_rate * 1e-3) as u64).clamp(2 * self.mss, MAX_SEND_QUANTUM.max(2 * self.mss))
    }

    /// `QuantizationBudget` with the QUIC offload budget (one send quantum).
    fn quantization_budget(&self, cap: u64) -> u64 {
        let cap = cap.max(self.send_quantum()).max(self.min_pipe_cwnd());
        if self.state == Bbr3State::ProbeBwUp {
            cap + 2 * self.mss
        } else {
            cap
        }
    }

    /// `Inflight(bw, gain)`.
    fn inflight(&self, bw: f64, gain: f64) -> u64 {
        self.quantization_budget(self.bdp_multiple(bw, gain))
    }

    fn max_inflight(&self) -> u64 {
        let cap = self.bdp_multiple(self.bw, self.cwnd_gain) + self.extra_acked as u64;
        self.quantization_budget(cap)
    }

    /// `TargetInflight`: the BDP unless congestion cut the window.
    fn target_inflight(&self) -> u64 {
        self.bdp_multiple(self.bw, 1.0).min(self.cwnd)
    }

    fn inflight_with_headroom(&self) -> u64 {
        if self.inflight_longterm == u64::MAX {
            return u64::MAX;
        }
        let headroom =
            ((self.config.headroom * self.inflight_longterm as f64) as u64).max(self.mss);
        self.inflight_longterm
            .saturating_sub(headroom)
            .max(self.min_pipe_cwnd())
    }

    fn probe_rtt_cwnd(&self) -> u64 {
        self.bdp_multiple(self.bw, self.config.probe_rtt_cwnd_gain)
            .max(self.min_pipe_cwnd())
    }

    fn is_cwnd_limited(&self) -> bool {
        self.cwnd_limited_this_round || self.cwnd_limited_last_round
    }

    // ------------------------------------------------------------ rounds and filters

    fn start_round(&mut self) {
        self.next_round_delivered = self.sampler.delivered();
    }

    fn update_round(&mut self, rs: &Sample) {
        if rs.packet.delivered >= self.next_round_delivered {
            self.start_round();
            self.round_count += 1;
            self.rounds_since_probe_up += 1;
            self.round_start = true;
            self.cwnd_limited_last_round = self.cwnd_limited_this_round;
            self.cwnd_limited_this_round = false;
        } else {
            self.round_start = false;
        }
    }

    fn update_max_bw(&mut self, rs: &Sample, rate: f64) {
        self.update_round(rs);
        if rate > 0.0 && (rate >= self.max_bw || !rs.app_limited) {
            let slot = (self.cycle_count % 2) as usize;
            self.bw_slots[slot] = self.bw_slots[slot].max(rate);
            self.max_bw = self.bw_slots[0].max(self.bw_slots[1]);
        }
    }

    fn advance_max_bw_filter(&mut self) {
        self.cycle_count += 1;
        self.bw_slots[(self.cycle_count % 2) as usize] = 0.0;
        self.max_bw = self.bw_slots[0].max(self.bw_slots[1]);
    }

    /// `UpdateACKAggregation` (§5.5.9).
    fn update_ack_aggregation(&mut self, now: Time, newly_acked: u64) {
        let interval = now.saturating_since(self.extra_acked_interval_start);
        let mut expected = self.bw * interval.as_secs_f64();
        if self.extra_acked_delivered as f64 <= expected {
            self.extra_acked_delivered = 0;
            self.extra_acked_interval_start = now;
            expected = 0.0;
        }
        self.extra_acked_delivered += newly_acked;
        let extra = (self.extra_acked_delivered as f64 - expected).min(self.cwnd as f64);
        let len = if self.full_bw_reached {
            EXTRA_ACKED_ROUNDS as u64
        } else {
            1
        };
        let round = self.round_count;
        let slot = &mut self.extra_acked_slots[(round % EXTRA_ACKED_ROUNDS as u64) as usize];
        if slot.0 != round {
            *slot = (round, extra);
        } else {
            slot.1 = slot.1.max(extra);
        }
        self.extra_acked = self
            .extra_acked_slots
            .iter()
            .filter(|(r, _)| r + len > round)
            .map(|&(_, v)| v)
            .fold(0.0, f64::max);
    }

    // ------------------------------------------------------------ congestion signals

    fn reset_congestion_signals(&mut self) {
        self.is_loss_in_round = false;
        self.ecn_in_round = false;
        self.bw_latest = 0.0;
        self.inflight_latest = 0;
    }

    fn reset_short_term_model(&mut self) {
        self.bw_shortterm = f64::INFINITY;
        self.inflight_shortterm = u64::MAX;
    }

    fn update_latest_delivery_signals(&mut self, rs: &Sample, rate: f64) {
        self.loss_round_start = false;
        self.bw_latest = self.bw_latest.max(rate);
        self.inflight_latest = self.inflight_latest.max(rs.delivered);
        if rs.packet.delivered >= self.loss_round_delivered {
            self.loss_round_delivered = self.sampler.delivered();
            self.loss_round_start = true;
        }
    }

    fn advance_latest_delivery_signals(&mut self, rs: &Sample, rate: f64) {
        if self.loss_round_start {
            self.bw_latest = rate;
            self.inflight_latest = rs.delivered;
        }
    }

    fn update_congestion_signals(&mut self, rs: &Sample, rate: f64) {
        self.update_max_bw(rs, rate);
        if !self.loss_round_start {
            return;
        }
        // The round's loss and CE fractions, before the counters restart.
        let delivered = self.delivered_in_round;
        let lost = self.lost_in_round;
        self.startup_loss_too_high = self.is_loss_in_round
            && self.loss_events_in_round >= self.config.startup_full_loss_count
            && lost as f64 > self.config.loss_thresh * (delivered + lost) as f64;
        let ce_fraction = if delivered > 0 {
            (self.ce_in_round as f64 / delivered as f64).min(1.0)
        } else {
            0.0
        };
        self.ce_round_too_high =
            self.config.ecn && self.ecn_in_round && ce_fraction > self.config.ecn_thresh;
        if self.config.ecn && self.ecn_seen {
            let g = self.config.ecn_alpha_gain;
            self.ecn_alpha = (1.0 - g) * self.ecn_alpha + g * ce_fraction;
        }
        self.adapt_lower_bounds_from_congestion();
        self.is_loss_in_round = false;
        self.ecn_in_round = false;
        self.loss_events_in_round = 0;
        self.lost_in_round = 0;
        self.delivered_in_round = 0;
        self.ce_in_round = 0;
    }

    /// Once per round, outside bandwidth probing, cut the short-term model.
    fn adapt_lower_bounds_from_congestion(&mut self) {
        if self.state.is_probing_bw() {
            return;
        }
        let ecn = self.config.ecn && self.ecn_in_round;
        if !self.is_loss_in_round && !ecn {
            return;
        }
        // InitLowerBounds
        if self.bw_shortterm == f64::INFINITY {
            self.bw_shortterm = self.max_bw;
        }
        if self.inflight_shortterm == u64::MAX {
            self.inflight_shortterm = self.cwnd;
        }
        let baseline = self.inflight_shortterm;
        if self.is_loss_in_round {
            // LossLowerBounds
            let beta = self.config.beta;
            self.bw_shortterm = self.bw_latest.max(beta * self.bw_shortterm);
            self.inflight_shortterm = self
                .inflight_latest
                .max((beta * self.inflight_shortterm as f64) as u64);
        }
        if ecn {
            let cut = 1.0 - self.config.ecn_factor * self.ecn_alpha;
            self.inflight_shortterm = self.inflight_shortterm.min((baseline as f64 * cut) as u64);
        }
    }

    fn is_inflight_too_high(&self, lost: u64, tx_in_flight: u64) -> bool {
        lost as f64 > tx_in_flight as f64 * self.config.loss_thresh
    }

    fn handle_inflight_too_high(&mut self, now: Time, tx_in_flight: u64, app_limited: bool) {
        self.prev_probe_too_high = true;
        self.is_bw_probe_sample = false;
        if !app_limited {
            let floor = (self.target_inflight() as f64 * self.config.beta) as u64;
            self.inflight_longterm = tx_in_flight.max(floor);
        }
        if self.state == Bbr3State::ProbeBwUp {
            self.start_probe_bw_down(now);
        }
    }

    /// The in-flight at which the loss rate crossed `LossThresh`, within the
    /// packet of `size` bytes (`InflightAtLoss`, §5.5.10.2).
    fn inflight_at_loss(&self, size: u64, tx_in_flight: u64, lost: u64) -> u64 {
        let thresh = self.config.loss_thresh;
        let inflight_prev = tx_in_flight.saturating_sub(size) as f64;
        let lost_prev = lost as f64 - size as f64;
        let lost_prefix = (thresh * inflight_prev - lost_prev) / (1.0 - thresh);
        (inflight_prev + lost_prefix).clamp(0.0, tx_in_flight as f64) as u64
    }

    // ------------------------------------------------------------ state machine

    fn reset_full_bw(&mut self) {
        self.full_bw = 0.0;
        self.full_bw_count = 0;
        self.full_bw_now = false;
    }

    fn enter_startup(&mut self) {
        self.state = Bbr3State::Startup;
        self.pacing_gain = self.config.startup_pacing_gain;
        self.cwnd_gain = self.config.cwnd_gain;
    }

    fn check_full_bw_reached(&mut self, rs: &Sample, rate: f64) {
        if self.full_bw_now || !self.round_start || rs.app_limited {
            return;
        }
        if rate >= self.full_bw * 1.25 {
            self.reset_full_bw();
            self.full_bw = rate;
            return;
        }
        self.full_bw_count += 1;
        self.full_bw_now = self.full_bw_count >= 3;
        if self.full_bw_now {
            if self.state == Bbr3State::Startup && !self.full_bw_reached {
                self.startup_exit = StartupExit::BandwidthPlateau;
            }
            self.full_bw_reached = true;
        }
    }

    /// `CheckStartupHighLoss` (§5.3.1.3), plus the ECN exit.
    fn check_startup_high_loss(&mut self) {
        if self.state != Bbr3State::Startup || self.full_bw_reached || !self.loss_round_start {
            return;
        }
        if self.startup_loss_too_high {
            self.full_bw_reached = true;
            self.startup_exit = StartupExit::Loss;
            self.inflight_longterm = self.bdp_multiple(self.bw, 1.0).max(self.inflight_latest);
            return;
        }
        if self.ce_round_too_high {
            self.startup_ecn_rounds += 1;
        } else {
            self.startup_ecn_rounds = 0;
        }
        if self.startup_ecn_rounds >= STARTUP_ECN_ROUNDS {
            self.full_bw_reached = true;
            self.startup_exit = StartupExit::Ecn;
            self.inflight_longterm = self.bdp_multiple(self.bw, 1.0).max(self.min_pipe_cwnd());
        }
    }

    fn check_startup_done(&mut self) {
        self.check_startup_high_loss();
        if self.state == Bbr3State::Startup && self.full_bw_reached {
            self.enter_drain();
        }
    }

    fn enter_drain(&mut self) {
        self.state = Bbr3State::Drain;
        self.pacing_gain = self.config.drain_pacing_gain;
        self.cwnd_gain = self.config.cwnd_gain;
        self.drain_start_round = self.round_count;
    }

    fn check_drain_done(&mut self, now: Time) {
        if self.state == Bbr3State::Drain
            && (self.in_flight <= self.inflight(self.bw, 1.0)
                || self.round_count > self.drain_start_round + 3)
        {
            self.enter_probe_bw(now);
        }
    }

    fn enter_probe_bw(&mut self, now: Time) {
        self.cwnd_gain = self.config.cwnd_gain;
        self.start_probe_bw_down(now);
    }

    fn pick_probe_wait(&mut self) {
        self.rounds_since_probe_up = rng::below(&mut self.rng, 2);
        let jitter = rng::uniform_f64(&mut self.rng);
        self.bw_probe_wait = Duration::from_secs(2) + Duration::from_secs_f64(jitter);
    }

    fn start_probe_bw_down(&mut self, now: Time) {
        self.reset_congestion_signals();
        self.probe_up_acked_per_inc = u64::MAX;
        self.pick_probe_wait();
        self.cycle_stamp = now;
        self.ack_phase = AckPhase::ProbeStopping;
        self.start_round();
        self.state = Bbr3State::ProbeBwDown;
        self.pacing_gain = self.config.down_pacing_gain;
        self.cwnd_gain = self.config.cwnd_gain;
    }

    fn start_probe_bw_cruise(&mut self) {
        self.state = Bbr3State::ProbeBwCruise;
        self.pacing_gain = 1.0;
        self.cwnd_gain = self.config.cwnd_gain;
    }

    fn start_probe_bw_refill(&mut self) {
        self.reset_short_term_model();
        self.bw_probe_up_rounds = 0;
        self.bw_probe_up_acked = 0;
        self.prev_probe_precautionary = false;
        self.ack_phase = AckPhase::Refilling;
        self.start_round();
        self.state = Bbr3State::ProbeBwRefill;
        self.pacing_gain = 1.0;
        self.cwnd_gain = self.config.cwnd_gain;
    }

    fn start_probe_bw_up(&mut self, rate: f64) {
        self.ack_phase = AckPhase::ProbeStarting;
        self.start_round();
        self.reset_full_bw();
        self.full_bw = rate;
        self.state = Bbr3State::ProbeBwUp;
        self.pacing_gain = self.config.up_pacing_gain;
        self.cwnd_gain = self.config.up_cwnd_gain;
        self.raise_inflight_longterm_slope();
    }

    fn is_reno_coexistence_probe_time(&self) -> bool {
        let reno_rounds = self.target_inflight() / self.mss.max(1);
        self.rounds_since_probe_up >= reno_rounds.min(MAX_PROBE_ROUNDS)
    }

    fn is_time_to_probe_bw(&mut self, now: Time) -> bool {
        if now > self.cycle_stamp + self.bw_probe_wait || self.is_reno_coexistence_probe_time() {
            self.start_probe_bw_refill();
            return true;
        }
        false
    }

    fn is_time_to_cruise(&self) -> bool {
        self.in_flight <= self.inflight_with_headroom()
            && self.in_flight <= self.inflight(self.max_bw, 1.0)
    }

    fn is_time_to_go_down(&mut self, rate: f64) -> bool {
        // In flight before this ACK (as Linux), in whole packets: "reached"
        // is "no room for another".
        if self.prev_probe_too_high && self.prior_in_flight + self.mss > self.inflight_longterm {
            self.prev_probe_precautionary = true;
            return true;
        }
        if self.is_cwnd_limited() && self.cwnd >= self.inflight_longterm {
            self.reset_full_bw();
            self.full_bw = rate;
        } else if self.full_bw_now {
            return true;
        }
        false
    }

    fn raise_inflight_longterm_slope(&mut self) {
        let growth_this_round = 1u64 << self.bw_probe_up_rounds;
        self.bw_probe_up_rounds = (self.bw_probe_up_rounds + 1).min(30);
        self.probe_up_acked_per_inc = (self.cwnd / growth_this_round).max(self.mss);
    }

    fn probe_inflight_longterm_upward(&mut self, newly_acked: u64) {
        if !self.is_cwnd_limited() || self.cwnd < self.inflight_longterm {
            return;
        }
        self.bw_probe_up_acked += newly_acked;
        if self.bw_probe_up_acked >= self.probe_up_acked_per_inc {
            let delta = self.bw_probe_up_acked / self.probe_up_acked_per_inc;
            self.bw_probe_up_acked -= delta * self.probe_up_acked_per_inc;
            self.inflight_longterm = self.inflight_longterm.saturating_add(delta * self.mss);
        }
        if self.round_start {
            self.raise_inflight_longterm_slope();
        }
    }

    /// `AdaptLongTermModel`; true when it decided a state transition.
    fn adapt_long_term_model(&mut self, now: Time, rs: &Sample, newly_acked: u64) -> bool {
        if self.ack_phase == AckPhase::ProbeStarting && self.round_start {
            self.ack_phase = AckPhase::ProbeFeedback;
        }
        if self.ack_phase == AckPhase::ProbeStopping && self.round_start {
            self.is_bw_probe_sample = false;
            self.ack_phase = AckPhase::Init;
            if self.state.is_probe_bw() && !rs.app_limited {
                self.advance_max_bw_filter();
            }
            if self.state.is_probe_bw()
                && self.prev_probe_precautionary
                && !self.prev_probe_too_high
            {
                self.start_probe_bw_refill();
                return true;
            }
        }
        // A probing round with too many CE marks went too high (Linux BBRv3).
        if self.is_bw_probe_sample && self.loss_round_start && self.ce_round_too_high {
            let tx_in_flight = rs.packet.tx_in_flight;
            let was_up = self.state == Bbr3State::ProbeBwUp;
            self.handle_inflight_too_high(now, tx_in_flight, rs.app_limited);
            return was_up;
        }
        if !self.is_inflight_too_high(rs.lost, rs.packet.tx_in_flight) {
            if self.inflight_longterm == u64::MAX {
                return false;
            }
            if rs.packet.tx_in_flight > self.inflight_longterm {
                self.inflight_longterm = rs.packet.tx_in_flight;
            }
            if self.state == Bbr3State::ProbeBwUp {
                self.probe_inflight_longterm_upward(newly_acked);
            }
        }
        false
    }

    fn update_probe_bw_cycle_phase(&mut self, now: Time, rs: &Sample, rate: f64, newly_acked: u64) {
        if !self.full_bw_reached {
            return;
        }
        if self.adapt_long_term_model(now, rs, newly_acked) {
            return;
        }
        match self.state {
            Bbr3State::ProbeBwDown => {
                if self.is_time_to_probe_bw(now) {
                    return;
                }
                if self.is_time_to_cruise() {
                    self.start_probe_bw_cruise();
                }
            }
            Bbr3State::ProbeBwCruise => {
                self.is_time_to_probe_bw(now);
            }
            // After one round of REFILL, start UP.
            Bbr3State::ProbeBwRefill if self.round_start => {
                self.is_bw_probe_sample = true;
                self.start_probe_bw_up(rate);
            }
            Bbr3State::ProbeBwUp => self.check_time_to_go_down(now, rate),
            _ => {}
        }
    }

    fn check_time_to_go_down(&mut self, now: Time, rate: f64) {
        if self.is_time_to_go_down(rate) {
            self.prev_probe_too_high = false; // no high loss (yet)
            self.start_probe_bw_down(now);
        }
    }

    fn update_min_rtt(&mut self, now: Time, rtt: Duration) {
        self.probe_rtt_expired = now > self.probe_rtt_min_stamp + self.config.probe_rtt_interval;
        if !rtt.is_zero() && (rtt < self.probe_rtt_min_delay || self.probe_rtt_expired) {
            self.probe_rtt_min_delay = rtt;
            self.probe_rtt_min_stamp = now;
        }
        let min_rtt_expired = now > self.min_rtt_stamp + self.config.min_rtt_window;
        if self.probe_rtt_min_delay < self.min_rtt || min_rtt_expired {
            self.min_rtt = self.probe_rtt_min_delay;
            self.min_rtt_stamp = self.probe_rtt_min_stamp;
        }
    }

    fn save_cwnd(&mut self) {
        if !self.in_recovery && self.state != Bbr3State::ProbeRtt {
            self.prior_cwnd = self.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
        }
    }

    fn restore_cwnd(&mut self) {
        self.cwnd = self.cwnd.max(self.prior_cwnd);
    }

    fn check_probe_rtt(&mut self, now: Time, rs: &Sample) {
        if self.state != Bbr3State::ProbeRtt && self.probe_rtt_expired && !self.idle_restart {
            self.state = Bbr3State::ProbeRtt;
            self.pacing_gain = 1.0;
            self.cwnd_gain = self.config.probe_rtt_cwnd_gain;
            self.probe_rtt_count += 1;
            self.save_cwnd();
            self.probe_rtt_done_stamp = None;
            self.ack_phase = AckPhase::ProbeStopping;
            self.start_round();
        }
        if self.state == Bbr3State::ProbeRtt {
            self.handle_probe_rtt(now);
        }
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    fn handle_probe_rtt(&mut self, now: Time) {
        match self.probe_rtt_done_stamp {
            None if self.in_flight <= self.probe_rtt_cwnd() => {
                self.probe_rtt_done_stamp = Some(now + self.config.probe_rtt_duration);
                self.probe_rtt_round_done = false;
                self.start_round();
            }
            Some(_) => {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done {
                    self.check_probe_rtt_done(now);
                }
            }
            None => {}
        }
    }

    fn check_probe_rtt_done(&mut self, now: Time) {
        if self.probe_rtt_done_stamp.is_some_and(|done| now > done) {
            self.probe_rtt_min_stamp = now;
            self.restore_cwnd();
            self.exit_probe_rtt(now);
        }
    }

    fn exit_probe_rtt(&mut self, now: Time) {
        self.reset_short_term_model();
        self.probe_rtt_done_stamp = None;
        if self.full_bw_reached {
            self.start_probe_bw_down(now);
            self.start_probe_bw_cruise();
        } else {
            self.enter_startup();
        }
    }

    fn bound_bw_for_model(&mut self) {
        self.bw = self.max_bw.min(self.bw_shortterm);
    }

    // ------------------------------------------------------------ controls

    fn set_pacing_rate_with_gain(&mut self, gain: f64) {
        if self.bw <= 0.0 {
            return;
        }
        let rate = gain * self.bw * (1.0 - self.config.pacing_margin);
        if self.full_bw_reached || rate > self.pacing_rate {
            self.pacing_rate = rate;
        }
    }

    fn set_cwnd(&mut self, newly_acked: u64) {
        let max_inflight = self.max_inflight();
        if self.full_bw_reached {
            self.cwnd = (self.cwnd + newly_acked).min(max_inflight);
        } else if self.cwnd < max_inflight || self.sampler.delivered() < self.init_cwnd {
            self.cwnd += newly_acked;
        }
        self.cwnd = self.cwnd.max(self.min_pipe_cwnd());
        if self.state == Bbr3State::ProbeRtt {
            self.cwnd = self.cwnd.min(self.probe_rtt_cwnd());
        }
        self.bound_cwnd_for_model();
    }

    fn bound_cwnd_for_model(&mut self) {
        let mut cap = u64::MAX;
        if self.state.is_probe_bw() && self.state != Bbr3State::ProbeBwCruise {
            cap = self.inflight_longterm;
        } else if matches!(self.state, Bbr3State::ProbeRtt | Bbr3State::ProbeBwCruise) {
            cap = self.inflight_with_headroom();
        }
        cap = cap.min(self.inflight_shortterm).max(self.min_pipe_cwnd());
        self.cwnd = self.cwnd.min(cap);
    }
}

impl CongestionControl for Bbr3 {
    fn name(&self) -> &'static str {
        "bbr3"
    }

    fn variant(&self) -> VariantId {
        VariantId::BBR3
    }

    fn on_packet_sent(&mut self, now: Time, sent: &SentPacket) {
        if sent.bytes_in_flight <= sent.bytes && self.app_limited {
            // HandleRestartFromIdle (§5.4.1).
            self.idle_restart = true;
            self.extra_acked_interval_start = now;
            if self.state.is_probe_bw() {
                self.set_pacing_rate_with_gain(1.0);
            } else if self.state == Bbr3State::ProbeRtt {
                self.check_probe_rtt_done(now);
            }
        }
        self.in_flight = sent.bytes_in_flight;
        if sent.bytes_in_flight + self.mss > self.cwnd {
            self.cwnd_limited_this_round = true;
        }
        // Samples of packets sent in ProbeRTT count only if they raise max_bw.
        self.sampler
            .on_packet_sent(now, sent, self.state == Bbr3State::ProbeRtt);
    }

    fn on_ack(&mut self, now: Time, ack: &Ack) {
        self.prior_in_flight = self.in_flight;
        self.in_flight = self.in_flight.saturating_sub(ack.bytes);
        self.acked_since_batch += ack.bytes;
        self.delivered_in_round += ack.bytes;
        if !self.has_seen_rtt && !ack.rtt.latest.is_zero() {
            self.has_seen_rtt = true;
            let srtt = if ack.rtt.smoothed.is_zero() {
                ack.rtt.latest
            } else {
                ack.rtt.smoothed
            };
            let rate = self.config.startup_pacing_gain * self.init_cwnd as f64 / srtt.as_secs_f64();
            self.pacing_rate = rate;
        }
        if self.in_recovery
            && self
                .recovery_start
                .is_some_and(|start| ack.sent_time > start)
        {
            self.in_recovery = false;
            self.restore_cwnd();
        }
        let Some(rs) = self.sampler.on_ack(now, ack) else {
            self.round_start = false;
            self.set_pacing_rate_with_gain(self.pacing_gain);
            self.set_cwnd(ack.bytes);
            return;
        };
        let rate = rs.rate.unwrap_or(0.0);
        // UpdateModelAndState (§5.2.3).
        self.update_latest_delivery_signals(&rs, rate);
        self.update_congestion_signals(&rs, rate);
        self.update_ack_aggregation(now, ack.bytes);
        self.check_full_bw_reached(&rs, rate);
        self.check_startup_done();
        self.check_drain_done(now);
        self.update_probe_bw_cycle_phase(now, &rs, rate, ack.bytes);
        self.update_min_rtt(now, ack.rtt.latest);
        self.check_probe_rtt(now, &rs);
        self.advance_latest_delivery_signals(&rs, rate);
        self.bound_bw_for_model();
        // UpdateControlParameters.
        self.set_pacing_rate_with_gain(self.pacing_gain);
        self.set_cwnd(ack.bytes);
    }

    fn on_ack_batch_end(&mut self, now: Time, batch: &AckBatch) {
        self.in_flight = batch.bytes_in_flight;
        self.app_limited = batch.app_limited;
        self.last_batch_acked = self.acked_since_batch;
        self.acked_since_batch = 0;
        // In-flight may have dropped below the thresholds only now.
        match self.state {
            Bbr3State::Drain => self.check_drain_done(now),
            Bbr3State::ProbeRtt if self.probe_rtt_done_stamp.is_none() => {
                self.handle_probe_rtt(now);
            }
            _ => {}
        }
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        self.in_flight = self.in_flight.saturating_sub(event.lost_bytes);
        if event.kind == CongestionKind::EcnCe {
            if self.config.ecn {
                // The frame's newly acknowledged bytes count as CE-marked.
                self.ecn_seen = true;
                self.ecn_in_round = true;
                self.ce_in_round += self.last_batch_acked;
                self.last_batch_acked = 0;
            }
            return;
        }
        self.sampler.on_lost(event.lost_bytes);
        self.lost_in_round += event.lost_bytes;
        self.loss_events_in_round += 1;
        let new_period = self
            .recovery_start
            .is_none_or(|start| event.sent_time > start);
        if new_period {
            // OnEnterFastRecovery: SaveCwnd (SaveStateUponLoss is for undo).
            self.save_cwnd();
            self.recovery_start = Some(now);
            self.in_recovery = true;
        }
        if event.persistent_congestion {
            // OnEnterRTO.
            self.save_cwnd();
            self.cwnd = (self.in_flight + self.mss).max(self.mss);
        }
        // NoteLoss.
        if !self.is_loss_in_round {
            self.loss_round_delivered = self.sampler.delivered();
        }
        self.is_loss_in_round = true;
        // HandleLostPacket: only packets sent while probing count.
        if !self.is_bw_probe_sample {
            return;
        }
        let Some(packet) = self.sampler.find_sent_at(event.sent_time) else {
            return;
        };
        let lost = self.sampler.lost() - packet.lost;
        if self.is_inflight_too_high(lost, packet.tx_in_flight) {
            let at_loss = self.inflight_at_loss(packet.bytes, packet.tx_in_flight, lost);
            self.handle_inflight_too_high(now, at_loss, packet.app_limited);
        }
    }

    fn on_mtu_change(&mut self, _now: Time, mss: u64) {
        self.mss = mss;
        self.cwnd = self.cwnd.max(self.min_pipe_cwnd());
    }

    fn impose_window(&mut self, _now: Time, window: u64) {
        // Lower the window and the saved window, so neither leaving recovery
        // nor leaving ProbeRTT restores the pre-imposed value.
        self.cwnd = self.cwnd.min(window).max(self.min_pipe_cwnd());
        self.prior_cwnd = self.prior_cwnd.min(self.cwnd);
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    fn pacing_rate(&self) -> Option<u64> {
        Some((self.pacing_rate as u64).max(1))
    }

    fn stats(&self) -> Stats {
        let bound = |v: u64| if v == u64::MAX { -1.0 } else { v as f64 };
        Stats {
            window: self.cwnd,
            ssthresh: None,
            pacing_rate: self.pacing_rate(),
            details: vec![
                ("mode", StatValue::Text(self.state.label())),
                ("max_bw_Bps", StatValue::Num(self.max_bw)),
                ("bw_Bps", StatValue::Num(self.bw)),
                (
                    "min_rtt_s",
                    StatValue::Num(self.min_rtt().map_or(0.0, |d| d.as_secs_f64())),
                ),
                ("pacing_gain", StatValue::Num(self.pacing_gain)),
                ("cwnd_gain", StatValue::Num(self.cwnd_gain)),
                (
                    "inflight_longterm_bytes",
                    StatValue::Num(bound(self.inflight_longterm)),
                ),
                (
                    "inflight_shortterm_bytes",
                    StatValue::Num(bound(self.inflight_shortterm)),
                ),
                (
                    "bw_shortterm_Bps",
                    StatValue::Num(if self.bw_shortterm.is_finite() {
                        self.bw_shortterm
                    } else {
                        -1.0
                    }),
                ),
                ("round_count", StatValue::Num(self.round_count as f64)),
                (
                    "full_bw_reached",
                    StatValue::Num(f64::from(u8::from(self.full_bw_reached))),
                ),
                ("startup_exit", StatValue::Text(self.startup_exit.label())),
                (
                    "probe_rtt_count",
                    StatValue::Num(self.probe_rtt_count as f64),
                ),
                ("ecn_alpha", StatValue::Num(self.ecn_alpha)),
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

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::RttSample;

    const MSS: u64 = 1200;

    type DropRule = Box<dyn FnMut(u64, &Bbr3) -> bool>;

    /// One BBRv3 sender on a FIFO drop-tail bottleneck, driven through the
    /// trait: one ACK per packet (each its own ACK frame), losses reported
    /// one base RTT after the drop, optional CE marks above a queue threshold.
    struct Net {
        now: Time,
        rtt: Duration,
        rate: f64,
        buffer: u64,
        next_pn: u64,
        link_free: Time,
        in_flight: u64,
        next_send: Time,
        sending: bool,
        acks: VecDeque<(Time, u64, Time, bool)>,
        losses: VecDeque<(Time, Time)>,
        drop: DropRule,
        ce_above: Option<u64>,
        lost: u64,
        min_rtt: Duration,
    }

    impl Net {
        fn new(mbps: f64, rtt_ms: u64, buffer_bdp: f64) -> Self {
            let rate = mbps * 1e6 / 8.0;
            let rtt = Duration::from_millis(rtt_ms);
            Net {
                now: Time::ZERO,
                rtt,
                rate,
                buffer: (buffer_bdp * rate * rtt.as_secs_f64()) as u64,
                next_pn: 0,
                link_free: Time::ZERO,
                in_flight: 0,
                next_send: Time::ZERO,
                sending: true,
                acks: VecDeque::new(),
                losses: VecDeque::new(),
                drop: Box::new(|_, _| false),
                ce_above: None,
                lost: 0,
                min_rtt: Duration::MAX,
            }
        }

        fn bdp(&self) -> f64 {
            self.rate * self.rtt.as_secs_f64()
        }

        fn send(&mut self, b: &mut Bbr3) {
            let pn = self.next_pn;
            self.next_pn += 1;
            self.in_flight += MSS;
            b.on_packet_sent(
                self.now,
                &SentPacket {
                    packet_number: pn,
                    bytes: MSS,
                    bytes_in_flight: self.in_flight,
                },
            );
            let pacing = b.pacing_rate().unwrap() as f64;
            self.next_send = self.now + Duration::from_secs_f64(MSS as f64 / pacing);
            let queue = self.link_free.saturating_since(self.now).as_secs_f64() * self.rate;
            if (self.drop)(pn, b) || queue as u64 + MSS > self.buffer {
                self.losses.push_back((self.now + self.rtt, self.now));
                return;
            }
            let ce = self.ce_above.is_some_and(|t| queue as u64 > t);
            self.link_free =
                self.link_free.max(self.now) + Duration::from_secs_f64(MSS as f64 / self.rate);
            self.acks
                .push_back((self.link_free + self.rtt, pn, self.now, ce));
        }

        fn ack(&mut self, b: &mut Bbr3) {
            let (_, pn, sent, ce) = self.acks.pop_front().unwrap();
            self.in_flight -= MSS;
            let latest = self.now.saturating_since(sent);
            self.min_rtt = self.min_rtt.min(latest);
            let rtt = RttSample {
                latest,
                smoothed: latest,
                min: self.min_rtt,
            };
            let ack = Ack {
                packet_number: pn,
                bytes: MSS,
                sent_time: sent,
                rtt,
                app_limited: false,
            };
            b.on_ack(self.now, &ack);
            let batch = AckBatch {
                bytes_in_flight: self.in_flight,
                app_limited: false,
                largest_acked: Some(pn),
            };
            b.on_ack_batch_end(self.now, &batch);
            if ce {
                b.on_congestion_event(self.now, &event(CongestionKind::EcnCe, sent, 0));
            }
        }

        fn lose(&mut self, b: &mut Bbr3) {
            let (_, sent) = self.losses.pop_front().unwrap();
            self.in_flight -= MSS;
            self.lost += MSS;
            b.on_congestion_event(self.now, &event(CongestionKind::Loss, sent, MSS));
        }

        /// Run until `end` or until `stop` says so after an event; `stop`
        /// sees the sender after every send, ACK and loss.
        fn run(
            &mut self,
            b: &mut Bbr3,
            end: Time,
            mut stop: impl FnMut(&Net, &Bbr3) -> bool,
        ) -> bool {
            loop {
                let ack_at = self.acks.front().map(|a| a.0);
                let loss_at = self.losses.front().map(|l| l.0);
                let send_at = (self.sending && self.in_flight + MSS <= b.window())
                    .then(|| self.next_send.max(self.now));
                let Some(t) = [loss_at, ack_at, send_at].into_iter().flatten().min() else {
                    return false;
                };
                if t > end {
                    self.now = end;
                    return false;
                }
                self.now = t;
                if loss_at == Some(t) {
                    self.lose(b);
                } else if ack_at == Some(t) {
                    self.ack(b);
                } else {
                    self.send(b);
                }
                if stop(self, b) {
                    return true;
                }
            }
        }

        /// Run until the state is `state`; panics if not reached by `limit` s.
        fn run_to(&mut self, b: &mut Bbr3, state: Bbr3State, limit: f64) {
            let reached = self.run(b, Time::from_secs_f64(limit), |_, b| b.state == state);
            assert!(
                reached,
                "{state:?} not reached by {limit} s (in {:?})",
                b.state
            );
        }
    }

    fn event(kind: CongestionKind, sent_time: Time, lost_bytes: u64) -> CongestionEvent {
        CongestionEvent {
            kind,
            sent_time,
            lost_bytes,
            persistent_congestion: false,
        }
    }

    fn bbr3(spec_params: &str) -> Bbr3 {
        let spec = crate::spec::Spec::parse(&format!("bbr3({spec_params})")).unwrap();
        let args = Args::new("bbr3", PARAMS, &spec, "bbr3").unwrap();
        Bbr3::new(Bbr3Config::from_args(&args).unwrap(), &Env::with_mss(MSS))
    }

    fn secs(t: Time) -> f64 {
        t.as_secs_f64()
    }

    #[test]
    fn defaults_are_the_drafts_constants() {
        let c = Bbr3Config::default();
        assert_eq!(c.startup_pacing_gain, 2.77);
        assert_eq!(c.drain_pacing_gain, 0.5);
        assert_eq!((c.cwnd_gain, c.up_cwnd_gain), (2.0, 2.25));
        assert_eq!((c.up_pacing_gain, c.down_pacing_gain), (1.25, 0.9));
        assert_eq!((c.loss_thresh, c.beta, c.headroom), (0.02, 0.7, 0.15));
        assert_eq!(c.probe_rtt_interval, Duration::from_secs(5));
        assert_eq!(c.probe_rtt_duration, Duration::from_millis(200));
        assert_eq!(c.probe_rtt_cwnd_gain, 0.5);
        assert_eq!(c.startup_full_loss_count, 6);
        let b = bbr3("");
        assert_eq!(b.state(), Bbr3State::Startup);
        assert_eq!((b.pacing_gain(), b.cwnd_gain()), (2.77, 2.0));
    }

    #[test]
    fn startup_exits_to_drain_on_a_bandwidth_plateau() {
        // A buffer of 3 BDP: Startup's queue (at most 1 BDP) never overflows.
        let mut net = Net::new(10.0, 40, 3.0);
        let mut b = bbr3("");
        let mut at_round: Vec<f64> = Vec::new();
        let reached = net.run(&mut b, Time::from_secs_f64(3.0), |_, b| {
            if b.round_start && b.state == Bbr3State::Startup {
                at_round.push(b.max_bw);
            }
            b.state != Bbr3State::Startup
        });
        assert!(reached);
        assert_eq!(b.state(), Bbr3State::Drain);
        assert_eq!(b.pacing_gain(), 0.5);
        assert_eq!(b.startup_exit(), StartupExit::BandwidthPlateau);
        assert_eq!(net.lost, 0);
        assert!(b.inflight_longterm().is_none());
        let bw = b.max_bw() / net.rate;
        assert!((0.95..=1.05).contains(&bw), "max_bw {bw} of the link");
        // The bandwidth had kept growing by >= 25 % a round until it reached
        // the link rate; three more rounds without such growth end Startup.
        let n = at_round.len();
        assert!(n >= 6, "{at_round:?}");
        assert!(at_round[n - 4] >= 0.9 * net.rate, "{at_round:?}");
        assert!(at_round[n - 1] < 1.25 * at_round[n - 4], "{at_round:?}");
    }

    #[test]
    fn startup_exits_to_drain_on_excessive_loss() {
        // 10 % of packets lost from the start: more than LossThresh per round,
        // in more than 6 loss events; Startup ends long before any plateau.
        let mut net = Net::new(10.0, 40, 3.0);
        net.drop = Box::new(|pn, _| pn % 10 == 9);
        let mut b = bbr3("");
        net.run_to(&mut b, Bbr3State::Drain, 3.0);
        assert_eq!(b.startup_exit(), StartupExit::Loss);
        let hi = b
            .inflight_longterm()
            .expect("loss exit sets inflight_longterm");
        let bdp = b.bdp_multiple(b.bw(), 1.0);
        assert!(hi >= bdp && hi >= b.inflight_latest, "{hi} {bdp}");
        assert!(b.round_count() < 8, "{}", b.round_count());

        // 0.5 % loss is below LossThresh: Startup runs to the plateau.
        let mut net = Net::new(10.0, 40, 3.0);
        net.drop = Box::new(|pn, _| pn % 200 == 199);
        let mut b = bbr3("");
        net.run_to(&mut b, Bbr3State::Drain, 3.0);
        assert_eq!(b.startup_exit(), StartupExit::BandwidthPlateau);
    }

    /// Startup ended by loss (so inflight_longterm is set), run to Drain.
    /// `headroom=0.3` puts the headroom target (70 % of inflight_longterm)
    /// below the BDP, so DOWN lasts until in flight falls below it.
    fn after_lossy_startup() -> (Net, Bbr3) {
        let mut net = Net::new(10.0, 40, 3.0);
        net.drop = Box::new(|pn, b: &Bbr3| b.state == Bbr3State::Startup && pn % 10 == 9);
        let mut b = bbr3("headroom=0.3");
        net.run_to(&mut b, Bbr3State::Drain, 3.0);
        (net, b)
    }

    #[test]
    fn drain_exits_to_probe_bw_down_when_in_flight_is_at_most_the_bdp() {
        let (mut net, mut b) = after_lossy_startup();
        let drain_round = b.round_count();
        let mut last_in_drain = 0;
        net.run(&mut b, Time::from_secs_f64(5.0), |net, b| {
            if b.state == Bbr3State::Drain {
                last_in_drain = net.in_flight;
            }
            b.state != Bbr3State::Drain
        });
        assert_eq!(b.state(), Bbr3State::ProbeBwDown);
        assert_eq!(b.pacing_gain(), 0.9);
        assert!(b.round_count() <= drain_round + 3);
        let target = b.inflight(b.bw(), 1.0);
        assert!(net.in_flight <= target, "{} > {target}", net.in_flight);
        assert!(
            last_in_drain > target,
            "left Drain only once in flight fell to the BDP"
        );
        assert_eq!(b.cycle_stamp, net.now);
    }

    #[test]
    fn drain_exits_after_three_rounds_even_above_the_bdp() {
        // A min_rtt estimate of 1 ms: in flight (~half the real BDP at
        // Drain's gain) never falls to the estimated BDP.
        let (mut net, mut b) = after_lossy_startup();
        b.min_rtt = Duration::from_millis(1);
        let start = b.round_count();
        net.run(&mut b, Time::from_secs_f64(5.0), |_, b| {
            b.state != Bbr3State::Drain
        });
        assert!(b.state().is_probe_bw());
        assert_eq!(b.round_count(), start + 4);
    }

    #[test]
    fn probe_bw_down_exits_to_cruise_once_headroom_is_free() {
        let (mut net, mut b) = after_lossy_startup();
        net.run_to(&mut b, Bbr3State::ProbeBwDown, 5.0);
        // (in flight, min(headroom target, BDP)) at each event in DOWN.
        let mut in_down = Vec::new();
        net.run(&mut b, Time::from_secs_f64(5.0), |net, b| {
            if b.state == Bbr3State::ProbeBwDown {
                let limit = b.inflight_with_headroom().min(b.inflight(b.max_bw, 1.0));
                in_down.push((net.in_flight, limit));
            }
            b.state != Bbr3State::ProbeBwDown
        });
        assert_eq!(b.state(), Bbr3State::ProbeBwCruise);
        assert_eq!(b.pacing_gain(), 1.0);
        let headroom = b.inflight_with_headroom();
        assert!(headroom < u64::MAX);
        assert!(net.in_flight <= headroom.min(b.inflight(b.max_bw(), 1.0)));
        // DOWN lasted while in flight was above one of the two limits.
        assert!(in_down.len() > 10, "{}", in_down.len());
        assert!(in_down.iter().all(|(f, limit)| f > limit), "{in_down:?}");
        // CRUISE's volume cap is the headroom target.
        assert!(b.window() <= headroom.max(b.min_pipe_cwnd()));
    }

    #[test]
    fn cruise_probes_after_the_randomised_wall_clock_wait() {
        // 50 Mbit/s, 100 ms: the Reno bound (63 rounds = 6.3 s) is far away,
        // so the 2..3 s wall-clock wait decides.
        let mut waits = Vec::new();
        for seed in [1, 2, 3] {
            let mut net = Net::new(50.0, 100, 2.0);
            let mut b = bbr3(&format!("seed={seed}"));
            net.run_to(&mut b, Bbr3State::ProbeBwCruise, 10.0);
            let (stamp, wait) = (b.cycle_stamp, b.bw_probe_wait());
            assert!((2.0..3.0).contains(&wait.as_secs_f64()), "{wait:?}");
            net.run_to(&mut b, Bbr3State::ProbeBwRefill, 10.0);
            let waited = net.now.saturating_since(stamp);
            assert!(waited > wait, "{waited:?} <= {wait:?}");
            assert!(
                waited < wait + Duration::from_millis(5),
                "{waited:?} vs {wait:?}"
            );
            assert!(b.rounds_since_probe_up() < 63);
            waits.push(wait);
        }
        assert!(waits[0] != waits[1] && waits[1] != waits[2], "{waits:?}");
    }

    #[test]
    fn cruise_probes_after_bdp_rounds_on_a_small_bdp_path() {
        // 10 Mbit/s, 20 ms: BDP 20.8 packets, so the Reno-coexistence bound
        // (min(BDP in packets, 63) rounds, ~0.45 s) comes before 2 s.
        let mut net = Net::new(10.0, 20, 2.0);
        let mut b = bbr3("");
        net.run_to(&mut b, Bbr3State::ProbeBwCruise, 5.0);
        let stamp = b.cycle_stamp;
        let target_rounds = b.target_inflight() / MSS;
        net.run_to(&mut b, Bbr3State::ProbeBwRefill, 5.0);
        let waited = net.now.saturating_since(stamp).as_secs_f64();
        assert!(waited < 1.0, "{waited}");
        assert!((15..=25).contains(&target_rounds), "{target_rounds}");
    }

    #[test]
    fn refill_resets_the_short_term_model_and_goes_up_after_one_round() {
        let mut net = Net::new(10.0, 40, 2.0);
        let mut b = bbr3("");
        net.run_to(&mut b, Bbr3State::ProbeBwCruise, 5.0);
        // A loss in CRUISE sets the short-term bounds...
        let pn = net.next_pn + 5;
        net.drop = Box::new(move |p, _| p == pn);
        let set = net.run(&mut b, Time::from_secs_f64(5.0), |_, b| {
            b.inflight_shortterm != u64::MAX
        });
        assert!(set && b.state() == Bbr3State::ProbeBwCruise);
        assert!(b.bw_shortterm().is_finite());
        net.drop = Box::new(|_, _| false);
        // ...and REFILL discards them.
        net.run_to(&mut b, Bbr3State::ProbeBwRefill, 10.0);
        assert!(b.inflight_shortterm().is_none() && b.bw_shortterm().is_infinite());
        assert_eq!((b.pacing_gain(), b.cwnd_gain()), (1.0, 2.0));
        let refill_at = net.now;
        let round = b.round_count();
        net.run_to(&mut b, Bbr3State::ProbeBwUp, 10.0);
        assert_eq!(b.round_count(), round + 1);
        let took = net.now.saturating_since(refill_at).as_secs_f64();
        assert!((0.040..0.060).contains(&took), "REFILL lasted {took} s");
        assert_eq!((b.pacing_gain(), b.cwnd_gain()), (1.25, 2.25));
        assert!(b.is_bw_probe_sample);
    }

    #[test]
    fn up_ends_on_a_plateau_without_loss() {
        let mut net = Net::new(10.0, 40, 3.0);
        let mut b = bbr3("");
        net.run_to(&mut b, Bbr3State::ProbeBwUp, 10.0);
        let round = b.round_count();
        net.run_to(&mut b, Bbr3State::ProbeBwDown, 10.0);
        // Three rounds without 25 % delivery-rate growth (plus the first).
        assert!((3..=5).contains(&(b.round_count() - round)));
        assert!(!b.prev_probe_too_high);
        assert_eq!(net.lost, 0);
    }

    #[test]
    fn loss_above_two_percent_in_up_cuts_inflight_longterm_and_ends_up() {
        let mut net = Net::new(10.0, 40, 3.0);
        let mut b = bbr3("");
        net.run_to(&mut b, Bbr3State::ProbeBwUp, 10.0);
        // Lose 5 consecutive packets sent in UP (~10 % of a 42-packet BDP).
        let first = net.next_pn + 10;
        net.drop = Box::new(move |pn, _| (first..first + 5).contains(&pn));
        let target = b.target_inflight();
        let mut tx_in_flight = 0;
        net.run(&mut b, Time::from_secs_f64(10.0), |net, b| {
            if b.state == Bbr3State::ProbeBwUp {
                tx_in_flight = tx_in_flight.max(net.in_flight);
            }
            b.state != Bbr3State::ProbeBwUp
        });
        assert_eq!(b.state(), Bbr3State::ProbeBwDown);
        assert!(b.prev_probe_too_high);
        let hi = b.inflight_longterm().expect("set by the loss");
        assert!(hi as f64 >= 0.7 * target as f64, "{hi} < beta * {target}");
        assert!(hi <= tx_in_flight + MSS, "{hi} > {tx_in_flight}");

        // The next probe is precautionary: UP ends as soon as in flight
        // reaches inflight_longterm, and the flow re-probes at once.
        net.drop = Box::new(|_, _| false);
        net.run_to(&mut b, Bbr3State::ProbeBwUp, 20.0);
        let hi = b.inflight_longterm.min(b.cwnd);
        net.run(&mut b, Time::from_secs_f64(20.0), |_, b| {
            b.state != Bbr3State::ProbeBwUp
        });
        assert_eq!(b.state(), Bbr3State::ProbeBwDown);
        assert!(b.prev_probe_precautionary);
        assert!(
            b.prior_in_flight + MSS > hi,
            "{} vs {hi}",
            b.prior_in_flight
        );
        // Precautionary acceleration: one round later, REFILL again (through
        // CRUISE if DOWN ended first), not after the 2..3 s wait.
        let down_at = net.now;
        net.run(&mut b, Time::from_secs_f64(20.0), |_, b| {
            !matches!(b.state, Bbr3State::ProbeBwDown | Bbr3State::ProbeBwCruise)
        });
        assert_eq!(b.state(), Bbr3State::ProbeBwRefill);
        let took = net.now.saturating_since(down_at).as_secs_f64();
        assert!(took < 0.2, "{took}");
    }

    #[test]
    fn loss_below_two_percent_in_up_keeps_probing() {
        let mut net = Net::new(50.0, 100, 3.0);
        let mut b = bbr3("");
        net.run_to(&mut b, Bbr3State::ProbeBwUp, 10.0);
        // One packet of ~520 in flight: 0.2 %.
        let pn = net.next_pn + 10;
        net.drop = Box::new(move |p, _| p == pn);
        let lost_before = net.lost;
        net.run(&mut b, Time::from_secs_f64(10.0), |net, b| {
            net.lost > lost_before || b.state != Bbr3State::ProbeBwUp
        });
        assert_eq!(b.state(), Bbr3State::ProbeBwUp);
        assert!(b.inflight_longterm().is_none());
        assert!(!b.prev_probe_too_high);
    }

    #[test]
    fn loss_outside_probing_sets_bw_and_inflight_shortterm_once_per_round() {
        let mut net = Net::new(10.0, 40, 3.0);
        let mut b = bbr3("");
        net.run_to(&mut b, Bbr3State::ProbeBwCruise, 5.0);
        let (max_bw, cwnd) = (b.max_bw(), b.window());
        // One loss per round for two rounds.
        let first = net.next_pn + 5;
        let second = first + 60;
        net.drop = Box::new(move |pn, _| pn == first || pn == second);
        let mut cuts = Vec::new();
        net.run(&mut b, Time::from_secs_f64(5.0), |_, b| {
            if b.loss_round_start && b.bw_shortterm.is_finite() {
                let cut = (b.bw_shortterm, b.inflight_shortterm);
                if cuts.last() != Some(&cut) {
                    cuts.push(cut);
                }
            }
            cuts.len() == 2 || b.state != Bbr3State::ProbeBwCruise
        });
        assert_eq!(cuts.len(), 2, "{cuts:?}");
        let (bw1, inflight1) = cuts[0];
        assert!(
            bw1 >= 0.7 * max_bw - 1.0 && bw1 <= max_bw,
            "{bw1} vs {max_bw}"
        );
        assert!(
            inflight1 as f64 >= 0.7 * cwnd as f64 - 1.0,
            "{inflight1} vs {cwnd}"
        );
        let (bw2, inflight2) = cuts[1];
        assert!(bw2 >= 0.7 * bw1 - 1.0 && inflight2 as f64 >= 0.7 * inflight1 as f64 - 1.0);
        // The bound applies: bw = min(max_bw, bw_shortterm), and the window.
        assert_eq!(b.bw(), b.max_bw().min(b.bw_shortterm()));
        assert!(b.window() <= b.inflight_shortterm().unwrap().max(b.min_pipe_cwnd()));
    }

    #[test]
    fn pacing_rate_is_gain_times_bw_less_the_margin() {
        // Random-ish losses keep bw_shortterm below max_bw at times.
        let mut net = Net::new(10.0, 40, 1.0);
        net.drop = Box::new(|pn, _| pn % 300 == 299);
        let mut b = bbr3("");
        let (mut checked, mut bounded) = (0, 0);
        let mut gains = Vec::new();
        let mut bad = Vec::new();
        net.run(&mut b, Time::from_secs_f64(12.0), |_, b| {
            if b.full_bw_reached && b.bw > 0.0 {
                let expected = b.pacing_gain * b.bw * 0.99;
                checked += 1;
                bounded += usize::from(b.bw < b.max_bw);
                if !gains.contains(&b.pacing_gain) {
                    gains.push(b.pacing_gain);
                }
                if (b.pacing_rate - expected).abs() > 1e-6 * expected {
                    bad.push((b.state, b.pacing_rate, expected));
                }
            }
            false
        });
        assert!(checked > 10_000 && bounded > 100, "{checked} {bounded}");
        assert!(bad.is_empty(), "{:?}", &bad[..bad.len().min(5)]);
        for gain in [0.5, 0.9, 1.0, 1.25] {
            assert!(gains.contains(&gain), "{gain} not seen in {gains:?}");
        }
    }

    #[test]
    fn probe_rtt_after_five_seconds_lasts_200_ms_and_a_round() {
        let mut net = Net::new(10.0, 40, 2.0);
        let mut b = bbr3("");
        net.run_to(&mut b, Bbr3State::ProbeBwDown, 5.0);
        let stamp = b.probe_rtt_min_stamp;
        net.run_to(&mut b, Bbr3State::ProbeRtt, 10.0);
        let entered = net.now;
        let since = entered.saturating_since(stamp).as_secs_f64();
        assert!(
            (5.0..5.05).contains(&since),
            "entered {since} s after the last minimum"
        );
        assert_eq!(b.cwnd_gain(), 0.5);
        let cap = b.probe_rtt_cwnd();
        assert!(b.window() <= cap, "{} > {cap}", b.window());
        assert!((cap as f64) < 0.6 * net.bdp() + 4.0 * MSS as f64);
        let mut reached_target = None;
        net.run(&mut b, Time::from_secs_f64(12.0), |net, b| {
            if reached_target.is_none() && b.probe_rtt_done_stamp.is_some() {
                reached_target = Some(net.now);
            }
            b.state != Bbr3State::ProbeRtt
        });
        let reached = reached_target.unwrap();
        let held = net.now.saturating_since(reached).as_secs_f64();
        assert!(held > 0.2 && held < 0.25, "held {held} s");
        assert_eq!(b.state(), Bbr3State::ProbeBwCruise);
        assert_eq!(b.probe_rtt_min_stamp, net.now, "next ProbeRTT 5 s from now");
        assert!(b.window() > cap);
    }

    #[test]
    fn ecn_marks_end_startup_and_cut_inflight_shortterm() {
        // Marks whenever a queue exceeds 10 packets: Startup ends on ECN.
        let mut net = Net::new(10.0, 40, 3.0);
        net.ce_above = Some(10 * MSS);
        let mut b = bbr3("");
        net.run_to(&mut b, Bbr3State::Drain, 3.0);
        assert_eq!(b.startup_exit(), StartupExit::Ecn);
        assert_eq!(net.lost, 0);
        // In CRUISE a marked round cuts inflight_shortterm by alpha / 3.
        net.run_to(&mut b, Bbr3State::ProbeBwCruise, 5.0);
        net.ce_above = Some(0);
        net.run(&mut b, Time::from_secs_f64(6.0), |_, b| {
            b.inflight_shortterm != u64::MAX
        });
        assert!(b.ecn_alpha() > 0.0 && b.ecn_alpha() <= 1.0);
        assert!(b.inflight_shortterm().unwrap() < b.inflight_with_headroom() + MSS);

        // With ecn=off the same marks change nothing.
        let mut net = Net::new(10.0, 40, 3.0);
        net.ce_above = Some(10 * MSS);
        let mut b = bbr3("ecn=off");
        net.run_to(&mut b, Bbr3State::Drain, 3.0);
        assert_eq!(b.startup_exit(), StartupExit::BandwidthPlateau);
    }

    #[test]
    fn same_seed_same_run() {
        let trace = |seed: u64| {
            let mut net = Net::new(10.0, 40, 1.0);
            let mut b = bbr3(&format!("seed={seed}"));
            let mut states = Vec::new();
            net.run(&mut b, Time::from_secs_f64(12.0), |net, b| {
                if states.last().map(|s: &(Bbr3State, u64)| s.0) != Some(b.state) {
                    states.push((b.state, net.now.as_nanos()));
                }
                false
            });
            (states, b.window(), secs(net.now))
        };
        assert_eq!(trace(7), trace(7));
        assert_ne!(trace(7).0, trace(8).0);
    }
}
