//! A fixed-size Bloom filter used to count distinct flows per window.
//!
//! `k` bit positions per key come from double hashing (Kirsch & Mitzenmacher,
//! "Less hashing, same performance", 2006): `g_i = h1 + i * h2 mod m`, with
//! `h1`, `h2` two halves of a 64-bit mix of the key. [`Bloom::insert`] reports
//! whether the key was new (at least one of its bits was clear), so a caller
//! counts distinct keys by counting `true` results; false positives make it
//! undercount by about `(1 - e^{-kn/m})^k`. The bit array is allocated once;
//! [`Bloom::clear`] resets it (RRMQS does so every window).

use crate::flow::mix64;

/// A Bloom filter over 64-bit keys.
#[derive(Clone, Debug)]
pub struct Bloom {
    words: Vec<u64>,
    mask: u64,
    hashes: u32,
}

impl Bloom {
    /// `bits` (rounded up to a power of two, at least 64) and `hashes` probes per key.
    pub fn new(bits: usize, hashes: u32) -> Self {
        let bits = bits.max(64).next_power_of_two();
        Bloom {
            words: vec![0; bits / 64],
            mask: bits as u64 - 1,
            hashes: hashes.max(1),
        }
    }

    /// Insert `key`; `true` if it was not (apparently) present.
    #[inline]
    pub fn insert(&mut self, key: u64) -> bool {
        let h = mix64(key ^ 0xB100_3F11_7E25_0001);
        let (h1, h2) = (h & 0xFFFF_FFFF, (h >> 32) | 1);
        let mut new = false;
        for i in 0..u64::from(self.hashes) {
            let bit = h1.wrapping_add(i.wrapping_mul(h2)) & self.mask;
            let (w, b) = ((bit / 64) as usize, bit % 64);
            if self.words[w] & (1 << b) == 0 {
                self.words[w] |= 1 << b;
                new = true;
            }
        }
        new
    }

    /// Forget every key.
    pub fn clear(&mut self) {
        self.words.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_distinct_keys_within_false_positive_bound() {
        let mut b = Bloom::new(1 << 14, 3);
        let distinct = (0..1000u64).filter(|&k| b.insert(k * 7919)).count();
        // n/m = 1000/16384: false-positive rate (1 - e^{-3n/m})^3 < 0.6 %.
        assert!((990..=1000).contains(&distinct), "{distinct}");
        assert!(!b.insert(7919), "a present key is not new");
        b.clear();
        assert!(b.insert(7919));
    }
}
