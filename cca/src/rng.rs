//! The one seeded pseudo-random generator used across Tollgate.
//!
//! Every random choice in the workspace — BBR's first ProbeBW phase, the
//! packet model's random losses, the router disciplines' drop and victim
//! choices (RED, CHOKe, RRMQS), the transport's test impairments, the bulk
//! data pattern and the emulator's draws — comes from a [`SimRng`] that the
//! caller creates with [`seeded`] and owns. There is no global or
//! thread-local generator and no seeding from the clock or the OS, so the same
//! seed gives the same run, bit for bit.
//!
//! [`SimRng`] is xoshiro256++ (Blackman & Vigna, "Scrambled linear
//! pseudorandom number generators", ACM TOMS 2021) from the maintained
//! `rand_xoshiro` crate: 256 bits of state, period 2^256 − 1, passes BigCrush,
//! a few cycles and no allocation per draw, so it is fine on per-packet paths.
//! [`seeded`] expands a `u64` seed into the state with SplitMix64, as
//! `rand_core`'s [`SeedableRng::seed_from_u64`] specifies for this generator.
//! It is not cryptographically secure; nothing here needs that.
//!
//! The helpers below are the only conversions the workspace uses; keeping them
//! here means every crate turns random bits into numbers the same way.

pub use rand_core::{Rng, SeedableRng};

/// The workspace's seeded pseudo-random generator: xoshiro256++.
///
/// Create one with [`seeded`]; draw with [`Rng::next_u64`], [`uniform_f64`],
/// [`below`] or [`chance`].
pub type SimRng = rand_xoshiro::Xoshiro256PlusPlus;

/// A generator whose whole sequence is determined by `seed`.
#[inline]
pub fn seeded(seed: u64) -> SimRng {
    SimRng::seed_from_u64(seed)
}

/// A uniform float in `[0, 1)` with 53 random bits (the top 53 of one draw).
#[inline]
pub fn uniform_f64(rng: &mut SimRng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A uniform integer in `[0, n)`; `0` when `n == 0`.
///
/// Lemire's multiply-shift reduction of one 64-bit draw: no division, no
/// loop, and a bias below `n / 2^64`.
#[inline]
pub fn below(rng: &mut SimRng, n: u64) -> u64 {
    ((u128::from(rng.next_u64()) * u128::from(n)) >> 64) as u64
}

/// `true` with probability `p` (`p <= 0` never, `p >= 1` always).
#[inline]
pub fn chance(rng: &mut SimRng, p: f64) -> bool {
    uniform_f64(rng) < p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = seeded(7);
        let mut b = seeded(7);
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(seeded(1).next_u64(), seeded(2).next_u64());
        // A zero seed is as good as any other.
        assert_ne!(seeded(0).next_u64(), 0);
    }

    #[test]
    fn uniform_floats_are_in_range_with_mean_one_half() {
        let mut rng = seeded(7);
        let mut sum = 0.0;
        for _ in 0..10_000 {
            let x = uniform_f64(&mut rng);
            assert!((0.0..1.0).contains(&x));
            sum += x;
        }
        assert!((sum / 10_000.0 - 0.5).abs() < 0.02);
    }

    #[test]
    fn below_stays_below_and_covers_the_range() {
        let mut rng = seeded(3);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            let x = below(&mut rng, 10);
            assert!(x < 10);
            seen[x as usize] += 1;
        }
        assert!(seen.iter().all(|&c| (800..1200).contains(&c)), "{seen:?}");
        assert_eq!(below(&mut rng, 0), 0);
        assert_eq!(below(&mut rng, 1), 0);
    }

    #[test]
    fn chance_follows_its_probability() {
        let mut rng = seeded(5);
        assert!(!(0..1000).any(|_| chance(&mut rng, 0.0)));
        assert!((0..1000).all(|_| chance(&mut rng, 1.0)));
        let hits = (0..10_000).filter(|_| chance(&mut rng, 0.3)).count();
        assert!((2800..3200).contains(&hits), "{hits}");
    }
}
