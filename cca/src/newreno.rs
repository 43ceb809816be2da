//! NewReno, as specified for QUIC in RFC 9002 §7 and Appendix B (and RFC 6582 for TCP).
//!
//! - **Slow start**: while `cwnd < ssthresh`, `cwnd += acked_bytes`.
//! - **Congestion avoidance**: `cwnd += mss * acked_bytes / cwnd`, i.e. one
//!   MSS per window of acknowledged bytes (kept exact with a byte counter).
//! - **Congestion event** (loss or ECN-CE) for a packet sent after the current
//!   recovery period began: `ssthresh = cwnd = max(cwnd * beta, 2 * mss)` with
//!   `beta = 0.5` (RFC 9002 `kLossReductionFactor`), and a new recovery period
//!   starts `now`. At most one reduction per recovery period.
//! - **Persistent congestion**: `cwnd = 2 * mss` (RFC 9002 §7.6).
//! - No growth on ACKs of packets sent during recovery or while app-limited.

use crate::registry::{Algorithm, Env};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{Ack, CongestionControl, CongestionEvent, StatValue, Stats, Time, VariantId};

/// NewReno's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NewRenoConfig {
    /// Multiplicative decrease factor on a congestion event.
    pub beta: f64,
}

const PARAMS: &[Param] = &[Param {
    name: "beta",
    kind: Kind::Float {
        min: 0.1,
        max: 0.95,
    },
    default: "0.5",
    help: "window multiplier on a congestion event (RFC 9002 kLossReductionFactor)",
}];

impl NewRenoConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(NewRenoConfig {
            beta: args.float("beta")?,
        })
    }
}

impl Default for NewRenoConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("newreno", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "newreno",
    variant: VariantId::NEWRENO,
    summary: "loss-based AIMD: +1 MSS per RTT, halve once per loss event",
    source: "RFC 9002 §7, RFC 6582",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| Ok(Box::new(NewReno::new(NewRenoConfig::from_args(args)?, env))),
};

/// Slow start, congestion avoidance and recovery shared by NewReno-like
/// algorithms (NewReno itself, Libra and most classic variants).
#[derive(Clone, Debug)]
pub struct RenoCore {
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// Slow-start threshold, bytes (`u64::MAX` until the first loss).
    pub ssthresh: u64,
    /// Maximum segment size, bytes.
    pub mss: u64,
    /// Start of the current recovery period.
    pub recovery_start: Option<Time>,
    /// Bytes acknowledged in congestion avoidance since the window last grew.
    pub acked_in_ca: u64,
}

impl RenoCore {
    /// A core at the environment's initial window.
    pub fn new(env: &Env) -> Self {
        RenoCore {
            cwnd: env.initial_window,
            ssthresh: u64::MAX,
            mss: env.mss,
            recovery_start: None,
            acked_in_ca: 0,
        }
    }

    /// The smallest window: two segments (RFC 9002 `kMinimumWindow`).
    pub fn min_window(&self) -> u64 {
        2 * self.mss
    }

    /// Whether the window is still in slow start.
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// Whether a packet sent at `sent_time` was sent during the current recovery period.
    pub fn in_recovery(&self, sent_time: Time) -> bool {
        self.recovery_start.is_some_and(|start| sent_time <= start)
    }

    /// Whether this ACK may grow the window at all.
    pub fn may_grow(&self, ack: &Ack) -> bool {
        !ack.app_limited && !self.in_recovery(ack.sent_time)
    }

    /// Slow-start growth for `bytes` acknowledged; returns the bytes not used by
    /// slow start (all of them once `cwnd >= ssthresh`), for congestion avoidance.
    pub fn slow_start(&mut self, bytes: u64) -> u64 {
        let room = self.ssthresh.saturating_sub(self.cwnd);
        let used = bytes.min(room);
        self.cwnd += used;
        bytes - used
    }

    /// Bytes of `ack` left for congestion avoidance: zero if the ACK may not
    /// grow the window (app-limited, or sent before the recovery period began),
    /// otherwise what slow start did not use.
    pub fn congestion_avoidance_bytes(&mut self, ack: &Ack) -> u64 {
        if self.may_grow(ack) {
            self.slow_start(ack.bytes)
        } else {
            0
        }
    }

    /// A new maximum segment size; the window stays at least the minimum window.
    pub fn set_mss(&mut self, mss: u64) {
        self.mss = mss;
        self.cwnd = self.cwnd.max(self.min_window());
    }

    /// Standard growth: slow start, then Reno congestion avoidance with what is left.
    pub fn grow_reno(&mut self, bytes: u64) {
        let rest = self.slow_start(bytes);
        if rest > 0 {
            self.reno_increase(rest);
        }
    }

    /// Reno congestion avoidance: one MSS per window of acknowledged bytes.
    pub fn reno_increase(&mut self, bytes: u64) {
        self.acked_in_ca += bytes;
        while self.acked_in_ca >= self.cwnd {
            self.acked_in_ca -= self.cwnd;
            self.cwnd += self.mss;
        }
    }

    /// Start a recovery period for `event` if it is a new one; returns whether it is.
    pub fn enter_recovery(&mut self, now: Time, event: &CongestionEvent) -> bool {
        if self.in_recovery(event.sent_time) {
            return false;
        }
        self.recovery_start = Some(now);
        self.acked_in_ca = 0;
        true
    }

    /// Set `cwnd = ssthresh = max(window, min_window)`.
    pub fn reduce_to(&mut self, window: u64) {
        self.cwnd = window.max(self.min_window());
        self.ssthresh = self.cwnd;
    }

    /// RFC 9002 persistent congestion: back to the minimum window.
    pub fn persistent_congestion(&mut self) {
        self.cwnd = self.min_window();
        self.acked_in_ca = 0;
    }

    /// An outside controller lowers the window (never raises it).
    pub fn impose(&mut self, window: u64) {
        self.cwnd = window.clamp(self.min_window(), self.cwnd.max(self.min_window()));
    }

    /// Stats with window and ssthresh filled in.
    pub fn stats(&self, details: Vec<(&'static str, StatValue)>) -> Stats {
        Stats {
            window: self.cwnd,
            ssthresh: (self.ssthresh != u64::MAX).then_some(self.ssthresh),
            pacing_rate: None,
            details,
        }
    }
}

/// NewReno congestion control.
#[derive(Clone, Debug)]
pub struct NewReno {
    config: NewRenoConfig,
    core: RenoCore,
}

impl NewReno {
    /// NewReno with `config` for a sender described by `env`.
    pub fn new(config: NewRenoConfig, env: &Env) -> Self {
        NewReno {
            config,
            core: RenoCore::new(env),
        }
    }
}

impl CongestionControl for NewReno {
    fn name(&self) -> &'static str {
        "newreno"
    }

    fn variant(&self) -> VariantId {
        VariantId::NEWRENO
    }

    fn on_ack(&mut self, _now: Time, ack: &Ack) {
        if !self.core.may_grow(ack) {
            return;
        }
        self.core.grow_reno(ack.bytes);
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        if self.core.enter_recovery(now, event) {
            self.core
                .reduce_to((self.core.cwnd as f64 * self.config.beta) as u64);
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
        self.core.stats(Vec::new())
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}
