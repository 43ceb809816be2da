//! TCP Westwood+ (L. A. Grieco, S. Mascolo, "Performance evaluation and
//! comparison of Westwood+, New Reno, and Vegas TCP congestion control",
//! ACM CCR 34(2), 2004; Linux `tcp_westwood`).
//!
//! Reno growth, but after a loss the window is set to the estimated
//! bandwidth-delay product instead of being halved.
//!
//! - **Bandwidth estimate** (Westwood+ samples once per RTT, not per ACK):
//!   acknowledged bytes are counted over an interval of at least
//!   `max(srtt, min_interval)`; at its end the sample `b_k = bytes / interval`
//!   passes through Linux's two-stage low-pass filter
//!   ```text
//!   bw_ns = 7/8 bw_ns + 1/8 b_k        BWE = 7/8 BWE + 1/8 bw_ns
//!   ```
//!   (the first sample initialises both).
//! - **Congestion event** (once per recovery period):
//!   `ssthresh = cwnd = max(BWE * RTT_min, 2 mss)`, but never above the
//!   current window (a loss does not raise it; Linux can, when the window was
//!   below the BDP estimate; we do not, so a window lowered from outside
//!   through `impose_window` is not undone by the next loss).
//!   Before the first bandwidth sample, Reno's halving is used.
//! - **Persistent congestion**: `ssthresh = max(BWE * RTT_min, 2 mss)`,
//!   `cwnd = 2 mss`, and `RTT_min` is measured afresh.
//! - `RTT_min` is the smallest RTT sample seen.
//!
//! Default: `min_interval = 50 ms` (Linux `TCP_WESTWOOD_RTT_MIN`).

use std::time::Duration;

use crate::newreno::RenoCore;
use crate::registry::{Algorithm, Env};
use crate::spec::{Args, Kind, Param, SpecError};
use crate::{Ack, CongestionControl, CongestionEvent, StatValue, Stats, Time, VariantId};

/// Westwood+'s parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WestwoodConfig {
    /// Shortest bandwidth-sampling interval.
    pub min_interval: Duration,
}

const PARAMS: &[Param] = &[Param {
    name: "min_interval",
    kind: Kind::Duration,
    default: "50ms",
    help: "shortest bandwidth sampling interval (Linux TCP_WESTWOOD_RTT_MIN)",
}];

impl WestwoodConfig {
    fn from_args(args: &Args) -> Result<Self, SpecError> {
        Ok(WestwoodConfig {
            min_interval: args.duration("min_interval")?,
        })
    }
}

impl Default for WestwoodConfig {
    fn default() -> Self {
        Self::from_args(&Args::defaults("westwood", PARAMS)).expect("declared defaults are valid")
    }
}

/// Registry entry.
pub const ALGORITHM: Algorithm = Algorithm {
    name: "westwood",
    variant: VariantId::WESTWOOD,
    summary: "Reno growth; on loss cwnd = filtered ACK-rate bandwidth estimate * RTT_min",
    source: "Grieco & Mascolo, Westwood+, ACM CCR 2004; Linux tcp_westwood",
    takes_base: false,
    params: PARAMS,
    build: |args, _base, env| {
        Ok(Box::new(Westwood::new(
            WestwoodConfig::from_args(args)?,
            env,
        )))
    },
};

/// Westwood+ congestion control.
#[derive(Clone, Debug)]
pub struct Westwood {
    config: WestwoodConfig,
    core: RenoCore,
    interval_start: Option<Time>,
    interval_bytes: u64,
    /// First filter stage, bytes/s.
    bw_ns: f64,
    /// Bandwidth estimate, bytes/s (0 before the first sample).
    bwe: f64,
    rtt_min: Duration,
    srtt: Duration,
}

impl Westwood {
    /// Westwood+ with `config` for a sender described by `env`.
    pub fn new(config: WestwoodConfig, env: &Env) -> Self {
        Westwood {
            config,
            core: RenoCore::new(env),
            interval_start: None,
            interval_bytes: 0,
            bw_ns: 0.0,
            bwe: 0.0,
            rtt_min: Duration::MAX,
            srtt: Duration::ZERO,
        }
    }

    /// The bandwidth estimate, bytes per second.
    pub fn bandwidth_estimate(&self) -> f64 {
        self.bwe
    }

    /// `BWE * RTT_min` in bytes (at least two segments), if there is an estimate.
    pub fn bdp_estimate(&self) -> Option<u64> {
        (self.bwe > 0.0 && self.rtt_min != Duration::MAX)
            .then(|| ((self.bwe * self.rtt_min.as_secs_f64()) as u64).max(self.core.min_window()))
    }

    fn sample(&mut self, now: Time, bytes: u64) {
        let start = *self.interval_start.get_or_insert(now);
        self.interval_bytes += bytes;
        let elapsed = now.saturating_since(start);
        if elapsed > self.srtt.max(self.config.min_interval) && !elapsed.is_zero() {
            let b = self.interval_bytes as f64 / elapsed.as_secs_f64();
            if self.bwe == 0.0 {
                self.bw_ns = b;
                self.bwe = b;
            } else {
                self.bw_ns = (7.0 * self.bw_ns + b) / 8.0;
                self.bwe = (7.0 * self.bwe + self.bw_ns) / 8.0;
            }
            self.interval_start = Some(now);
            self.interval_bytes = 0;
        }
    }
}

impl CongestionControl for Westwood {
    fn name(&self) -> &'static str {
        "westwood"
    }

    fn variant(&self) -> VariantId {
        VariantId::WESTWOOD
    }

    fn on_ack(&mut self, now: Time, ack: &Ack) {
        if !ack.rtt.latest.is_zero() {
            self.rtt_min = self.rtt_min.min(ack.rtt.latest);
        }
        self.srtt = ack.rtt.smoothed;
        self.sample(now, ack.bytes);
        if !self.core.may_grow(ack) {
            return;
        }
        self.core.grow_reno(ack.bytes);
    }

    fn on_congestion_event(&mut self, now: Time, event: &CongestionEvent) {
        if self.core.enter_recovery(now, event) {
            let target = self.bdp_estimate().unwrap_or(self.core.cwnd / 2);
            self.core.reduce_to(target.min(self.core.cwnd));
        }
        if event.persistent_congestion {
            if let Some(bdp) = self.bdp_estimate() {
                self.core.ssthresh = bdp;
            }
            self.core.persistent_congestion();
            self.rtt_min = Duration::MAX;
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
        let rtt_min = if self.rtt_min == Duration::MAX {
            0.0
        } else {
            self.rtt_min.as_secs_f64()
        };
        self.core.stats(vec![
            ("bwe_Bps", StatValue::Num(self.bwe)),
            ("rtt_min_s", StatValue::Num(rtt_min)),
            (
                "bdp_estimate",
                StatValue::Num(self.bdp_estimate().unwrap_or(0) as f64),
            ),
        ])
    }

    fn clone_box(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}
