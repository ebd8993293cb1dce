//! Second-hit admission with bounded memory: a line is admitted on its second miss within a
//! window, the misses remembered in Bloom filters rather than a table of keys (nhit-2 in a
//! fixed number of bits; "cache on second hit", Maggs and Sitaraman, 2015; libCacheSim's
//! `bloomfilter` admissioner).
//!
//! Two filters of `m` bits and `k` hash functions each: misses are added to the current one;
//! when it has taken `window` keys it becomes the previous one and a cleared filter the
//! current one, so a miss is remembered for between one and two windows and memory is fixed
//! at `2m` bits whatever the trace. A key is "seen" if either filter holds it: never "not
//! seen" for a key added in the last window (no false negatives), and "seen" falsely with
//! probability at most `1 − (1 − f)²` ≈ `2f`, where `f = (1 − e^(−k·window/m))^k` is one
//! full filter's false-positive rate. With the default 10 bits a key (`k` = 7) `f` ≈ 0.82 %,
//! so about 1.6 % of first misses are admitted as if second.

use super::Admission;
use tiercache_core::splitmix::mix64;
use tiercache_core::LineKey;

/// nhit-2 over two generations of Bloom filters (see the module docs).
#[derive(Debug, Clone)]
pub struct BloomSecondHit {
    current: Vec<u64>,
    previous: Vec<u64>,
    /// Bits per filter, a power of two.
    bits: usize,
    hashes: u32,
    /// Keys a filter takes before the generations turn.
    window: usize,
    added: usize,
}

impl BloomSecondHit {
    /// Filters for windows of `window` keys at `bits_per_key` bits a key (at least 1;
    /// rounded up so each filter is a power of two bits), `k = round(bits_per_key · ln 2)`
    /// hash functions (at least 1).
    pub fn new(window: usize, bits_per_key: u32) -> Self {
        let window = window.max(1);
        let bits = (window * bits_per_key.max(1) as usize)
            .next_power_of_two()
            .max(64);
        let hashes = ((f64::from(bits_per_key) * std::f64::consts::LN_2).round() as u32).max(1);
        Self {
            current: vec![0; bits / 64],
            previous: vec![0; bits / 64],
            bits,
            hashes,
            window,
            added: 0,
        }
    }

    /// Hash functions per key.
    pub fn hashes(&self) -> u32 {
        self.hashes
    }

    /// The false-positive rate of one filter holding a whole window, `(1 − e^(−k·n/m))^k`.
    pub fn filter_false_positive_rate(&self) -> f64 {
        let (k, n, m) = (self.hashes as f64, self.window as f64, self.bits as f64);
        (1.0 - (-k * n / m).exp()).powf(k)
    }

    /// The bit positions of `key` in a filter of `bits` bits (double hashing over two halves
    /// of one 64-bit hash).
    fn positions(bits: usize, hashes: u32, key: u64) -> impl Iterator<Item = usize> {
        let h = mix64(key ^ 0x5851_F42D_4C95_7F2D);
        let (h1, h2) = (h as u32 as u64, (h >> 32) | 1);
        let mask = bits as u64 - 1;
        (0..u64::from(hashes)).map(move |i| (h1.wrapping_add(i.wrapping_mul(h2)) & mask) as usize)
    }

    fn holds(filter: &[u64], bits: usize, hashes: u32, key: u64) -> bool {
        Self::positions(bits, hashes, key).all(|b| filter[b / 64] >> (b % 64) & 1 == 1)
    }

    /// Whether `key` was added in this window or the last (or is a false positive).
    pub fn seen(&self, key: u64) -> bool {
        Self::holds(&self.current, self.bits, self.hashes, key)
            || Self::holds(&self.previous, self.bits, self.hashes, key)
    }

    /// Remembers `key`, turning the generations when the current filter is full.
    pub fn add(&mut self, key: u64) {
        if self.added >= self.window {
            std::mem::swap(&mut self.current, &mut self.previous);
            self.current.fill(0);
            self.added = 0;
        }
        for b in Self::positions(self.bits, self.hashes, key) {
            self.current[b / 64] |= 1 << (b % 64);
        }
        self.added += 1;
    }
}

impl Admission for BloomSecondHit {
    fn name(&self) -> &'static str {
        "bloom"
    }

    fn admit(&mut self, key: LineKey, _victim: Option<LineKey>) -> bool {
        if self.seen(key.0) {
            return true;
        }
        self.add(key.0);
        false
    }

    fn memory_bytes(&self) -> usize {
        (self.current.capacity() + self.previous.capacity()) * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    proptest! {
        /// Against a set of the keys added in this window and the last (the reference model):
        /// never "not seen" for one of them, and admission on a key's second miss within it.
        #[test]
        fn never_forgets_a_key_of_the_window(keys in proptest::collection::vec(0u64..500, 1..1000),
                                             window in 1usize..100) {
            let mut b = BloomSecondHit::new(window, 10);
            let (mut current, mut previous) = (HashSet::new(), HashSet::new());
            for k in keys {
                let remembered = current.contains(&k) || previous.contains(&k);
                let admitted = b.admit(LineKey(k), None);
                if remembered {
                    prop_assert!(admitted, "key {} seen in the window, not admitted", k);
                }
                if !admitted {
                    if current.len() >= window {
                        previous = std::mem::take(&mut current);
                    }
                    current.insert(k);
                }
                for &r in current.iter().chain(&previous) {
                    prop_assert!(b.seen(r));
                }
            }
        }
    }

    /// The documented false-positive rate holds: keys never added are "seen" at about `2f`.
    #[test]
    fn false_positives_as_documented() {
        let window = 10_000;
        let mut b = BloomSecondHit::new(window, 10);
        // Two full windows: both filters full.
        for k in 0..2 * window as u64 - 1 {
            b.add(k);
        }
        let f = b.filter_false_positive_rate();
        assert!(f < 0.01, "one filter's rate {f}");
        let probes = 200_000u64;
        let false_seen = (0..probes).filter(|i| b.seen(1 << 40 | i)).count() as f64;
        let rate = false_seen / probes as f64;
        let bound = 1.0 - (1.0 - f) * (1.0 - f);
        // The filters are larger than the window (rounded up to a power of two): below the bound.
        assert!(
            rate <= bound * 1.2 + 0.001,
            "rate {rate} above 2f = {bound}"
        );
    }

    #[test]
    fn memory_is_fixed_by_the_window() {
        let mut b = BloomSecondHit::new(1000, 10);
        let before = b.memory_bytes();
        for k in 0..100_000 {
            b.admit(LineKey(k), None);
        }
        assert_eq!(b.memory_bytes(), before);
        // 16,384 bits a filter (10,000 rounded up), two filters.
        assert_eq!(before, 2 * 16_384 / 8);
    }
}
