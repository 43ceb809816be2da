//! Timing noise: when emulated hosts react to what arrives.
//!
//! The emulator's hosts are perfect: a datagram is processed the instant it
//! arrives and the answer leaves at once. Real hosts are not, and the
//! difference decides drop-tail phase locking (the losses of two flows stay
//! in step with the bottleneck's transmission slots when nothing perturbs the
//! timing) and what packet-pair estimators such as CapProbe measure. The
//! default model (`topology.noise = "host"`) is the one measured on the
//! namespace testbed through real kernels (tools/reproduce/noise/README.md):
//!
//! * **Arrival is stamped, the reaction waits.** Every datagram is handed to
//!   the transport with its arrival time, as the kernel's receive timestamp
//!   does on a real host (the transport's driver uses it), so RTT samples and
//!   ACK gaps are as exact as the kernel's.
//! * **The host wakes up late.** A datagram that finds its host idle wakes
//!   it after a latency `L` drawn from [`WAKEUP_LATENCY_US`] (the
//!   measured distribution, times `topology.noise_scale`); datagrams that
//!   arrive before the wake-up join that batch. Only at the wake-up does the
//!   host run its transport and emit what it has to send: one ACK for the
//!   whole batch (the merged ACKs seen on real receivers), data in a burst
//!   whose packets keep the access link's spacing. A host's own timers also
//!   wake it, and a wake-up serves everything that arrived before it.
//!
//! So packets of one burst keep their spacing, bursts move by whole wake-up
//! latencies, and ACK compression (two ACKs closer at the sender than their
//! data was at the receiver) comes from batches as it does on a real host.
//!
//! `topology.noise = "iid"` keeps the older model: each emitted datagram is
//! delayed by an independent uniform draw in `[0, topology.jitter]`, FIFO
//! per host, data and ACKs alike; `"none"` adds nothing.

use tollgate_cca::rng::{self, SimRng};

/// Wake-up latency of a host, µs, as `(probability, latency)` points of its
/// distribution (linear between them): the time from a datagram's kernel
/// receive stamp on an idle receiver to the first datagram the receiver sends
/// after it (`wake_us` of tools/reproduce/noise/pcap_timing.py). Measured on
/// the namespace testbed with capture-testbed.sh on libra-1bdp.toml (both in
/// tools/reproduce/noise/, README.md there), 195,195 wake-ups; the tail is
/// cut at the 99.9th percentile (the longest, 6.9 ms, was a descheduled
/// process on a two-core machine).
pub const WAKEUP_LATENCY_US: [(f64, f64); 26] = [
    (0.0, 0.2),
    (0.05, 19.8),
    (0.10, 27.2),
    (0.15, 33.6),
    (0.20, 35.3),
    (0.25, 36.2),
    (0.30, 37.0),
    (0.35, 37.7),
    (0.40, 38.4),
    (0.45, 39.1),
    (0.50, 39.8),
    (0.55, 41.0),
    (0.60, 42.2),
    (0.65, 43.9),
    (0.70, 47.0),
    (0.75, 50.5),
    (0.80, 55.1),
    (0.85, 64.1),
    (0.90, 78.7),
    (0.95, 113.5),
    (0.97, 169.0),
    (0.98, 215.3),
    (0.99, 359.5),
    (0.995, 672.8),
    (0.999, 1828.9),
    (1.0, 1828.9),
];

/// Delay a packet picks up between two hosts besides the links' own
/// (veths, the router's polling), µs: exponential with mean
/// [`PATH_NOISE_SMALL_US`], or with probability [`PATH_NOISE_LARGE_P`]
/// exponential with mean [`PATH_NOISE_LARGE_US`]. It is drawn per packet
/// after the last link, before the host's interface, FIFO per flow and
/// direction, so it reorders nothing. It spreads packet pairs around the
/// bottleneck's spacing, and it compresses and expands ACK gaps: the gap change of
/// consecutive ACKs between the receiver's and the sender's interface
/// (`ack_change_us` of pcap_timing.py) measured p5 / p25 / p75 / p95 of
/// −22.2 / −1.2 / 1.2 / 17.9 µs on the testbed.
pub const PATH_NOISE_SMALL_US: f64 = 1.0;
/// See [`PATH_NOISE_SMALL_US`].
pub const PATH_NOISE_LARGE_US: f64 = 18.0;
/// See [`PATH_NOISE_SMALL_US`].
pub const PATH_NOISE_LARGE_P: f64 = 0.15;

/// Draws wake-up latencies from [`WAKEUP_LATENCY_US`].
#[derive(Debug)]
pub struct Wakeups {
    rng: SimRng,
    scale: f64,
}

impl Wakeups {
    /// Latencies scaled by `scale`, drawn from a stream seeded with `seed`.
    pub fn new(seed: u64, scale: f64) -> Self {
        Wakeups {
            rng: rng::seeded(seed),
            scale,
        }
    }

    /// One wake-up latency, ns.
    pub fn draw_ns(&mut self) -> u64 {
        let u = rng::uniform_f64(&mut self.rng);
        (quantile(&WAKEUP_LATENCY_US, u) * self.scale * 1e3) as u64
    }
}

/// Draws path-noise delays ([`PATH_NOISE_SMALL_US`]).
#[derive(Debug)]
pub struct PathNoise {
    rng: SimRng,
    scale: f64,
}

impl PathNoise {
    /// Delays scaled by `scale`, drawn from a stream seeded with `seed`.
    pub fn new(seed: u64, scale: f64) -> Self {
        PathNoise {
            rng: rng::seeded(seed),
            scale,
        }
    }

    /// One delay, ns.
    pub fn draw_ns(&mut self) -> u64 {
        let mean_us = if rng::chance(&mut self.rng, PATH_NOISE_LARGE_P) {
            PATH_NOISE_LARGE_US
        } else {
            PATH_NOISE_SMALL_US
        };
        let u = rng::uniform_f64(&mut self.rng);
        (-(1.0 - u).ln() * mean_us * self.scale * 1e3) as u64
    }
}

/// The value at probability `u` in `[0, 1]` of a distribution given by
/// `(probability, value)` points, increasing, from probability 0 to 1.
pub fn quantile(table: &[(f64, f64)], u: f64) -> f64 {
    let u = u.clamp(0.0, 1.0);
    let i = table
        .windows(2)
        .position(|w| u <= w[1].0)
        .unwrap_or(table.len() - 2);
    let ((p0, v0), (p1, v1)) = (table[i], table[i + 1]);
    if p1 <= p0 {
        return v1;
    }
    v0 + (v1 - v0) * (u - p0) / (p1 - p0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_follow_the_table() {
        let mut w = Wakeups::new(7, 1.0);
        let mut v: Vec<f64> = (0..40_000).map(|_| w.draw_ns() as f64 / 1e3).collect();
        v.sort_by(f64::total_cmp);
        for (p, want) in WAKEUP_LATENCY_US[1..20].iter().copied() {
            let got = v[(p * v.len() as f64) as usize];
            assert!(
                (got - want).abs() < 0.05 * want + 1.0,
                "p{p}: {got} vs {want}"
            );
        }
        let max = WAKEUP_LATENCY_US[WAKEUP_LATENCY_US.len() - 1].1;
        assert!(v[0] >= WAKEUP_LATENCY_US[0].1 && v[v.len() - 1] <= max);
        let mut double = Wakeups::new(7, 2.0);
        let mut single = Wakeups::new(7, 1.0);
        let (a, b) = (double.draw_ns(), single.draw_ns());
        assert!(a.abs_diff(2 * b) <= 1, "{a} vs 2 x {b}");
    }

    /// The gap change of two consecutive packets that each draw a path
    /// delay (FIFO) lands near the measured quantiles.
    #[test]
    fn path_noise_gap_changes_match_the_testbed() {
        let mut n = PathNoise::new(3, 1.0);
        let mut changes: Vec<f64> = (0..100_000)
            .map(|_| (n.draw_ns() as f64 - n.draw_ns() as f64) / 1e3)
            .collect();
        changes.sort_by(f64::total_cmp);
        let q = |p: f64| changes[(p * changes.len() as f64) as usize];
        // Testbed: -22.2 / -1.2 / 1.2 / 17.9 us at p5 / p25 / p75 / p95.
        assert!((-30.0..-14.0).contains(&q(0.05)), "p5 {}", q(0.05));
        assert!((-2.5..-0.3).contains(&q(0.25)), "p25 {}", q(0.25));
        assert!((0.3..2.5).contains(&q(0.75)), "p75 {}", q(0.75));
        assert!((14.0..30.0).contains(&q(0.95)), "p95 {}", q(0.95));
    }

    #[test]
    fn quantile_interpolates() {
        let t = [(0.0, 0.0), (0.5, 10.0), (0.9, 30.0), (1.0, 30.0)];
        assert_eq!(quantile(&t, 0.0), 0.0);
        assert_eq!(quantile(&t, 0.25), 5.0);
        assert!((quantile(&t, 0.7) - 20.0).abs() < 1e-9);
        assert_eq!(quantile(&t, 1.0), 30.0);
    }
}
