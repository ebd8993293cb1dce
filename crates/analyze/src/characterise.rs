//! Workload characterisation (docs/design.md §7): request sizes, read/write bytes, IOPS per
//! interval with burst detection, inter-arrival times, working set over time.

use crate::reuse::IntervalReuse;
use rustc_hash::FxHashSet;
use serde::Serialize;
use tiercache_core::{LineGeometry, LineKey, Op, Request};

/// One interval of trace time.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IntervalRow {
    /// Start of the interval (trace time, ns from the first request).
    pub start_ns: u64,
    /// Requests (all kinds).
    pub requests: u64,
    /// Reads.
    pub reads: u64,
    /// Writes.
    pub writes: u64,
    /// Bytes read and written.
    pub bytes: u64,
    /// Requests per second over the interval.
    pub iops: f64,
    /// Distinct lines touched in the interval (its working set); `None` when lines are not
    /// tracked ([`Characteriser::requests_only`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_set_lines: Option<u64>,
    /// Distinct lines touched since the start (the footprint so far); `None` as above.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub footprint_lines: Option<u64>,
    /// Whether the interval is part of a burst.
    pub burst: bool,
    /// Reuses whose later access falls in the interval, with their URD and TRD demands (the
    /// shared cache; zero when the lines are not supplied by an analyzer, `None` when lines
    /// are not tracked).
    #[serde(flatten)]
    pub reuse: Option<IntervalReuse>,
}

/// What an interval's lines looked like, supplied when it closes by whoever tracks lines.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IntervalLines {
    /// Distinct lines touched in the interval.
    pub working_set_lines: u64,
    /// Distinct lines touched since the start.
    pub footprint_lines: u64,
    /// Reuses in the interval.
    pub reuse: IntervalReuse,
}

/// Most interval rows a characterisation keeps. Past this the interval width doubles and
/// neighbouring rows merge (as `trace stats` does), so memory is bounded by this and not by
/// the trace's time span: a three-request trace spanning a century makes at most this many rows.
pub const MAX_INTERVALS: usize = 4096;

impl IntervalRow {
    /// Folds the row that follows this one into it (the two become one interval). Counts add
    /// up; the footprint is the later one's; demands are the larger; the working set is the
    /// larger of the two (a lower bound of the merged interval's: lines they share are not
    /// known any more).
    fn absorb(&mut self, next: &IntervalRow) {
        self.requests += next.requests;
        self.reads += next.reads;
        self.writes += next.writes;
        self.bytes += next.bytes;
        self.working_set_lines = self.working_set_lines.max(next.working_set_lines);
        self.footprint_lines = self.footprint_lines.max(next.footprint_lines);
        if let (Some(r), Some(n)) = (&mut self.reuse, &next.reuse) {
            r.reuses += n.reuses;
            r.useful_reuses += n.useful_reuses;
            r.urd_demand_lines = r.urd_demand_lines.max(n.urd_demand_lines);
            r.trd_demand_lines = r.trd_demand_lines.max(n.trd_demand_lines);
        }
    }
}

/// Sets of lines, for a characteriser that tracks them itself.
#[derive(Debug, Default)]
struct OwnLines {
    in_interval: FxHashSet<u64>,
    seen: FxHashSet<u64>,
}

/// Burst detection: intervals whose IOPS exceed `factor` × the median interval's.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Bursts {
    /// The factor applied to the median.
    pub factor: f64,
    /// Median IOPS over intervals.
    pub median_iops: f64,
    /// IOPS above which an interval is a burst.
    pub threshold_iops: f64,
    /// Intervals in bursts.
    pub burst_intervals: u64,
    /// Separate bursts (runs of burst intervals).
    pub bursts: u64,
    /// Longest run of burst intervals.
    pub longest_burst_intervals: u64,
    /// Highest interval IOPS.
    pub peak_iops: f64,
}

/// A log₂-bucketed distribution: `(bucket lower bound, count)`; bucket 0 holds zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Log2Histogram {
    /// Non-empty buckets in ascending order.
    pub buckets: Vec<(u64, u64)>,
    /// Values counted.
    pub count: u64,
    /// Median (a bucket's lower bound).
    pub p50: u64,
    /// 90th percentile (bucket lower bound).
    pub p90: u64,
    /// 99th percentile (bucket lower bound).
    pub p99: u64,
}

fn bucket(v: u64) -> usize {
    if v == 0 {
        0
    } else {
        64 - v.leading_zeros() as usize
    }
}

fn lower_bound(b: usize) -> u64 {
    if b == 0 {
        0
    } else {
        1u64 << (b - 1)
    }
}

impl Log2Histogram {
    fn of(counts: &[u64; 65]) -> Self {
        let count: u64 = counts.iter().sum();
        let q = |p: f64| {
            let target = ((count as f64) * p).ceil().max(1.0) as u64;
            let mut acc = 0;
            for (b, &c) in counts.iter().enumerate() {
                acc += c;
                if acc >= target {
                    return lower_bound(b);
                }
            }
            0
        };
        Self {
            buckets: counts
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(b, &c)| (lower_bound(b), c))
                .collect(),
            count,
            p50: if count > 0 { q(0.5) } else { 0 },
            p90: if count > 0 { q(0.9) } else { 0 },
            p99: if count > 0 { q(0.99) } else { 0 },
        }
    }
}

/// The characterisation of a trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Characterisation {
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Trims.
    pub trims: u64,
    /// Request sizes in bytes (reads and writes).
    pub request_sizes: Log2Histogram,
    /// Times between consecutive requests, ns.
    pub inter_arrival_ns: Log2Histogram,
    /// Interval length, ns (the requested one, doubled as often as needed to keep at most
    /// [`MAX_INTERVALS`] rows).
    pub interval_ns: u64,
    /// Whether intervals were widened: then each row's `working_set_lines` is the largest
    /// working set of the narrower intervals it merges (a lower bound).
    pub intervals_widened: bool,
    /// Per-interval rows.
    pub intervals: Vec<IntervalRow>,
    /// Bursts among the intervals.
    pub bursts: Bursts,
}

/// Streaming characteriser.
#[derive(Debug)]
pub struct Characteriser {
    geo: LineGeometry,
    interval_ns: u64,
    burst_factor: f64,
    out: Characterisation,
    sizes: [u64; 65],
    gaps: [u64; 65],
    first: Option<u64>,
    last: u64,
    current: IntervalRow,
    /// A closed row folded into `current` by a widening (merged in when `current` closes).
    carry: Option<IntervalRow>,
    /// `None` when the caller supplies [`IntervalLines`] (see [`Characteriser::add_with`]).
    lines: Option<OwnLines>,
    /// Whether interval rows get lines at all (see [`Characteriser::requests_only`]).
    track_lines: bool,
}

impl Characteriser {
    /// Intervals of `interval_ns` (> 0) of trace time; bursts above `burst_factor` × median.
    /// Tracks the lines of requests itself (two hash sets) for working sets and footprints.
    pub fn new(geo: LineGeometry, interval_ns: u64, burst_factor: f64) -> Self {
        Self {
            lines: Some(OwnLines::default()),
            ..Self::without_lines(geo, interval_ns, burst_factor)
        }
    }

    /// As [`new`](Self::new), but the caller supplies each interval's [`IntervalLines`] as it
    /// closes (e.g. from a stack that already knows every line): no sets are kept here.
    pub fn without_lines(geo: LineGeometry, interval_ns: u64, burst_factor: f64) -> Self {
        Self {
            lines: None,
            track_lines: true,
            geo,
            interval_ns: interval_ns.max(1),
            burst_factor,
            out: Characterisation::default(),
            sizes: [0; 65],
            gaps: [0; 65],
            first: None,
            last: 0,
            current: IntervalRow::default(),
            carry: None,
        }
    }

    /// As [`without_lines`](Self::without_lines), but nobody supplies lines (a sampled
    /// analysis): rows leave working sets, footprints and reuses out (`None`), and the
    /// per-request work is counting only.
    pub fn requests_only(geo: LineGeometry, interval_ns: u64, burst_factor: f64) -> Self {
        Self {
            track_lines: false,
            ..Self::without_lines(geo, interval_ns, burst_factor)
        }
    }

    /// Doubles the interval width: neighbouring closed rows merge pairwise, and a closed row
    /// left without a partner joins the open one.
    fn widen(&mut self) {
        let rows = std::mem::take(&mut self.out.intervals);
        let width = self.interval_ns.saturating_mul(2);
        let mut merged = Vec::with_capacity(rows.len() / 2 + 1);
        let mut it = rows.into_iter();
        while let Some(mut a) = it.next() {
            match it.next() {
                Some(b) => {
                    a.absorb(&b);
                    merged.push(a);
                }
                None => {
                    // `a` and the open row form one interval of the new width.
                    if let Some(c) = self.carry.take() {
                        a.absorb(&c);
                    }
                    self.current.start_ns = a.start_ns;
                    self.carry = Some(a);
                }
            }
        }
        for row in &mut merged {
            row.iops = row.requests as f64 * 1e9 / width as f64;
        }
        self.out.intervals = merged;
        self.interval_ns = width;
        self.out.intervals_widened = true;
    }

    fn close_interval(&mut self, supply: &mut dyn FnMut() -> IntervalLines) {
        let mut row = std::mem::take(&mut self.current);
        row.iops = row.requests as f64 * 1e9 / self.interval_ns as f64;
        let lines = match &mut self.lines {
            Some(own) => {
                let l = IntervalLines {
                    working_set_lines: own.in_interval.len() as u64,
                    footprint_lines: own.seen.len() as u64,
                    reuse: IntervalReuse::default(),
                };
                own.in_interval.clear();
                Some(l)
            }
            None if self.track_lines => Some(supply()),
            None => None,
        };
        row.working_set_lines = lines.map(|l| l.working_set_lines);
        row.footprint_lines = lines.map(|l| l.footprint_lines);
        row.reuse = lines.map(|l| l.reuse);
        if let Some(mut earlier) = self.carry.take() {
            earlier.absorb(&row);
            row = earlier;
            row.iops = row.requests as f64 * 1e9 / self.interval_ns as f64;
        }
        self.current.start_ns = row.start_ns + self.interval_ns;
        self.out.intervals.push(row);
    }

    /// Feeds one request.
    pub fn add(&mut self, r: &Request) {
        self.add_with(r, &mut IntervalLines::default);
    }

    /// Feeds one request; `supply` is called once for each interval that closes before it (in
    /// order, before any line of `r` is accessed) and returns that interval's lines, unless
    /// this characteriser tracks lines itself.
    pub fn add_with(&mut self, r: &Request, supply: &mut dyn FnMut() -> IntervalLines) {
        let first = *self.first.get_or_insert(r.time_ns);
        // Trace times that go backwards count at the latest time seen.
        let t = r.time_ns.max(self.last).saturating_sub(first);
        if self.out.intervals.is_empty() && self.current.requests == 0 && self.last == 0 {
            self.current.start_ns = 0;
        } else {
            self.gaps[bucket(r.time_ns.max(self.last) - self.last)] += 1;
        }
        self.last = r.time_ns.max(self.last);
        // Widen first, so that the intervals this request closes fit under the bound.
        while t >= self.current.start_ns
            && (t - self.current.start_ns) / self.interval_ns
                >= (MAX_INTERVALS - self.out.intervals.len()) as u64
        {
            self.widen();
        }
        while t >= self.current.start_ns + self.interval_ns {
            self.close_interval(supply);
        }
        self.current.requests += 1;
        match r.op {
            Op::Read => {
                self.current.reads += 1;
                self.out.read_bytes += r.len;
            }
            Op::Write => {
                self.current.writes += 1;
                self.out.write_bytes += r.len;
            }
            Op::Trim => self.out.trims += 1,
            Op::Flush => {}
        }
        if matches!(r.op, Op::Read | Op::Write) {
            self.current.bytes += r.len;
            self.sizes[bucket(r.len)] += 1;
            if let Some(own) = &mut self.lines {
                for s in self.geo.split(r.offset, r.len) {
                    let key = LineKey::new(r.volume, s.index).0;
                    own.in_interval.insert(key);
                    own.seen.insert(key);
                }
            }
        }
    }

    /// Heap bytes (approximate: the line sets, if kept).
    pub fn memory_bytes(&self) -> usize {
        self.lines
            .as_ref()
            .map_or(0, |l| (l.in_interval.capacity() + l.seen.capacity()) * 9)
    }

    /// The characterisation so far.
    pub fn finish(self) -> Characterisation {
        self.finish_with(&mut IntervalLines::default)
    }

    /// As [`finish`](Self::finish), with `supply` as in [`add_with`](Self::add_with) for the
    /// last interval.
    pub fn finish_with(mut self, supply: &mut dyn FnMut() -> IntervalLines) -> Characterisation {
        if self.current.requests > 0 || self.carry.is_some() {
            self.close_interval(supply);
        }
        let mut out = self.out;
        out.interval_ns = self.interval_ns;
        out.request_sizes = Log2Histogram::of(&self.sizes);
        out.inter_arrival_ns = Log2Histogram::of(&self.gaps);
        let mut iops: Vec<f64> = out.intervals.iter().map(|r| r.iops).collect();
        iops.sort_by(f64::total_cmp);
        let median = iops.get(iops.len() / 2).copied().unwrap_or(0.0);
        let threshold = median * self.burst_factor;
        let mut b = Bursts {
            factor: self.burst_factor,
            median_iops: median,
            threshold_iops: threshold,
            peak_iops: iops.last().copied().unwrap_or(0.0),
            ..Bursts::default()
        };
        let mut run = 0u64;
        for row in &mut out.intervals {
            row.burst = median > 0.0 && row.iops > threshold;
            if row.burst {
                b.burst_intervals += 1;
                if run == 0 {
                    b.bursts += 1;
                }
                run += 1;
                b.longest_burst_intervals = b.longest_burst_intervals.max(run);
            } else {
                run = 0;
            }
        }
        out.bursts = b;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiercache_core::VolumeId;

    #[test]
    fn a_century_long_trace_keeps_bounded_rows() {
        // Three requests spanning 95 years at 1 s intervals: one row per second would be
        // 3e9 rows (7 GB), and closing them one by one would take hours.
        let geo = LineGeometry::new(4096).unwrap();
        let mut c = Characteriser::new(geo, 1_000_000_000, 2.0);
        let year_ns = 365 * 24 * 3600 * 1_000_000_000u64;
        for (i, t) in [0, 40 * year_ns, 95 * year_ns].into_iter().enumerate() {
            c.add(&Request {
                time_ns: t,
                volume: VolumeId(0),
                op: Op::Read,
                offset: i as u64 * 4096,
                len: 4096,
            });
        }
        let out = c.finish();
        assert!(
            out.intervals.len() <= MAX_INTERVALS,
            "{}",
            out.intervals.len()
        );
        assert!(out.intervals_widened);
        assert_eq!(out.intervals.iter().map(|r| r.requests).sum::<u64>(), 3);
        assert!(out.interval_ns as u128 * MAX_INTERVALS as u128 > 95 * year_ns as u128);
        for w in out.intervals.windows(2) {
            assert_eq!(w[1].start_ns, w[0].start_ns + out.interval_ns);
        }
    }

    #[test]
    fn widened_rows_equal_rows_of_the_wider_interval() {
        use rand::{Rng, SeedableRng};
        let geo = LineGeometry::new(4096).unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let mut t = 0u64;
        let reqs: Vec<Request> = (0..30_000)
            .map(|_| {
                t += rng.gen_range(0..700_000_000u64);
                Request {
                    time_ns: t,
                    volume: VolumeId(0),
                    op: if rng.gen_bool(0.3) {
                        Op::Write
                    } else {
                        Op::Read
                    },
                    offset: rng.gen_range(0..500u64) * 4096,
                    len: 4096,
                }
            })
            .collect();
        let mut narrow = Characteriser::new(geo, 1_000_000_000, 2.0);
        for r in &reqs {
            narrow.add(r);
        }
        let narrow = narrow.finish();
        assert!(narrow.intervals_widened);
        let mut wide = Characteriser::new(geo, narrow.interval_ns, 2.0);
        for r in &reqs {
            wide.add(r);
        }
        let wide = wide.finish();
        assert!(!wide.intervals_widened);
        assert_eq!(narrow.intervals.len(), wide.intervals.len());
        for (a, b) in narrow.intervals.iter().zip(&wide.intervals) {
            assert_eq!(a.start_ns, b.start_ns);
            assert_eq!(
                (a.requests, a.reads, a.writes, a.bytes),
                (b.requests, b.reads, b.writes, b.bytes)
            );
            assert_eq!(a.footprint_lines, b.footprint_lines);
            assert!(a.working_set_lines <= b.working_set_lines);
            assert_eq!(a.iops, b.iops);
        }
    }

    fn req(t_ms: u64, op: Op, offset: u64, len: u64) -> Request {
        Request {
            time_ns: t_ms * 1_000_000,
            volume: VolumeId(0),
            op,
            offset,
            len,
        }
    }

    #[test]
    fn intervals_bursts_sizes_and_working_sets() {
        let geo = LineGeometry::new(4096).unwrap();
        let mut c = Characteriser::new(geo, 1_000_000_000, 2.0);
        // 10 quiet seconds of 10 requests each over 4 lines, then 2 seconds of 100 over new lines.
        for s in 0..10u64 {
            for i in 0..10u64 {
                c.add(&req(s * 1000 + i * 100, Op::Read, (i % 4) * 4096, 4096));
            }
        }
        for s in 10..12u64 {
            for i in 0..100u64 {
                c.add(&req(s * 1000 + i * 10, Op::Write, (100 + i) * 4096, 8192));
            }
        }
        let out = c.finish();
        assert_eq!(out.intervals.len(), 12);
        assert_eq!(out.intervals[0].requests, 10);
        assert_eq!(out.intervals[0].working_set_lines, Some(4));
        assert_eq!(out.intervals[9].footprint_lines, Some(4));
        assert_eq!(
            out.intervals[10].working_set_lines,
            Some(101),
            "100 two-line writes overlapping by one"
        );
        assert_eq!(out.intervals[11].footprint_lines, Some(4 + 101));
        assert_eq!(out.bursts.median_iops, 10.0);
        assert_eq!(
            (
                out.bursts.burst_intervals,
                out.bursts.bursts,
                out.bursts.longest_burst_intervals
            ),
            (2, 1, 2)
        );
        assert_eq!(out.bursts.peak_iops, 100.0);
        assert!(out.intervals[10].burst && !out.intervals[9].burst);
        assert_eq!(out.read_bytes, 100 * 4096);
        assert_eq!(out.write_bytes, 200 * 8192);
        assert_eq!(out.request_sizes.buckets, vec![(4096, 100), (8192, 200)]);
        assert_eq!(out.request_sizes.p50, 8192);
        // Gaps: 100 ms inside quiet seconds, 10 ms in bursts.
        assert_eq!(out.inter_arrival_ns.count, 299);
        assert!(
            out.inter_arrival_ns.p50 >= 1 << 23 && out.inter_arrival_ns.p50 < 1 << 24,
            "{:?}",
            out.inter_arrival_ns
        );
    }
}
