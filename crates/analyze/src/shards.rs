//! SHARDS (Waldspurger et al., FAST'15): approximate LRU miss-ratio curves from a spatially
//! hashed sample of lines, with the hottest lines tracked exactly.
//!
//! A line is sampled when `hash(line) mod P < T`; the sampling rate is `R = T / P`.
//! Fixed-rate mode keeps `T` constant. Fixed-size mode bounds the number of tracked lines: when
//! the sample outgrows the bound, `T` drops to the largest tracked hash and lines at or above it
//! leave the sample.
//!
//! Plain spatial sampling is weak on skewed workloads in two ways, and both are addressed here:
//!
//! - **A few very hot lines carry much of the traffic**, and whether the hash happens to pick
//!   one of them swings the whole curve (on Zipf(0.95) over 2M lines the top hundred lines take
//!   a quarter of the accesses; a 1% sample holds about one of them). So hot lines are tracked
//!   exactly: a small HeavyKeeper-style table (4-way buckets of line and count, a colliding
//!   count decays with probability `1.08^-count`) sees every access, and a line whose count
//!   reaches [`PROMOTE_AT`] joins the hot set (bounded). From then on each access to it counts
//!   with weight 1, and the distinct hot lines between two accesses are counted exactly; a
//!   sampled line's accesses weigh `1/R`. Membership does not depend on the sampling hash, so
//!   the estimate stays unbiased whatever gets promoted. (A line promoted without having been
//!   sampled has no known previous access: that one access is left out.)
//! - **Small distances are unresolvable at rate R**: one sampled line in between stands for
//!   `1/R` lines. Instead, each tracked line also remembers how many accesses to lines *not*
//!   hot (`A`) and to sampled lines (`N`) had happened at its latest access. Between two of its
//!   accesses, the distinct non-hot lines are estimated as `A × S / N` (`S` distinct sampled
//!   lines in between: the sample gives the share of distinct lines among accesses, the
//!   counter gives the accesses), or `A` when `N = 0` (short gaps repeat little). The
//!   distance is `D = 1 + H + that` (`H` distinct hot lines), exact at `R = 1`.
//!
//! The miss ratio is a ratio estimator: weighted misses over weighted accesses. Each access
//! counts with its weight at the time (`1/R` then), so fixed-size mode needs no rescaling when
//! `R` drops. Distances go into a log-linear histogram (exact below 256 lines, 64 sub-buckets
//! per octave above) as unit intervals `(D − 1, D]`, from which the weight beyond any size is
//! read exactly at bucket edges (every power of two is one) and interpolated between.

use crate::stack::Marks;
use rustc_hash::FxHashMap;
use std::collections::BinaryHeap;

const MODULUS: u64 = 1 << 24;

/// A line joins the hot set when its count in the frequency table reaches this.
pub const PROMOTE_AT: u32 = 16;
/// Hot lines tracked exactly in fixed-rate mode (fixed-size mode: a quarter of the bound).
pub const HOT_LINES: usize = 1024;
/// Frequency-table entries in fixed-rate mode (fixed-size mode: the bound, at least 64).
const TABLE_ENTRIES: usize = 1 << 13;

// The sampling hash of a line: SplitMix64 of its number.
pub(crate) use tiercache_core::splitmix::hash64 as mix;

/// Whether a line with [`mix`] `h` is sampled at threshold `threshold` (see
/// [`sample_threshold`]).
#[inline]
pub(crate) fn sampled(h: u64, threshold: u64) -> bool {
    h % MODULUS < threshold
}

/// The threshold of sampling rate `rate` (clamped to `(0, 1]`).
pub(crate) fn sample_threshold(rate: f64) -> u64 {
    let rate = rate.clamp(1.0 / MODULUS as f64, 1.0);
    ((rate * MODULUS as f64).round() as u64).max(1)
}

/// Four lines and their counts: one cache line.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
struct Bucket {
    keys: [u64; 4],
    counts: [u32; 4],
}

/// Counts from this up are promoted lines (`HOT + index` in the hot set): never decayed or
/// replaced.
const HOT: u32 = 1 << 31;

/// HeavyKeeper-style table finding the most frequent lines.
#[derive(Debug, Clone)]
pub(crate) struct HotFinder {
    buckets: Vec<Bucket>,
    /// `decay[c]`: probability `1.08^-c` of decaying a count `c`, scaled to `u64`.
    decay: Vec<u64>,
    rng: u64,
    hot: u32,
    capacity: u32,
}

/// What the table says of an access.
pub(crate) enum Heat {
    /// A hot line, with its index.
    Hot(u32),
    /// Just promoted, with its new index.
    Promoted(u32),
    Cold,
}

impl HotFinder {
    /// A table of about `entries` lines promoting at most `capacity` of them.
    pub(crate) fn new(entries: usize, capacity: usize) -> Self {
        let n = (entries / 4).max(16).next_power_of_two();
        Self {
            buckets: vec![Bucket::default(); n],
            decay: (0..=PROMOTE_AT)
                .map(|c| (1.08f64.powi(-(c as i32)) * u64::MAX as f64) as u64)
                .collect(),
            rng: 0x853c_49e6_748f_ea9b,
            hot: 0,
            capacity: capacity.min(HOT as usize - 1) as u32,
        }
    }

    /// Starts loading the bucket [`HotFinder::offer`] of a key with [`mix`] `h` reads (a
    /// hint: changes nothing).
    #[inline]
    pub(crate) fn prefetch(&self, h: u64) {
        tiercache_core::hint::prefetch(&self.buckets[self.bucket_of(h)]);
    }

    /// The bucket of a key with [`mix`] `h` (a power-of-two table: its high bits, masked).
    #[inline]
    fn bucket_of(&self, h: u64) -> usize {
        (h >> 32) as usize & (self.buckets.len() - 1)
    }

    /// Counts an access to `key` (`h`: its [`mix`]).
    #[inline]
    pub(crate) fn offer(&mut self, key: u64, h: u64) -> Heat {
        let at = self.bucket_of(h);
        let b = &mut self.buckets[at];
        let mut weakest = 0;
        for i in 0..4 {
            let c = b.counts[i];
            if b.keys[i] == key && c > 0 {
                if c >= HOT {
                    return Heat::Hot(c - HOT);
                }
                if c + 1 >= PROMOTE_AT && self.hot < self.capacity {
                    b.counts[i] = HOT + self.hot;
                    self.hot += 1;
                    return Heat::Promoted(self.hot - 1);
                }
                b.counts[i] = (c + 1).min(PROMOTE_AT);
                return Heat::Cold;
            }
            if c < b.counts[weakest] {
                weakest = i;
            }
        }
        let c = b.counts[weakest];
        if c >= HOT {
            return Heat::Cold; // four hot lines here already
        }
        if c == 0 {
            b.keys[weakest] = key;
            b.counts[weakest] = 1;
            return Heat::Cold;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        if self.rng <= self.decay[c as usize] {
            if c == 1 {
                b.keys[weakest] = key;
            } else {
                b.counts[weakest] = c - 1;
            }
        }
        Heat::Cold
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Bucket>() + self.decay.capacity() * 8
    }
}

/// No access yet (a hot line promoted without having been sampled).
const NEVER: u32 = u32::MAX;

/// What lies between two accesses to a tracked line: distinct hot lines, distinct sampled
/// lines, and accesses to lines that are not hot (sampled or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Between {
    hot: u64,
    sampled: u64,
    others: u64,
    sampled_accesses: u64,
}

/// Counts of accesses to lines not hot, and to sampled lines, up to some access.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    others: u64,
    sampled: u64,
}

/// LRU stack over the tracked lines, hot and sampled, on one time axis: plane 1 of the marks
/// holds the hot lines' latest accesses. Each line also keeps the count of accesses to lines
/// not hot at its latest access.
#[derive(Debug, Clone)]
struct ClassStack {
    /// Sampled lines: time of the latest access, and the count then.
    sampled: FxHashMap<u64, (u32, Counts)>,
    /// Hot lines by index: time of the latest access (or [`NEVER`]), and the counts then.
    hot: Vec<(u32, Counts)>,
    marks: Marks<2>,
}

impl ClassStack {
    fn new() -> Self {
        Self {
            sampled: FxHashMap::default(),
            hot: Vec::new(),
            marks: Marks::with_layout(crate::stack::LAYOUT),
        }
    }

    /// What lies between `prev` and now (`others`: the count before this access), and forgets
    /// the mark at `prev`.
    #[inline]
    fn leave(&mut self, (p, then): (u32, Counts), now: Counts) -> Between {
        let [all, hot] = self.marks.after(p);
        self.marks.clear(p);
        Between {
            hot,
            sampled: all - hot,
            others: now.others - then.others,
            sampled_accesses: now.sampled - then.sampled,
        }
    }

    /// An access to a sampled line, `others` accesses to lines not hot before it; returns what
    /// lies since its previous access, if tracked.
    #[inline]
    fn access_sampled(&mut self, key: u64, counts: Counts) -> Option<Between> {
        if self.marks.full() {
            self.compact();
        }
        let after = Counts {
            others: counts.others + 1,
            sampled: counts.sampled + 1,
        };
        let prev = self.sampled.insert(key, (self.marks.now(), after));
        let between = prev.map(|p| self.leave(p, counts));
        self.marks.push(0);
        between
    }

    /// An access to hot line `idx`; as [`access_sampled`](Self::access_sampled).
    #[inline]
    fn access_hot(&mut self, idx: u32, counts: Counts) -> Option<Between> {
        if self.marks.full() {
            self.compact();
        }
        let now = (self.marks.now(), counts);
        let prev = std::mem::replace(&mut self.hot[idx as usize], now);
        let between = (prev.0 != NEVER).then(|| self.leave(prev, counts));
        self.marks.push(1 << 1);
        between
    }

    /// `key` becomes hot line `idx` (the next index), keeping its mark if it was sampled.
    fn promote(&mut self, key: u64, idx: u32) {
        debug_assert_eq!(idx as usize, self.hot.len());
        let last = match self.sampled.remove(&key) {
            Some(last) => {
                self.marks.set_plane(last.0, 1);
                last
            }
            None => (NEVER, Counts::default()),
        };
        self.hot.push(last);
    }

    fn is_sampled(&self, key: u64) -> bool {
        self.sampled.contains_key(&key)
    }

    fn remove_sampled(&mut self, key: u64) {
        if let Some((p, _)) = self.sampled.remove(&key) {
            self.marks.clear(p);
        }
    }

    /// Lines tracked, hot ones included.
    fn len(&self) -> usize {
        self.sampled.len() + self.hot.len()
    }

    fn compact(&mut self) {
        let (sampled, hot) = (&mut self.sampled, &mut self.hot);
        self.marks.compact(4, |renumber| {
            for (t, _) in sampled.values_mut() {
                *t = renumber(*t);
            }
            for (t, _) in hot.iter_mut().filter(|(t, _)| *t != NEVER) {
                *t = renumber(*t);
            }
        });
    }

    fn memory_bytes(&self) -> usize {
        self.sampled.capacity() * 33 + self.hot.capacity() * 24 + self.marks.memory_bytes()
    }
}

/// Weighted distances as uniform densities over intervals, kept as interval end points by
/// log-linear bucket of position: per bucket `[Σ s·c, Σ s·c·pos]`, where a density `c` over
/// `(lo, hi]` is the events `(hi, +c)` and `(lo, −c)`. The weight beyond `x` is
/// `Σ s·c·(pos − x)⁺`.
#[derive(Debug, Clone)]
struct SpreadHistogram {
    buckets: Vec<[f64; 2]>,
}

impl Default for SpreadHistogram {
    fn default() -> Self {
        Self {
            buckets: vec![[0.0; 2]; BUCKETS],
        }
    }
}

const EXACT: u64 = 256;
const SUB_BITS: u32 = 6;
/// Positions beyond `2^MAX_OCTAVE` lines share the last bucket.
const MAX_OCTAVE: u32 = 44;
/// Buckets: the exact ones (and bucket 0, unused), then 64 per octave from 2^8 to
/// 2^MAX_OCTAVE.
const BUCKETS: usize = EXACT as usize + 1 + (MAX_OCTAVE - 8) as usize * (1 << SUB_BITS);

/// Bucket of position `x > 0`: `(m−1, m]` for `m = ⌈x⌉ ≤ 256`, then 64 per octave.
fn bucket_of(x: f64) -> usize {
    // ⌈x⌉ without a libm call, through i64 (native conversions on x86-64; positions are
    // positive and below 2^MAX_OCTAVE).
    let t = x.min((1u64 << MAX_OCTAVE) as f64) as i64;
    let m = (t + (x > t as f64) as i64).max(1) as u64;
    if m <= EXACT {
        return m as usize;
    }
    let v = m - 1;
    let k = 63 - v.leading_zeros();
    let sub = (v >> (k - SUB_BITS)) & ((1 << SUB_BITS) - 1);
    (EXACT as usize + 1) + ((k - 8) as usize) * (1 << SUB_BITS) + sub as usize
}

/// Position range `(lo, hi]` of bucket `b`.
fn bucket_range(b: usize) -> (f64, f64) {
    if b as u64 <= EXACT {
        return (b as f64 - 1.0, b as f64);
    }
    let i = b - (EXACT as usize + 1);
    let k = 8 + (i >> SUB_BITS) as u32;
    let sub = (i & ((1 << SUB_BITS) - 1)) as u64;
    let lo = (1u64 << k) + (sub << (k - SUB_BITS));
    (lo as f64, (lo + (1 << (k - SUB_BITS))) as f64)
}

impl SpreadHistogram {
    fn event(&mut self, pos: f64, c: f64) {
        if pos <= 0.0 {
            return; // (pos − x)⁺ is 0 for every size x ≥ 0
        }
        let b = bucket_of(pos);
        self.buckets[b][0] += c;
        self.buckets[b][1] += c * pos;
    }

    /// Adds weight `w` spread uniformly over `(d − 1, d]` (exact at integer sizes when `d` is
    /// an integer).
    #[inline]
    fn add_unit(&mut self, d: f64, w: f64) {
        if d > (EXACT + 1) as f64 {
            let b = bucket_of(d);
            if b == bucket_of(d - 1.0) {
                // Both ends in one bucket: +w and −w cancel in Σ s·c, leave w·1 in Σ s·c·pos.
                self.buckets[b][1] += w;
                return;
            }
        }
        self.event(d, w);
        self.event(d - 1.0, -w);
    }

    /// Weight beyond `x` (≥ 0).
    fn beyond(&self, x: f64) -> f64 {
        // F(e) at the bucket edges around x, from the top down.
        let mut above = [0.0f64; 2]; // sums over buckets above the current one
        let f = |s: &[f64; 2], at: f64| s[1] - at * s[0];
        for b in (0..self.buckets.len()).rev() {
            let (lo, hi) = bucket_range(b);
            if lo < x {
                // x in (lo, hi]: interpolate F between the bucket's edges.
                let f_hi = f(&above, hi);
                let with = [above[0] + self.buckets[b][0], above[1] + self.buckets[b][1]];
                let f_lo = f(&with, lo);
                let t = ((x - lo) / (hi - lo)).clamp(0.0, 1.0);
                return (f_lo + (f_hi - f_lo) * t).max(0.0);
            }
            above[0] += self.buckets[b][0];
            above[1] += self.buckets[b][1];
        }
        f(&above, x).max(0.0)
    }
}

/// A SHARDS sampler producing an approximate LRU miss-ratio curve.
#[derive(Debug, Clone)]
pub struct Shards {
    threshold: u64,
    /// `threshold / MODULUS`.
    rate: f64,
    /// `1 / rate`: the weight of a sampled access.
    scale: f64,
    max_entries: Option<usize>,
    stack: ClassStack,
    finder: HotFinder,
    /// Sampled (not hot) lines by hash, largest first (fixed-size mode only); may hold lines
    /// promoted since, skipped when popped.
    heap: BinaryHeap<(u64, u64)>,
    hist: SpreadHistogram,
    cold: f64,
    total: f64,
    accesses: u64,
    /// Accesses to lines not hot, and to sampled lines.
    counts: Counts,
    hot_lines: usize,
    peak_entries: usize,
}

impl Shards {
    /// Fixed-rate SHARDS at sampling rate `rate` (0 < rate ≤ 1), plus up to [`HOT_LINES`]
    /// hot lines tracked exactly.
    pub fn fixed_rate(rate: f64) -> Self {
        Self::new(rate, None)
    }

    /// Fixed-size SHARDS tracking at most `max_entries` lines (a quarter of them for hot
    /// lines), starting at rate 1.
    pub fn fixed_size(max_entries: usize) -> Self {
        Self::new(1.0, Some(max_entries.max(1)))
    }

    fn new(rate: f64, max_entries: Option<usize>) -> Self {
        let rate = rate.clamp(1.0 / MODULUS as f64, 1.0);
        let (table, hot) = match max_entries {
            None => (TABLE_ENTRIES, HOT_LINES),
            Some(m) => (m.max(64), m / 4),
        };
        let mut s = Self {
            threshold: 0,
            rate: 0.0,
            scale: 0.0,
            max_entries,
            stack: ClassStack::new(),
            finder: HotFinder::new(table, hot),
            heap: BinaryHeap::new(),
            hist: SpreadHistogram::default(),
            cold: 0.0,
            total: 0.0,
            accesses: 0,
            counts: Counts::default(),
            hot_lines: 0,
            peak_entries: 0,
        };
        s.set_threshold(sample_threshold(rate));
        s
    }

    /// Current sampling rate.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    fn set_threshold(&mut self, threshold: u64) {
        self.threshold = threshold;
        self.rate = threshold as f64 / MODULUS as f64;
        self.scale = 1.0 / self.rate;
    }

    /// Most lines tracked at once (sampled and hot).
    pub fn peak_entries(&self) -> usize {
        self.peak_entries
    }

    /// Lines tracked exactly as hot.
    pub fn hot_lines(&self) -> usize {
        self.hot_lines
    }

    /// Accesses offered (sampled or not).
    pub fn accesses(&self) -> u64 {
        self.accesses
    }

    /// Hint that `key` is offered soon: starts loading what [`Shards::access`] reads first.
    /// Changes nothing.
    #[inline]
    pub fn prefetch(&self, key: u64) {
        self.finder.prefetch(mix(key));
    }

    /// Offers one line access.
    #[inline]
    pub fn access(&mut self, key: u64) {
        self.accesses += 1;
        let h = mix(key);
        let sampled = sampled(h, self.threshold);
        let counts = self.counts;
        match self.finder.offer(key, h) {
            Heat::Hot(idx) => {
                let between = self.stack.access_hot(idx, counts);
                self.record(between, 1.0);
            }
            Heat::Promoted(idx) => {
                self.hot_lines += 1;
                // Unless it was sampled, its previous access is unknown: this access is left
                // out (weight 0) and the line is tracked from now on.
                let known = self.stack.is_sampled(key);
                self.stack.promote(key, idx);
                let between = self.stack.access_hot(idx, counts);
                self.record(between, if known { 1.0 } else { 0.0 });
                self.shrink();
            }
            Heat::Cold if sampled => {
                self.counts.others += 1;
                self.counts.sampled += 1;
                let between = self.stack.access_sampled(key, counts);
                self.record(between, self.scale);
                if between.is_none() && self.max_entries.is_some() {
                    self.heap.push((h % MODULUS, key));
                    self.shrink();
                }
            }
            Heat::Cold => {
                self.counts.others += 1;
                return;
            }
        }
        self.peak_entries = self.peak_entries.max(self.stack.len());
    }

    /// Counts a tracked access of weight `weight` with `between` it and the previous access to
    /// its line (`None`: a first access).
    #[inline]
    fn record(&mut self, between: Option<Between>, weight: f64) {
        self.total += weight;
        match between {
            None => self.cold += weight,
            Some(b) if weight > 0.0 => {
                // (Counts go through i64: native conversions on x86-64.)
                let f = |x: u64| x as i64 as f64;
                // The distinct lines not hot in between: the accesses to such lines times the
                // share of distinct lines among the sampled ones' accesses (exact at R = 1);
                // with no sampled access in between, all of them (short gaps repeat little).
                let others = match b.sampled_accesses {
                    0 => f(b.others),
                    n => f(b.others) * f(b.sampled) / f(n),
                };
                let d = 1.0 + f(b.hot) + others;
                self.hist.add_unit(d, weight);
            }
            Some(_) => {}
        }
    }

    fn shrink(&mut self) {
        let Some(max) = self.max_entries else { return };
        while self.stack.len() > max {
            let Some(&(top, _)) = self.heap.peek() else {
                return; // only hot lines left (cannot happen: they are at most max / 4)
            };
            self.set_threshold(top);
            while self.heap.peek().is_some_and(|&(h, _)| h >= top) {
                let (_, k) = self.heap.pop().expect("peeked");
                self.stack.remove_sampled(k); // nothing if it was promoted since
            }
        }
    }

    /// Approximate miss ratio of an LRU cache of `lines` lines.
    pub fn miss_ratio(&self, lines: u64) -> f64 {
        if self.total <= 0.0 {
            return 0.0;
        }
        ((self.cold + self.hist.beyond(lines as f64)) / self.total).clamp(0.0, 1.0)
    }

    /// Estimated distinct lines: the weighted first accesses (cold misses), as for the curve.
    pub fn footprint_estimate(&self) -> u64 {
        self.cold.round().max(0.0) as u64
    }

    /// Heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.stack.memory_bytes()
            + self.finder.memory_bytes()
            + self.heap.capacity() * 16
            + self.hist.buckets.capacity() * 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::StackDistance;
    use proptest::prelude::*;

    /// A small skewed trace: a few keys very hot (they get promoted), many cold.
    fn skewed(n: usize, seed: u64) -> Vec<u64> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let y = x >> 8;
                match x % 10 {
                    0..=3 => y % 8,
                    4..=6 => 100 + y % 300,
                    _ => 10_000 + y % 5_000,
                }
            })
            .collect()
    }

    fn exact_miss_ratio(keys: &[u64], sizes: &[u64]) -> Vec<f64> {
        let mut s = StackDistance::with_layout(crate::stack::LAYOUT);
        let ds: Vec<Option<u64>> = keys.iter().map(|&k| s.access(k)).collect();
        sizes
            .iter()
            .map(|&c| {
                ds.iter()
                    .filter(|d| !matches!(d, Some(d) if *d <= c))
                    .count() as f64
                    / keys.len() as f64
            })
            .collect()
    }

    #[test]
    fn at_rate_one_the_curve_is_exact_with_hot_lines() {
        let keys = skewed(100_000, 7);
        // Every size up to 256 and bucket edges beyond (multiples of 4 up to 512, 8 to 1024…).
        let mut sizes: Vec<u64> = (1..=256).collect();
        sizes.extend([260, 300, 512, 520, 1000, 2048, 4096, 4992, 6016, 65536]);
        let exact = exact_miss_ratio(&keys, &sizes);
        for mut s in [Shards::fixed_rate(1.0), Shards::fixed_size(1 << 20)] {
            keys.iter().for_each(|&k| s.access(k));
            assert!(s.hot_lines() >= 8, "the hottest keys were promoted");
            assert_eq!(s.rate(), 1.0);
            for (&c, &e) in sizes.iter().zip(&exact) {
                let m = s.miss_ratio(c);
                assert!((m - e).abs() < 1e-9, "{c} lines: {m} vs exact {e}");
            }
        }
    }

    #[test]
    fn fixed_size_bounds_tracked_lines_hot_ones_included() {
        let keys = skewed(200_000, 3);
        let mut s = Shards::fixed_size(500);
        keys.iter().for_each(|&k| s.access(k));
        assert!(s.peak_entries() <= 500, "{}", s.peak_entries());
        assert!(s.hot_lines() > 0 && s.hot_lines() <= 125);
        assert!(s.rate() < 0.2, "the rate fell: {}", s.rate());
    }

    #[test]
    fn buckets_tile_the_positions() {
        let mut prev_hi = 0.0;
        for b in 1..BUCKETS {
            let (lo, hi) = bucket_range(b);
            assert_eq!(lo, prev_hi, "bucket {b} starts where {} ends", b - 1);
            assert!(hi > lo);
            assert_eq!(bucket_of(hi), b);
            assert_eq!(bucket_of((lo + hi) / 2.0), b);
            if b + 1 < BUCKETS {
                assert_eq!(bucket_of(hi + 1e-6 * hi), b + 1);
            }
            prev_hi = hi;
        }
        assert_eq!(prev_hi, (1u64 << MAX_OCTAVE) as f64);
        for k in 0..MAX_OCTAVE {
            // Every power of two is a bucket edge.
            let x = (1u64 << k) as f64;
            assert_eq!(bucket_range(bucket_of(x)).1, x);
        }
    }

    #[test]
    fn weight_beyond_matches_a_direct_sum() {
        let mut h = SpreadHistogram::default();
        let ds = [0.5, 1.0, 3.25, 200.0, 256.5, 300.0, 301.7, 1e4, 3.3e6];
        for (i, &d) in ds.iter().enumerate() {
            h.add_unit(d, 1.0 + i as f64);
        }
        for x in [
            0.0f64, 1.0, 2.0, 3.0, 256.0, 260.0, 300.0, 304.0, 512.0, 16384.0, 1e7,
        ] {
            let direct: f64 = ds
                .iter()
                .enumerate()
                .map(|(i, &d)| (1.0 + i as f64) * (d - x.max(d - 1.0)).clamp(0.0, 1.0))
                .sum();
            assert!(
                (h.beyond(x) - direct).abs() < 1e-9,
                "{x}: {} vs {direct}",
                h.beyond(x)
            );
        }
    }

    /// Reference for [`ClassStack`]: the stack as a list, most recent last.
    #[derive(Default)]
    struct Naive {
        stack: Vec<(u64, bool)>,
    }

    impl Naive {
        fn access(&mut self, key: u64, hot: bool) -> Option<[u64; 2]> {
            let pos = self.stack.iter().position(|&(k, _)| k == key);
            let between = pos.map(|p| {
                let after = &self.stack[p + 1..];
                let h = after.iter().filter(|e| e.1).count() as u64;
                [h, after.len() as u64 - h]
            });
            if let Some(p) = pos {
                self.stack.remove(p);
            }
            self.stack.push((key, hot));
            between
        }
    }

    proptest! {
        #[test]
        fn class_stack_matches_a_naive_list(
            ops in proptest::collection::vec((0u64..300, 0u8..20), 1..3000),
        ) {
            let mut s = ClassStack::new();
            let mut naive = Naive::default();
            let mut hot: FxHashMap<u64, u32> = FxHashMap::default();
            let mut counts = Counts::default();
            for (key, op) in ops {
                match op {
                    // Promote (keys below 40 only, so that most stay sampled).
                    0 if key < 40 && !hot.contains_key(&key) => {
                        let idx = hot.len() as u32;
                        let was = s.is_sampled(key);
                        s.promote(key, idx);
                        hot.insert(key, idx);
                        if !was {
                            naive.stack.retain(|e| e.0 != key);
                        }
                        for e in naive.stack.iter_mut().filter(|e| e.0 == key) {
                            e.1 = true;
                        }
                    }
                    1 if !hot.contains_key(&key) => {
                        s.remove_sampled(key);
                        naive.stack.retain(|e| e.0 != key);
                    }
                    _ => {
                        let (got, want) = match hot.get(&key) {
                            Some(&idx) => (s.access_hot(idx, counts), naive.access(key, true)),
                            None => {
                                let got = s.access_sampled(key, counts);
                                counts.others += 1;
                                counts.sampled += 1;
                                (got, naive.access(key, false))
                            }
                        };
                        prop_assert_eq!(got.map(|b| [b.hot, b.sampled]), want);
                    }
                }
                prop_assert_eq!(s.len(), naive.stack.len() + hot.keys().filter(|k| !naive.stack.iter().any(|e| e.0 == **k)).count());
            }
        }
    }
}
