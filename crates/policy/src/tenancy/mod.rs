//! Multi-tenant caches (docs/design.md §4.10): several volumes share one cache; a tenancy mode
//! decides, once per interval, how many lines each volume's partition gets and which write policy
//! it runs under.
//!
//! One file per mode behind [`TenancyMode`]:
//! - `shared`: one cache, no partitions (what a cache without a tenancy section does);
//! - `static_shares`: fixed partitions, equal or in given proportions;
//! - `eci`: ECI-Cache: each volume's demand is its max useful reuse distance + 1 (or the knee
//!   of its URD hit curve) over the previous interval, and volumes whose reuses are mostly
//!   write-after-read or write-after-write run read-only (their writes go to the backend);
//! - `trd`: the Centaur-like baseline: the same sizing from traditional reuse distances (every
//!   reuse, writes included) and the plain miss-ratio curve; write policies left alone.
//!
//! The cache feeds every read and write to the mode as it plans it ([`TenancyMode::observe`]):
//! the reuse-distance modes keep an incremental LRU stack per volume (`analysis`, built on
//! `tiercache-analyze`'s exact stack, optionally spatially sampled as in SHARDS), so a request
//! costs one stack access per line. Both executors poll the cache
//! ([`crate::Background::repartition`]) as they poll the load balancer; at an interval
//! boundary the mode answers with a [`VolumePlan`] per volume and the cache resizes the
//! partitions (a shrink evicts, writing dirty lines back through flush jobs) and sets the
//! write policies. When the demands exceed the cache, lines go by marginal gain in hits per
//! line along each volume's hit curve ([`allocate_by_gain`]). Adding a mode is a file here, a
//! [`TenancyModeKind`] variant and a line in [`build`].

mod analysis;
mod eci;
mod shared;
mod static_shares;
mod trd;

pub use analysis::{HitCurve, VolumeAnalysis};
pub use eci::Eci;
pub use shared::Shared;
pub use static_shares::StaticShares;
pub use trd::Trd;

use crate::config::WritePolicy;
use serde::{Deserialize, Serialize};
use tiercache_core::units::de_nanos;
use tiercache_core::{Nanos, VolumeId, MAX_VOLUMES};

/// A tenancy mode: how volumes share the cache.
pub trait TenancyMode: std::fmt::Debug + Send {
    /// Name as written in configs.
    fn name(&self) -> &'static str;

    /// Time between decisions, ns; `None`: never polled (one shared cache).
    fn interval_ns(&self) -> Option<Nanos>;

    /// Whether the mode decides at the first poll already (fixed shares), rather than at the
    /// end of the first interval (modes that learn from the traffic).
    fn decides_at_start(&self) -> bool {
        false
    }

    /// Whether [`observe`](Self::observe) does anything: the cache skips the call otherwise.
    fn observes(&self) -> bool;

    /// `lines` lines of `volume` from line `first` were read (`is_write` false) or written.
    fn observe(&mut self, volume: VolumeId, first: u64, lines: u64, is_write: bool);

    /// An interval ended: the plan for every volume until the next one, for a cache of
    /// `capacity_lines` lines (allocations sum to at most that). `None`: keep the current
    /// partitions and policies.
    fn decide(&mut self, capacity_lines: u64) -> Option<Vec<VolumePlan>>;

    /// Whether the next [`decide`](Self::decide) may plan `volume` (it was configured or
    /// seen). The cache leaves the partitions of volumes it will not plan (static ones,
    /// `cache.partitions`) out of the lines it lets the mode decide over. The default, `true`,
    /// leaves no line out: a mode that then plans fewer volumes than it claims has its
    /// decision refused when the partitions would not fit (counted in the report).
    fn plans_volume(&self, volume: VolumeId) -> bool {
        let _ = volume;
        true
    }
}

/// What a mode decided for one volume at an interval boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct VolumePlan {
    /// The volume.
    pub volume: VolumeId,
    /// Lines the volume would use well (its sizing rule's answer, capped at the cache).
    pub demand_lines: u64,
    /// Lines its partition gets.
    pub allocation_lines: u64,
    /// Write policy to put in force (`None`: leave the volume's policy as it is).
    pub write_policy: Option<WritePolicy>,
}

/// Which mode a cache runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TenancyModeKind {
    /// One cache, no partitions.
    #[default]
    Shared,
    /// Fixed partitions, equal or in the proportions of `shares`.
    Static,
    /// ECI-Cache: sizing from useful reuse distances, RO for write-reuse volumes.
    Eci,
    /// Centaur-like: sizing from traditional reuse distances.
    Trd,
}

impl TenancyModeKind {
    /// The name configs give it (`eci`), for messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Shared => "shared",
            Self::Static => "static",
            Self::Eci => "eci",
            Self::Trd => "trd",
        }
    }
}

/// How a reuse-distance mode turns a volume's interval into a demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sizing {
    /// The largest reuse distance + 1: every reuse of the interval would have hit.
    #[default]
    Max,
    /// The knee of the hit curve: the smallest size capturing `knee_share` of the reuses.
    Knee,
}

/// Default decay of the demand history ([`TenancyConfig::history`]).
pub const DEFAULT_HISTORY: f64 = 0.5;

/// Multi-tenant partitioning, docs/design.md §4.10 (`cache.tenancy`). One flat table so that a
/// sweep can vary `mode` alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TenancyConfig {
    /// The mode.
    pub mode: TenancyModeKind,
    /// Time between decisions.
    #[serde(deserialize_with = "de_nanos")]
    pub interval_ns: Nanos,
    /// `static`: weight of volume `i`'s partition (index = volume id); empty: equal shares
    /// among `volumes` volumes, or among those seen so far.
    pub shares: Vec<f64>,
    /// `static`: number of volumes sharing the cache when `shares` is empty (0: those seen).
    pub volumes: u32,
    /// `eci`: share of reuses that are WAR or WAW above which a volume runs read-only.
    pub waw_war_threshold: f64,
    /// `eci`, `trd`: sizing rule.
    pub sizing: Sizing,
    /// Share of reuses the knee captures (`sizing = "knee"`).
    pub knee_share: f64,
    /// Spatial sampling rate of the per-volume reuse analysis (SHARDS, fixed rate): 1 is
    /// the exact stack; lower rates keep memory and time per request down on large volumes.
    pub sample_rate: f64,
    /// `eci`, `trd`: the decay of the demand history, in [0, 1): an interval's hit curves and
    /// reuse types weigh `history` as much one interval later (geometric), and its largest
    /// reuse distances (the demands) count in full for as long as that weight stays above a
    /// sixteenth (4 intervals at 0.5), so a volume's demand is the largest of its recent
    /// intervals'. Default 0.5. 0 sizes from the previous interval alone (ECI-Cache's
    /// definition, the old behaviour), which lets a volume that issued few requests in one
    /// interval (idle, or starved by misses) lose its partition and its write policy.
    pub history: f64,
    /// Volumes with fixed settings the mode does not change: a fixed partition size (taken
    /// off the top; the mode divides the rest) and/or a fixed write policy.
    pub fixed: Vec<FixedVolume>,
}

/// Settings of one volume that no tenancy mode changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedVolume {
    /// The volume.
    pub volume: u32,
    /// Bytes of its partition (rounded down to whole lines); needs a partitioning mode.
    #[serde(
        default,
        deserialize_with = "tiercache_core::units::de_opt_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub bytes: Option<u64>,
    /// Its write policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_policy: Option<WritePolicy>,
}

impl Default for TenancyConfig {
    fn default() -> Self {
        Self {
            mode: TenancyModeKind::Shared,
            interval_ns: 100_000_000,
            shares: Vec::new(),
            volumes: 0,
            waw_war_threshold: 0.5,
            sizing: Sizing::Max,
            knee_share: 0.95,
            sample_rate: 1.0,
            history: DEFAULT_HISTORY,
            fixed: Vec::new(),
        }
    }
}

impl TenancyConfig {
    /// Checks the settings; the error names the field (relative to `cache`).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.interval_ns == 0 {
            return Err(("tenancy.interval_ns", "must be positive".into()));
        }
        if let Some(reason) = crate::config::duration_too_long(self.interval_ns) {
            return Err(("tenancy.interval_ns", reason));
        }
        if self.shares.len() > MAX_VOLUMES as usize {
            return Err((
                "tenancy.shares",
                format!(
                    "{} shares exceed the limit of {MAX_VOLUMES} volumes",
                    self.shares.len()
                ),
            ));
        }
        for (i, &s) in self.shares.iter().enumerate() {
            if !(s.is_finite() && s >= 0.0) {
                return Err((
                    "tenancy.shares",
                    format!("share {i} is {s}: must be a finite number >= 0"),
                ));
            }
        }
        if !self.shares.is_empty() && self.shares.iter().sum::<f64>() <= 0.0 {
            return Err((
                "tenancy.shares",
                "at least one share must be positive".into(),
            ));
        }
        if self.volumes > MAX_VOLUMES {
            return Err((
                "tenancy.volumes",
                format!("{} exceeds the limit of {MAX_VOLUMES}", self.volumes),
            ));
        }
        if !(0.0..=1.0).contains(&self.waw_war_threshold) {
            return Err((
                "tenancy.waw_war_threshold",
                format!("{} must be in [0, 1]", self.waw_war_threshold),
            ));
        }
        if !(self.knee_share > 0.0 && self.knee_share <= 1.0) {
            return Err((
                "tenancy.knee_share",
                format!("{} must be in (0, 1]", self.knee_share),
            ));
        }
        if !(self.sample_rate > 0.0 && self.sample_rate <= 1.0) {
            return Err((
                "tenancy.sample_rate",
                format!("{} must be in (0, 1]", self.sample_rate),
            ));
        }
        if !(0.0..1.0).contains(&self.history) {
            return Err((
                "tenancy.history",
                format!("{} must be in [0, 1)", self.history),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, f) in self.fixed.iter().enumerate() {
            if f.volume >= MAX_VOLUMES || !seen.insert(f.volume) {
                return Err((
                    "tenancy.fixed",
                    format!(
                        "entry {i}: volume {} is listed twice or beyond the limit of \
                         {MAX_VOLUMES}",
                        f.volume
                    ),
                ));
            }
            if f.bytes.is_some() && !self.partitions() {
                return Err((
                    "tenancy.fixed",
                    format!(
                        "entry {i}: a fixed size for volume {} needs a partitioning mode \
                         (static, eci, trd), or a static partition in cache.partitions",
                        f.volume
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Lines the fixed sizes take from a cache of `line_size`-byte lines.
    pub fn fixed_lines(&self, line_size: u64) -> u64 {
        self.fixed
            .iter()
            .filter_map(|f| f.bytes)
            .map(|b| b / line_size.max(1))
            .sum()
    }

    /// Whether the mode partitions the cache (every mode but `shared`).
    pub fn partitions(&self) -> bool {
        self.mode != TenancyModeKind::Shared
    }
}

/// The mode a configuration names, for a cache of `capacity_lines` lines.
pub fn build(cfg: &TenancyConfig, capacity_lines: u64) -> Box<dyn TenancyMode> {
    match cfg.mode {
        TenancyModeKind::Shared => Box::new(Shared),
        TenancyModeKind::Static => Box::new(StaticShares::new(cfg)),
        TenancyModeKind::Eci => Box::new(Eci::new(cfg, capacity_lines)),
        TenancyModeKind::Trd => Box::new(Trd::new(cfg, capacity_lines)),
    }
}

/// Allocates `capacity` lines among volumes by marginal gain: volume `i` wants `demand[i]`
/// lines and would hit `hits(i, c)` times with `c` (non-decreasing in `c`). When the demands
/// fit, each gets its demand. Otherwise lines go, `step` at a time, to the volume whose next
/// extension (of any length up to its demand) gains the most hits per line (a lookahead, so
/// that a curve flat before a step still gets its step: hit curves are not concave); ties go
/// to the lower index. Extensions gaining nothing are never made, so lines may be left over.
/// Every allocation is at most its demand and they sum to at most `capacity`.
pub fn allocate_by_gain(
    demand: &[u64],
    capacity: u64,
    step: u64,
    hits: &dyn Fn(usize, u64) -> f64,
) -> Vec<u64> {
    if demand.iter().fold(0u64, |a, &d| a.saturating_add(d)) <= capacity {
        return demand.to_vec();
    }
    let step = step.max(1);
    let mut alloc = vec![0u64; demand.len()];
    let mut left = capacity;
    loop {
        // (gain per line, volume, extension)
        let mut best: Option<(f64, usize, u64)> = None;
        for (i, &d) in demand.iter().enumerate() {
            let room = d.saturating_sub(alloc[i]).min(left);
            if room == 0 {
                continue;
            }
            let base = hits(i, alloc[i]);
            let mut k = step.min(room);
            loop {
                let gain = (hits(i, alloc[i] + k) - base) / k as f64;
                if gain > 0.0 && best.is_none_or(|(g, _, _)| gain > g) {
                    best = Some((gain, i, k));
                }
                if k == room {
                    break;
                }
                k = (k + step).min(room);
            }
        }
        let Some((_, i, k)) = best else { break };
        alloc[i] += k;
        left -= k;
        if left == 0 {
            break;
        }
    }
    alloc
}

/// What the tenancy mode decided at its last interval boundary and what each volume did in
/// the interval before it (docs/design.md §4.10's per-VM figures), from
/// [`crate::Report::tenancy_report`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TenancyReport {
    /// Mode name.
    pub mode: &'static str,
    /// Decisions made so far.
    pub decisions: u64,
    /// Time of the last decision, ns.
    pub at_ns: Nanos,
    /// Lines of the cache.
    pub capacity_lines: u64,
    /// Lines allocated to volumes' partitions together (the cache's lines in `shared` mode).
    pub allocated_lines: u64,
    /// Per volume, in volume order.
    pub volumes: Vec<VolumeTenancy>,
    /// Decisions refused because their partitions did not fit the cache (the partitions and
    /// write policies stayed as they were; not counted in `decisions`).
    #[serde(skip_serializing_if = "is_zero")]
    pub refused_decisions: u64,
    /// Why the last refused decision was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_refusal: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One volume in a [`TenancyReport`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct VolumeTenancy {
    /// The volume.
    pub volume: u32,
    /// Demand found in the interval that ended (lines; 0 for modes without one).
    pub demand_lines: u64,
    /// Lines of its partition from now on (`shared`: the whole cache).
    pub allocation_lines: u64,
    /// Lines it holds now.
    pub used_lines: u64,
    /// Write policy in force for it.
    pub write_policy: WritePolicy,
    /// Line hits in the interval that ended.
    pub interval_hits: u64,
    /// Line misses in the interval that ended.
    pub interval_misses: u64,
    /// Bytes written to the cache device for it in the interval that ended.
    pub interval_cache_bytes_written: u64,
}

/// What one volume did (counted by the cache for every volume, whatever the mode).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct VolumeStats {
    /// Read requests.
    pub read_requests: u64,
    /// Write requests.
    pub write_requests: u64,
    /// Lines found with all needed data.
    pub line_hits: u64,
    /// Lines found with part of the needed data.
    pub line_partial_hits: u64,
    /// Lines not found.
    pub line_misses: u64,
    /// Lines served around the cache: a subset of `line_misses` (a bypass is a miss, or a
    /// resident line passed by in a pass-through mode, counted as a miss too).
    pub line_bypasses: u64,
    /// Bytes written to the cache device for the volume (fills, promotions, writes): its
    /// share of the device's wear.
    pub cache_bytes_written: u64,
}

impl VolumeStats {
    /// Line accesses of reads and writes (bypasses are among the misses, not added again).
    pub fn line_accesses(&self) -> u64 {
        self.line_hits + self.line_partial_hits + self.line_misses
    }

    /// Share of line accesses that were full hits (0 without any).
    pub fn hit_ratio(&self) -> f64 {
        match self.line_accesses() {
            0 => 0.0,
            n => self.line_hits as f64 / n as f64,
        }
    }

    /// Counts since `base` (an earlier value of the same counters; `None`: since zero).
    pub fn since(&self, base: Option<&VolumeStats>) -> VolumeStats {
        let b = base.copied().unwrap_or_default();
        VolumeStats {
            read_requests: self.read_requests - b.read_requests,
            write_requests: self.write_requests - b.write_requests,
            line_hits: self.line_hits - b.line_hits,
            line_partial_hits: self.line_partial_hits - b.line_partial_hits,
            line_misses: self.line_misses - b.line_misses,
            line_bypasses: self.line_bypasses - b.line_bypasses,
            cache_bytes_written: self.cache_bytes_written - b.cache_bytes_written,
        }
    }

    /// Adds `o`'s counts (the shards of one cache).
    pub fn merge(&mut self, o: &VolumeStats) {
        self.read_requests += o.read_requests;
        self.write_requests += o.write_requests;
        self.line_hits += o.line_hits;
        self.line_partial_hits += o.line_partial_hits;
        self.line_misses += o.line_misses;
        self.line_bypasses += o.line_bypasses;
        self.cache_bytes_written += o.cache_bytes_written;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demands_that_fit_are_granted_and_others_go_by_gain() {
        let curve = |i: usize, c: u64| -> f64 {
            // Volume 0: 10 hits per line up to 10 lines; volume 1: 1 hit per line up to 100.
            match i {
                0 => 10.0 * c.min(10) as f64,
                _ => c.min(100) as f64,
            }
        };
        assert_eq!(allocate_by_gain(&[10, 100], 200, 1, &curve), vec![10, 100]);
        assert_eq!(allocate_by_gain(&[10, 100], 50, 1, &curve), vec![10, 40]);
        // A step function: nothing until 20 lines, then 100 hits; beats a 1-per-line curve.
        let step = |i: usize, c: u64| -> f64 {
            match i {
                0 => 100.0 * (c >= 20) as u64 as f64,
                _ => c as f64,
            }
        };
        assert_eq!(allocate_by_gain(&[20, 50], 30, 1, &step), vec![20, 10]);
    }

    #[test]
    fn bad_settings_are_named() {
        let bad = [
            TenancyConfig {
                interval_ns: 0,
                ..Default::default()
            },
            TenancyConfig {
                shares: vec![1.0, -1.0],
                ..Default::default()
            },
            TenancyConfig {
                shares: vec![0.0],
                ..Default::default()
            },
            TenancyConfig {
                waw_war_threshold: 1.5,
                ..Default::default()
            },
            TenancyConfig {
                sample_rate: 0.0,
                ..Default::default()
            },
        ];
        let fields = [
            "tenancy.interval_ns",
            "tenancy.shares",
            "tenancy.shares",
            "tenancy.waw_war_threshold",
            "tenancy.sample_rate",
        ];
        for (c, f) in bad.iter().zip(fields) {
            assert_eq!(c.validate().unwrap_err().0, f);
        }
        assert!(TenancyConfig::default().validate().is_ok());
    }
}
