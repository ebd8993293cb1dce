//! Latency recording: HDR histogram in ns, summaries in µs.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Records latencies in nanoseconds with 3 significant digits (relative error ≤ 0.1 %).
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
    /// Exact sum, so the mean is not subject to histogram bucketing.
    sum_ns: u128,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    /// Empty recorder. The histogram auto-resizes, so any `u64` latency is accepted.
    pub fn new() -> Self {
        let hist = Histogram::new(3).expect("3 significant digits is a valid precision");
        Self { hist, sum_ns: 0 }
    }

    /// Records one latency.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        // `record` grows the auto-resizing histogram; `saturating_record` would clamp instead.
        if self.hist.record(ns).is_err() {
            self.hist.saturating_record(ns);
        }
        self.sum_ns += ns as u128;
    }

    /// Records `count` samples of `ns` in the histogram only (the caller adds their sum with
    /// [`LatencyRecorder::add_sum`]).
    pub(crate) fn record_n_raw(&mut self, ns: u64, count: u64) {
        if self.hist.record_n(ns, count).is_err() {
            self.hist.saturating_record_n(ns, count);
        }
    }

    /// Adds to the exact sum of the samples.
    pub(crate) fn add_sum(&mut self, ns: u128) {
        self.sum_ns += ns;
    }

    /// Same samples, sum and histogram fields (tests).
    #[cfg(test)]
    pub(crate) fn same_as(&self, other: &LatencyRecorder) -> bool {
        self.sum_ns == other.sum_ns
            && self.hist == other.hist
            && format!("{:?}", self.hist) == format!("{:?}", other.hist)
    }

    /// Adds every sample of another recorder.
    pub fn merge(&mut self, other: &LatencyRecorder) {
        // Both auto-resize, so adding cannot fail for range reasons.
        self.hist
            .add(&other.hist)
            .expect("auto-resizing histograms always merge");
        self.sum_ns += other.sum_ns;
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Exact mean in ns (0 when empty).
    pub fn mean_ns(&self) -> f64 {
        if self.count() == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count() as f64
        }
    }

    /// Value at quantile `q` (0..=1) in ns, 0 when empty.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.count() == 0 {
            0
        } else {
            self.hist.value_at_quantile(q)
        }
    }

    /// Removes every sample.
    pub fn reset(&mut self) {
        self.hist.reset();
        self.sum_ns = 0;
    }

    /// Summary in microseconds.
    pub fn summary(&self) -> LatencySummary {
        let us = |ns: u64| ns as f64 / 1e3;
        if self.count() == 0 {
            return LatencySummary::default();
        }
        LatencySummary {
            count: self.count(),
            mean: self.mean_ns() / 1e3,
            p50: us(self.quantile_ns(0.5)),
            p90: us(self.quantile_ns(0.9)),
            p99: us(self.quantile_ns(0.99)),
            p999: us(self.quantile_ns(0.999)),
            p9999: us(self.quantile_ns(0.9999)),
            max: us(self.hist.max()),
        }
    }

    /// Points of the latency CDF, `(latency µs, cumulative fraction)`, one per distinct
    /// histogram bucket holding samples (for CDF plots).
    pub fn cdf_us(&self) -> Vec<(f64, f64)> {
        let n = self.count();
        if n == 0 {
            return Vec::new();
        }
        let mut seen = 0u64;
        self.hist
            .iter_recorded()
            .map(|v| {
                seen += v.count_at_value();
                (v.value_iterated_to() as f64 / 1e3, seen as f64 / n as f64)
            })
            .collect()
    }
}

/// Latency distribution summary; every value in microseconds. All zero for no samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Mean (exact).
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// 99.99th percentile.
    pub p9999: f64,
    /// Maximum.
    pub max: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_uniform_samples() {
        let mut r = LatencyRecorder::new();
        for i in 1..=10_000u64 {
            r.record(i * 1000); // 1 µs .. 10 ms
        }
        let s = r.summary();
        assert_eq!(s.count, 10_000);
        assert!((s.mean - 5000.5).abs() < 1e-6, "mean is exact: {}", s.mean);
        assert!((s.p50 - 5000.0).abs() / 5000.0 < 0.002, "p50 {}", s.p50);
        assert!((s.p99 - 9900.0).abs() / 9900.0 < 0.002, "p99 {}", s.p99);
        assert!((s.max - 10_000.0).abs() / 10_000.0 < 0.002);
        assert!(
            s.p50 <= s.p90
                && s.p90 <= s.p99
                && s.p99 <= s.p999
                && s.p999 <= s.p9999
                && s.p9999 <= s.max
        );
    }

    #[test]
    fn empty_is_zero_and_merge_adds() {
        let mut a = LatencyRecorder::new();
        assert_eq!(a.summary(), LatencySummary::default());
        assert!(a.cdf_us().is_empty());
        let mut b = LatencyRecorder::new();
        a.record(0);
        b.record(2000);
        b.record(u64::MAX);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        let cdf = a.cdf_us();
        assert_eq!(cdf.last().unwrap().1, 1.0);
        a.reset();
        assert_eq!(a.count(), 0);
    }
}
