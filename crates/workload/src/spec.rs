//! The workload specification: what a user writes in a config (docs/design.md §6, §4.7 archetypes).
//!
//! Sizes accept an integer number of bytes or a string with a unit (`"4KiB"`, `"10GiB"`), times an
//! integer number of nanoseconds or a string (`"100us"`, `"2s"`). Unknown fields are errors.
//!
//! ```toml
//! seed = 7
//! jobs = 4
//! iodepth = 8                      # closed loop; give rate_iops instead for an open loop
//! read_fraction = 0.7
//! block_sizes = [{ size = "4KiB", weight = 3 }, { size = "64KiB", weight = 1 }]
//! footprint = "10GiB"
//! distribution = { type = "zipf", theta = 0.9 }
//! requests = 1_000_000
//! ```

use serde::{Deserialize, Deserializer, Serialize};
use tiercache_core::units::{de_bytes, de_nanos, de_opt_bytes, de_opt_nanos};

use crate::error::WorkloadError;

/// Default footprint: 1 GiB.
pub const DEFAULT_FOOTPRINT: u64 = 1 << 30;
/// Default block size: 4 KiB.
pub const DEFAULT_BLOCK_SIZE: u64 = 4096;
/// Most `jobs` a workload may have (each has its state, allocated up front).
const MAX_JOBS: u32 = 65_536;
/// Most `iodepth` a workload may have.
const MAX_IODEPTH: u32 = 65_536;
/// Most requests in flight, `jobs × iodepth` (an executor allocates a slot for each).
const MAX_IN_FLIGHT: u64 = 1 << 20;

/// A fio-like synthetic workload (docs/design.md §6).
///
/// Closed loop (`iodepth`, the default) or open loop (`rate_iops`); every field has a documented
/// default so `WorkloadSpec::default()` is a valid read-only, uniform, 4 KiB, 1 GiB, unbounded
/// workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Seed of every random choice. Same seed and spec → same requests, bit for bit. Default 0.
    /// A tiercache config seeds its workload with `run.seed` and refuses `workload.seed`.
    pub seed: u64,
    /// Independent submitters (fio `numjobs`). Each has its own random stream derived from
    /// (`seed`, job index). In an open loop the jobs are the streams arrivals are dealt to
    /// round-robin (each job keeps its own sequential cursor). Default 1.
    pub jobs: u32,
    /// Requests in flight per job (closed loop). Default 1 when `rate_iops` is not given; must
    /// not be given together with `rate_iops`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iodepth: Option<u32>,
    /// Open loop: arrivals per second (during on periods if `bursts` is given). Default: none
    /// (closed loop).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_iops: Option<f64>,
    /// Open-loop inter-arrival law. Default `poisson`.
    pub arrival: ArrivalProcess,
    /// Fraction of requests that are reads, `0..=1`. Default 1 (read-only, as fio's default).
    pub read_fraction: f64,
    /// Fraction of requests that are trims, `0..=1`; the rest after reads and trims are writes.
    /// Default 0.
    pub trim_fraction: f64,
    /// Weighted request-size distribution. Default `[{ size = 4096, weight = 1 }]`.
    pub block_sizes: Vec<BlockSize>,
    /// Byte boundary every offset is a multiple of (fio `blockalign`). Default: the smallest
    /// block size (so 4096 for the default sizes).
    #[serde(
        deserialize_with = "de_opt_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub alignment: Option<u64>,
    /// Address range of each volume in bytes: every request lies in `0..footprint`.
    /// Default 1 GiB.
    #[serde(deserialize_with = "de_bytes")]
    pub footprint: u64,
    /// Number of volumes the requests go to. Default 1.
    pub volumes: u32,
    /// Optional per-volume weights (one per volume): each request picks its volume at random by
    /// weight. Without weights, job `j` addresses volume `j % volumes` (so `jobs >= volumes` is
    /// required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_weights: Option<Vec<f64>>,
    /// Address distribution of reads (and of writes and trims unless `write_distribution` is
    /// given). Default `uniform`.
    #[serde(deserialize_with = "de_dist")]
    pub distribution: AddressDist,
    /// Optional separate address distribution for writes and trims.
    #[serde(
        deserialize_with = "de_opt_dist",
        skip_serializing_if = "Option::is_none"
    )]
    pub write_distribution: Option<AddressDist>,
    /// Optional on/off periods, starting with an on period at time 0. Default: always on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bursts: Option<Bursts>,
    /// Total number of requests, split over jobs as evenly as possible (the first
    /// `requests % jobs` jobs get one more). Default: unbounded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Time limit in ns: open loop, no arrival at or after it; closed loop, enforced by
    /// [`SyntheticWorkload::next_request_at`](crate::SyntheticWorkload::next_request_at)
    /// (which knows the executor's clock). Default: unbounded.
    #[serde(
        alias = "duration",
        deserialize_with = "de_opt_nanos",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_ns: Option<u64>,
    /// Each job follows every `flush_every`-th write of its own with a flush request (fio
    /// `fsync`); flushes count towards `requests`. Default: no flushes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flush_every: Option<u64>,
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        Self {
            seed: 0,
            jobs: 1,
            iodepth: None,
            rate_iops: None,
            arrival: ArrivalProcess::Poisson,
            read_fraction: 1.0,
            trim_fraction: 0.0,
            block_sizes: vec![BlockSize {
                size: DEFAULT_BLOCK_SIZE,
                weight: 1.0,
            }],
            alignment: None,
            footprint: DEFAULT_FOOTPRINT,
            volumes: 1,
            volume_weights: None,
            distribution: AddressDist::Uniform,
            write_distribution: None,
            bursts: None,
            requests: None,
            duration_ns: None,
            flush_every: None,
        }
    }
}

/// Open-loop inter-arrival law.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArrivalProcess {
    /// Exponential inter-arrival times (a Poisson process) of mean `1 / rate_iops`.
    #[default]
    Poisson,
    /// Fixed spacing `1 / rate_iops`.
    Uniform,
}

/// One entry of the request-size distribution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockSize {
    /// Request length in bytes (> 0).
    #[serde(deserialize_with = "de_bytes")]
    pub size: u64,
    /// Relative weight (> 0, finite). Default 1.
    #[serde(default = "one")]
    pub weight: f64,
}

/// On/off periods: requests are issued only during on periods. The pattern starts with an on
/// period at time 0 and repeats every `on_ns + off_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bursts {
    /// Length of each on period (> 0).
    #[serde(alias = "on", deserialize_with = "de_nanos")]
    pub on_ns: u64,
    /// Length of each off period.
    #[serde(alias = "off", deserialize_with = "de_nanos")]
    pub off_ns: u64,
}

/// One zone of a [`AddressDist::Zoned`] distribution: `access_fraction` of the accesses go
/// uniformly to the zone's byte range. Zones are laid out back to back from offset 0 in the
/// order given; give exactly one of `size_fraction` (of the footprint) or `size` (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Zone {
    /// Fraction of the accesses that go to this zone, `0..=1`.
    pub access_fraction: f64,
    /// Zone size as a fraction of the footprint, `(0, 1]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_fraction: Option<f64>,
    /// Zone size in bytes.
    #[serde(
        default,
        deserialize_with = "de_opt_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub size: Option<u64>,
}

/// Address distribution: which block (an `alignment`-sized slot) a request starts at.
///
/// The slots are the valid starting offsets for the largest block size:
/// `0, a, 2a, … ≤ footprint − max_size` (`a` = alignment), so every request lies in the
/// footprint whatever its size. In configs: `{ type = "zipf", theta = 0.9 }`; the parameterless
/// ones may also be written as a bare string, `"uniform"` or `"sequential"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum AddressDist {
    /// Every slot equally likely (the §4.7 RANDOM archetype).
    #[serde(deserialize_with = "no_fields")]
    Uniform,
    /// Zipf: the slot of popularity rank `k` (1-based) has probability ∝ `k^-theta`; any
    /// `theta > 0` (below, at or above 1). θ = 1 is the §4.7 "probability ∝ 1/i" archetype.
    Zipf {
        /// Skew exponent (> 0).
        theta: f64,
        /// Scatter ranks over the address space with a seeded bijection so hot slots are not
        /// adjacent. Default true; `false` puts rank 1 at slot 0, rank 2 at slot 1, …
        #[serde(default = "yes")]
        scramble: bool,
    },
    /// Bounded Pareto (type I, scale 1, shape α) over popularity ranks: rank `⌊X⌋ − 1` where
    /// `X` has density ∝ `x^-(α+1)` on `[1, slots+1)`. Smaller α is flatter; the discrete
    /// analogue is zipf with θ ≈ α + 1.
    Pareto {
        /// Shape α (> 0).
        shape: f64,
        /// As for zipf. Default true.
        #[serde(default = "yes")]
        scramble: bool,
    },
    /// Truncated normal over the address space (out-of-range draws are redrawn): locality
    /// around one point.
    Normal {
        /// Mean as a fraction of the footprint, `0..=1`. Default 0.5.
        #[serde(default = "half")]
        mean_fraction: f64,
        /// Standard deviation as a fraction of the footprint, `(0, 1]`.
        stddev_fraction: f64,
    },
    /// x% of the accesses to the first y% (or y bytes) of the footprint: how target hit ratios
    /// are made (e.g. 55% of accesses within the first cache-size bytes). Accesses left over
    /// when the fractions sum to less than 1 go uniformly to the part after the last zone.
    /// Every access to a zone lies entirely inside the zone's bytes.
    Zoned {
        /// The zones, laid out from offset 0.
        zones: Vec<Zone>,
    },
    /// Per-job sequential streams over the whole footprint: job `j` starts at slot
    /// `j · slots / jobs`, each request follows the previous one (advancing by its size rounded
    /// up to the alignment) and the stream wraps to offset 0 at the end.
    #[serde(deserialize_with = "no_fields")]
    Sequential,
    /// The §4.7 SEQUENTIAL archetype: per-job sequential streams, as [`AddressDist::Sequential`],
    /// looping over a working set `0..size` (give exactly one of `size` or `size_fraction`).
    Loop {
        /// Working-set size in bytes.
        #[serde(
            default,
            deserialize_with = "de_opt_bytes",
            skip_serializing_if = "Option::is_none"
        )]
        size: Option<u64>,
        /// Working-set size as a fraction of the footprint, `(0, 1]`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size_fraction: Option<f64>,
    },
}

/// Reads the table of a parameterless variant (its tag already taken), which must be empty:
/// serde lets an internally tagged unit variant ignore extra keys, and
/// `{ type = "uniform", theta = 0.5 }` must be an error naming `theta`.
fn no_fields<'de, D: Deserializer<'de>>(d: D) -> Result<(), D::Error> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct NoFields {}
    NoFields::deserialize(d).map(|_| ())
}

fn one() -> f64 {
    1.0
}
fn half() -> f64 {
    0.5
}
fn yes() -> bool {
    true
}

/// Accepts `"uniform"` / `"sequential"` as well as the tagged table form.
fn de_dist<'de, D: Deserializer<'de>>(d: D) -> Result<AddressDist, D::Error> {
    use serde::de::{Error, MapAccess, Visitor};
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = AddressDist;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an address distribution: \"uniform\", \"sequential\" or a table such as { type = \"zipf\", theta = 0.9 }")
        }
        fn visit_str<E: Error>(self, s: &str) -> Result<AddressDist, E> {
            match s {
                "uniform" => Ok(AddressDist::Uniform),
                "sequential" => Ok(AddressDist::Sequential),
                "zipf" | "pareto" | "normal" | "zoned" | "loop" => Err(E::custom(format!(
                    "distribution `{s}` needs parameters: write it as a table, e.g. {{ type = \"{s}\", ... }}"
                ))),
                other => Err(E::custom(format!(
                    "unknown distribution `{other}` (expected uniform, zipf, pareto, normal, zoned, sequential or loop)"
                ))),
            }
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<AddressDist, A::Error> {
            AddressDist::deserialize(serde::de::value::MapAccessDeserializer::new(map))
        }
    }
    d.deserialize_any(V)
}

fn de_opt_dist<'de, D: Deserializer<'de>>(d: D) -> Result<Option<AddressDist>, D::Error> {
    de_dist(d).map(Some)
}

fn check_fraction(field: &str, v: f64) -> Result<(), WorkloadError> {
    if !(0.0..=1.0).contains(&v) {
        return Err(WorkloadError::invalid(
            field,
            format!("{v} is not a fraction in 0..=1"),
        ));
    }
    Ok(())
}

fn check_positive(field: &str, v: f64) -> Result<(), WorkloadError> {
    if !(v.is_finite() && v > 0.0) {
        return Err(WorkloadError::invalid(
            field,
            format!("{v} must be finite and > 0"),
        ));
    }
    Ok(())
}

/// Tolerance for fractions that must sum to at most 1 (they are written in decimal).
pub(crate) const SUM_EPS: f64 = 1e-9;

impl WorkloadSpec {
    /// Smallest and largest block size (the spec must be valid).
    pub(crate) fn size_range(&self) -> (u64, u64) {
        let min = self
            .block_sizes
            .iter()
            .map(|b| b.size)
            .min()
            .unwrap_or(DEFAULT_BLOCK_SIZE);
        let max = self
            .block_sizes
            .iter()
            .map(|b| b.size)
            .max()
            .unwrap_or(DEFAULT_BLOCK_SIZE);
        (min, max)
    }

    /// Effective alignment: `alignment` or, by default, the smallest block size.
    pub fn effective_alignment(&self) -> u64 {
        self.alignment.unwrap_or(self.size_range().0)
    }

    /// Whether the workload is open loop (`rate_iops` given).
    pub fn is_open_loop(&self) -> bool {
        self.rate_iops.is_some()
    }

    /// Checks every field; the error names the first offending one.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        if self.jobs == 0 {
            return Err(WorkloadError::invalid("jobs", "must be at least 1"));
        }
        // Per-job state and the executor's slots are allocated up front: bound them.
        if self.jobs > MAX_JOBS {
            return Err(WorkloadError::invalid(
                "jobs",
                format!("{} is more than the {MAX_JOBS} allowed", self.jobs),
            ));
        }
        if let Some(d) = self.iodepth.filter(|d| *d > MAX_IODEPTH) {
            return Err(WorkloadError::invalid(
                "iodepth",
                format!("{d} is more than the {MAX_IODEPTH} allowed"),
            ));
        }
        let in_flight = u64::from(self.jobs) * u64::from(self.iodepth.unwrap_or(1));
        if in_flight > MAX_IN_FLIGHT {
            return Err(WorkloadError::invalid(
                "iodepth",
                format!(
                    "jobs × iodepth = {in_flight} requests in flight, more than the {MAX_IN_FLIGHT} allowed"
                ),
            ));
        }
        match (self.iodepth, self.rate_iops) {
            (Some(_), Some(_)) => return Err(WorkloadError::invalid(
                "iodepth",
                "iodepth is for a closed loop; it cannot be combined with rate_iops (open loop)",
            )),
            (Some(0), None) => return Err(WorkloadError::invalid("iodepth", "must be at least 1")),
            (None, Some(r)) => check_positive("rate_iops", r)?,
            _ => {}
        }
        check_fraction("read_fraction", self.read_fraction)?;
        check_fraction("trim_fraction", self.trim_fraction)?;
        if self.read_fraction + self.trim_fraction > 1.0 + SUM_EPS {
            return Err(WorkloadError::invalid(
                "trim_fraction",
                format!(
                    "read_fraction + trim_fraction = {} exceeds 1",
                    self.read_fraction + self.trim_fraction
                ),
            ));
        }
        if self.block_sizes.is_empty() {
            return Err(WorkloadError::invalid(
                "block_sizes",
                "needs at least one entry",
            ));
        }
        for (i, b) in self.block_sizes.iter().enumerate() {
            if b.size == 0 {
                return Err(WorkloadError::invalid(
                    format!("block_sizes[{i}].size"),
                    "must be > 0",
                ));
            }
            check_positive(&format!("block_sizes[{i}].weight"), b.weight)?;
        }
        let (_, max_size) = self.size_range();
        if self.alignment == Some(0) {
            return Err(WorkloadError::invalid("alignment", "must be > 0"));
        }
        if self.footprint < max_size {
            return Err(WorkloadError::invalid(
                "footprint",
                format!(
                    "{} bytes is smaller than the largest block size {max_size}",
                    self.footprint
                ),
            ));
        }
        if self.volumes == 0 {
            return Err(WorkloadError::invalid("volumes", "must be at least 1"));
        }
        match &self.volume_weights {
            Some(w) => {
                if w.len() != self.volumes as usize {
                    return Err(WorkloadError::invalid(
                        "volume_weights",
                        format!("has {} entries for {} volumes", w.len(), self.volumes),
                    ));
                }
                for (i, &x) in w.iter().enumerate() {
                    check_positive(&format!("volume_weights[{i}]"), x)?;
                }
            }
            None => {
                if self.volumes > self.jobs {
                    return Err(WorkloadError::invalid(
                        "volumes",
                        format!(
                            "{} volumes but only {} jobs: without volume_weights job j addresses volume j % volumes; add jobs or give volume_weights",
                            self.volumes, self.jobs
                        ),
                    ));
                }
            }
        }
        self.validate_dist("distribution", &self.distribution, max_size)?;
        if let Some(d) = &self.write_distribution {
            self.validate_dist("write_distribution", d, max_size)?;
        }
        if let Some(b) = &self.bursts {
            if b.on_ns == 0 {
                return Err(WorkloadError::invalid("bursts.on_ns", "must be > 0"));
            }
            if b.on_ns.checked_add(b.off_ns).is_none() {
                return Err(WorkloadError::invalid(
                    "bursts.off_ns",
                    "on_ns + off_ns overflows",
                ));
            }
        }
        if self.requests == Some(0) {
            return Err(WorkloadError::invalid(
                "requests",
                "must be at least 1 when given",
            ));
        }
        if self.flush_every == Some(0) {
            return Err(WorkloadError::invalid(
                "flush_every",
                "must be at least 1 when given",
            ));
        }
        if self.duration_ns == Some(0) {
            return Err(WorkloadError::invalid(
                "duration_ns",
                "must be > 0 when given",
            ));
        }
        Ok(())
    }

    fn validate_dist(
        &self,
        name: &str,
        d: &AddressDist,
        max_size: u64,
    ) -> Result<(), WorkloadError> {
        match d {
            AddressDist::Uniform | AddressDist::Sequential => {}
            AddressDist::Zipf { theta, .. } => check_positive(&format!("{name}.theta"), *theta)?,
            AddressDist::Pareto { shape, .. } => check_positive(&format!("{name}.shape"), *shape)?,
            AddressDist::Normal {
                mean_fraction,
                stddev_fraction,
            } => {
                check_fraction(&format!("{name}.mean_fraction"), *mean_fraction)?;
                check_positive(&format!("{name}.stddev_fraction"), *stddev_fraction)?;
                if *stddev_fraction > 1.0 {
                    return Err(WorkloadError::invalid(
                        format!("{name}.stddev_fraction"),
                        format!("{stddev_fraction} > 1: that is practically uniform; use the uniform distribution"),
                    ));
                }
            }
            AddressDist::Zoned { zones } => {
                if zones.is_empty() {
                    return Err(WorkloadError::invalid(
                        format!("{name}.zones"),
                        "needs at least one zone",
                    ));
                }
                let mut access = 0.0;
                let mut bytes: u64 = 0;
                for (i, z) in zones.iter().enumerate() {
                    let f = format!("{name}.zones[{i}]");
                    check_fraction(&format!("{f}.access_fraction"), z.access_fraction)?;
                    access += z.access_fraction;
                    let size = self.zone_bytes(&f, z)?;
                    if size < max_size {
                        return Err(WorkloadError::invalid(
                            format!("{f}.size"),
                            format!("zone of {size} bytes cannot hold a block of {max_size} bytes"),
                        ));
                    }
                    bytes = bytes.saturating_add(size);
                }
                if access > 1.0 + SUM_EPS {
                    return Err(WorkloadError::invalid(
                        format!("{name}.zones"),
                        format!("access fractions sum to {access} > 1"),
                    ));
                }
                if bytes > self.footprint {
                    return Err(WorkloadError::invalid(
                        format!("{name}.zones"),
                        format!(
                            "zone sizes sum to {bytes} bytes, more than the footprint {}",
                            self.footprint
                        ),
                    ));
                }
                let rest = self.footprint - bytes;
                if access < 1.0 - SUM_EPS && rest < max_size {
                    return Err(WorkloadError::invalid(
                        format!("{name}.zones"),
                        format!(
                            "access fractions sum to {access} < 1 but the zones leave no room after them for the remaining accesses"
                        ),
                    ));
                }
            }
            AddressDist::Loop {
                size,
                size_fraction,
            } => {
                let ws = self.sized(name, *size, *size_fraction)?;
                if ws < max_size {
                    return Err(WorkloadError::invalid(
                        format!("{name}.size"),
                        format!(
                            "working set of {ws} bytes cannot hold a block of {max_size} bytes"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Byte size of a zone; `prefix` is the zone's path for errors.
    pub(crate) fn zone_bytes(&self, prefix: &str, z: &Zone) -> Result<u64, WorkloadError> {
        self.sized(prefix, z.size, z.size_fraction)
    }

    /// Byte size given as `size` bytes or `size_fraction` of the footprint (exactly one);
    /// `prefix` is the path of the table holding them.
    pub(crate) fn sized(
        &self,
        prefix: &str,
        size: Option<u64>,
        fraction: Option<f64>,
    ) -> Result<u64, WorkloadError> {
        match (size, fraction) {
            (Some(_), Some(_)) => Err(WorkloadError::invalid(
                format!("{prefix}.size"),
                "give either size or size_fraction, not both",
            )),
            (None, None) => Err(WorkloadError::invalid(
                format!("{prefix}.size"),
                "give size (bytes) or size_fraction",
            )),
            (Some(b), None) if b > self.footprint => Err(WorkloadError::invalid(
                format!("{prefix}.size"),
                format!("{b} bytes exceeds the footprint {}", self.footprint),
            )),
            (Some(b), None) => Ok(b),
            (None, Some(f)) if !(f > 0.0 && f <= 1.0) => Err(WorkloadError::invalid(
                format!("{prefix}.size_fraction"),
                format!("{f} is not a fraction in (0, 1]"),
            )),
            // Floor: a zone never reaches past the share of the footprint it was given.
            (None, Some(f)) => Ok((self.footprint as f64 * f).floor() as u64),
        }
    }
}
