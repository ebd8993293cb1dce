//! A count-min sketch of access frequencies with aging, as TinyLFU keeps (Einziger, Friedman
//! and Manes, "TinyLFU: A Highly Efficient Cache Admission Policy", ACM ToS 2017): 4 rows of
//! 4-bit counters, `width` counters a row (a power of two at least the items expected), and
//! every counter halved once `10 × width` increments have been counted since the last
//! halving, so the estimates follow recent frequency rather than all of history.
//!
//! An estimate is the least of the key's four counters: never below the key's true count
//! since the last halving (capped at 15, halvings rounding down), above it only by
//! collisions. Rows are indexed by independent SplitMix64 hashes of the key with fixed seeds,
//! so a sketch is a function of the keys it was given, in order: no randomness, no hashing
//! order.

use tiercache_core::splitmix::mix64;

/// Rows of the sketch.
const ROWS: usize = 4;
/// Largest value of a 4-bit counter.
const MAX_COUNT: u64 = 15;
/// Increments between two halvings, as a multiple of the width.
const SAMPLE_FACTOR: usize = 10;
/// Per-row hash seeds (fixed: the sketch must be deterministic).
const SEEDS: [u64; ROWS] = [
    0x9E37_79B9_7F4A_7C15,
    0xC2B2_AE3D_27D4_EB4F,
    0x1656_67B1_9E37_79F9,
    0x85EB_CA77_C2B2_AE63,
];

/// Count-min sketch of 4 rows of 4-bit counters with periodic halving (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrequencySketch {
    /// Sixteen 4-bit counters a word; row `r`'s counter `i` is counter `r × width + i`.
    words: Vec<u64>,
    /// Counters per row, a power of two.
    width: usize,
    /// Increments since the last halving.
    increments: usize,
    /// Increments that trigger a halving (`10 × width`).
    sample: usize,
}

impl FrequencySketch {
    /// A sketch for about `expected_items` distinct keys: each row `expected_items` rounded
    /// up to a power of two counters (at least one), 2 bytes of counters per width unit.
    pub fn new(expected_items: usize) -> Self {
        let width = expected_items.max(1).next_power_of_two();
        let counters = ROWS * width;
        Self {
            words: vec![0; counters.div_ceil(16)],
            width,
            increments: 0,
            sample: SAMPLE_FACTOR * width,
        }
    }

    /// Counters per row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// The counter index of `key` in `row`.
    #[inline]
    fn index(&self, key: u64, row: usize) -> usize {
        row * self.width + (mix64(key ^ SEEDS[row]) as usize & (self.width - 1))
    }

    #[inline]
    fn get(&self, i: usize) -> u64 {
        (self.words[i / 16] >> ((i % 16) * 4)) & 0xF
    }

    /// Counts one access to `key` (each of its counters below 15 grows by one); the
    /// `10 × width`-th increment since the last halving halves every counter.
    pub fn increment(&mut self, key: u64) {
        for row in 0..ROWS {
            let i = self.index(key, row);
            if self.get(i) < MAX_COUNT {
                self.words[i / 16] += 1 << ((i % 16) * 4);
            }
        }
        self.increments += 1;
        if self.increments >= self.sample {
            self.halve();
        }
    }

    /// Halves every counter (rounding down): aging, so old popularity fades.
    fn halve(&mut self) {
        for w in &mut self.words {
            // Shift every nibble right by one; the mask drops the bit that crossed into the
            // nibble below.
            *w = (*w >> 1) & 0x7777_7777_7777_7777;
        }
        self.increments = 0;
    }

    /// The estimated accesses to `key` since aging began to count them (0..=15): the least
    /// of its four counters.
    pub fn estimate(&self, key: u64) -> u8 {
        (0..ROWS)
            .map(|row| self.get(self.index(key, row)))
            .min()
            .unwrap_or(0) as u8
    }

    /// Heap bytes of the counters.
    pub fn memory_bytes(&self) -> usize {
        self.words.capacity() * std::mem::size_of::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn width_is_a_power_of_two_at_least_the_items() {
        for (items, width) in [(0, 1), (1, 1), (3, 4), (1000, 1024), (1024, 1024)] {
            let s = FrequencySketch::new(items);
            assert_eq!(s.width(), width, "{items} items");
            // 4 rows × width × 4 bits, in whole words.
            assert_eq!(s.memory_bytes(), (4 * width).div_ceil(16) * 8);
        }
    }

    #[test]
    fn counters_saturate_at_fifteen_and_halve_after_ten_times_the_width() {
        let mut s = FrequencySketch::new(64);
        for _ in 0..20 {
            s.increment(7);
        }
        assert_eq!(s.estimate(7), 15);
        // 640 increments in all trigger the halving: 620 more of other keys.
        let mut k = 1000;
        while s.increments != 0 {
            s.increment(k);
            k += 1;
        }
        assert_eq!(k - 1000, 620);
        assert_eq!(s.estimate(7), 7, "15 halved, rounding down");
    }

    proptest! {
        /// Against an exact count (the reference model): the estimate is never below the true
        /// count (capped at 15) and, with a wide sketch over few keys, equal to it; halving
        /// halves the model too.
        #[test]
        fn never_underestimates(keys in proptest::collection::vec(0u64..64, 1..2000)) {
            let mut s = FrequencySketch::new(1 << 12);
            let mut exact: HashMap<u64, u64> = HashMap::new();
            for k in keys {
                s.increment(k);
                let c = exact.entry(k).or_insert(0);
                *c = (*c + 1).min(15);
                if s.increments == 0 {
                    exact.values_mut().for_each(|c| *c /= 2);
                }
                for (&key, &count) in &exact {
                    prop_assert!(u64::from(s.estimate(key)) >= count);
                }
            }
        }

        /// Same keys, same sketch, whatever else was built in between.
        #[test]
        fn deterministic(keys in proptest::collection::vec(any::<u64>(), 0..500)) {
            let mut a = FrequencySketch::new(100);
            let mut b = FrequencySketch::new(100);
            for &k in &keys { a.increment(k); }
            for &k in &keys { b.increment(k); }
            prop_assert_eq!(a, b);
        }
    }
}
