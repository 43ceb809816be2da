//! CUBIC, RFC 9438.
//!
//! After a congestion event the window follows, in segments and seconds,
//!
//! ```text
//! W_cubic(t) = C * (t - K)^3 + W_max,     K = cbrt((W_max - cwnd_epoch) / C)
//! ```
//!
//! where `t` is the time since the current congestion-avoidance epoch began and
//! `cwnd_epoch` the window then (§4.2). Each ACK moves `cwnd` towards the target
//! `W_cubic(t + RTT)`, clamped to `[cwnd, 1.5 * cwnd]` (§4.4). In the
//! Reno-friendly region (§4.3) a Reno estimate grows by
//! `alpha_cubic = 3 (1 - beta) / (1 + beta)` segments per RTT (1 once it passes
//! the pre-loss window) and the window is never below it. On a congestion event
//! `ssthresh = cwnd = max(cwnd * beta, 2 mss)` with `beta = 0.7` (§4.6), and with
//! fast convergence (§4.7) `W_max = cwnd * (1 + beta) / 2` when the window had
//! not regained the previous `W_max`. Slow start is standard; with `hystart=on`
//! HyStart's delay-increase test ([`crate::hystart`]) can end it before the
//! first loss, as in Linux and ns-3, where it is on by default. Off by default
//! here, so that results stay comparable with earlier Tollgate runs.

use crate::hystart::HyStart;
use crate::newreno::RenoCore;
use crate::registry::{Algorithm, Env};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{
    Ack, CongestionControl, CongestionEvent, SentPacket, StatValue, Stats, Time, VariantId,
};

/// CUBIC's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CubicConfig {
    /// `C`, segments per second cubed.
    pub c: f64,
    /// `beta_cubic`, the window multiplier on a congestion event.
    pub beta: f64,
    /// Fast convergence (§4.7).
    pub fast_convergence: bool,
    /// Reno-friendly region (§4.3).
    pub reno_friendly: bool,
    /// HyStart's delay-increase test in slow start ([`crate::hystart`]).
    pub hystart: bool,
}

const PARAMS: &[Param] = &[
    Param {
        name: "c",
        kind: Kind::Float {
            min: 0.01,
            max: 10.0,
        },
        default: "0.4",
        help: "cubic scaling constant C (segments/s^3)",
    },
    Param {
        name: "beta",
        kind: Kind::Float {
            min: 0.1,
            max: 0.95,
        },
        default: "0.7",
        help: "multiplicative decrease factor beta_cubic",
    },
    Param {
        name: "fast_convergence",
        kind: Kind::Bool,
        default: "on",
        help: "release bandwidth faster when the window did not regain W_max",
    },
    Param {
        name: "reno_friendly",
        kind: Kind::Bool,
        default: "on",
        help: "never grow slower than an AIMD flow with the same beta",
    },
    Param {
        name: "hystart",
        kind: Kind::Bool,
        default: "off",
        help: "end slow start when the RTT rises by clamp(min_rtt/8, 4ms, 16ms) (HyStart's delay test, on in Linux and ns-3)",
    },
];

impl CubicConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(CubicConfig {
            c: args.float("c")?,
            beta: args.float("beta")?,
            fast_convergence: args.bool("fast_convergence")?,
            reno_friendly: args.bool("reno_friendly")?,
            hystart: args.bool("hystart")?,
        })
    }
}

impl Default for CubicConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("cubic", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "cubic",
    variant: VariantId::CUBIC,
    summary: "cubic window growth around the last W_max, beta 0.7",
    source: "RFC 9438",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| Ok(Box::new(Cubic::new(CubicConfig::from_args(args)?, env))),
};

/// CUBIC congestion control.
#[derive(Clone, Debug)]
pub struct Cubic {
    config: CubicConfig,
    core: RenoCore,
    /// Window before the last reduction, segments.
    w_max: f64,
    /// Time to reach `w_max` from the epoch start, seconds.
    k: f64,
    /// Start of the current congestion-avoidance epoch.
    epoch_start: Option<Time>,
    /// Reno-friendly estimate, bytes.
    w_est: f64,
    /// Window just before the last reduction, bytes (for alpha_cubic's switch to 1).
    cwnd_prior: f64,
    /// Latest smoothed RTT, seconds.
    srtt: f64,
    /// HyStart's state (used only with `hystart = on`).
    hystart: HyStart,
}

impl Cubic {
    /// CUBIC with `config` for a sender described by `env`.
    pub fn new(config: CubicConfig, env: &Env) -> Self {
        Cubic {
            config,
            core: RenoCore::new(env),
            w_max: 0.0,
            k: 0.0,
            epoch_start: None,
            w_est: 0.0,
            cwnd_prior: 0.0,
            srtt: 0.0,
            hystart: HyStart::default(),
        }
    }

    /// `W_cubic(t)` in segments, `t` in seconds since the epoch started.
    pub fn w_cubic(&self, t: f64) -> f64 {
        self.config.c * (t - self.k).powi(3) + self.w_max
    }

    /// `W_max` in segments (the window before the last reduction).
    pub fn w_max(&self) -> f64 {
        self.w_max
    }

    /// `K` in seconds.
    pub fn k(&self) -> f64 {
        self.k
    }

    fn alpha(&self) -> f64 {
        let beta = self.config.beta;
        if self.w_est >= self.cwnd_prior {
            1.0
        } else {
            3.0 * (1.0 - beta) / (1.0 + beta)
        }
    }

    fn congestion_avoidance(&mut self, now: Time, bytes: u64) {
        let mss = self.core.mss as f64;
        let cwnd = self.core.cwnd as f64;
        let epoch_start = *self.epoch_start.get_or_insert_with(|| {
            // §4.2: a new epoch begins; K from the window at its start.
            let cwnd_seg = cwnd / mss;
            if self.w_max > cwnd_seg {
                self.k = ((self.w_max - cwnd_seg) / self.config.c).cbrt();
            } else {
                self.k = 0.0;
                self.w_max = cwnd_seg;
            }
            self.w_est = cwnd;
            now
        });
        let t = now.saturating_since(epoch_start).as_secs_f64();
        let target = (self.w_cubic(t + self.srtt) * mss).clamp(cwnd, 1.5 * cwnd);
        let mut next = cwnd + (target - cwnd) * bytes as f64 / cwnd;
        if self.config.reno_friendly {
            self.w_est += self.alpha() * mss * bytes as f64 / cwnd;
            if self.w_cubic(t) * mss < self.w_est {
                next = next.max(self.w_est);
            }
        }
        self.core.cwnd = next as u64;
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn variant(&self) -> VariantId {
        VariantId::CUBIC
    }

    fn on_packet_sent(&mut self, _now: Time, sent: &SentPacket) {
        if self.config.hystart {
            self.hystart.on_packet_sent(sent.packet_number);
        }
    }

    fn on_ack(&mut self, now: Time, ack: &Ack) {
        self.srtt = ack.rtt.smoothed.as_secs_f64();
        if self.config.hystart
            && self.core.in_slow_start()
            && self
                .hystart
                .on_ack(ack, self.core.cwnd / self.core.mss.max(1))
        {
            self.core.ssthresh = self.core.cwnd;
        }
        let rest = self.core.congestion_avoidance_bytes(ack);
        if rest > 0 {
            self.congestion_avoidance(now, rest);
        }
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        if self.core.enter_recovery(now, event) {
            let cwnd_seg = self.core.cwnd as f64 / self.core.mss as f64;
            self.cwnd_prior = self.core.cwnd as f64;
            self.w_max = if self.config.fast_convergence && cwnd_seg < self.w_max {
                cwnd_seg * (1.0 + self.config.beta) / 2.0
            } else {
                cwnd_seg
            };
            self.core
                .reduce_to((self.core.cwnd as f64 * self.config.beta) as u64);
            self.epoch_start = None;
        }
        if event.persistent_congestion {
            self.core.persistent_congestion();
            self.epoch_start = None;
            self.hystart.restart();
        }
    }

    fn on_mtu_change(&mut self, _now: Time, mss: u64) {
        self.w_max *= self.core.mss as f64 / mss as f64;
        self.core.set_mss(mss);
    }

    fn impose_window(&mut self, _now: Time, window: u64) {
        self.core.impose(window);
        // Keep the Reno estimate from snapping the window straight back.
        self.w_est = self.w_est.min(self.core.cwnd as f64);
    }

    fn window(&self) -> u64 {
        self.core.cwnd
    }

    fn stats(&self) -> Stats {
        let mut details = vec![
            ("w_max_segments", StatValue::Num(self.w_max)),
            ("k_seconds", StatValue::Num(self.k)),
        ];
        if self.config.hystart {
            let exit = f64::from(u8::from(self.hystart.found()));
            details.push(("hystart_exit", StatValue::Num(exit)));
        }
        self.core.stats(details)
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}
