//! A count-min frequency sketch with aging: TinyLFU's popularity estimate (Einziger, Friedman
//! & Manes, "TinyLFU", ACM TOS 2017), as W-TinyLFU ([`crate::WTinyLfu`]) and admission filters
//! use it.
//!
//! Four rows of 4-bit counters, `width` counters a row, `width` the smallest power of two
//! that is at least the expected number of distinct items. A key picks one counter per row
//! with a row-specific hash (fixed seeds: the same keys give the same estimates in every run);
//! [`FrequencySketch::increment`] raises the four counters (saturating at 15) and
//! [`FrequencySketch::estimate`] is the smallest of them, an overestimate only when other keys
//! share all four counters. Every `10 × width` increments all counters are halved, so old
//! popularity fades (TinyLFU's "reset", with Caffeine's sample size of ten times the size).
//!
//! Memory: `4 × width × 4` bits, at most 4 bytes per expected item; allocated once in
//! [`FrequencySketch::new`], never after.

/// Number of rows (hash functions).
const ROWS: usize = 4;
/// Counters packed in one `u64` word.
const PER_WORD: usize = 16;
/// Largest counter value (4 bits).
const MAX_COUNT: u64 = 15;
/// Most counters a row has: keeps the index arithmetic in `u32` range and memory sane.
const MAX_WIDTH: usize = 1 << 30;
/// Fixed seed of each row's hash (odd 64-bit constants; any fixed values would do).
const SEEDS: [u64; ROWS] = [
    0x9E37_79B9_7F4A_7C15,
    0xC2B2_AE3D_27D4_EB4F,
    0x1656_67B1_9E37_79F9,
    0xD6E8_FEB8_6659_FD93,
];

/// Count-min sketch of 4-bit counters in 4 rows, halved periodically.
#[derive(Debug, Clone)]
pub struct FrequencySketch {
    /// Row `r`'s counters are words `r * words_per_row ..`, 16 counters a word.
    words: Vec<u64>,
    /// `width - 1`: a row index is a hash masked with it.
    mask: u64,
    words_per_row: usize,
    /// Increments since the last halving.
    increments: u64,
    /// Increments between halvings: `10 × width`.
    period: u64,
}

impl FrequencySketch {
    /// A sketch for about `expected_items` distinct keys: rows `width` counters wide, `width`
    /// the smallest power of two `>= expected_items` (at least 16, at most 2^30).
    pub fn new(expected_items: usize) -> Self {
        let width = expected_items
            .clamp(PER_WORD, MAX_WIDTH)
            .checked_next_power_of_two()
            .unwrap_or(MAX_WIDTH)
            .min(MAX_WIDTH);
        let words_per_row = width / PER_WORD;
        FrequencySketch {
            words: vec![0; ROWS * words_per_row],
            mask: width as u64 - 1,
            words_per_row,
            increments: 0,
            period: 10 * width as u64,
        }
    }

    /// Counters in one row.
    pub fn width(&self) -> usize {
        self.mask as usize + 1
    }

    /// Row `row`'s counter for `key`: (word index, bit shift inside the word).
    #[inline]
    fn position(&self, row: usize, key: u64) -> (usize, u32) {
        // A multiply-xorshift mix (splitmix64's finaliser) of the key and the row's seed:
        // every key bit reaches the low bits the mask keeps.
        let mut h = (key ^ SEEDS[row]).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^= h >> 31;
        h = h.wrapping_mul(0x94D0_49BB_1331_11EB);
        h ^= h >> 29;
        let index = (h & self.mask) as usize;
        (
            row * self.words_per_row + index / PER_WORD,
            (index % PER_WORD) as u32 * 4,
        )
    }

    /// Counts one occurrence of `key`; every `10 × width` calls all counters are halved.
    pub fn increment(&mut self, key: u64) {
        for row in 0..ROWS {
            let (w, shift) = self.position(row, key);
            if (self.words[w] >> shift) & MAX_COUNT < MAX_COUNT {
                self.words[w] += 1 << shift;
            }
        }
        self.increments += 1;
        if self.increments >= self.period {
            self.halve();
        }
    }

    /// Estimated occurrences of `key` since the counters were last halved (plus half the
    /// earlier ones), at most 15: the smallest of its four counters.
    pub fn estimate(&self, key: u64) -> u8 {
        (0..ROWS)
            .map(|row| {
                let (w, shift) = self.position(row, key);
                ((self.words[w] >> shift) & MAX_COUNT) as u8
            })
            .min()
            .unwrap_or(0)
    }

    /// Halves every counter (dropping the low bit of each 4-bit field) and restarts the count.
    fn halve(&mut self) {
        for w in &mut self.words {
            *w = (*w >> 1) & 0x7777_7777_7777_7777;
        }
        self.increments = 0;
    }

    /// Heap bytes of the counters.
    pub fn memory_bytes(&self) -> usize {
        self.words.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_is_a_power_of_two_at_least_the_items() {
        for (items, width) in [(0, 16), (1, 16), (16, 16), (17, 32), (1000, 1024)] {
            let s = FrequencySketch::new(items);
            assert_eq!(s.width(), width, "{items} items");
            assert_eq!(s.memory_bytes(), width * 2, "4 rows of 4 bits");
        }
    }

    #[test]
    fn counts_saturate_at_fifteen_and_never_underestimate() {
        let mut s = FrequencySketch::new(1024);
        for k in 0..200u64 {
            for _ in 0..(k % 7) {
                s.increment(k);
            }
        }
        for k in 0..200u64 {
            assert!(s.estimate(k) as u64 >= k % 7, "key {k}");
        }
        for _ in 0..40 {
            s.increment(5000);
        }
        assert_eq!(s.estimate(5000), 15);
    }

    #[test]
    fn counters_halve_after_ten_times_width_increments() {
        let mut s = FrequencySketch::new(16);
        for _ in 0..12 {
            s.increment(1);
        }
        assert_eq!(s.estimate(1), 12);
        // 147 increments of other keys: 159 in all, one short of 10 × 16.
        for k in 0..147u64 {
            s.increment(1000 + k % 3);
        }
        let before = s.estimate(1);
        assert!(before >= 12, "never an underestimate");
        // The 160th increment (key 1's four counters each + 1) is followed by the halving.
        s.increment(1);
        assert_eq!(s.estimate(1), before.div_ceil(2));
    }

    proptest::proptest! {
        /// Before any halving, no estimate is below the key's true count (capped at 15).
        #[test]
        fn estimates_never_undercount(keys in proptest::collection::vec(0u64..300, 0..600)) {
            let mut s = FrequencySketch::new(64);
            let mut counts = std::collections::HashMap::new();
            for &k in &keys {
                s.increment(k);
                *counts.entry(k).or_insert(0u64) += 1;
            }
            for (k, n) in counts {
                proptest::prop_assert!(s.estimate(k) as u64 >= n.min(15));
            }
        }
    }

    #[test]
    fn same_keys_give_same_estimates() {
        let run = || {
            let mut s = FrequencySketch::new(64);
            for k in 0..500u64 {
                s.increment(k * k % 97);
            }
            (0..100u64).map(|k| s.estimate(k)).collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }
}
