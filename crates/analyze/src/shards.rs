//! SHARDS (Waldspurger et al., FAST'15): approximate miss-ratio curves from a spatially hashed
//! sample of lines. A line is sampled when `hash(line) mod P < T`; the sampling rate is
//! `R = T / P`, and a sampled stack distance `d` stands for `d / R` in the full trace.
//!
//! Fixed-rate mode keeps `T` constant. Fixed-size mode bounds the number of tracked lines: when
//! the sample outgrows the bound, `T` drops to the largest tracked hash, lines at or above it
//! leave the sample, and the histogram so far is rescaled by `T_new / T_old`. Both modes apply
//! the SHARDS-adj correction of the sample size at query time.

use crate::stack::StackDistance;
use std::collections::BinaryHeap;

const MODULUS: u64 = 1 << 24;

fn hash(key: u64) -> u64 {
    let mut z = key.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) % MODULUS
}

/// A SHARDS sampler producing an approximate LRU miss-ratio curve.
#[derive(Debug, Clone)]
pub struct Shards {
    threshold: u64,
    max_entries: Option<usize>,
    stack: StackDistance,
    /// Tracked lines by hash, largest first (fixed-size mode only).
    heap: BinaryHeap<(u64, u64)>,
    /// Weighted counts of scaled distances, in buckets of `bucket` lines.
    hist: Vec<f64>,
    bucket: f64,
    cold: f64,
    total: f64,
    accesses: u64,
    peak_entries: usize,
}

impl Shards {
    /// Fixed-rate SHARDS at sampling rate `rate` (0 < rate ≤ 1).
    pub fn fixed_rate(rate: f64) -> Self {
        Self::new(rate, None)
    }

    /// Fixed-size SHARDS tracking at most `max_entries` lines, starting at rate 1.
    pub fn fixed_size(max_entries: usize) -> Self {
        Self::new(1.0, Some(max_entries.max(1)))
    }

    fn new(rate: f64, max_entries: Option<usize>) -> Self {
        let rate = rate.clamp(1.0 / MODULUS as f64, 1.0);
        Self {
            threshold: ((rate * MODULUS as f64).round() as u64).max(1),
            max_entries,
            stack: StackDistance::new(),
            heap: BinaryHeap::new(),
            hist: Vec::new(),
            bucket: 1.0 / rate,
            cold: 0.0,
            total: 0.0,
            accesses: 0,
            peak_entries: 0,
        }
    }

    /// Current sampling rate.
    pub fn rate(&self) -> f64 {
        self.threshold as f64 / MODULUS as f64
    }

    /// Most lines tracked at once.
    pub fn peak_entries(&self) -> usize {
        self.peak_entries
    }

    /// Accesses offered (sampled or not).
    pub fn accesses(&self) -> u64 {
        self.accesses
    }

    /// Offers one line access.
    #[inline]
    pub fn access(&mut self, key: u64) {
        self.accesses += 1;
        let h = hash(key);
        if h >= self.threshold {
            return;
        }
        let d = self.stack.access(key);
        if d.is_none() && self.max_entries.is_some() {
            self.heap.push((h, key));
            self.shrink();
            if hash(key) >= self.threshold {
                return; // the new line itself fell out of the sample
            }
        }
        self.peak_entries = self.peak_entries.max(self.stack.distinct() as usize);
        match d {
            None => self.cold += 1.0,
            Some(d) => {
                let scaled = d as f64 / self.rate();
                let b = (scaled / self.bucket) as usize;
                if self.hist.len() <= b {
                    self.hist.resize(b + 1, 0.0);
                }
                self.hist[b] += 1.0;
            }
        }
        self.total += 1.0;
    }

    fn shrink(&mut self) {
        let Some(max) = self.max_entries else { return };
        while self.stack.distinct() as usize > max {
            let (top, _) = *self.heap.peek().expect("heap holds every tracked line");
            let old = self.threshold;
            self.threshold = top;
            while self.heap.peek().is_some_and(|&(h, _)| h >= top) {
                let (_, k) = self.heap.pop().expect("peeked");
                self.stack.remove(k);
            }
            let scale = self.threshold as f64 / old as f64;
            self.hist.iter_mut().for_each(|c| *c *= scale);
            self.cold *= scale;
            self.total *= scale;
        }
    }

    /// Approximate miss ratio of an LRU cache of `lines` lines.
    pub fn miss_ratio(&self, lines: u64) -> f64 {
        if self.total == 0.0 {
            return 0.0;
        }
        let first_miss_bucket = ((lines as f64) / self.bucket).floor() as usize;
        // Distances in buckets beyond the cache size miss; the bucket holding the boundary is
        // split in proportion.
        let mut misses = self.cold;
        for (b, &c) in self.hist.iter().enumerate().skip(first_miss_bucket) {
            let lo = b as f64 * self.bucket;
            let hi = lo + self.bucket;
            let frac = if lo >= lines as f64 {
                1.0
            } else {
                ((hi - lines as f64) / self.bucket).clamp(0.0, 1.0)
            };
            misses += c * frac;
        }
        // SHARDS-adj: the sample holds more or fewer accesses than `accesses × R` by chance,
        // mostly through a few hot lines; count the difference as reuses at the smallest
        // distance (hits at any size) so the ratio is taken over the expected sample size.
        let expected = self.accesses as f64 * self.rate();
        let denominator = if expected > 0.0 {
            expected.max(misses)
        } else {
            self.total
        };
        (misses / denominator).clamp(0.0, 1.0)
    }

    /// Heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.stack.memory_bytes() + self.heap.capacity() * 16 + self.hist.capacity() * 8
    }
}
