//! Honouring a CCA's own pacing rate.
//!
//! quinn-proto paces every connection from its window and smoothed RTT. When a
//! `tollgate-cca` algorithm reports [`pacing_rate`](tollgate_cca::CongestionControl::pacing_rate),
//! the [`Endpoint`](crate::Endpoint) additionally gates the connection with this
//! token bucket, so the connection never sends faster than the algorithm asks.
//! Without a rate the bucket is inert.

use std::time::{Duration, Instant};

/// A token bucket refilled at the CCA's pacing rate.
#[derive(Clone, Debug, Default)]
pub struct RatePacer {
    tokens: f64,
    last: Option<Instant>,
}

impl RatePacer {
    /// Burst allowance: two datagrams or one millisecond at `rate`, whichever is larger.
    fn burst(rate: u64, mtu: u64) -> f64 {
        (2 * mtu).max(rate / 1000) as f64
    }

    /// Whether a datagram of up to `mtu` bytes may be sent at `now` with
    /// pacing `rate` (bytes/s); if not, the instant at which it may.
    pub fn check(&mut self, now: Instant, rate: Option<u64>, mtu: u64) -> Result<(), Instant> {
        let Some(rate) = rate.filter(|&r| r > 0) else {
            self.last = None;
            return Ok(());
        };
        let burst = Self::burst(rate, mtu);
        match self.last {
            None => self.tokens = burst,
            Some(last) => {
                let dt = now.saturating_duration_since(last).as_secs_f64();
                self.tokens = (self.tokens + dt * rate as f64).min(burst);
            }
        }
        self.last = Some(now);
        if self.tokens >= mtu as f64 {
            Ok(())
        } else {
            let wait = (mtu as f64 - self.tokens) / rate as f64;
            Err(now + Duration::from_secs_f64(wait).max(Duration::from_micros(1)))
        }
    }

    /// `bytes` were sent.
    pub fn on_sent(&mut self, bytes: usize) {
        if self.last.is_some() {
            self.tokens -= bytes as f64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_to_the_rate_after_the_burst() {
        let t0 = Instant::now();
        let mut p = RatePacer::default();
        let rate = 1_200_000; // 1000 datagrams of 1200 bytes per second
        let mut sent = 0;
        let mut now = t0;
        while now < t0 + Duration::from_millis(100) {
            match p.check(now, Some(rate), 1200) {
                Ok(()) => {
                    p.on_sent(1200);
                    sent += 1;
                }
                Err(at) => now = at,
            }
        }
        // 100 ms at 1000/s is 100 datagrams, plus the initial burst of 2.
        assert!((100..=103).contains(&sent), "{sent}");
        assert!(p.check(now, None, 1200).is_ok());
    }
}
