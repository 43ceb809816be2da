//! HighSpeed TCP, RFC 3649 (S. Floyd, 2003).
//!
//! Standard TCP while the window `w` (in segments) is at most `Low_Window`;
//! above it, the response function `w = 0.12 / p^0.835` (for the default
//! parameters) sets per-RTT increase `a(w)` and decrease fraction `b(w)`
//! (RFC 3649 §5, with `W = w`):
//!
//! ```text
//! p(w) = exp( (ln w - ln Low_Window) / (ln High_Window - ln Low_Window)
//!             * (ln High_P - ln Low_P) + ln Low_P )
//! b(w) = (High_Decrease - 0.5) * (ln w - ln Low_Window)
//!             / (ln High_Window - ln Low_Window) + 0.5
//! a(w) = w^2 * p(w) * 2 * b(w) / (2 - b(w))
//! ```
//!
//! - **Congestion avoidance**: `cwnd += a(w) * mss * acked / cwnd`, i.e. `a(w)`
//!   segments per RTT.
//! - **Congestion event**: `ssthresh = cwnd = (1 - b(w)) * cwnd` once per
//!   recovery period (RFC 3649 §4).
//! - Below `Low_Window`: `a = 1`, `b = 0.5` (Reno). Above `High_Window` the
//!   formulas are extrapolated (the RFC leaves this open; Linux caps the
//!   table at `High_Window`, we cap `w` in the formulas likewise).
//! - Slow start is standard (RFC 3742 Limited Slow-Start is not implemented).
//!
//! Defaults (RFC 3649 §5): `Low_Window = 38`, `High_Window = 83000`,
//! `High_P = 1e-7`, `Low_P = 1e-3` (Standard TCP's loss rate at 38 segments),
//! `High_Decrease = 0.1`. With these, `a(83000) ≈ 72` and `b(83000) = 0.1`.
//! `a` and `b` are recomputed only when the window changes by a whole segment.

use crate::classic::Fraction;
use crate::newreno::RenoCore;
use crate::registry::{Algorithm, Env};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{Ack, CongestionControl, CongestionEvent, StatValue, Stats, Time, VariantId};

/// HighSpeed TCP's parameters (RFC 3649 §5).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HighSpeedConfig {
    /// `Low_Window`, segments: standard TCP up to here.
    pub low_window: f64,
    /// `High_Window`, segments.
    pub high_window: f64,
    /// `High_P`: loss rate at which the window is `High_Window`.
    pub high_p: f64,
    /// `Low_P`: loss rate at which the window is `Low_Window`.
    pub low_p: f64,
    /// `High_Decrease`: `b(High_Window)`.
    pub high_decrease: f64,
}

const PARAMS: &[Param] = &[
    Param {
        name: "low_window",
        kind: Kind::Float { min: 2.0, max: 1e6 },
        default: "38",
        help: "Low_Window (segments): Reno below",
    },
    Param {
        name: "high_window",
        kind: Kind::Float { min: 3.0, max: 1e9 },
        default: "83000",
        help: "High_Window (segments)",
    },
    Param {
        name: "high_p",
        kind: Kind::Float {
            min: 1e-15,
            max: 0.5,
        },
        default: "1e-7",
        help: "High_P: loss rate at High_Window",
    },
    Param {
        name: "low_p",
        kind: Kind::Float {
            min: 1e-15,
            max: 0.5,
        },
        default: "1e-3",
        help: "Low_P: loss rate at Low_Window",
    },
    Param {
        name: "high_decrease",
        kind: Kind::Float {
            min: 0.01,
            max: 0.5,
        },
        default: "0.1",
        help: "High_Decrease: b(High_Window)",
    },
];

impl HighSpeedConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(HighSpeedConfig {
            low_window: args.float("low_window")?,
            high_window: args.float("high_window")?,
            high_p: args.float("high_p")?,
            low_p: args.float("low_p")?,
            high_decrease: args.float("high_decrease")?,
        })
    }

    /// Whether `w` segments is in the standard-TCP region (also everywhere
    /// if `high_window <= low_window`).
    fn standard(&self, w: f64) -> bool {
        w <= self.low_window || self.high_window <= self.low_window
    }

    /// `b(w)`: the decrease fraction at a window of `w` segments.
    pub fn b(&self, w: f64) -> f64 {
        if self.standard(w) {
            return 0.5;
        }
        let w = w.min(self.high_window);
        (self.high_decrease - 0.5) * self.position(w) + 0.5
    }

    /// `p(w)`: the loss rate at which the response function gives `w` segments.
    pub fn p(&self, w: f64) -> f64 {
        let w = w.max(self.low_window).min(self.high_window);
        (self.position(w) * (self.high_p.ln() - self.low_p.ln()) + self.low_p.ln()).exp()
    }

    /// `a(w)`: the increase in segments per RTT at a window of `w` segments.
    pub fn a(&self, w: f64) -> f64 {
        if self.standard(w) {
            return 1.0;
        }
        let w = w.min(self.high_window);
        let b = self.b(w);
        (w * w * self.p(w) * 2.0 * b / (2.0 - b)).max(1.0)
    }

    /// Where `w` sits between the windows on a log scale (0 at Low, 1 at High).
    fn position(&self, w: f64) -> f64 {
        (w.ln() - self.low_window.ln()) / (self.high_window.ln() - self.low_window.ln())
    }
}

impl Default for HighSpeedConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("highspeed", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "highspeed",
    variant: VariantId::HIGHSPEED,
    summary: "HighSpeed TCP: a(w) segments per RTT, decrease b(w), Reno below 38 segments",
    source: "RFC 3649",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| {
        Ok(Box::new(HighSpeed::new(
            HighSpeedConfig::from_args(args)?,
            env,
        )))
    },
};

/// HighSpeed TCP congestion control.
#[derive(Clone, Debug)]
pub struct HighSpeed {
    config: HighSpeedConfig,
    core: RenoCore,
    carry: Fraction,
    /// Window (whole segments) for which `a` and `b` were computed.
    cached_for: u64,
    a: f64,
    b: f64,
}

impl HighSpeed {
    /// HighSpeed TCP with `config` for a sender described by `env`.
    pub fn new(config: HighSpeedConfig, env: &Env) -> Self {
        HighSpeed {
            config,
            core: RenoCore::new(env),
            carry: Fraction::default(),
            cached_for: 0,
            a: 1.0,
            b: 0.5,
        }
    }

    /// The configuration (for `a(w)`, `b(w)`).
    pub fn config(&self) -> &HighSpeedConfig {
        &self.config
    }

    fn refresh(&mut self) {
        let w = self.core.cwnd / self.core.mss.max(1);
        if w != self.cached_for {
            self.cached_for = w;
            self.a = self.config.a(w as f64);
            self.b = self.config.b(w as f64);
        }
    }
}

impl CongestionControl for HighSpeed {
    fn name(&self) -> &'static str {
        "highspeed"
    }

    fn variant(&self) -> VariantId {
        VariantId::HIGHSPEED
    }

    fn on_ack(&mut self, _now: Time, ack: &Ack) {
        let rest = self.core.congestion_avoidance_bytes(ack);
        if rest > 0 {
            self.refresh();
            let inc = self.a * self.core.mss as f64 * rest as f64 / self.core.cwnd as f64;
            self.carry.grow(&mut self.core.cwnd, inc);
        }
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        if self.core.enter_recovery(now, event) {
            self.refresh();
            self.core
                .reduce_to((self.core.cwnd as f64 * (1.0 - self.b)) as u64);
            self.carry.reset();
        }
        if event.persistent_congestion {
            self.core.persistent_congestion();
        }
    }

    fn on_mtu_change(&mut self, _now: Time, mss: u64) {
        self.core.set_mss(mss);
        self.cached_for = 0;
    }

    fn impose_window(&mut self, _now: Time, window: u64) {
        self.core.impose(window);
        self.carry.reset();
    }

    fn window(&self) -> u64 {
        self.core.cwnd
    }

    fn stats(&self) -> Stats {
        let w = self.core.cwnd as f64 / self.core.mss.max(1) as f64;
        self.core.stats(vec![
            ("a_segments_per_rtt", StatValue::Num(self.config.a(w))),
            ("b_decrease", StatValue::Num(self.config.b(w))),
        ])
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}
