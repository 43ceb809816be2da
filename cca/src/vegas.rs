//! TCP Vegas (L. Brakmo, L. Peterson, "TCP Vegas: End to End Congestion
//! Avoidance on a Global Internet", IEEE JSAC 13(8), 1995; Linux `tcp_vegas`).
//!
//! Vegas keeps a few packets queued at the bottleneck and no more. Once per
//! RTT (a round ends when a packet sent after the round began is
//! acknowledged), with `BaseRTT` the smallest RTT ever seen and `RTT` the
//! smallest sample of the round just ended:
//!
//! ```text
//! diff = cwnd * (RTT - BaseRTT) / RTT        segments this flow has queued
//!                                            (= (Expected - Actual) * BaseRTT)
//! congestion avoidance:  diff < alpha  ->  cwnd += 1 segment
//!                        diff > beta   ->  cwnd -= 1 segment
//!                        otherwise     ->  hold
//! slow start:            diff > gamma  ->  cwnd = min(cwnd, cwnd * BaseRTT / RTT + 1),
//!                                          ssthresh = cwnd - 1   (leave slow start)
//! ```
//!
//! Slow start is the paper's: the window doubles only every *other* RTT and
//! stays fixed in between, so that a round measures a steady window (with
//! per-RTT doubling the round's minimum RTT lags the queue it has just built,
//! and Vegas overshoots). If a round had fewer than 3
//! RTT samples, Vegas does Reno's increase for that ACK instead (as Linux:
//! too few samples to trust). Losses are handled as Reno (`cwnd = ssthresh =
//! cwnd / 2`, once per recovery period); the window never goes below two
//! segments. Linux divides by `BaseRTT` instead of `RTT` in `diff`; we use
//! the paper's form, which is exactly the flow's queued packets when the
//! bottleneck is saturated.
//!
//! Defaults (paper and Linux): `alpha = 2`, `beta = 4`, `gamma = 1` segments.

use std::time::Duration;

use crate::classic::{vegas_backlog, RoundRtt, Rounds};
use crate::newreno::RenoCore;
use crate::registry::{Algorithm, Env};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{Ack, CongestionControl, CongestionEvent, StatValue, Stats, Time, VariantId};

/// Vegas's parameters (segments of queueing).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VegasConfig {
    /// Grow while fewer than this many segments are queued.
    pub alpha: f64,
    /// Shrink while more than this many segments are queued.
    pub beta: f64,
    /// Leave slow start once this many segments are queued.
    pub gamma: f64,
}

const PARAMS: &[Param] = &[
    Param {
        name: "alpha",
        kind: Kind::Float {
            min: 0.0,
            max: 1000.0,
        },
        default: "2",
        help: "grow while fewer segments than this are queued",
    },
    Param {
        name: "beta",
        kind: Kind::Float {
            min: 0.0,
            max: 1000.0,
        },
        default: "4",
        help: "shrink while more segments than this are queued",
    },
    Param {
        name: "gamma",
        kind: Kind::Float {
            min: 0.0,
            max: 1000.0,
        },
        default: "1",
        help: "leave slow start above this many queued segments",
    },
];

impl VegasConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(VegasConfig {
            alpha: args.float("alpha")?,
            beta: args.float("beta")?,
            gamma: args.float("gamma")?,
        })
    }
}

impl Default for VegasConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("vegas", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "vegas",
    variant: VariantId::VEGAS,
    summary: "delay-based: keep alpha..beta (2..4) segments queued, +-1 segment per RTT",
    source: "Brakmo & Peterson, TCP Vegas, IEEE JSAC 1995; Linux tcp_vegas",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| Ok(Box::new(Vegas::new(VegasConfig::from_args(args)?, env))),
};

/// Vegas congestion control.
#[derive(Clone, Debug)]
pub struct Vegas {
    config: VegasConfig,
    core: RenoCore,
    rounds: Rounds,
    round_rtt: RoundRtt,
    base_rtt: Duration,
    diff: f64,
    /// Slow start: whether this round holds the window (grows every other round).
    ss_hold: bool,
}

impl Vegas {
    /// Vegas with `config` for a sender described by `env`.
    pub fn new(config: VegasConfig, env: &Env) -> Self {
        Vegas {
            config,
            core: RenoCore::new(env),
            rounds: Rounds::default(),
            round_rtt: RoundRtt::default(),
            base_rtt: Duration::MAX,
            diff: 0.0,
            ss_hold: false,
        }
    }

    /// The latest `diff`: segments this flow is estimated to have queued.
    pub fn diff(&self) -> f64 {
        self.diff
    }

    fn end_round(&mut self, ack: &Ack) {
        let round = self.round_rtt.take();
        if round.count <= 2 {
            self.core.grow_reno(ack.bytes);
            return;
        }
        let mss = self.core.mss;
        let cwnd_seg = self.core.cwnd as f64 / mss as f64;
        self.diff = vegas_backlog(cwnd_seg, round.min, self.base_rtt);
        if self.core.in_slow_start() {
            if self.diff > self.config.gamma {
                let target = cwnd_seg * self.base_rtt.as_secs_f64() / round.min.as_secs_f64();
                let target = ((target + 1.0) * mss as f64) as u64;
                self.core.cwnd = self.core.cwnd.min(target).max(self.core.min_window());
                self.core.ssthresh = self.core.ssthresh.min(self.core.cwnd.saturating_sub(mss));
            } else {
                self.ss_hold = !self.ss_hold;
                if !self.ss_hold {
                    self.core.slow_start(ack.bytes);
                }
            }
        } else if self.diff > self.config.beta {
            self.core.cwnd = self
                .core
                .cwnd
                .saturating_sub(mss)
                .max(self.core.min_window());
            self.core.ssthresh = self.core.ssthresh.min(self.core.cwnd.saturating_sub(mss));
        } else if self.diff < self.config.alpha {
            self.core.cwnd += mss;
        }
    }
}

impl CongestionControl for Vegas {
    fn name(&self) -> &'static str {
        "vegas"
    }

    fn variant(&self) -> VariantId {
        VariantId::VEGAS
    }

    fn on_ack(&mut self, now: Time, ack: &Ack) {
        let rtt = ack.rtt.latest;
        if !rtt.is_zero() {
            self.base_rtt = self.base_rtt.min(rtt);
            self.round_rtt.add(rtt);
        }
        let round_end = self.rounds.on_ack(now, ack.sent_time);
        if !self.core.may_grow(ack) {
            if round_end {
                self.round_rtt.take();
            }
            return;
        }
        if round_end {
            self.end_round(ack);
        } else if self.core.in_slow_start() && !self.ss_hold {
            self.core.slow_start(ack.bytes);
        }
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        if self.core.enter_recovery(now, event) {
            self.core.reduce_to(self.core.cwnd / 2);
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
        let base = if self.base_rtt == Duration::MAX {
            0.0
        } else {
            self.base_rtt.as_secs_f64()
        };
        self.core.stats(vec![
            ("diff_segments", StatValue::Num(self.diff)),
            ("base_rtt_s", StatValue::Num(base)),
        ])
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}
