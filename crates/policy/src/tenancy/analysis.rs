//! Incremental per-volume reuse analysis for the reuse-distance modes.
//!
//! Each volume keeps one LRU stack of its lines (`tiercache-stackdist`'s exact stack, a Fenwick
//! tree over access times: O(log M) per access) for its whole life, so a reuse reaching back
//! before the interval counts at its true distance. Per interval it collects what the modes
//! need: the largest stack distance of every reuse (TRD + 1) and of reads only (URD + 1), a hit
//! curve of each, and the reuse types (RAR, RAW, WAR, WAW). Curves are histograms in buckets
//! of `granule` lines up to the cache's size (a distance beyond the cache can never hit), so
//! allocating by marginal gain costs the same whatever the trace.
//!
//! With `sample_rate < 1` only lines whose hash falls below the threshold enter the stack
//! (SHARDS, fixed rate): distances are scaled by `1 / rate` and each sampled access weighs
//! `1 / rate`.

// SplitMix64 of a line number spreads line numbers over the sampling modulus (the hash of the
// analysis's SHARDS, so that both sample the same lines).
use tiercache_core::splitmix::hash64 as mix;
use tiercache_core::VolumeId;
use tiercache_stackdist::StackDistance;

/// Hash modulus of the spatial sampling.
const MODULUS: u64 = 1 << 24;

/// Hits an LRU partition of each size would have had over one interval: reuses by stack
/// distance, in buckets of `granule` lines (bucket `b` holds distances in
/// `((b - 1) * granule, b * granule]`), up to the cache's size.
#[derive(Debug, Clone, PartialEq)]
pub struct HitCurve {
    granule: u64,
    /// Weighted reuses per bucket; index 0 unused.
    buckets: Vec<f64>,
    /// Weighted reuses beyond the last bucket (beyond the cache).
    beyond: f64,
}

impl HitCurve {
    fn new(granule: u64, buckets: usize) -> Self {
        Self {
            granule: granule.max(1),
            buckets: vec![0.0; buckets + 1],
            beyond: 0.0,
        }
    }

    #[inline]
    fn add(&mut self, distance: u64, weight: f64) {
        let b = distance.div_ceil(self.granule) as usize;
        match self.buckets.get_mut(b) {
            Some(c) => *c += weight,
            None => self.beyond += weight,
        }
    }

    fn clear(&mut self) {
        self.buckets.iter_mut().for_each(|c| *c = 0.0);
        self.beyond = 0.0;
    }

    /// Adds `factor` times `o`'s counts (same granule and size).
    fn add_scaled(&mut self, o: &HitCurve, factor: f64) {
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b * factor;
        }
        self.beyond += o.beyond * factor;
    }

    /// Reuses an LRU cache of `lines` lines would have hit (whole buckets: exact at multiples
    /// of the granule, a lower bound between them).
    pub fn hits(&self, lines: u64) -> f64 {
        let b = ((lines / self.granule) as usize).min(self.buckets.len() - 1);
        self.buckets[..=b].iter().sum()
    }

    /// Every reuse counted, those beyond the cache included.
    pub fn reuses(&self) -> f64 {
        self.buckets.iter().sum::<f64>() + self.beyond
    }

    /// The smallest size (a multiple of the granule) whose hits reach `share` of the reuses
    /// within the cache; 0 without any.
    pub fn knee(&self, share: f64) -> u64 {
        let within: f64 = self.buckets.iter().sum();
        if within <= 0.0 {
            return 0;
        }
        let want = within * share;
        let mut acc = 0.0;
        for (b, &c) in self.buckets.iter().enumerate() {
            acc += c;
            if acc >= want * (1.0 - 1e-12) && acc > 0.0 {
                return b as u64 * self.granule;
            }
        }
        (self.buckets.len() as u64 - 1) * self.granule
    }
}

/// What one volume did in one interval.
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeAnalysis {
    /// Largest stack distance of a read reuse (max URD + 1; 0 without one).
    pub max_useful_distance: u64,
    /// Largest stack distance of any reuse (max TRD + 1; 0 without one).
    pub max_distance: u64,
    /// Hit curve of the read reuses (the URD curve).
    pub useful: HitCurve,
    /// Hit curve of every reuse (the TRD / miss-ratio curve).
    pub all: HitCurve,
    /// Weighted reuses by type: RAR, RAW, WAR, WAW.
    pub types: [f64; 4],
    /// Weighted line accesses.
    pub accesses: f64,
}

impl VolumeAnalysis {
    fn new(granule: u64, buckets: usize) -> Self {
        Self {
            max_useful_distance: 0,
            max_distance: 0,
            useful: HitCurve::new(granule, buckets),
            all: HitCurve::new(granule, buckets),
            types: [0.0; 4],
            accesses: 0.0,
        }
    }

    /// Adds `factor` times `o`'s curves, types and accesses (maxima are kept apart).
    fn add_scaled(&mut self, o: &VolumeAnalysis, factor: f64) {
        self.useful.add_scaled(&o.useful, factor);
        self.all.add_scaled(&o.all, factor);
        for (a, b) in self.types.iter_mut().zip(o.types) {
            *a += b * factor;
        }
        self.accesses += o.accesses * factor;
    }

    fn clear(&mut self) {
        self.max_useful_distance = 0;
        self.max_distance = 0;
        self.useful.clear();
        self.all.clear();
        self.types = [0.0; 4];
        self.accesses = 0.0;
    }

    /// Share of the reuses that are WAR or WAW (0 without reuses).
    pub fn write_reuse_share(&self) -> f64 {
        let total: f64 = self.types.iter().sum();
        if total <= 0.0 {
            0.0
        } else {
            (self.types[2] + self.types[3]) / total
        }
    }
}

/// One volume's stack and its current interval.
#[derive(Debug, Clone)]
struct Tracked {
    stack: StackDistance,
    interval: VolumeAnalysis,
    /// The earlier intervals, each weighed by `history` per interval since.
    carried: VolumeAnalysis,
    /// Maxima (useful, all) of the latest intervals, newest first, as many as `history`
    /// leaves a sixteenth of weight to.
    past_max: std::collections::VecDeque<(u64, u64)>,
}

/// The per-volume analyses of one cache.
#[derive(Debug, Clone)]
pub(crate) struct Analyses {
    volumes: Vec<Option<Box<Tracked>>>,
    granule: u64,
    buckets: usize,
    threshold: u64,
    scale: f64,
    history: f64,
    /// Intervals whose maxima still count.
    keep_max: usize,
}

impl Analyses {
    /// Analyses for a cache of `capacity_lines`, curves in at most ~512 buckets.
    /// Each interval's figures weigh `history` (0 to 1) as much one interval later: 0 is the
    /// previous interval alone, as ECI-Cache's definition; more keeps a volume that issued
    /// few requests in an interval (a starved or idle one) from losing its partition.
    pub(crate) fn new(capacity_lines: u64, sample_rate: f64, history: f64) -> Self {
        let granule = capacity_lines.div_ceil(512).max(1);
        let rate = sample_rate.clamp(1.0 / MODULUS as f64, 1.0);
        let threshold = ((rate * MODULUS as f64).round() as u64).max(1);
        Self {
            volumes: Vec::new(),
            granule,
            buckets: capacity_lines.div_ceil(granule) as usize,
            threshold,
            scale: MODULUS as f64 / threshold as f64,
            history,
            // Weight history^k falls below 1/16 after k = ln 16 / ln(1 / history) intervals.
            keep_max: if history <= 0.0 {
                0
            } else {
                ((16f64.ln() / (1.0 / history).ln()).ceil() as usize).clamp(1, 64)
            },
        }
    }

    /// Line granule of the hit curves.
    pub(crate) fn granule(&self) -> u64 {
        self.granule
    }

    /// Records `lines` accesses of `volume` from line `first`.
    pub(crate) fn observe(&mut self, volume: VolumeId, first: u64, lines: u64, is_write: bool) {
        let v = volume.0 as usize;
        if self.volumes.len() <= v {
            self.volumes.resize_with(v + 1, || None);
        }
        let (granule, buckets) = (self.granule, self.buckets);
        let t = self.volumes[v].get_or_insert_with(|| {
            Box::new(Tracked {
                stack: StackDistance::new(),
                interval: VolumeAnalysis::new(granule, buckets),
                carried: VolumeAnalysis::new(granule, buckets),
                past_max: Default::default(),
            })
        });
        let sampling = self.threshold < MODULUS;
        for line in first..first + lines {
            if sampling && mix(line) % MODULUS >= self.threshold {
                continue;
            }
            let w = self.scale;
            let iv = &mut t.interval;
            iv.accesses += w;
            let (d, prev) = t.stack.access_flagged(line, is_write);
            let Some(d) = d else { continue };
            // A sampled distance stands for `scale` times as many lines.
            let d = if sampling {
                ((d as f64 * self.scale).round() as u64).max(1)
            } else {
                d
            };
            iv.max_distance = iv.max_distance.max(d);
            iv.all.add(d, w);
            if !is_write {
                iv.max_useful_distance = iv.max_useful_distance.max(d);
                iv.useful.add(d, w);
            }
            if let Some(prev_write) = prev {
                iv.types[(is_write as usize) << 1 | prev_write as usize] += w;
            }
        }
    }

    /// Ends the interval: the analyses of the volumes seen so far, in volume order (this
    /// interval's figures plus the earlier ones weighed by `history`), then starts a new one.
    pub(crate) fn take_interval(&mut self) -> Vec<(VolumeId, VolumeAnalysis)> {
        let mut out = Vec::new();
        let (history, keep) = (self.history, self.keep_max);
        for (v, t) in self.volumes.iter_mut().enumerate() {
            let Some(t) = t else { continue };
            let mut a = t.interval.clone();
            a.add_scaled(&t.carried, 1.0);
            for &(u, all) in &t.past_max {
                a.max_useful_distance = a.max_useful_distance.max(u);
                a.max_distance = a.max_distance.max(all);
            }
            if keep > 0 {
                t.past_max
                    .push_front((t.interval.max_useful_distance, t.interval.max_distance));
                t.past_max.truncate(keep);
                t.carried.clear();
                t.carried.add_scaled(&a, history);
            }
            t.interval.clear();
            out.push((VolumeId(v as u32), a));
        }
        out
    }
}

/// Which reuses a sizing counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reuses {
    /// Reads only (URD).
    Useful,
    /// Every reuse (TRD).
    All,
}

/// What `eci` and `trd` share: the per-volume analyses of the current interval and, at a
/// boundary, each volume's demand and allocation from one kind of reuse. The modes differ only
/// in the reuses they size from and in what they do with the write-reuse shares.
#[derive(Debug, Clone)]
pub(crate) struct ReuseSizer {
    pub(crate) interval_ns: tiercache_core::Nanos,
    reuses: Reuses,
    sizing: super::Sizing,
    knee_share: f64,
    analyses: Analyses,
}

impl ReuseSizer {
    /// Sizing from `reuses` with `cfg`'s settings (validated) for `capacity_lines` lines.
    pub(crate) fn new(cfg: &super::TenancyConfig, capacity_lines: u64, reuses: Reuses) -> Self {
        Self {
            interval_ns: cfg.interval_ns,
            reuses,
            sizing: cfg.sizing,
            knee_share: cfg.knee_share,
            analyses: Analyses::new(capacity_lines, cfg.sample_rate, cfg.history),
        }
    }

    /// Whether `volume` was seen: the next sizing plans it.
    pub(crate) fn has_seen(&self, volume: VolumeId) -> bool {
        self.analyses
            .volumes
            .get(volume.0 as usize)
            .is_some_and(|t| t.is_some())
    }

    /// Feeds one access to the analyses.
    #[inline]
    pub(crate) fn observe(&mut self, volume: VolumeId, first: u64, lines: u64, is_write: bool) {
        self.analyses.observe(volume, first, lines, is_write);
    }

    /// Ends the interval: every volume seen, its analysis, and its (demand, allocation) in
    /// lines for a cache of `capacity_lines`.
    pub(crate) fn size(
        &mut self,
        capacity_lines: u64,
    ) -> Vec<((VolumeId, VolumeAnalysis), (u64, u64))> {
        let iv = self.analyses.take_interval();
        let sized = size_by_reuse(
            &iv,
            capacity_lines,
            self.analyses.granule(),
            self.reuses,
            self.sizing,
            self.knee_share,
        );
        iv.into_iter().zip(sized).collect()
    }
}

/// Demands and allocations of every volume of an interval: each volume's demand from its
/// curve of `reuses` (capped at the cache), then [`super::allocate_by_gain`] along the same
/// curves when the demands exceed the cache.
fn size_by_reuse(
    analyses: &[(VolumeId, VolumeAnalysis)],
    capacity_lines: u64,
    granule: u64,
    reuses: Reuses,
    sizing: super::Sizing,
    knee_share: f64,
) -> Vec<(u64, u64)> {
    fn curve(a: &VolumeAnalysis, reuses: Reuses) -> &HitCurve {
        match reuses {
            Reuses::Useful => &a.useful,
            Reuses::All => &a.all,
        }
    }
    let demand: Vec<u64> = analyses
        .iter()
        .map(|(_, a)| {
            let d = match sizing {
                super::Sizing::Max => match reuses {
                    Reuses::Useful => a.max_useful_distance,
                    Reuses::All => a.max_distance,
                },
                super::Sizing::Knee => curve(a, reuses).knee(knee_share),
            };
            d.min(capacity_lines)
        })
        .collect();
    let alloc = super::allocate_by_gain(&demand, capacity_lines, granule, &|i, c| {
        curve(&analyses[i].1, reuses).hits(c)
    });
    demand.into_iter().zip(alloc).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seq: &[(bool, u64)], cap: u64) -> VolumeAnalysis {
        let mut a = Analyses::new(cap, 1.0, 0.0);
        for &(w, k) in seq {
            a.observe(VolumeId(0), k, 1, w);
        }
        a.take_interval().pop().unwrap().1
    }

    #[test]
    fn spec_example_gives_max_urd_4_and_demand_5() {
        // W1 W2 R1 R3 R5 R6 R2 (docs/design.md §4.10).
        let iv = run(
            &[
                (true, 1),
                (true, 2),
                (false, 1),
                (false, 3),
                (false, 5),
                (false, 6),
                (false, 2),
            ],
            64,
        );
        assert_eq!(iv.max_useful_distance, 5, "max URD 4 + 1");
        assert_eq!(iv.max_distance, 5);
        assert_eq!(iv.types, [0.0, 2.0, 0.0, 0.0]);
        assert_eq!(iv.useful.hits(4), 1.0);
        assert_eq!(iv.useful.hits(5), 2.0);
    }

    #[test]
    fn reuse_types_index_as_previous_then_current() {
        // R1 R1 (RAR) W2 R2 (RAW) R3 W3 (WAR) W4 W4 (WAW)
        let iv = run(
            &[
                (false, 1),
                (false, 1),
                (true, 2),
                (false, 2),
                (false, 3),
                (true, 3),
                (true, 4),
                (true, 4),
            ],
            64,
        );
        assert_eq!(iv.types, [1.0, 1.0, 1.0, 1.0]);
        assert_eq!(iv.write_reuse_share(), 0.5);
    }

    #[test]
    fn curves_bucket_by_granule_and_count_beyond_the_cache() {
        // 1024 lines of cache: granule 2.
        let mut seq: Vec<(bool, u64)> = (0..2000).map(|k| (false, k)).collect();
        seq.extend((0..2000).map(|k| (false, k)));
        let iv = run(&seq, 1024);
        assert_eq!(iv.all.reuses(), 2000.0);
        assert_eq!(iv.all.hits(1024), 0.0, "every distance is 2000");
        assert_eq!(iv.max_distance, 2000);
        assert_eq!(iv.all.knee(0.95), 0);
    }

    #[test]
    fn sampling_estimates_distances_of_a_loop() {
        // A loop over 20000 lines, twice: every reuse at distance 20000.
        let mut a = Analyses::new(1 << 16, 0.1, 0.0);
        for _ in 0..2 {
            for k in 0..20_000u64 {
                a.observe(VolumeId(3), k, 1, false);
            }
        }
        let (v, iv) = a.take_interval().pop().unwrap();
        assert_eq!(v, VolumeId(3));
        let r = iv.max_distance as f64 / 20_000.0;
        assert!((0.8..1.25).contains(&r), "{r}");
        let reuses = iv.all.reuses() / 20_000.0;
        assert!((0.8..1.25).contains(&reuses), "{reuses}");
    }

    #[test]
    fn history_carries_earlier_intervals_at_a_decaying_weight() {
        let mut a = Analyses::new(64, 1.0, 0.5);
        // Interval 1: line 1 read twice, 10 lines apart (distance 11).
        a.observe(VolumeId(0), 1, 1, false);
        a.observe(VolumeId(0), 100, 10, false);
        a.observe(VolumeId(0), 1, 1, false);
        let iv = a.take_interval().pop().unwrap().1;
        assert_eq!((iv.max_useful_distance, iv.useful.reuses()), (11, 1.0));
        // Interval 2: nothing; the reuse still counts, at half weight, and so does its max.
        let iv = a.take_interval().pop().unwrap().1;
        assert_eq!((iv.max_useful_distance, iv.useful.reuses()), (11, 0.5));
        // history 0.5 keeps maxima for 4 intervals.
        for _ in 0..3 {
            a.take_interval();
        }
        let iv = a.take_interval().pop().unwrap().1;
        assert_eq!(iv.max_useful_distance, 0);
        assert!(iv.useful.reuses() < 0.05);
        // Without history, an idle interval says nothing.
        let mut b = Analyses::new(64, 1.0, 0.0);
        b.observe(VolumeId(0), 1, 1, false);
        b.observe(VolumeId(0), 1, 1, false);
        assert_eq!(b.take_interval()[0].1.max_useful_distance, 1);
        assert_eq!(b.take_interval()[0].1.max_useful_distance, 0);
    }
}
