//! BIC TCP (L. Xu, K. Harfoush, I. Rhee, "Binary Increase Congestion Control
//! for Fast, Long Distance Networks", INFOCOM 2004), with the constants of
//! Linux's `tcp_bic`.
//!
//! Windows in segments; `W_max` is the window at the last congestion event;
//! the increase per RTT is:
//!
//! ```text
//! w <= low_window:                 Reno: 1
//! w <  W_max (binary search):      dist = (W_max - w) / B
//!                                  inc = Smax           if dist > Smax
//!                                      = B / smooth     if dist <= 1
//!                                      = dist           otherwise
//! w >= W_max (max probing):        inc = B / smooth     if w < W_max + B
//!                                      = (w - W_max) / (B - 1)   if < W_max + Smax (B - 1)
//!                                      = Smax           otherwise
//! inc = max(inc, Smin)
//! ```
//!
//! and each ACK adds `inc * mss * acked / cwnd`. So after a loss the window
//! jumps towards the midpoint of `[cwnd, W_max]` (limited to `Smax` per RTT),
//! halving the remaining distance each step and flattening out at `W_max`;
//! past it, it probes slowly, then accelerates (the inverse search).
//!
//! **Congestion event** (once per recovery period): with fast convergence,
//! `W_max = w (1 + beta) / 2` if `w < W_max`, else `W_max = w`; then
//! `cwnd = ssthresh = beta * cwnd` (`0.5 * cwnd` at or below `low_window`).
//!
//! Defaults (Linux `tcp_bic`): `B = 4`, `Smax = 16`, `Smin = 0.01`,
//! `beta = 819/1024 ≈ 0.8`, `low_window = 14`, `smooth_part = 20`, fast
//! convergence on. (The paper's examples used `Smax = 32` and `beta = 0.875`.)

use crate::classic::Fraction;
use crate::newreno::RenoCore;
use crate::registry::{Algorithm, Env};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{Ack, CongestionControl, CongestionEvent, StatValue, Stats, Time, VariantId};

/// BIC's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BicConfig {
    /// `B`: binary search divisor.
    pub b: f64,
    /// `Smax`: largest increase per RTT, segments.
    pub smax: f64,
    /// `Smin`: smallest increase per RTT, segments.
    pub smin: f64,
    /// Window multiplier on a congestion event.
    pub beta: f64,
    /// Reno at or below this window, segments.
    pub low_window: f64,
    /// Near `W_max` the increase is `B / smooth_part` per RTT.
    pub smooth_part: f64,
    /// Fast convergence.
    pub fast_convergence: bool,
}

const PARAMS: &[Param] = &[
    Param {
        name: "b",
        kind: Kind::Float {
            min: 1.5,
            max: 100.0,
        },
        default: "4",
        help: "binary search divisor B",
    },
    Param {
        name: "smax",
        kind: Kind::Float { min: 0.1, max: 1e6 },
        default: "16",
        help: "largest increase per RTT (segments)",
    },
    Param {
        name: "smin",
        kind: Kind::Float {
            min: 0.0001,
            max: 100.0,
        },
        default: "0.01",
        help: "smallest increase per RTT (segments)",
    },
    Param {
        name: "beta",
        kind: Kind::Float {
            min: 0.1,
            max: 0.95,
        },
        default: "0.8",
        help: "window multiplier on a congestion event (Linux 819/1024)",
    },
    Param {
        name: "low_window",
        kind: Kind::Float { min: 0.0, max: 1e9 },
        default: "14",
        help: "Reno at or below this window (segments)",
    },
    Param {
        name: "smooth_part",
        kind: Kind::Float { min: 1.0, max: 1e6 },
        default: "20",
        help: "increase B/smooth_part per RTT next to W_max",
    },
    Param {
        name: "fast_convergence",
        kind: Kind::Bool,
        default: "on",
        help: "lower W_max when a loss comes before regaining it",
    },
];

impl BicConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(BicConfig {
            b: args.float("b")?,
            smax: args.float("smax")?,
            smin: args.float("smin")?,
            beta: args.float("beta")?,
            low_window: args.float("low_window")?,
            smooth_part: args.float("smooth_part")?,
            fast_convergence: args.bool("fast_convergence")?,
        })
    }

    /// Increase per RTT, segments, at window `w` with target `w_max` (both segments).
    pub fn increase(&self, w: f64, w_max: f64) -> f64 {
        if w <= self.low_window {
            return 1.0;
        }
        let b = self.b;
        let inc = if w < w_max {
            let dist = (w_max - w) / b;
            if dist > self.smax {
                self.smax
            } else if dist <= 1.0 {
                b / self.smooth_part
            } else {
                dist
            }
        } else if w < w_max + b {
            b / self.smooth_part
        } else if w < w_max + self.smax * (b - 1.0) {
            (w - w_max) / (b - 1.0)
        } else {
            self.smax
        };
        inc.max(self.smin)
    }
}

impl Default for BicConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("bic", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "bic",
    variant: VariantId::BIC,
    summary: "binary search towards the last W_max (at most Smax per RTT), then max probing",
    source: "Xu, Harfoush, Rhee, BIC TCP, INFOCOM 2004; Linux tcp_bic",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| Ok(Box::new(Bic::new(BicConfig::from_args(args)?, env))),
};

/// BIC congestion control.
#[derive(Clone, Debug)]
pub struct Bic {
    config: BicConfig,
    core: RenoCore,
    carry: Fraction,
    /// Window at the last congestion event, segments (0 before the first).
    w_max: f64,
}

impl Bic {
    /// BIC with `config` for a sender described by `env`.
    pub fn new(config: BicConfig, env: &Env) -> Self {
        Bic {
            config,
            core: RenoCore::new(env),
            carry: Fraction::default(),
            w_max: 0.0,
        }
    }

    /// `W_max`, segments.
    pub fn w_max(&self) -> f64 {
        self.w_max
    }

    fn segments(&self) -> f64 {
        self.core.cwnd as f64 / self.core.mss as f64
    }
}

impl CongestionControl for Bic {
    fn name(&self) -> &'static str {
        "bic"
    }

    fn variant(&self) -> VariantId {
        VariantId::BIC
    }

    fn on_ack(&mut self, _now: Time, ack: &Ack) {
        let rest = self.core.congestion_avoidance_bytes(ack);
        if rest == 0 {
            return;
        }
        let inc = self.config.increase(self.segments(), self.w_max);
        let bytes = inc * self.core.mss as f64 * rest as f64 / self.core.cwnd as f64;
        self.carry.grow(&mut self.core.cwnd, bytes);
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        if self.core.enter_recovery(now, event) {
            let w = self.segments();
            self.w_max = if self.config.fast_convergence && w < self.w_max {
                w * (1.0 + self.config.beta) / 2.0
            } else {
                w
            };
            let keep = if w <= self.config.low_window {
                0.5
            } else {
                self.config.beta
            };
            self.core.reduce_to((self.core.cwnd as f64 * keep) as u64);
            self.carry.reset();
        }
        if event.persistent_congestion {
            self.core.persistent_congestion();
        }
    }

    fn on_mtu_change(&mut self, _now: Time, mss: u64) {
        self.w_max *= self.core.mss as f64 / mss as f64;
        self.core.set_mss(mss);
    }

    fn impose_window(&mut self, _now: Time, window: u64) {
        // W_max stays: BIC searches back towards it at most Smax per RTT.
        self.core.impose(window);
        self.carry.reset();
    }

    fn window(&self) -> u64 {
        self.core.cwnd
    }

    fn stats(&self) -> Stats {
        self.core.stats(vec![
            ("w_max_segments", StatValue::Num(self.w_max)),
            (
                "increase_per_rtt",
                StatValue::Num(self.config.increase(self.segments(), self.w_max)),
            ),
        ])
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}
