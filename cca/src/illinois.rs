//! TCP Illinois (S. Liu, T. Başar, R. Srikant, "TCP-Illinois: A loss- and
//! delay-based congestion control algorithm for high-speed networks",
//! VALUETOOLS 2006; Linux `tcp_illinois`).
//!
//! Loss decides *when* to back off, queueing delay decides *how much* to
//! grow and back off. Once per RTT, with `d_a` the average queueing delay of
//! the round (mean RTT sample minus the minimum RTT ever seen) and `d_m` the
//! largest queueing delay seen (maximum RTT minus minimum RTT):
//!
//! ```text
//! d1 = d_m / 100,  d2 = d_m / 10,  d3 = 8 d_m / 10
//! alpha = alpha_max                                   d_a <= d1 (after theta such rounds)
//!       = k1 / (k2 + d_a)                             otherwise
//!         k1 = (d_m - d1) alpha_min alpha_max / (alpha_max - alpha_min)
//!         k2 = (d_m - d1) alpha_min / (alpha_max - alpha_min) - d1
//! beta  = beta_min                                    d_a <= d2
//!       = beta_min + (beta_max - beta_min)(d_a - d2)/(d3 - d2)   d2 < d_a < d3
//!       = beta_max                                    d_a >= d3
//! ```
//!
//! so `alpha` falls from `alpha_max` at `d1` to `alpha_min` at `d_m`
//! (hyperbolically), and `beta` rises linearly from `beta_min` to `beta_max`.
//! Congestion avoidance adds `alpha * mss * acked / cwnd` per ACK; a congestion
//! event sets `cwnd = ssthresh = (1 - beta) cwnd`. Below `win_thresh` segments
//! `alpha = 1` and `beta = 0.5` (Reno). `alpha_max` is used only after `theta`
//! consecutive low-delay rounds. Persistent congestion resets `alpha`/`beta`
//! to Reno's. Slow start is standard.
//!
//! Defaults (paper and Linux): `alpha_min = 0.3`, `alpha_max = 10`,
//! `beta_min = 0.125`, `beta_max = 0.5`, `win_thresh = 15`, `theta = 5`.

use std::time::Duration;

use crate::classic::{Fraction, RoundRtt, Rounds};
use crate::newreno::RenoCore;
use crate::registry::{Algorithm, Env};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{Ack, CongestionControl, CongestionEvent, StatValue, Stats, Time, VariantId};

/// Illinois's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IllinoisConfig {
    /// Smallest increase per RTT, segments.
    pub alpha_min: f64,
    /// Largest increase per RTT, segments.
    pub alpha_max: f64,
    /// Smallest decrease fraction.
    pub beta_min: f64,
    /// Largest decrease fraction.
    pub beta_max: f64,
    /// Reno below this window, segments.
    pub win_thresh: f64,
    /// Low-delay rounds before `alpha_max`.
    pub theta: u64,
}

const PARAMS: &[Param] = &[
    Param {
        name: "alpha_min",
        kind: Kind::Float {
            min: 0.01,
            max: 100.0,
        },
        default: "0.3",
        help: "increase per RTT at the largest queueing delay (segments)",
    },
    Param {
        name: "alpha_max",
        kind: Kind::Float {
            min: 0.02,
            max: 1000.0,
        },
        default: "10",
        help: "increase per RTT with no queueing delay (segments)",
    },
    Param {
        name: "beta_min",
        kind: Kind::Float {
            min: 0.01,
            max: 0.9,
        },
        default: "0.125",
        help: "decrease fraction at low queueing delay",
    },
    Param {
        name: "beta_max",
        kind: Kind::Float {
            min: 0.01,
            max: 0.9,
        },
        default: "0.5",
        help: "decrease fraction at high queueing delay",
    },
    Param {
        name: "win_thresh",
        kind: Kind::Float { min: 0.0, max: 1e9 },
        default: "15",
        help: "Reno below this window (segments)",
    },
    Param {
        name: "theta",
        kind: Kind::Int { min: 0, max: 1000 },
        default: "5",
        help: "low-delay rounds before alpha_max",
    },
];

impl IllinoisConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(IllinoisConfig {
            alpha_min: args.float("alpha_min")?,
            alpha_max: args.float("alpha_max")?,
            beta_min: args.float("beta_min")?,
            beta_max: args.float("beta_max")?,
            win_thresh: args.float("win_thresh")?,
            theta: args.int("theta")?,
        })
    }

    /// `alpha` for average queueing delay `da` and maximum `dm` (seconds),
    /// without the `theta` hysteresis.
    pub fn alpha(&self, da: f64, dm: f64) -> f64 {
        let d1 = dm / 100.0;
        if da <= d1 || self.alpha_max <= self.alpha_min {
            return self.alpha_max;
        }
        let span = self.alpha_max - self.alpha_min;
        let k1 = (dm - d1) * self.alpha_min * self.alpha_max / span;
        let k2 = (dm - d1) * self.alpha_min / span - d1;
        (k1 / (k2 + da)).clamp(self.alpha_min, self.alpha_max)
    }

    /// `beta` for average queueing delay `da` and maximum `dm` (seconds).
    pub fn beta(&self, da: f64, dm: f64) -> f64 {
        let (d2, d3) = (dm / 10.0, dm * 8.0 / 10.0);
        if da <= d2 {
            self.beta_min
        } else if da >= d3 {
            self.beta_max
        } else {
            self.beta_min + (self.beta_max - self.beta_min) * (da - d2) / (d3 - d2)
        }
    }
}

impl Default for IllinoisConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("illinois", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "illinois",
    variant: VariantId::ILLINOIS,
    summary: "loss-triggered AIMD whose alpha (10..0.3) and beta (1/8..1/2) follow queueing delay",
    source: "Liu, Başar, Srikant, TCP-Illinois, VALUETOOLS 2006; Linux tcp_illinois",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| {
        Ok(Box::new(Illinois::new(
            IllinoisConfig::from_args(args)?,
            env,
        )))
    },
};

/// Illinois congestion control.
#[derive(Clone, Debug)]
pub struct Illinois {
    config: IllinoisConfig,
    core: RenoCore,
    carry: Fraction,
    rounds: Rounds,
    round_rtt: RoundRtt,
    base_rtt: Duration,
    max_rtt: Duration,
    alpha: f64,
    beta: f64,
    rtt_low: u64,
    /// Latest average queueing delay, seconds (for stats).
    da: f64,
}

impl Illinois {
    /// Illinois with `config` for a sender described by `env`.
    pub fn new(config: IllinoisConfig, env: &Env) -> Self {
        Illinois {
            config,
            core: RenoCore::new(env),
            carry: Fraction::default(),
            rounds: Rounds::default(),
            round_rtt: RoundRtt::default(),
            base_rtt: Duration::MAX,
            max_rtt: Duration::ZERO,
            alpha: 1.0,
            beta: 0.5,
            rtt_low: 0,
            da: 0.0,
        }
    }

    /// Current `alpha` (segments per RTT).
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Current `beta` (decrease fraction).
    pub fn beta(&self) -> f64 {
        self.beta
    }

    fn end_round(&mut self) {
        let round = self.round_rtt.take();
        if (self.core.cwnd as f64) < self.config.win_thresh * self.core.mss as f64 {
            self.alpha = 1.0;
            self.beta = 0.5;
            return;
        }
        if round.count == 0 || self.base_rtt == Duration::MAX {
            return;
        }
        let da = round.mean().saturating_sub(self.base_rtt).as_secs_f64();
        let dm = self.max_rtt.saturating_sub(self.base_rtt).as_secs_f64();
        self.da = da;
        if da <= dm / 100.0 {
            if self.rtt_low < self.config.theta {
                self.rtt_low += 1;
            } else {
                self.alpha = self.config.alpha_max;
            }
        } else {
            self.rtt_low = 0;
            self.alpha = self.config.alpha(da, dm);
        }
        self.beta = self.config.beta(da, dm);
    }
}

impl CongestionControl for Illinois {
    fn name(&self) -> &'static str {
        "illinois"
    }

    fn variant(&self) -> VariantId {
        VariantId::ILLINOIS
    }

    fn on_ack(&mut self, now: Time, ack: &Ack) {
        let rtt = ack.rtt.latest;
        if !rtt.is_zero() {
            self.base_rtt = self.base_rtt.min(rtt);
            self.max_rtt = self.max_rtt.max(rtt);
            self.round_rtt.add(rtt);
        }
        if self.rounds.on_ack(now, ack.sent_time) {
            self.end_round();
        }
        let rest = self.core.congestion_avoidance_bytes(ack);
        if rest == 0 {
            return;
        }
        let inc = self.alpha * self.core.mss as f64 * rest as f64 / self.core.cwnd as f64;
        self.carry.grow(&mut self.core.cwnd, inc);
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        if self.core.enter_recovery(now, event) {
            self.core
                .reduce_to((self.core.cwnd as f64 * (1.0 - self.beta)) as u64);
            self.carry.reset();
        }
        if event.persistent_congestion {
            self.core.persistent_congestion();
            self.alpha = 1.0;
            self.beta = 0.5;
            self.rtt_low = 0;
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
        self.core.stats(vec![
            ("alpha", StatValue::Num(self.alpha)),
            ("beta", StatValue::Num(self.beta)),
            ("queueing_delay_s", StatValue::Num(self.da)),
        ])
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}
