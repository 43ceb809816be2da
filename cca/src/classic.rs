//! Small helpers shared by the classic variants ([`highspeed`](crate::highspeed),
//! [`scalable`](crate::scalable), [`bic`](crate::bic), [`htcp`](crate::htcp),
//! [`hybla`](crate::hybla), [`illinois`](crate::illinois), [`vegas`](crate::vegas),
//! [`veno`](crate::veno), [`westwood`](crate::westwood), [`yeah`](crate::yeah)):
//! fractional window growth, round-trip counting from send times, and
//! per-round RTT summaries. All state is a few words; nothing reads a clock.

use std::time::Duration;

use crate::Time;

/// Carries the fractional part of additive window increases, so that
/// `cwnd += a * mss * acked / cwnd` is exact on average even when one ACK's
/// share is less than a byte.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Fraction(f64);

impl Fraction {
    /// Add `bytes` (may be fractional; negative values are ignored) to `cwnd`.
    pub fn grow(&mut self, cwnd: &mut u64, bytes: f64) {
        if bytes.is_nan() || bytes <= 0.0 {
            return;
        }
        self.0 += bytes;
        let whole = self.0.floor();
        self.0 -= whole;
        *cwnd = cwnd.saturating_add(whole as u64);
    }

    /// Forget the carried fraction (after a reduction or an imposed window).
    pub fn reset(&mut self) {
        self.0 = 0.0;
    }
}

/// Round-trip rounds measured from send times: a round ends when a packet
/// sent at or after the start of the current round is acknowledged, and the
/// next round starts at that ACK. This is Linux's `snd_nxt`-based "once per
/// RTT" rule expressed with the `sent_time` every [`Ack`](crate::Ack) carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rounds {
    start: Time,
    count: u64,
}

impl Rounds {
    /// Feed one ACK; returns whether it ends the current round.
    pub fn on_ack(&mut self, now: Time, sent_time: Time) -> bool {
        if sent_time >= self.start {
            self.start = now;
            self.count += 1;
            true
        } else {
            false
        }
    }

    /// Rounds completed so far.
    pub fn count(&self) -> u64 {
        self.count
    }
}

/// Summary of the RTT samples seen during one round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundRtt {
    /// Smallest sample.
    pub min: Duration,
    /// Largest sample.
    pub max: Duration,
    /// Sum of samples (for the mean).
    pub sum: Duration,
    /// Number of samples.
    pub count: u32,
}

impl Default for RoundRtt {
    fn default() -> Self {
        RoundRtt {
            min: Duration::MAX,
            max: Duration::ZERO,
            sum: Duration::ZERO,
            count: 0,
        }
    }
}

impl RoundRtt {
    /// Add one sample.
    pub fn add(&mut self, rtt: Duration) {
        self.min = self.min.min(rtt);
        self.max = self.max.max(rtt);
        self.sum = self.sum.saturating_add(rtt);
        self.count = self.count.saturating_add(1);
    }

    /// Mean of the samples (zero if none).
    pub fn mean(&self) -> Duration {
        if self.count == 0 {
            Duration::ZERO
        } else {
            self.sum / self.count
        }
    }

    /// Return the summary and start a new, empty one.
    pub fn take(&mut self) -> RoundRtt {
        std::mem::take(self)
    }
}

/// Vegas's backlog estimate in segments: `cwnd * (rtt - base) / rtt`, the
/// number of this flow's packets sitting in queues (expected minus actual
/// rate, times the base RTT).
pub fn vegas_backlog(cwnd_segments: f64, rtt: Duration, base: Duration) -> f64 {
    if rtt.is_zero() || rtt <= base {
        return 0.0;
    }
    cwnd_segments * (rtt - base).as_secs_f64() / rtt.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fraction_carries_sub_byte_growth() {
        let mut f = Fraction::default();
        let mut cwnd = 1000;
        for _ in 0..10 {
            f.grow(&mut cwnd, 0.25);
        }
        assert_eq!(cwnd, 1002);
    }

    #[test]
    fn rounds_end_on_packets_sent_after_the_round_began() {
        let mut r = Rounds::default();
        let t = Time::from_millis;
        assert!(r.on_ack(t(100), t(0)));
        assert!(!r.on_ack(t(101), t(1)));
        assert!(r.on_ack(t(200), t(100)));
        assert_eq!(r.count(), 2);
    }
}
