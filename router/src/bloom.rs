//! A fixed-size Bloom filter used to count distinct flows per window.
//!
//! A key selects one 64-bit word (blocked Bloom filter) and `k` bit positions
//! in it by double hashing (Kirsch & Mitzenmacher, "Less hashing, same
//! performance", 2006): `g_i = h1 + i * h2 mod 64`, from a 64-bit mix of the key. [`Bloom::insert`] reports
//! whether the key was new (at least one of its bits was clear), so a caller
//! counts distinct keys by counting `true` results; false positives make it
//! undercount by about `(1 - e^{-kn/m})^k` (a little more in the blocked
//! layout, as keys do not spread evenly over words). The bit array is allocated once;
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
    ///
    /// Blocked (Putze, Sanders & Singler, "Cache-, hash- and space-efficient
    /// Bloom filters", 2007): the `k` bits of a key lie in one 64-bit word,
    /// so an insert is one load, one compare and one store on the
    /// discipline's per-packet path instead of `k` scattered ones. The word
    /// comes from the high half of the mix, the bit positions from double
    /// hashing on the low half.
    #[inline]
    pub fn insert(&mut self, key: u64) -> bool {
        let h = mix64(key ^ 0xB100_3F11_7E25_0001);
        let word = ((h >> 32) & (self.mask >> 6)) as usize;
        let (h1, h2) = (h & 0xFFFF, ((h >> 16) & 0xFFFF) | 1);
        let mut bits = 0u64;
        for i in 0..u64::from(self.hashes) {
            bits |= 1 << (h1.wrapping_add(i.wrapping_mul(h2)) & 63);
        }
        let Some(w) = self.words.get_mut(word) else {
            return false;
        };
        let new = *w & bits != bits;
        *w |= bits;
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
