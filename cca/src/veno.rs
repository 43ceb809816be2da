//! TCP Veno (C. P. Fu, S. C. Liew, "TCP Veno: TCP Enhancement for
//! Transmission Over Wireless Access Networks", IEEE JSAC 21(2), 2003;
//! Linux `tcp_veno`).
//!
//! Veno uses Vegas's backlog estimate to tell random (wireless) losses from
//! congestive ones. Once per RTT (same round rule as [`vegas`](crate::vegas)):
//!
//! ```text
//! N = cwnd * (RTT - BaseRTT) / RTT       segments queued (RTT: smallest sample of the round)
//! ```
//!
//! - **Congestion avoidance**: `N < beta` (non-congestive state): Reno, +1
//!   segment per RTT; `N >= beta` (congestive state): +1 segment every
//!   *other* RTT.
//! - **Congestion event** (once per recovery period): `N < beta` means the
//!   loss was probably random: `cwnd = ssthresh = cwnd * 4/5`; otherwise it was
//!   congestive: `cwnd = ssthresh = cwnd / 2`.
//! - Slow start is standard.
//!
//! Default (paper and Linux): `beta = 3` segments; the random-loss factor
//! `0.8` and congestive factor `0.5` are parameters too.

use std::time::Duration;

use crate::classic::{vegas_backlog, RoundRtt, Rounds};
use crate::newreno::RenoCore;
use crate::registry::{Algorithm, Env};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{Ack, CongestionControl, CongestionEvent, StatValue, Stats, Time, VariantId};

/// Veno's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VenoConfig {
    /// Backlog (segments) separating non-congestive from congestive state.
    pub beta: f64,
    /// Window multiplier after a random (non-congestive) loss.
    pub random_loss_factor: f64,
    /// Window multiplier after a congestive loss.
    pub congestive_loss_factor: f64,
}

const PARAMS: &[Param] = &[
    Param {
        name: "beta",
        kind: Kind::Float {
            min: 0.0,
            max: 1000.0,
        },
        default: "3",
        help: "backlog (segments) at which losses count as congestive",
    },
    Param {
        name: "random_loss_factor",
        kind: Kind::Float {
            min: 0.1,
            max: 0.95,
        },
        default: "0.8",
        help: "window multiplier after a random loss",
    },
    Param {
        name: "congestive_loss_factor",
        kind: Kind::Float {
            min: 0.1,
            max: 0.95,
        },
        default: "0.5",
        help: "window multiplier after a congestive loss",
    },
];

impl VenoConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(VenoConfig {
            beta: args.float("beta")?,
            random_loss_factor: args.float("random_loss_factor")?,
            congestive_loss_factor: args.float("congestive_loss_factor")?,
        })
    }
}

impl Default for VenoConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("veno", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "veno",
    variant: VariantId::VENO,
    summary: "Reno with Vegas backlog N: loss with N < 3 is random (x0.8), else congestive (x0.5)",
    source: "Fu & Liew, TCP Veno, IEEE JSAC 2003; Linux tcp_veno",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| Ok(Box::new(Veno::new(VenoConfig::from_args(args)?, env))),
};

/// Veno congestion control.
#[derive(Clone, Debug)]
pub struct Veno {
    config: VenoConfig,
    core: RenoCore,
    rounds: Rounds,
    round_rtt: RoundRtt,
    base_rtt: Duration,
    /// Latest backlog estimate, segments.
    backlog: f64,
    /// In the congestive state, whether this RTT's increment is due.
    inc_due: bool,
    /// Bytes acknowledged towards the every-other-RTT increment.
    acked: u64,
}

impl Veno {
    /// Veno with `config` for a sender described by `env`.
    pub fn new(config: VenoConfig, env: &Env) -> Self {
        Veno {
            config,
            core: RenoCore::new(env),
            rounds: Rounds::default(),
            round_rtt: RoundRtt::default(),
            base_rtt: Duration::MAX,
            backlog: 0.0,
            inc_due: false,
            acked: 0,
        }
    }

    /// The latest backlog estimate `N`, segments.
    pub fn backlog(&self) -> f64 {
        self.backlog
    }

    fn congestive(&self) -> bool {
        self.backlog >= self.config.beta
    }
}

impl CongestionControl for Veno {
    fn name(&self) -> &'static str {
        "veno"
    }

    fn variant(&self) -> VariantId {
        VariantId::VENO
    }

    fn on_ack(&mut self, now: Time, ack: &Ack) {
        let rtt = ack.rtt.latest;
        if !rtt.is_zero() {
            self.base_rtt = self.base_rtt.min(rtt);
            self.round_rtt.add(rtt);
        }
        if self.rounds.on_ack(now, ack.sent_time) {
            let round = self.round_rtt.take();
            if round.count > 0 {
                let cwnd_seg = self.core.cwnd as f64 / self.core.mss as f64;
                self.backlog = vegas_backlog(cwnd_seg, round.min, self.base_rtt);
            }
        }
        let rest = self.core.congestion_avoidance_bytes(ack);
        if rest == 0 {
            return;
        }
        if !self.congestive() {
            self.core.reno_increase(rest);
            return;
        }
        // Congestive state: one segment every other window of ACKs.
        self.acked += rest;
        while self.acked >= self.core.cwnd {
            self.acked -= self.core.cwnd;
            if self.inc_due {
                self.core.cwnd += self.core.mss;
                self.inc_due = false;
            } else {
                self.inc_due = true;
            }
        }
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        if self.core.enter_recovery(now, event) {
            let factor = if self.congestive() {
                self.config.congestive_loss_factor
            } else {
                self.config.random_loss_factor
            };
            self.core.reduce_to((self.core.cwnd as f64 * factor) as u64);
            self.acked = 0;
            self.inc_due = false;
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
        self.acked = 0;
    }

    fn window(&self) -> u64 {
        self.core.cwnd
    }

    fn stats(&self) -> Stats {
        self.core.stats(vec![
            ("backlog_segments", StatValue::Num(self.backlog)),
            (
                "state",
                StatValue::Text(if self.congestive() {
                    "congestive"
                } else {
                    "non-congestive"
                }),
            ),
        ])
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}
