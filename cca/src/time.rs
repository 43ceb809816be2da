//! Explicit time.
//!
//! Algorithms never read a clock: every call carries `now` as a [`Time`], a
//! count of nanoseconds since an epoch the caller chooses (connection start,
//! TSC origin, or virtual time zero). The same code therefore runs on a NIC,
//! on a monotonic clock and in the emulator.

use core::ops::{Add, Sub};
use std::time::Duration;

/// A point in time: nanoseconds since a caller-chosen epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(u64);

impl Time {
    /// The epoch itself.
    pub const ZERO: Time = Time(0);

    /// A time `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Self {
        Time(nanos)
    }

    /// A time `micros` microseconds after the epoch.
    pub const fn from_micros(micros: u64) -> Self {
        Time(micros * 1_000)
    }

    /// A time `millis` milliseconds after the epoch.
    pub const fn from_millis(millis: u64) -> Self {
        Time(millis * 1_000_000)
    }

    /// A time `secs` seconds after the epoch (negative or NaN clamp to zero).
    pub fn from_secs_f64(secs: f64) -> Self {
        Time((secs.max(0.0) * 1e9) as u64)
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Seconds since the epoch.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// The time elapsed from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, rhs: Duration) -> Time {
        Time(self.0.saturating_add(duration_nanos(rhs)))
    }
}

impl Sub<Duration> for Time {
    type Output = Time;
    fn sub(self, rhs: Duration) -> Time {
        Time(self.0.saturating_sub(duration_nanos(rhs)))
    }
}

/// A duration in nanoseconds as `u64`, saturating (584 years is plenty).
pub fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        let t = Time::from_millis(5);
        assert_eq!(t - Duration::from_secs(1), Time::ZERO);
        assert_eq!(Time::ZERO.saturating_since(t), Duration::ZERO);
        assert_eq!(
            (t + Duration::from_millis(20)).saturating_since(t),
            Duration::from_millis(20)
        );
    }
}
