//! Seeded flow hashing.
//!
//! A [`FlowHasher`] maps a [`FlowKey`] to 64 bits. The seed is chosen per
//! router (from configuration), so a remote sender cannot aim many flows at
//! one bucket of a fixed-capacity table without knowing it.
//!
//! Construction: the key is read as five 64-bit words (two per address, one
//! for ports and protocol); each word is folded into the state as
//! `h = rotl((h ^ w) * φ, 31)` (φ = 0x9E3779B97F4A7C15, odd, so each step is a
//! bijection of `h`) starting from `h = mix64(seed)`, and the result passes
//! through [`mix64`], the SplitMix64 finaliser with full avalanche. One
//! multiply per word keeps the dependency chain short on the dataplane's
//! per-packet path. This is not a
//! cryptographic PRF, but with a secret seed it is good enough for bucket
//! selection (as Linux uses seeded jhash/siphash for the same purpose).

use crate::packet::FlowKey;

/// Stafford's "Mix13" 64-bit finaliser, the output function of SplitMix64
/// (Steele, Lea & Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014; constants from D. Stafford, "Better bit mixing", 2011).
///
/// A bijection of `u64` with full avalanche: every input bit flips each output
/// bit with probability about 1/2. Used as a hash mixer (here, in
/// [`crate::bloom`] and [`crate::cebinae`]), not as a random generator; random
/// draws come from [`tollgate_cca::rng`].
#[inline]
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A seeded hash of 5-tuples.
#[derive(Clone, Copy, Debug)]
pub struct FlowHasher {
    seed: u64,
}

impl FlowHasher {
    /// A hasher whose outputs depend on `seed`.
    pub const fn new(seed: u64) -> Self {
        FlowHasher {
            seed: mix64(seed ^ 0x7011_6A7E_0000_0001),
        }
    }

    /// The 64-bit hash of `key`.
    #[inline]
    pub fn hash(&self, key: &FlowKey) -> u64 {
        let w = |b: &[u8; 16], half: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[half * 8..half * 8 + 8]);
            u64::from_le_bytes(a)
        };
        let ports = (u64::from(key.src_port) << 32)
            | (u64::from(key.dst_port) << 16)
            | u64::from(key.proto);
        // One multiply per word, then a full avalanche: about half the
        // dependent multiplies of mixing every word with `mix64`.
        let mut h = self.seed;
        for word in [
            w(&key.src, 0),
            w(&key.src, 1),
            w(&key.dst, 0),
            w(&key.dst, 1),
            ports,
        ] {
            h = (h ^ word)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .rotate_left(31);
        }
        mix64(h)
    }
}

impl FlowHasher {
    /// [`FlowHasher::hash`] of the IPv4 5-tuple `(src, dst, proto, ports)`
    /// (its key holds the IPv4-mapped addresses), computed from the four
    /// address bytes: the mapped address's first word is zero and its second
    /// is `0xFFFF << 16 | addr << 32` read little-endian. Same value, without
    /// building the 37-byte key.
    #[inline(always)]
    pub fn hash_v4(
        &self,
        src: [u8; 4],
        dst: [u8; 4],
        proto: u8,
        src_port: u16,
        dst_port: u16,
    ) -> u64 {
        let mapped = |a: [u8; 4]| (u64::from(u32::from_le_bytes(a)) << 32) | 0xFFFF_0000;
        let ports = (u64::from(src_port) << 32) | (u64::from(dst_port) << 16) | u64::from(proto);
        let mut h = self.seed;
        for word in [0, mapped(src), 0, mapped(dst), ports] {
            h = (h ^ word)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .rotate_left(31);
        }
        mix64(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_v4_is_hash_of_the_mapped_key() {
        let h = FlowHasher::new(77);
        let mut x = 1u64;
        for _ in 0..10_000 {
            x = mix64(x);
            let b = x.to_le_bytes();
            let (src, dst) = ([b[0], b[1], b[2], b[3]], [b[4], b[5], b[6], b[7]]);
            let (sp, dp, proto) = ((x >> 17) as u16, (x >> 40) as u16, (x >> 33) as u8);
            let key = FlowKey::new(src.into(), dst.into(), proto, sp, dp);
            assert_eq!(h.hash_v4(src, dst, proto, sp, dp), h.hash(&key));
        }
    }

    #[test]
    fn seed_changes_hash_and_buckets_are_balanced() {
        let key = |i: u32| {
            FlowKey::new(
                std::net::Ipv4Addr::from(i).into(),
                "10.0.0.1".parse().unwrap(),
                17,
                1,
                2,
            )
        };
        let a = FlowHasher::new(1);
        let b = FlowHasher::new(2);
        assert_eq!(a.hash(&key(5)), a.hash(&key(5)));
        assert_ne!(a.hash(&key(5)), b.hash(&key(5)));
        // 64k sequential addresses into 64 buckets: every bucket within 10 % of the mean.
        let mut buckets = [0u32; 64];
        for i in 0..65_536 {
            buckets[(a.hash(&key(i)) % 64) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|&n| (921..=1127).contains(&n)),
            "{buckets:?}"
        );
    }
}
