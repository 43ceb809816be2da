//! Egress shaper: a token bucket at the bottleneck rate.
//!
//! Tokens are bytes. They accrue at `rate_bps / 8` per second up to
//! `burst_bytes`; a packet of `len` bytes may leave when the bucket holds at
//! least `min(len, burst_bytes)` tokens, and takes `len` of them (the bucket
//! may go negative for a packet larger than the burst, so the long-run rate is
//! exact for any size). This is the classic token bucket filter (as Linux
//! `sch_tbf`, RFC 2697's committed bucket) driven by `now` instead of a timer:
//! the owner asks [`TokenBucket::ready_at`] when the next packet may leave.
//! A `now` earlier than the last one seen adds no tokens and never panics.

use tollgate_cca::Time;

use crate::qdisc::{check, ConfigError};

const NAME: &str = "shaper";

/// Shaper parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShaperConfig {
    /// Output rate in bit/s. Default 100 Mbit/s.
    pub rate_bps: f64,
    /// Bucket depth in bytes. Default 3028 (two full Ethernet frames).
    pub burst_bytes: u64,
}

impl Default for ShaperConfig {
    fn default() -> Self {
        ShaperConfig {
            rate_bps: 100e6,
            burst_bytes: 3028,
        }
    }
}

impl ShaperConfig {
    /// Check every parameter.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::open_closed(NAME, "rate_bps", self.rate_bps, 0.0, 1e13)?;
        check::int(NAME, "burst_bytes", self.burst_bytes, 1, 1 << 40)
    }
}

/// A token bucket driven by explicit time.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    bytes_per_ns: f64,
    burst: f64,
    tokens: f64,
    last: Time,
}

impl TokenBucket {
    /// A full bucket at time zero.
    pub fn new(config: &ShaperConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(TokenBucket {
            bytes_per_ns: config.rate_bps / 8e9,
            burst: config.burst_bytes as f64,
            tokens: config.burst_bytes as f64,
            last: Time::ZERO,
        })
    }

    #[inline]
    fn refill(&mut self, now: Time) {
        if now > self.last {
            // Nanoseconds as u64 (`now > last`): no `Duration` round trip
            // (a split into seconds and back) on the per-packet path.
            let dt = (now.as_nanos() - self.last.as_nanos()) as f64;
            self.tokens = (self.tokens + dt * self.bytes_per_ns).min(self.burst);
            self.last = now;
        }
    }

    /// Take tokens for a `len`-byte packet if it may leave at `now`.
    #[inline]
    pub fn try_consume(&mut self, len: u32, now: Time) -> bool {
        self.refill(now);
        let need = f64::from(len).min(self.burst);
        if self.tokens + 1e-9 >= need {
            self.tokens -= f64::from(len);
            true
        } else {
            false
        }
    }

    /// The earliest time a `len`-byte packet may leave (at or after the last `now` seen).
    pub fn ready_at(&self, len: u32) -> Time {
        let need = f64::from(len).min(self.burst) - self.tokens;
        if need <= 0.0 {
            self.last
        } else {
            Time::from_nanos(
                self.last
                    .as_nanos()
                    .saturating_add((need / self.bytes_per_ns).ceil() as u64),
            )
        }
    }

    /// Tokens currently in the bucket (bytes; negative after an oversize packet).
    pub fn tokens(&self) -> f64 {
        self.tokens
    }
}
