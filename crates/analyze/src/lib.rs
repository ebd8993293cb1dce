//! Workload analysis (docs/design.md §4.10, §7): what a cache would see before choosing one.
//!
//! - exact LRU miss-ratio curves in one pass ([`stack`], O(log M) per line access), for all,
//!   read and write accesses, overall and per volume;
//! - SHARDS approximate curves, fixed-rate and fixed-size ([`shards`]);
//! - curves of other replacement policies (FIFO, CLOCK, ARC, S3-FIFO, SIEVE, ...) by sampled
//!   miniature simulation ([`minisim`]);
//! - traditional and useful reuse distances, reuse types, ECI-style sizing and write-policy
//!   advice per volume ([`reuse`]);
//! - characterisation ([`characterise`]): mix, sequentiality, request sizes, inter-arrival
//!   times, and per interval of trace time the IOPS (bursts), the working set, and the reuses
//!   ending in it with their URD and TRD demands (max URD + 1, max TRD + 1).
//!
//! Line accesses follow the policy core: a request covers lines ⌊off/L⌋ ..= ⌊(off+len−1)/L⌋,
//! and on reads and writes the exact curve equals the hit-ratio-only simulator's LRU with
//! always-promotion, an
//! access counting as a hit when its line is resident (the core's full plus partial hits).
//! A trim drops the lines it covers whole from the exact stacks, as the core drops them (their
//! next access is a miss and no reuse); a line it covers in part stays (the core keeps it
//! while any sub-block is valid). With trims the curve approximates the core's: a cache does
//! not take back a line it evicted when a trim frees a slot, while the stack, losing a line
//! above it, counts that line as cached again (and a line several partial trims empty
//! between them, which the core drops, stays here). The sampled estimators (SHARDS, miniature simulation) do not
//! apply trims: the analysis says so in its notes when a trace has any.

#![warn(missing_docs)]

pub mod characterise;
mod file;
pub mod minisim;
pub mod opt;
pub mod plots;
pub mod reuse;
pub mod shards;
pub mod stack;
mod summary;

pub use file::{analyze_file, analyze_file_with_progress, AnalyzeError, FileOptions, Progress};
use minisim::{MiniSim, PolicyCurve};
use reuse::{Advice, ReuseAnalyzer};
use serde::Serialize;
use shards::Shards;
use std::collections::BTreeMap;
pub use summary::MAX_VOLUME_ROWS;
use tiercache_core::{LineGeometry, LineKey, Op, Request, VolumeId};
pub use tiercache_eviction::EvictionKind;
pub use tiercache_optimal::writeback::CostWeights;

/// What to compute.
#[derive(Debug, Clone)]
pub struct Options {
    /// Line size in bytes.
    pub line_size: u64,
    /// Cache sizes (lines) at which to report the curves; empty: a power-of-two grid up to the
    /// footprint.
    pub sizes: Vec<u64>,
    /// SHARDS sampling rate (fixed-rate), if wanted.
    pub shards_rate: Option<f64>,
    /// SHARDS bound on tracked lines (fixed-size), if wanted.
    pub shards_max_entries: Option<usize>,
    /// WAR+WAW share above which the advice disables cache writes.
    pub write_reuse_threshold: f64,
    /// Interval of trace time for the IOPS and working-set timelines.
    pub interval_ns: u64,
    /// An interval is in a burst when its IOPS exceed this factor × the median.
    pub burst_factor: f64,
    /// Replacement policies whose curves to estimate by miniature simulation.
    pub policies: Vec<EvictionKind>,
    /// Sampling rate of the miniature simulations (0 < rate ≤ 1).
    pub minisim_rate: f64,
    /// Keep the exact LRU stacks when sampling (SHARDS asked for). Without sampling they are
    /// always kept. Without them the exact outputs (exact curves, footprint, per-volume
    /// analysis, reuse distributions, per-interval working sets and reuses) are `None`: a
    /// sampled analysis then costs the reader, the request counts and the sampler only.
    pub exact: bool,
    /// Compute Belady's OPT curve beside the others ([`opt`]; also when `policies` names
    /// `belady`). Spills the line accesses to temporary files.
    pub opt: bool,
    /// With OPT, the write-back cost bound and each policy's cost at these weights.
    pub writeback: Option<tiercache_optimal::writeback::CostWeights>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            line_size: 4096,
            sizes: Vec::new(),
            shards_rate: None,
            shards_max_entries: None,
            write_reuse_threshold: 0.5,
            interval_ns: 1_000_000_000,
            burst_factor: 2.0,
            policies: Vec::new(),
            minisim_rate: 0.01,
            exact: true,
            opt: false,
            writeback: None,
        }
    }
}

/// One point of a miss-ratio curve.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CurvePoint {
    /// Cache size in lines.
    pub lines: u64,
    /// Cache size in bytes.
    pub bytes: u64,
    /// Exact LRU miss ratio over all line accesses (`None`: not computed, sampled analysis;
    /// or undefined, no such access).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub miss_ratio: Option<f64>,
    /// ... over read accesses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_miss_ratio: Option<f64>,
    /// ... over write accesses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_miss_ratio: Option<f64>,
    /// SHARDS estimate, when sampling was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards_miss_ratio: Option<f64>,
    /// Belady's (OPT) miss ratio over all line accesses, when asked for ([`Options::opt`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opt_miss_ratio: Option<f64>,
}

/// Per-volume summary.
#[derive(Debug, Clone, Serialize)]
pub struct VolumeAnalysis {
    /// Volume name in the trace.
    pub name: String,
    /// Line accesses.
    pub line_accesses: u64,
    /// Distinct lines (footprint).
    pub footprint_lines: u64,
    /// Reuse counts: RAR, RAW, WAR, WAW.
    pub reuse_types: [u64; 4],
    /// Sizing and write-policy advice.
    pub advice: Advice,
    /// Exact LRU miss-ratio curve of this volume alone.
    pub curve: Vec<CurvePoint>,
}

/// The result of an analysis.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    /// Line size used.
    pub line_size: u64,
    /// Requests read.
    pub requests: u64,
    /// Read and write requests.
    pub read_requests: u64,
    /// Write requests.
    pub write_requests: u64,
    /// Line accesses (reads and writes).
    pub line_accesses: u64,
    /// Whether the exact outputs were computed (see [`Options::exact`]); when not, each of
    /// them is `None` (left out of the JSON).
    pub exact: bool,
    /// Distinct lines held at the end (a line a trim dropped counts again when accessed again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub footprint_lines: Option<u64>,
    /// Fraction of requests starting where the previous request of their volume ended.
    pub sequential_fraction: f64,
    /// LRU miss-ratio curve over all volumes sharing one cache: exact and, when sampling,
    /// SHARDS estimates. Without the exact stacks its sizes, unless given, are powers of two up
    /// to the footprint SHARDS estimates.
    pub curve: Vec<CurvePoint>,
    /// SHARDS sampling rate at the end and the most lines it tracked at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<(f64, usize)>,
    /// Per-volume analysis (exact only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<VolumeAnalysis>>,
    /// Sum of the volumes' URD demands and TRD demands, in lines (exact only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_urd_demand_lines: Option<u64>,
    /// TRD-based total demand (exact only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_trd_demand_lines: Option<u64>,
    /// Cumulative distributions of traditional and useful reuse distances (shared cache):
    /// `(distance in lines, share of reuses with TRD ≤ it, share of read reuses with URD ≤ it)`
    /// (exact only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reuse_cdf: Option<Vec<(u64, f64, f64)>>,
    /// Sizes, mix in bytes, IOPS and working set per interval, bursts, inter-arrival times.
    pub characterisation: characterise::Characterisation,
    /// Belady's OPT curve and the write-back costs, when asked for ([`Options::opt`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opt: Option<opt::OptAnalysis>,
    /// Other policies' curves by miniature simulation, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minisim: Option<MiniSimCurves>,
    /// Line accesses trims dropped from the exact stacks (lines covered whole).
    pub trimmed_lines: u64,
    /// What the figures leave out or approximate, for the reader (e.g. trims the sampled
    /// estimates did not apply).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Miss-ratio curves of replacement policies by miniature simulation.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MiniSimCurves {
    /// Sampling rate.
    pub rate: f64,
    /// Line accesses simulated (to sampled and hot lines).
    pub simulated_accesses: u64,
    /// Hot lines simulated exactly.
    pub hot_lines: usize,
    /// One curve per policy, at the sizes of [`Analysis::curve`].
    pub curves: Vec<PolicyCurve>,
}

/// The miss ratio of `h` at `lines` lines, when `h` counted any access.
fn defined(h: &reuse::DistanceHistogram, lines: u64) -> Option<f64> {
    (h.total > 0).then(|| h.miss_ratio(lines))
}

/// Streaming analyzer: feed requests, then [`Analyzer::finish`].
pub struct Analyzer {
    opts: Options,
    geo: LineGeometry,
    /// The shared-cache analysis. While one volume has been seen it *is* that volume's
    /// analysis, so it is only split off (cloned) when a second volume appears: single-volume
    /// traces pay for one stack, not two.
    global: Option<ReuseAnalyzer>,
    per_volume: BTreeMap<VolumeId, ReuseAnalyzer>,
    shards: Option<Shards>,
    minisim: Option<MiniSim>,
    /// End of each volume's last request, by dense volume id.
    last_end: Vec<Option<u64>>,
    requests: u64,
    reads: u64,
    writes: u64,
    sequential: u64,
    /// Whether the exact stacks run (see [`Options::exact`]).
    exact: bool,
    /// Lines trims dropped from the exact stacks.
    trimmed_lines: u64,
    /// Trims the sampled estimators did not apply.
    trims_not_sampled: u64,
    /// Line accesses, counted here when the stacks (which count them) do not run.
    line_accesses: u64,
    characteriser: Option<characterise::Characteriser>,
    /// The line accesses for OPT, when asked for.
    opt: Option<opt::OptTracker>,
    /// Why OPT was asked for and not computed.
    opt_failure: Option<String>,
}

impl Analyzer {
    /// An analyzer; errors on an invalid line size.
    pub fn new(opts: Options) -> Result<Self, tiercache_core::GeometryError> {
        let geo = LineGeometry::new(opts.line_size)?;
        let shards = match (opts.shards_max_entries, opts.shards_rate) {
            (Some(n), _) => Some(Shards::fixed_size(n)),
            (None, Some(r)) => Some(Shards::fixed_rate(r)),
            _ => None,
        };
        let exact = opts.exact || shards.is_none();
        // Working sets and footprints come from the shared stack: no line sets of its own.
        // Without the stacks, nothing knows them: the rows say so.
        let characteriser = if exact {
            characterise::Characteriser::without_lines(geo, opts.interval_ns, opts.burst_factor)
        } else {
            characterise::Characteriser::requests_only(geo, opts.interval_ns, opts.burst_factor)
        };
        // Belady is not simulated in miniature: asking for it asks for the exact OPT curve.
        let online: Vec<EvictionKind> = opts
            .policies
            .iter()
            .copied()
            .filter(|k| *k != EvictionKind::Belady)
            .collect();
        let want_opt = opts.opt || opts.writeback.is_some() || online.len() < opts.policies.len();
        let minisim =
            (!online.is_empty()).then(|| MiniSim::new(&online, opts.minisim_rate, &opts.sizes));
        Ok(Self {
            opt: want_opt.then(|| opt::OptTracker::new(geo)),
            opt_failure: None,
            minisim,
            opts,
            geo,
            global: None,
            per_volume: BTreeMap::new(),
            shards,
            last_end: Vec::new(),
            requests: 0,
            reads: 0,
            writes: 0,
            sequential: 0,
            exact,
            trimmed_lines: 0,
            trims_not_sampled: 0,
            line_accesses: 0,
            characteriser: Some(characteriser),
        })
    }

    /// Feeds one request (flushes are counted as requests but touch no line; a trim drops the
    /// lines it covers whole from the exact stacks). A read or write the line geometry cannot
    /// address (past the 2^48 lines of a volume, or a volume id past the limit) is an error,
    /// and changes nothing.
    pub fn add(&mut self, r: &Request) -> Result<(), tiercache_core::GeometryError> {
        if matches!(r.op, Op::Read | Op::Write) && r.len > 0 {
            self.geo.check_request(r.volume, r.offset, r.len)?;
        }
        self.requests += 1;
        if let Some(o) = &mut self.opt {
            o.add(r, self.requests - 1);
        }
        if let Some(c) = &mut self.characteriser {
            let (global, per_volume) = (&mut self.global, &mut self.per_volume);
            c.add_with(r, &mut || close_interval(global, per_volume));
        }
        let is_write = match r.op {
            Op::Read => false,
            Op::Write => true,
            Op::Trim => {
                self.trim(r);
                return Ok(());
            }
            Op::Flush => return Ok(()),
        };
        if is_write {
            self.writes += 1;
        } else {
            self.reads += 1;
        }
        let v = r.volume.0 as usize;
        if self.last_end.len() <= v {
            self.last_end.resize(v + 1, None);
        }
        if self.last_end[v].replace(r.end()) == Some(r.offset) {
            self.sequential += 1;
        }
        if !self.exact {
            // Sampled: only the samplers see line accesses.
            for s in self.geo.split(r.offset, r.len) {
                let key = LineKey::new(r.volume, s.index).0;
                self.line_accesses += 1;
                if let Some(sh) = &mut self.shards {
                    sh.access(key);
                }
                if let Some(m) = &mut self.minisim {
                    m.access(key);
                }
            }
            return Ok(());
        }
        if self.global.is_none()
            && self.per_volume.len() == 1
            && !self.per_volume.contains_key(&r.volume)
        {
            self.global = self.per_volume.values().next().cloned();
        }
        let vol = self.per_volume.entry(r.volume).or_default();
        for s in self.geo.split(r.offset, r.len) {
            let key = LineKey::new(r.volume, s.index).0;
            if let Some(g) = &mut self.global {
                g.access(key, is_write);
            }
            vol.access(key, is_write);
            if let Some(sh) = &mut self.shards {
                sh.access(key);
            }
            if let Some(m) = &mut self.minisim {
                m.access(key);
            }
        }
        Ok(())
    }

    /// Hint that `r` is added soon: the samplers start loading what its first line's access
    /// reads (the exact stacks take no hint). Changes nothing; `add` stays correct without it.
    #[inline]
    pub fn prefetch(&self, r: &Request) {
        if self.shards.is_none() && self.minisim.is_none() {
            return;
        }
        let key = LineKey::new_for_hint(r.volume, self.geo.line_of(r.offset)).0;
        if let Some(sh) = &self.shards {
            sh.prefetch(key);
        }
        if let Some(m) = &self.minisim {
            m.prefetch(key);
        }
    }

    /// Drops the lines `r` (a trim) covers whole from the exact stacks.
    fn trim(&mut self, r: &Request) {
        let l = self.geo.line_size();
        // Lines past the 2^48 a volume addresses hold nothing to drop.
        let first = r.offset.div_ceil(l).min(1 << 48);
        let end = (r.offset.saturating_add(r.len) / l).min(1 << 48);
        if first >= end || r.volume.0 >= tiercache_core::MAX_VOLUMES {
            return;
        }
        if self.shards.is_some() || self.minisim.is_some() {
            self.trims_not_sampled += 1;
        }
        if !self.exact {
            return;
        }
        for index in first..end {
            let key = LineKey::new(r.volume, index).0;
            if let Some(g) = &mut self.global {
                g.remove(key);
            }
            if let Some(v) = self.per_volume.get_mut(&r.volume) {
                v.remove(key);
            }
        }
        self.trimmed_lines += end - first;
    }

    /// Heap bytes held by the analysis state (approximate: stacks, histograms, sets).
    pub fn memory_bytes(&self) -> usize {
        self.global.as_ref().map_or(0, |g| g.memory_bytes())
            + self
                .per_volume
                .values()
                .map(|a| a.memory_bytes())
                .sum::<usize>()
            + self.shards.as_ref().map_or(0, |s| s.memory_bytes())
            + self.characteriser.as_ref().map_or(0, |c| c.memory_bytes())
            + self.minisim.as_ref().map_or(0, |m| m.memory_bytes())
    }

    fn grid(&self, footprint: u64) -> Vec<u64> {
        if !self.opts.sizes.is_empty() {
            return self.opts.sizes.clone();
        }
        let mut v = Vec::new();
        let mut s = 1u64;
        while s < footprint {
            v.push(s);
            s *= 2;
        }
        v.push(footprint.max(1));
        v
    }

    /// The curve of `a` (exact), or SHARDS's alone when `a` is `None`.
    fn curve(&self, a: Option<&ReuseAnalyzer>, with_shards: bool) -> Vec<CurvePoint> {
        let footprint = match a {
            Some(a) => a.distinct(),
            None => self.shards.as_ref().map_or(0, |s| s.footprint_estimate()),
        };
        self.grid(footprint)
            .into_iter()
            .map(|lines| CurvePoint {
                lines,
                bytes: lines.saturating_mul(self.opts.line_size),
                // Undefined (None, printed `-`) over no accesses, never a ratio of 0.
                miss_ratio: a.and_then(|a| defined(&a.all(), lines)),
                read_miss_ratio: a.and_then(|a| defined(&a.reads(), lines)),
                write_miss_ratio: a.and_then(|a| defined(&a.writes(), lines)),
                shards_miss_ratio: if with_shards {
                    self.shards.as_ref().map(|s| s.miss_ratio(lines))
                } else {
                    None
                },
                opt_miss_ratio: None,
            })
            .collect()
    }

    /// The shared-cache analyzer: the split-off global one, or the only volume's.
    fn shared(&self) -> std::borrow::Cow<'_, ReuseAnalyzer> {
        match (&self.global, self.per_volume.values().next()) {
            (Some(g), _) => std::borrow::Cow::Borrowed(g),
            (None, Some(v)) => std::borrow::Cow::Borrowed(v),
            (None, None) => std::borrow::Cow::Owned(ReuseAnalyzer::default()),
        }
    }

    /// The analysis; `names` maps volume ids to names (e.g. a trace's volume map).
    pub fn finish(&mut self, names: &dyn Fn(VolumeId) -> String) -> Analysis {
        let characterisation = match self.characteriser.take() {
            Some(c) => {
                let (global, per_volume) = (&mut self.global, &mut self.per_volume);
                c.finish_with(&mut || close_interval(global, per_volume))
            }
            None => Default::default(),
        };
        if !self.exact {
            return self.finish_sampled(characterisation);
        }
        // OPT first: its spilled accesses are worked on while nothing else is borrowed.
        let mut opt_curve = self.curve(Some(&self.shared()), true);
        let opt = self.opt_analysis(&mut opt_curve);
        let shared = self.shared();
        let reuse_cdf = {
            let (all, useful) = (&shared.all(), &shared.useful());
            let (ta, tu) = (all.reuses().max(1) as f64, useful.reuses().max(1) as f64);
            // Histograms are by stack distance d (1 = the same line again); a reuse distance
            // (docs/design.md §4.10: distinct lines in between) is d − 1.
            let max = all.max_distance().max(useful.max_distance()).max(2) - 1;
            let (mut ca, mut cu, mut d, mut out) = (0u64, 0u64, 0usize, Vec::new());
            let mut next = 1u64;
            loop {
                while d as u64 <= next.min(max) + 1 {
                    ca += all.counts.get(d).copied().unwrap_or(0);
                    cu += useful.counts.get(d).copied().unwrap_or(0);
                    d += 1;
                }
                out.push((next.min(max), ca as f64 / ta, cu as f64 / tu));
                if next >= max {
                    break;
                }
                next *= 2;
            }
            out
        };
        let volumes: Vec<VolumeAnalysis> = self
            .per_volume
            .iter()
            .map(|(&v, a)| VolumeAnalysis {
                name: names(v),
                line_accesses: a.accesses(),
                footprint_lines: a.distinct(),
                reuse_types: a.types,
                advice: a.advice(self.opts.write_reuse_threshold),
                curve: self.curve(Some(a), false),
            })
            .collect();
        let curve = opt_curve;
        let minisim = self.minisim_curves(&curve);
        Analysis {
            opt,
            line_size: self.opts.line_size,
            requests: self.requests,
            read_requests: self.reads,
            write_requests: self.writes,
            line_accesses: shared.accesses(),
            exact: true,
            footprint_lines: Some(shared.distinct()),
            sequential_fraction: if self.reads + self.writes == 0 {
                0.0
            } else {
                self.sequential as f64 / (self.reads + self.writes) as f64
            },
            curve,
            shards: self.shards.as_ref().map(|s| (s.rate(), s.peak_entries())),
            total_urd_demand_lines: Some(volumes.iter().map(|v| v.advice.urd_demand_lines).sum()),
            total_trd_demand_lines: Some(volumes.iter().map(|v| v.advice.trd_demand_lines).sum()),
            volumes: Some(volumes),
            reuse_cdf: Some(reuse_cdf),
            characterisation,
            minisim,
            trimmed_lines: self.trimmed_lines,
            notes: self.notes(),
        }
    }

    /// The analysis of a sampled run (no exact stacks): counts, SHARDS, mini-simulations and
    /// the request characterisation; every exact output `None`.
    fn finish_sampled(&mut self, characterisation: characterise::Characterisation) -> Analysis {
        let mut curve = self.curve(None, true);
        let opt = self.opt_analysis(&mut curve);
        Analysis {
            opt,
            line_size: self.opts.line_size,
            requests: self.requests,
            read_requests: self.reads,
            write_requests: self.writes,
            line_accesses: self.line_accesses,
            exact: false,
            footprint_lines: None,
            sequential_fraction: if self.reads + self.writes == 0 {
                0.0
            } else {
                self.sequential as f64 / (self.reads + self.writes) as f64
            },
            minisim: self.minisim_curves(&curve),
            curve,
            shards: self.shards.as_ref().map(|s| (s.rate(), s.peak_entries())),
            volumes: None,
            total_urd_demand_lines: None,
            total_trd_demand_lines: None,
            reuse_cdf: None,
            characterisation,
            trimmed_lines: self.trimmed_lines,
            notes: self.notes(),
        }
    }

    /// The OPT analysis at the curve's sizes, its miss ratios put into `curve`; `None` when not
    /// asked for or when it failed (the failure goes to the notes).
    fn opt_analysis(&mut self, curve: &mut [CurvePoint]) -> Option<opt::OptAnalysis> {
        let tracker = self.opt.take()?;
        let sizes: Vec<u64> = curve.iter().map(|p| p.lines).collect();
        match tracker.finish(&sizes, &self.opts.policies, self.opts.writeback) {
            Ok(a) => {
                for (p, o) in curve.iter_mut().zip(&a.curve) {
                    p.opt_miss_ratio = (a.line_accesses > 0).then_some(o.miss_ratio);
                }
                Some(a)
            }
            Err(e) => {
                self.opt_failure = Some(format!("OPT not computed: {e}"));
                None
            }
        }
    }

    fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self.opt_failure.iter().cloned().collect();
        if self.trims_not_sampled > 0 {
            notes.push(format!(
                "{} trims were not applied to the sampled estimates (SHARDS, miniature \
                 simulation): they count trimmed lines as still cached",
                self.trims_not_sampled
            ));
        }
        notes
    }

    fn minisim_curves(&self, curve: &[CurvePoint]) -> Option<MiniSimCurves> {
        self.minisim.as_ref().map(|m| {
            let sizes: Vec<u64> = curve.iter().map(|p| p.lines).collect();
            MiniSimCurves {
                rate: m.rate(),
                simulated_accesses: m.simulated_accesses(),
                hot_lines: m.hot_lines(),
                curves: m.curves(&sizes),
            }
        })
    }
}

/// Closes an interval of the shared-cache analyzer (the split-off global one, or the only
/// volume's): its reuses, working set and the footprint so far.
fn close_interval(
    global: &mut Option<ReuseAnalyzer>,
    per_volume: &mut BTreeMap<VolumeId, ReuseAnalyzer>,
) -> characterise::IntervalLines {
    match global.as_mut().or(per_volume.values_mut().next()) {
        Some(a) => {
            let (reuse, working_set_lines) = a.take_interval();
            characterise::IntervalLines {
                working_set_lines,
                footprint_lines: a.distinct(),
                reuse,
            }
        }
        None => Default::default(),
    }
}
