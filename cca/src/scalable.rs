//! Scalable TCP (T. Kelly, "Scalable TCP: Improving Performance in HighSpeed
//! Wide Area Networks", ACM CCR 33(2), 2003).
//!
//! Multiplicative increase, multiplicative decrease: the time to recover from
//! a loss is independent of the window.
//!
//! - **Congestion avoidance**: `cwnd += a * acked` (in bytes; `a = 0.01`), i.e.
//!   0.01 segment per acknowledged segment, so the window grows 1 % per RTT.
//! - **Congestion event**: `ssthresh = cwnd = (1 - b) * cwnd` with `b = 0.125`,
//!   once per recovery period.
//! - **Legacy region**: while `cwnd <= low_window` segments (Kelly's
//!   `lwnd = 16`) the flow behaves as Reno (+1 segment per RTT, halve on loss).
//!   (Linux's `tcp_scalable` instead grows by `max(Reno, a)` below 100
//!   segments; we follow the paper.)
//! - Slow start is standard.

use crate::classic::Fraction;
use crate::newreno::RenoCore;
use crate::registry::{Algorithm, Env};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{Ack, CongestionControl, CongestionEvent, StatValue, Stats, Time, VariantId};

/// Scalable TCP's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScalableConfig {
    /// `a`: window increase per acknowledged byte.
    pub a: f64,
    /// `b`: fraction of the window removed on a congestion event.
    pub b: f64,
    /// Legacy window, segments: Reno at or below it.
    pub low_window: f64,
}

const PARAMS: &[Param] = &[
    Param {
        name: "a",
        kind: Kind::Float {
            min: 0.0001,
            max: 1.0,
        },
        default: "0.01",
        help: "increase per acknowledged segment (segments)",
    },
    Param {
        name: "b",
        kind: Kind::Float {
            min: 0.01,
            max: 0.9,
        },
        default: "0.125",
        help: "fraction of cwnd removed on a congestion event",
    },
    Param {
        name: "low_window",
        kind: Kind::Float { min: 0.0, max: 1e9 },
        default: "16",
        help: "legacy window lwnd (segments): Reno at or below",
    },
];

impl ScalableConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(ScalableConfig {
            a: args.float("a")?,
            b: args.float("b")?,
            low_window: args.float("low_window")?,
        })
    }
}

impl Default for ScalableConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("scalable", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "scalable",
    variant: VariantId::SCALABLE,
    summary: "MIMD: +1% of a segment per ACK, -12.5% per loss event above 16 segments",
    source: "Kelly, Scalable TCP, ACM CCR 2003",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| {
        Ok(Box::new(Scalable::new(
            ScalableConfig::from_args(args)?,
            env,
        )))
    },
};

/// Scalable TCP congestion control.
#[derive(Clone, Debug)]
pub struct Scalable {
    config: ScalableConfig,
    core: RenoCore,
    carry: Fraction,
}

impl Scalable {
    /// Scalable TCP with `config` for a sender described by `env`.
    pub fn new(config: ScalableConfig, env: &Env) -> Self {
        Scalable {
            config,
            core: RenoCore::new(env),
            carry: Fraction::default(),
        }
    }

    fn legacy(&self) -> bool {
        (self.core.cwnd as f64) <= self.config.low_window * self.core.mss as f64
    }
}

impl CongestionControl for Scalable {
    fn name(&self) -> &'static str {
        "scalable"
    }

    fn variant(&self) -> VariantId {
        VariantId::SCALABLE
    }

    fn on_ack(&mut self, _now: Time, ack: &Ack) {
        let rest = self.core.congestion_avoidance_bytes(ack);
        if rest == 0 {
            return;
        }
        if self.legacy() {
            self.core.reno_increase(rest);
        } else {
            self.carry
                .grow(&mut self.core.cwnd, self.config.a * rest as f64);
        }
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        if self.core.enter_recovery(now, event) {
            let keep = if self.legacy() {
                0.5
            } else {
                1.0 - self.config.b
            };
            self.core.reduce_to((self.core.cwnd as f64 * keep) as u64);
            self.carry.reset();
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
        self.carry.reset();
    }

    fn window(&self) -> u64 {
        self.core.cwnd
    }

    fn stats(&self) -> Stats {
        self.core.stats(vec![(
            "region",
            StatValue::Text(if self.legacy() { "legacy" } else { "scalable" }),
        )])
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}
