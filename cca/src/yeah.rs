//! YeAH-TCP (A. Baiocchi, A. P. Castellani, F. Vacirca, "YeAH-TCP: Yet
//! Another Highspeed TCP", PFLDnet 2007; Linux `tcp_yeah`).
//!
//! Two modes, chosen once per RTT from Vegas's queue estimate (round rule as
//! in [`vegas`](crate::vegas); `RTT` is the smallest sample of the round, and
//! a round needs at least 3 samples to count, as Linux):
//!
//! ```text
//! Q = cwnd * (RTT - BaseRTT) / RTT       segments this flow has queued
//! slow mode  if  Q > alpha  or  RTT - BaseRTT > BaseRTT / phy
//! fast mode  otherwise
//! ```
//!
//! - **Fast mode**: Scalable growth, `+1` segment per `min(cwnd, 100)`
//!   acknowledged segments (1 % per RTT above 100 segments).
//! - **Slow mode**: Reno growth, plus **precautionary decongestion**: if
//!   `Q > alpha` and `cwnd > reno_count`, remove the queue at once:
//!   `cwnd -= min(Q / gamma, cwnd / 2^epsilon)`, not below `reno_count`, and
//!   `ssthresh = cwnd`.
//! - `reno_count` estimates the window a competing Reno flow would have: set
//!   to `cwnd / 2` on entering slow mode, `+1` per slow-mode RTT, halved on
//!   losses, and reset to 2 after `zeta` fast-mode RTTs.
//! - **Congestion event** (once per recovery period): if fewer than `rho`
//!   consecutive RTTs were in slow mode (no competing Reno traffic), remove
//!   just the last queue estimate: `reduction = max(min(Q, cwnd / 2), cwnd / 2^delta)`;
//!   otherwise halve. `cwnd = ssthresh = cwnd - reduction`.
//! - Slow start is standard.
//!
//! Defaults (Linux `tcp_yeah`): `alpha = 80` segments, `gamma = 1`,
//! `delta = 3`, `epsilon = 1`, `phy = 8`, `rho = 16`, `zeta = 50`.

use std::time::Duration;

use crate::classic::{vegas_backlog, Fraction, RoundRtt, Rounds};
use crate::newreno::RenoCore;
use crate::registry::{Algorithm, Env};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{Ack, CongestionControl, CongestionEvent, StatValue, Stats, Time, VariantId};

/// YeAH's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct YeahConfig {
    /// Largest tolerated queue, segments.
    pub alpha: f64,
    /// Fraction (1/gamma) of the queue removed by decongestion.
    pub gamma: f64,
    /// On loss, remove at least cwnd / 2^delta.
    pub delta: u32,
    /// Decongestion removes at most cwnd / 2^epsilon.
    pub epsilon: u32,
    /// Slow mode once queueing delay exceeds BaseRTT / phy.
    pub phy: f64,
    /// Slow-mode RTTs after which losses halve the window.
    pub rho: u64,
    /// Fast-mode RTTs after which reno_count resets.
    pub zeta: u64,
}

const PARAMS: &[Param] = &[
    Param {
        name: "alpha",
        kind: Kind::Float { min: 0.0, max: 1e6 },
        default: "80",
        help: "largest tolerated queue (segments)",
    },
    Param {
        name: "gamma",
        kind: Kind::Float {
            min: 0.01,
            max: 100.0,
        },
        default: "1",
        help: "decongestion removes Q/gamma",
    },
    Param {
        name: "delta",
        kind: Kind::Int { min: 0, max: 16 },
        default: "3",
        help: "loss removes at least cwnd/2^delta",
    },
    Param {
        name: "epsilon",
        kind: Kind::Int { min: 0, max: 16 },
        default: "1",
        help: "decongestion removes at most cwnd/2^epsilon",
    },
    Param {
        name: "phy",
        kind: Kind::Float {
            min: 0.01,
            max: 1000.0,
        },
        default: "8",
        help: "slow mode when queueing delay > BaseRTT/phy",
    },
    Param {
        name: "rho",
        kind: Kind::Int {
            min: 0,
            max: 1_000_000,
        },
        default: "16",
        help: "slow-mode RTTs before losses halve",
    },
    Param {
        name: "zeta",
        kind: Kind::Int {
            min: 0,
            max: 1_000_000,
        },
        default: "50",
        help: "fast-mode RTTs before reno_count resets",
    },
];

impl YeahConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(YeahConfig {
            alpha: args.float("alpha")?,
            gamma: args.float("gamma")?,
            delta: args.int("delta")? as u32,
            epsilon: args.int("epsilon")? as u32,
            phy: args.float("phy")?,
            rho: args.int("rho")?,
            zeta: args.int("zeta")?,
        })
    }
}

impl Default for YeahConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("yeah", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "yeah",
    variant: VariantId::YEAH,
    summary:
        "Scalable growth while the queue is small, Reno + precautionary decongestion otherwise",
    source: "Baiocchi, Castellani, Vacirca, YeAH-TCP, PFLDnet 2007; Linux tcp_yeah",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| Ok(Box::new(Yeah::new(YeahConfig::from_args(args)?, env))),
};

/// Scalable increase: one segment per this many acknowledged segments at most.
const SCALABLE_AI_CNT: f64 = 100.0;

/// YeAH congestion control.
#[derive(Clone, Debug)]
pub struct Yeah {
    config: YeahConfig,
    core: RenoCore,
    carry: Fraction,
    rounds: Rounds,
    round_rtt: RoundRtt,
    base_rtt: Duration,
    /// Consecutive slow-mode RTTs (0 = fast mode).
    doing_reno_now: u64,
    fast_count: u64,
    /// Estimated window of a competing Reno flow, segments.
    reno_count: f64,
    /// Latest queue estimate, segments.
    last_q: f64,
    decongestions: u64,
}

impl Yeah {
    /// YeAH with `config` for a sender described by `env`.
    pub fn new(config: YeahConfig, env: &Env) -> Self {
        Yeah {
            config,
            core: RenoCore::new(env),
            carry: Fraction::default(),
            rounds: Rounds::default(),
            round_rtt: RoundRtt::default(),
            base_rtt: Duration::MAX,
            doing_reno_now: 0,
            fast_count: 0,
            reno_count: 2.0,
            last_q: 0.0,
            decongestions: 0,
        }
    }

    /// Whether YeAH is in slow (Reno) mode.
    pub fn slow_mode(&self) -> bool {
        self.doing_reno_now > 0
    }

    /// Latest queue estimate, segments.
    pub fn queue(&self) -> f64 {
        self.last_q
    }

    fn end_round(&mut self) {
        let round = self.round_rtt.take();
        if round.count <= 2 || self.base_rtt == Duration::MAX {
            return;
        }
        let mss = self.core.mss as f64;
        let cwnd = self.core.cwnd as f64 / mss;
        let queue = vegas_backlog(cwnd, round.min, self.base_rtt);
        let delay = round.min.saturating_sub(self.base_rtt).as_secs_f64();
        if queue > self.config.alpha || delay > self.base_rtt.as_secs_f64() / self.config.phy {
            if queue > self.config.alpha && cwnd > self.reno_count {
                let reduction =
                    (queue / self.config.gamma).min(cwnd / f64::from(1u32 << self.config.epsilon));
                let next = (cwnd - reduction).max(self.reno_count);
                self.core.cwnd = ((next * mss) as u64).max(self.core.min_window());
                self.core.ssthresh = self.core.cwnd;
                self.carry.reset();
                self.decongestions += 1;
            }
            if self.reno_count <= 2.0 {
                self.reno_count = (self.core.cwnd as f64 / mss / 2.0).max(2.0);
            } else {
                self.reno_count += 1.0;
            }
            self.doing_reno_now += 1;
        } else {
            self.fast_count += 1;
            if self.fast_count > self.config.zeta {
                self.reno_count = 2.0;
                self.fast_count = 0;
            }
            self.doing_reno_now = 0;
        }
        self.last_q = queue;
    }
}

impl CongestionControl for Yeah {
    fn name(&self) -> &'static str {
        "yeah"
    }

    fn variant(&self) -> VariantId {
        VariantId::YEAH
    }

    fn on_ack(&mut self, now: Time, ack: &Ack) {
        let rtt = ack.rtt.latest;
        if !rtt.is_zero() {
            self.base_rtt = self.base_rtt.min(rtt);
            self.round_rtt.add(rtt);
        }
        if !self.core.may_grow(ack) {
            if self.rounds.on_ack(now, ack.sent_time) {
                self.end_round();
            }
            return;
        }
        let rest = self.core.slow_start(ack.bytes);
        if rest > 0 {
            let mss = self.core.mss as f64;
            let cwnd = self.core.cwnd as f64;
            let per = if self.slow_mode() {
                cwnd
            } else {
                cwnd.min(SCALABLE_AI_CNT * mss)
            };
            self.carry
                .grow(&mut self.core.cwnd, mss * rest as f64 / per);
        }
        if self.rounds.on_ack(now, ack.sent_time) {
            self.end_round();
        }
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        if self.core.enter_recovery(now, event) {
            let cwnd = self.core.cwnd as f64 / self.core.mss as f64;
            let half = (cwnd / 2.0).max(2.0);
            let reduction = if self.doing_reno_now < self.config.rho {
                self.last_q
                    .min(half)
                    .max(cwnd / f64::from(1u32 << self.config.delta))
            } else {
                half
            };
            self.fast_count = 0;
            self.reno_count = (self.reno_count / 2.0).max(2.0);
            self.core
                .reduce_to(((cwnd - reduction) * self.core.mss as f64) as u64);
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
        // Decongestion must not push the window back up to an older Reno estimate.
        self.reno_count = self
            .reno_count
            .min(self.core.cwnd as f64 / self.core.mss as f64)
            .max(2.0);
    }

    fn window(&self) -> u64 {
        self.core.cwnd
    }

    fn stats(&self) -> Stats {
        self.core.stats(vec![
            (
                "mode",
                StatValue::Text(if self.slow_mode() { "slow" } else { "fast" }),
            ),
            ("queue_segments", StatValue::Num(self.last_q)),
            ("reno_count", StatValue::Num(self.reno_count)),
            ("decongestions", StatValue::Num(self.decongestions as f64)),
        ])
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}
