//! A latency tally for hot loops: counts in the buckets of [`LatencyRecorder`]'s histogram,
//! turned into a recorder once, when the figures are read.
//!
//! Recording into the HDR histogram costs about 70 instructions a value (a general index
//! computation, a resize test, min and max tracking through its internal fields); a simulator
//! records one per request. The tally keeps the same buckets (3 significant digits, unit 1 ns:
//! 2048 sub-buckets, each bucket after the first covering the upper half at twice the width of
//! the one before) in a plain array, with the exact count, sum, smallest non-zero value and
//! largest value beside. [`LatencyTally::to_recorder`] records them into a histogram so that it
//! equals, field for field, the one recording every value would have built: each bucket's
//! count at a value of that bucket, the smallest non-zero and the largest value themselves
//! (the histogram tracks those exactly), and the same growth (its size follows the largest
//! value).

use crate::LatencyRecorder;

/// log2 of the histogram's sub-buckets per bucket (3 significant digits: 2 × 10³ ≤ 2^11).
const SUB_BUCKET_BITS: u32 = 11;
/// Half of the sub-buckets: buckets after the first use their upper half only.
const HALF_BITS: u32 = SUB_BUCKET_BITS - 1;
const HALF: usize = 1 << HALF_BITS;

/// Latencies in nanoseconds, counted in the buckets of [`LatencyRecorder`]'s histogram.
#[derive(Debug, Clone, Default)]
pub struct LatencyTally {
    /// Values per histogram index (grown as values need).
    counts: Vec<u64>,
    count: u64,
    sum_ns: u128,
    /// Smallest non-zero value recorded (`None` before any).
    min_nz: Option<u64>,
    /// Largest value recorded.
    max: u64,
}

/// The histogram's index of `v` (`hdrhistogram`'s `index_for` with unit 1 and 2048
/// sub-buckets: the bucket from the leading zeros, the sub-bucket from the bits below).
#[inline]
fn index_of(v: u64) -> usize {
    let bucket = (64 - SUB_BUCKET_BITS) - (v | ((1 << SUB_BUCKET_BITS) - 1)).leading_zeros();
    let sub = (v >> bucket) as usize;
    ((bucket as usize + 1) << HALF_BITS) + sub - HALF
}

/// The lowest value of index `i` (the inverse of [`index_of`] on bucket bounds).
fn value_of(i: usize) -> u64 {
    let bucket = (i >> HALF_BITS) as i64 - 1;
    let mut sub = (i & (HALF - 1)) + HALF;
    let bucket = if bucket < 0 {
        // The first bucket's lower half.
        sub -= HALF;
        0
    } else {
        bucket as u32
    };
    (sub as u64) << bucket
}

impl LatencyTally {
    /// Empty tally.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one latency (inlined: a simulator records one per request, and the call costs
    /// about as much as the recording).
    #[inline(always)]
    pub fn record(&mut self, ns: u64) {
        let i = index_of(ns);
        match self.counts.get_mut(i) {
            Some(c) => *c += 1,
            None => self.grow_and_count(i),
        }
        self.count += 1;
        self.sum_ns += u128::from(ns);
        if ns > self.max {
            self.max = ns;
        }
        if ns != 0 && self.min_nz.is_none_or(|m| ns < m) {
            self.min_nz = Some(ns);
        }
    }

    #[cold]
    #[inline(never)]
    fn grow_and_count(&mut self, i: usize) {
        // Whole buckets at a time, as the histogram grows.
        let len = ((i >> HALF_BITS) + 1) << HALF_BITS;
        self.counts.resize(len.max(i + 1), 0);
        self.counts[i] += 1;
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The recorder that recording every value into [`LatencyRecorder::record`] would have
    /// built (equal histogram, same exact sum).
    pub fn to_recorder(&self) -> LatencyRecorder {
        let mut r = LatencyRecorder::new();
        if self.count == 0 {
            return r;
        }
        // The largest value first (the histogram grows to its final size at once) and on its
        // own; the smallest non-zero value carries its bucket's count, so the histogram's
        // tracked extremes are the values themselves.
        r.record_n_raw(self.max, 1);
        let (max_i, min_i) = (index_of(self.max), self.min_nz.map(index_of));
        for (i, &c) in self.counts.iter().enumerate() {
            let c = c - u64::from(i == max_i);
            if c == 0 {
                continue;
            }
            let v = match self.min_nz {
                Some(m) if Some(i) == min_i => m,
                _ => value_of(i),
            };
            r.record_n_raw(v, c);
        }
        r.add_sum(self.sum_ns);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::Histogram;
    use proptest::prelude::*;

    fn values() -> impl Strategy<Value = u64> {
        prop_oneof![
            0u64..4096,
            0u64..10_000_000,
            any::<u64>().prop_map(|v| v >> 20),
            any::<u64>(),
        ]
    }

    proptest! {
        /// The index and its lowest value are the histogram's own.
        #[test]
        fn buckets_are_the_histograms(v in values()) {
            let h = Histogram::<u64>::new(3).unwrap();
            prop_assert_eq!(value_of(index_of(v)), h.lowest_equivalent(v));
            prop_assert_eq!(index_of(value_of(index_of(v))), index_of(v));
        }

        /// A tally turned into a recorder equals the recorder of the same values.
        #[test]
        fn tally_equals_recording_each_value(vs in proptest::collection::vec(values(), 0..300)) {
            let mut direct = LatencyRecorder::new();
            let mut tally = LatencyTally::new();
            for &v in &vs {
                direct.record(v);
                tally.record(v);
            }
            let built = tally.to_recorder();
            prop_assert_eq!(tally.count(), vs.len() as u64);
            prop_assert!(built.same_as(&direct));
            prop_assert_eq!(built.summary(), direct.summary());
            prop_assert_eq!(built.cdf_us(), direct.cdf_us());
            // Merged into another recorder, it adds what the direct one adds.
            let mut a = LatencyRecorder::new();
            a.record(1234);
            let mut b = a.clone();
            a.merge(&built);
            b.merge(&direct);
            prop_assert!(a.same_as(&b));
        }
    }
}
