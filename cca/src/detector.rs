//! RTT-rise congestion detector gating the sender-side tax (from the
//! sender-side taxation authors' ns-3 code).
//!
//! A ring of `ring` RTT samples, one taken at most every `interval`; samples
//! older than `expiry` are ignored. The path is **congested** when
//!
//! ```text
//! latest_rtt - oldest_unexpired_sample > threshold
//! ```
//!
//! i.e. the RTT has risen by more than `threshold` over the recent past, so a
//! queue is building. Defaults: 4 samples, 25 ms, 100 ms expiry, 1 ms threshold.

use std::time::Duration;

use crate::Time;

/// Most samples the ring can hold.
pub const MAX_RING: usize = 16;

/// Detector settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DetectorConfig {
    /// Samples kept (1..=16).
    pub ring: usize,
    /// Minimum time between two samples.
    pub interval: Duration,
    /// Samples older than this are ignored.
    pub expiry: Duration,
    /// RTT rise that means "congested".
    pub threshold: Duration,
}

impl Default for DetectorConfig {
    fn default() -> Self {
        DetectorConfig {
            ring: 4,
            interval: Duration::from_millis(25),
            expiry: Duration::from_millis(100),
            threshold: Duration::from_millis(1),
        }
    }
}

/// The detector's state: a fixed ring of `(time, rtt)` samples.
#[derive(Clone, Debug)]
pub struct CongestionDetector {
    config: DetectorConfig,
    samples: [Option<(Time, Duration)>; MAX_RING],
    next: usize,
    last_sample: Option<Time>,
    congested: bool,
}

impl CongestionDetector {
    /// A detector with `config` (`ring` is clamped to 1..=16).
    pub fn new(mut config: DetectorConfig) -> Self {
        config.ring = config.ring.clamp(1, MAX_RING);
        CongestionDetector {
            config,
            samples: [None; MAX_RING],
            next: 0,
            last_sample: None,
            congested: false,
        }
    }

    /// Feed the RTT measured by an ACK at `now`; returns whether the path is congested.
    pub fn on_rtt(&mut self, now: Time, latest_rtt: Duration) -> bool {
        let oldest = self.samples[..self.config.ring]
            .iter()
            .flatten()
            .filter(|(t, _)| now.saturating_since(*t) <= self.config.expiry)
            .min_by_key(|(t, _)| *t)
            .map(|&(_, rtt)| rtt);
        self.congested =
            oldest.is_some_and(|old| latest_rtt.saturating_sub(old) > self.config.threshold);
        if self
            .last_sample
            .is_none_or(|last| now.saturating_since(last) >= self.config.interval)
        {
            self.samples[self.next] = Some((now, latest_rtt));
            self.next = (self.next + 1) % self.config.ring;
            self.last_sample = Some(now);
        }
        self.congested
    }

    /// The verdict of the last [`on_rtt`](Self::on_rtt).
    pub fn congested(&self) -> bool {
        self.congested
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn rising_rtt_is_congestion_and_flat_rtt_is_not() {
        let mut d = CongestionDetector::new(DetectorConfig::default());
        for i in 0..10 {
            assert!(!d.on_rtt(Time::from_millis(i * 10), ms(20)), "flat at {i}");
        }
        // RTT climbs 1 ms every 10 ms: within the 100 ms window it rises > 1 ms.
        let mut verdicts = Vec::new();
        for i in 0..10 {
            verdicts.push(d.on_rtt(Time::from_millis(100 + i * 10), ms(20 + i)));
        }
        assert!(!verdicts[0] && verdicts[9], "{verdicts:?}");
    }

    #[test]
    fn expired_samples_do_not_count() {
        let mut d = CongestionDetector::new(DetectorConfig::default());
        d.on_rtt(Time::from_millis(0), ms(10));
        // 200 ms later the only sample has expired: no reference, not congested.
        assert!(!d.on_rtt(Time::from_millis(200), ms(30)));
        // A fresh reference 30 ms: a rise to 32 ms 25 ms later is congestion.
        assert!(d.on_rtt(Time::from_millis(225), ms(32)));
    }
}
