//! H-TCP (D. Leith, R. Shorten, "H-TCP: TCP for high-speed and long-distance
//! networks", PFLDnet 2004; draft-leith-tcp-htcp-06), with the refinements
//! of Linux's `tcp_htcp`.
//!
//! The increase depends on `Δ`, the time since the last congestion event:
//!
//! ```text
//! α(Δ) = 1                                       Δ <= Δ_L
//!      = 1 + 10 (Δ - Δ_L) + ((Δ - Δ_L) / 2)^2    Δ >  Δ_L          (Δ_L = 1 s)
//! α    = 2 (1 - β) * max(1, α(Δ) * clamp(RTT_min / 100 ms, 0.1, 2))   (RTT scaling)
//! ```
//!
//! and each ACK in congestion avoidance adds `α * mss * acked / cwnd` (α
//! segments per RTT). So for the first second after a loss H-TCP is Reno-like
//! and then grows quadratically in `Δ`. With `rtt_scaling=off` the RTT factor
//! is 1.
//!
//! **Adaptive backoff**: on a congestion event `cwnd = ssthresh = β * cwnd` with
//! `β = clamp(RTT_min / RTT_max, beta_min, beta_max)` (0.5 .. 0.8), where the
//! RTTs are smoothed RTTs (`RTT_max` since the last backoff, accepting rises of
//! at most 20 ms per sample, as Linux does). `β = 0.5` instead when
//! (`bandwidth_switch`) the achieved throughput `B` (per-RTT delivery rate,
//! smoothed `B = (3 B + sample) / 4`, maximum over the epoch) changed by more
//! than 20 % since the previous congestion event, on the first event, or when
//! `RTT_min <= 10 ms` (Linux's rule: the ratio is meaningless on short paths).
//! `Δ` restarts at every congestion event (and at the first ACK).

use std::time::Duration;

use crate::classic::Fraction;
use crate::newreno::RenoCore;
use crate::registry::{Algorithm, Env};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{Ack, CongestionControl, CongestionEvent, StatValue, Stats, Time, VariantId};

/// H-TCP's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HtcpConfig {
    /// `Δ_L`: low-speed period after a congestion event, seconds.
    pub delta_l: f64,
    /// Smallest backoff factor.
    pub beta_min: f64,
    /// Largest backoff factor.
    pub beta_max: f64,
    /// Scale α by `RTT_min / rtt_ref`.
    pub rtt_scaling: bool,
    /// Reference RTT for RTT scaling, seconds.
    pub rtt_ref: f64,
    /// Fall back to `beta_min` when throughput changed by > 20 %.
    pub bandwidth_switch: bool,
}

const PARAMS: &[Param] = &[
    Param {
        name: "delta_l",
        kind: Kind::Duration,
        default: "1s",
        help: "Δ_L: Reno-like period after a congestion event",
    },
    Param {
        name: "beta_min",
        kind: Kind::Float {
            min: 0.1,
            max: 0.95,
        },
        default: "0.5",
        help: "smallest backoff factor",
    },
    Param {
        name: "beta_max",
        kind: Kind::Float {
            min: 0.1,
            max: 0.95,
        },
        default: "0.8",
        help: "largest backoff factor",
    },
    Param {
        name: "rtt_scaling",
        kind: Kind::Bool,
        default: "on",
        help: "scale α by RTT_min / rtt_ref (clamped 0.1..2)",
    },
    Param {
        name: "rtt_ref",
        kind: Kind::Duration,
        default: "100ms",
        help: "reference RTT for RTT scaling",
    },
    Param {
        name: "bandwidth_switch",
        kind: Kind::Bool,
        default: "on",
        help: "β = beta_min after a >20% throughput change",
    },
];

impl HtcpConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(HtcpConfig {
            delta_l: args.duration("delta_l")?.as_secs_f64(),
            beta_min: args.float("beta_min")?,
            beta_max: args.float("beta_max")?,
            rtt_scaling: args.bool("rtt_scaling")?,
            rtt_ref: args.duration("rtt_ref")?.as_secs_f64(),
            bandwidth_switch: args.bool("bandwidth_switch")?,
        })
    }

    /// `α(Δ)` before RTT scaling and the `2 (1 - β)` factor; `delta` in seconds.
    pub fn alpha_of_delta(&self, delta: f64) -> f64 {
        if delta <= self.delta_l {
            1.0
        } else {
            let d = delta - self.delta_l;
            1.0 + 10.0 * d + (d / 2.0) * (d / 2.0)
        }
    }
}

impl Default for HtcpConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("htcp", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "htcp",
    variant: VariantId::HTCP,
    summary: "increase grows with time since the last loss; backoff RTT_min/RTT_max in 0.5..0.8",
    source: "Leith & Shorten, H-TCP (PFLDnet 2004, draft-leith-tcp-htcp); Linux tcp_htcp",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| Ok(Box::new(Htcp::new(HtcpConfig::from_args(args)?, env))),
};

/// H-TCP congestion control.
#[derive(Clone, Debug)]
pub struct Htcp {
    config: HtcpConfig,
    core: RenoCore,
    carry: Fraction,
    last_congestion: Option<Time>,
    beta: f64,
    /// Whether the RTT-ratio backoff is enabled (cleared by a bandwidth switch).
    mode_switch: bool,
    rtt_min: Duration,
    rtt_max: Duration,
    /// Throughput measurement: interval start and bytes since.
    interval_start: Option<Time>,
    interval_bytes: u64,
    /// Smoothed throughput, bytes/s, its maximum this epoch and the previous epoch's.
    bi: f64,
    max_b: f64,
    old_max_b: f64,
    /// α used on the latest ACK (for stats).
    last_alpha: f64,
}

impl Htcp {
    /// H-TCP with `config` for a sender described by `env`.
    pub fn new(config: HtcpConfig, env: &Env) -> Self {
        Htcp {
            config,
            core: RenoCore::new(env),
            carry: Fraction::default(),
            last_congestion: None,
            beta: config.beta_min,
            mode_switch: false,
            rtt_min: Duration::MAX,
            rtt_max: Duration::ZERO,
            interval_start: None,
            interval_bytes: 0,
            bi: 0.0,
            max_b: 0.0,
            old_max_b: 0.0,
            last_alpha: 1.0,
        }
    }

    /// The increase α in segments per RTT at `now` (including `2 (1 - β)`).
    pub fn alpha(&self, now: Time) -> f64 {
        let delta = self
            .last_congestion
            .map_or(0.0, |t| now.saturating_since(t).as_secs_f64());
        let mut factor = self.config.alpha_of_delta(delta);
        if self.config.rtt_scaling && self.rtt_min != Duration::MAX && !self.rtt_min.is_zero() {
            let scale = (self.rtt_min.as_secs_f64() / self.config.rtt_ref).clamp(0.1, 2.0);
            factor = (factor * scale).max(1.0);
        }
        2.0 * (1.0 - self.beta) * factor
    }

    /// The current backoff factor β.
    pub fn beta(&self) -> f64 {
        self.beta
    }

    fn measure(&mut self, now: Time, ack: &Ack) {
        let srtt = ack.rtt.smoothed;
        if !srtt.is_zero() {
            self.rtt_min = self.rtt_min.min(srtt);
            if !self.core.in_recovery(ack.sent_time) {
                if self.rtt_max < self.rtt_min {
                    self.rtt_max = self.rtt_min;
                }
                if srtt > self.rtt_max && srtt <= self.rtt_max + Duration::from_millis(20) {
                    self.rtt_max = srtt;
                }
            }
        }
        let start = *self.interval_start.get_or_insert(now);
        self.interval_bytes += ack.bytes;
        let elapsed = now.saturating_since(start);
        if self.rtt_min != Duration::MAX && elapsed >= self.rtt_min && !elapsed.is_zero() {
            let sample = self.interval_bytes as f64 / elapsed.as_secs_f64();
            self.bi = if self.bi == 0.0 {
                sample
            } else {
                (3.0 * self.bi + sample) / 4.0
            };
            self.max_b = self.max_b.max(self.bi);
            self.interval_start = Some(now);
            self.interval_bytes = 0;
        }
    }

    fn update_beta(&mut self) {
        if self.config.bandwidth_switch {
            let (max_b, old) = (self.max_b, self.old_max_b);
            self.old_max_b = max_b;
            self.max_b = self.bi;
            if !(max_b >= 0.8 * old && max_b <= 1.2 * old) || old == 0.0 {
                self.beta = self.config.beta_min;
                self.mode_switch = false;
                return;
            }
        }
        if self.mode_switch && self.rtt_min > Duration::from_millis(10) && !self.rtt_max.is_zero() {
            let ratio = self.rtt_min.as_secs_f64() / self.rtt_max.as_secs_f64();
            self.beta = ratio.clamp(
                self.config.beta_min,
                self.config.beta_max.max(self.config.beta_min),
            );
        } else {
            self.beta = self.config.beta_min;
            self.mode_switch = true;
        }
    }
}

impl CongestionControl for Htcp {
    fn name(&self) -> &'static str {
        "htcp"
    }

    fn variant(&self) -> VariantId {
        VariantId::HTCP
    }

    fn on_ack(&mut self, now: Time, ack: &Ack) {
        self.last_congestion.get_or_insert(now);
        self.measure(now, ack);
        let rest = self.core.congestion_avoidance_bytes(ack);
        if rest == 0 {
            return;
        }
        let alpha = self.alpha(now);
        self.last_alpha = alpha;
        let bytes = alpha * self.core.mss as f64 * rest as f64 / self.core.cwnd as f64;
        self.carry.grow(&mut self.core.cwnd, bytes);
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        if self.core.enter_recovery(now, event) {
            self.update_beta();
            self.core
                .reduce_to((self.core.cwnd as f64 * self.beta) as u64);
            self.carry.reset();
            self.last_congestion = Some(now);
            // RTT_max is measured afresh in each congestion epoch.
            self.rtt_max = if self.rtt_min == Duration::MAX {
                Duration::ZERO
            } else {
                self.rtt_min
            };
        }
        if event.persistent_congestion {
            self.core.persistent_congestion();
            self.last_congestion = Some(now);
        }
    }

    fn on_mtu_change(&mut self, _now: Time, mss: u64) {
        self.core.set_mss(mss);
    }

    fn impose_window(&mut self, _now: Time, window: u64) {
        self.core.impose(window);
        self.carry.reset();
    }

    fn window(&self) -> u64 {
        self.core.cwnd
    }

    fn stats(&self) -> Stats {
        let secs = |d: Duration| {
            if d == Duration::MAX {
                0.0
            } else {
                d.as_secs_f64()
            }
        };
        self.core.stats(vec![
            ("alpha", StatValue::Num(self.last_alpha)),
            ("beta", StatValue::Num(self.beta)),
            ("rtt_min_s", StatValue::Num(secs(self.rtt_min))),
            ("rtt_max_s", StatValue::Num(secs(self.rtt_max))),
            ("throughput_Bps", StatValue::Num(self.bi)),
        ])
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}
