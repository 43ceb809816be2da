//! TCP Hybla (C. Caini, R. Firrincieli, "TCP Hybla: a TCP enhancement for
//! heterogeneous networks", International Journal of Satellite Communications
//! and Networking 22(5), 2004; Linux `tcp_hybla`).
//!
//! Hybla makes a long-RTT flow's window grow, per unit of *time*, as fast as a
//! Reno flow with the reference RTT `RTT0 = 25 ms`:
//!
//! ```text
//! rho = max(RTT_min / RTT0, 1)
//! slow start:              cwnd += (2^rho - 1) segments per acknowledged segment
//! congestion avoidance:    cwnd += rho^2 * mss * acked / cwnd
//! ```
//!
//! so the window grows `rho^2` segments per RTT and the *rate* `w / RTT` grows
//! `rho^2 / RTT = RTT / RTT0^2` segments/s per RTT, i.e. `1 / RTT0^2`
//! segments/s per second, whatever the RTT. `RTT_min` is the sender's minimum
//! RTT (the propagation delay; Linux uses the minimum smoothed RTT). Like
//! Linux, the slow-start exponent is capped at 16. Loss reaction is Reno's
//! (`cwnd = ssthresh = cwnd / 2`, once per recovery period).

use std::time::Duration;

use crate::classic::Fraction;
use crate::newreno::RenoCore;
use crate::registry::{Algorithm, Env};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{Ack, CongestionControl, CongestionEvent, StatValue, Stats, Time, VariantId};

/// Hybla's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HyblaConfig {
    /// `RTT0`, the reference RTT.
    pub rtt0: Duration,
    /// Window multiplier on a congestion event (Reno's 0.5).
    pub beta: f64,
}

const PARAMS: &[Param] = &[
    Param {
        name: "rtt0",
        kind: Kind::Duration,
        default: "25ms",
        help: "reference RTT RTT0",
    },
    Param {
        name: "beta",
        kind: Kind::Float {
            min: 0.1,
            max: 0.95,
        },
        default: "0.5",
        help: "window multiplier on a congestion event",
    },
];

impl HyblaConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(HyblaConfig {
            rtt0: args.duration("rtt0")?.max(Duration::from_micros(1)),
            beta: args.float("beta")?,
        })
    }
}

impl Default for HyblaConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("hybla", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "hybla",
    variant: VariantId::HYBLA,
    summary: "rho = RTT/25ms: slow start +2^rho-1, avoidance +rho^2 per RTT (RTT-free rate growth)",
    source: "Caini & Firrincieli, TCP Hybla, IJSCN 2004; Linux tcp_hybla",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| Ok(Box::new(Hybla::new(HyblaConfig::from_args(args)?, env))),
};

/// Largest slow-start exponent (as Linux).
const MAX_SS_EXPONENT: f64 = 16.0;

/// Hybla congestion control.
#[derive(Clone, Debug)]
pub struct Hybla {
    config: HyblaConfig,
    core: RenoCore,
    carry: Fraction,
    rho: f64,
}

impl Hybla {
    /// Hybla with `config` for a sender described by `env`.
    pub fn new(config: HyblaConfig, env: &Env) -> Self {
        Hybla {
            config,
            core: RenoCore::new(env),
            carry: Fraction::default(),
            rho: 1.0,
        }
    }

    /// `rho = max(RTT_min / RTT0, 1)`.
    pub fn rho(&self) -> f64 {
        self.rho
    }
}

impl CongestionControl for Hybla {
    fn name(&self) -> &'static str {
        "hybla"
    }

    fn variant(&self) -> VariantId {
        VariantId::HYBLA
    }

    fn on_ack(&mut self, _now: Time, ack: &Ack) {
        if !ack.rtt.min.is_zero() {
            self.rho = (ack.rtt.min.as_secs_f64() / self.config.rtt0.as_secs_f64()).max(1.0);
        }
        if !self.core.may_grow(ack) {
            return;
        }
        let mut rest = ack.bytes as f64;
        if self.core.in_slow_start() {
            let inc = (self.rho.min(MAX_SS_EXPONENT).exp2() - 1.0) * rest;
            let room = self.core.ssthresh.saturating_sub(self.core.cwnd) as f64;
            if inc <= room {
                self.carry.grow(&mut self.core.cwnd, inc);
                return;
            }
            self.core.cwnd = self.core.ssthresh;
            rest *= 1.0 - room / inc;
        }
        let mss = self.core.mss as f64;
        let inc = self.rho * self.rho * mss * rest / self.core.cwnd as f64;
        self.carry.grow(&mut self.core.cwnd, inc);
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        if self.core.enter_recovery(now, event) {
            self.core
                .reduce_to((self.core.cwnd as f64 * self.config.beta) as u64);
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
        self.core.stats(vec![("rho", StatValue::Num(self.rho))])
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}
