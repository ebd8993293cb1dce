//! Configuration of one cache: geometry, capacity, partitions and the policy of each family.

use serde::{Deserialize, Serialize};
use tiercache_core::units::{de_bytes, de_nanos};
use tiercache_core::{Nanos, VolumeId};
pub use tiercache_eviction::EvictionKind;

/// Longest duration a configuration may give (an interval, a period, an idle time): one
/// year. Times are u64 nanoseconds (about 584 years in all), so a bound keeps `now +
/// duration` far from overflowing for any run.
pub const MAX_DURATION_NS: Nanos = 365 * 24 * 3600 * 1_000_000_000;

/// The error for a duration above [`MAX_DURATION_NS`], or `None`.
pub(crate) fn duration_too_long(ns: Nanos) -> Option<String> {
    (ns > MAX_DURATION_NS)
        .then(|| format!("{ns} ns exceeds the limit of one year ({MAX_DURATION_NS} ns)"))
}

/// Write policy (cache mode), exactly the table of docs/design.md §4.5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WritePolicy {
    /// WB: writes go to the cache and are written back later.
    WriteBack,
    /// WT: writes go to cache and backend; ack after both.
    WriteThrough,
    /// WA: write hits update cache and backend; write misses go to the backend only.
    WriteAround,
    /// WO: writes as WB; read misses are served from the backend and not promoted.
    WriteOnly,
    /// RO: writes invalidate the cached copy and go to the backend; read misses promote.
    ReadOnly,
    /// PT: everything goes to the backend; cached copies written over are invalidated.
    PassThrough,
    /// WBA: write hits as WB (cache, dirty); write misses go to the backend only, as WA; read
    /// misses promote. The file-level wb-around variant (docs/design.md §4.5, §4.9).
    WriteBackAround,
}

impl WritePolicy {
    /// The name configs give it (`write-back`), for messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::WriteBack => "write-back",
            Self::WriteThrough => "write-through",
            Self::WriteAround => "write-around",
            Self::WriteOnly => "write-only",
            Self::ReadOnly => "read-only",
            Self::PassThrough => "pass-through",
            Self::WriteBackAround => "write-back-around",
        }
    }
}

/// Promotion (admission) policy, docs/design.md §4.3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "kebab-case", deny_unknown_fields)]
pub enum PromotionConfig {
    /// Promote on every miss.
    #[serde(deserialize_with = "no_fields")]
    Always,
    /// Promote on the N-th access to a missed line, counted in a bounded table.
    Nhit {
        /// Accesses needed (1 = always).
        n: u32,
        /// Counter-table entries, as a multiple of the cache's line count (default 1.0).
        #[serde(default = "default_table_ratio")]
        table_ratio: f64,
        /// Only filter above this cache occupancy (0.0..=1.0); below it, promote always.
        #[serde(default)]
        occupancy_threshold: f64,
    },
    /// Stochastic multiqueue, as in Linux dm-cache.
    Smq {
        /// Lines per hotspot region.
        #[serde(default = "default_hotspot_lines")]
        hotspot_lines: u32,
    },
    /// Never promote.
    #[serde(deserialize_with = "no_fields")]
    Never,
}

/// Admission policy, docs/design.md §4.3: whether a missed line may take a line of the cache
/// at all, asked for read promotions and write allocations alike once the victim is known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "kebab-case", deny_unknown_fields)]
pub enum AdmissionConfig {
    /// Admit every line (no filter).
    #[serde(deserialize_with = "no_fields")]
    All,
    /// Admit each candidate with a fixed probability, from a seeded stream.
    Probabilistic {
        /// Probability of admission (0.0..=1.0).
        probability: f64,
        /// Seed of the stream of draws (each policy shard draws from its own copy).
        #[serde(default)]
        seed: u64,
    },
    /// TinyLFU: admit a candidate only if its estimated recent frequency (a count-min sketch
    /// of every access, aged) exceeds the victim's.
    Tinylfu {
        /// Sketch width as a multiple of the cache's line count (default 1.0).
        #[serde(default = "default_table_ratio")]
        sketch_ratio: f64,
    },
    /// Second-hit: admit a line on its second miss within a window, misses remembered in two
    /// generations of Bloom filters (bounded memory).
    Bloom {
        /// Keys per window as a multiple of the cache's line count (default 1.0).
        #[serde(default = "default_table_ratio")]
        window_ratio: f64,
        /// Bits of filter per key of a window (default 10: a false-positive rate near 1 %).
        #[serde(default = "default_bits_per_key")]
        bits_per_key: u32,
    },
}

fn default_bits_per_key() -> u32 {
    10
}

/// Reads the table of a parameterless variant (its tag already taken), which must be empty:
/// serde lets an internally tagged unit variant ignore extra keys, and
/// `{ policy = "always", n = 3 }` must be an error naming `n`, not an `always` that looks
/// configured. Serialising the variant is unchanged (`{ policy = "always" }`).
pub(crate) fn no_fields<'de, D: serde::Deserializer<'de>>(d: D) -> Result<(), D::Error> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct NoFields {}
    NoFields::deserialize(d).map(|_| ())
}

fn default_table_ratio() -> f64 {
    1.0
}
fn default_hotspot_lines() -> u32 {
    16
}

/// Cleaning (flushing) policy, docs/design.md §4.6.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "kebab-case", deny_unknown_fields)]
pub enum CleaningConfig {
    /// Flush only when the cache device has been idle for `idle_ns`.
    Lazy {
        /// Idle time before cleaning starts.
        #[serde(default = "default_idle_ns", deserialize_with = "de_nanos")]
        idle_ns: Nanos,
        /// Lines per flush batch.
        #[serde(default = "default_lazy_batch")]
        batch: u32,
    },
    /// Every `period_ns`, flush a batch of the oldest dirty lines (made dirty longest ago; the
    /// usual LRU-most first, docs/design.md §4.6, differs for dirty lines read since), whatever the
    /// load.
    Aggressive {
        /// Period between batches.
        #[serde(deserialize_with = "de_nanos")]
        period_ns: Nanos,
        /// Lines per batch.
        batch: u32,
    },
    /// Flush while dirty lines exceed `high` of the capacity until below `low`.
    Threshold {
        /// High watermark, a fraction of the cache's lines.
        high: f64,
        /// Low watermark, a fraction of the cache's lines.
        low: f64,
        /// Lines per batch.
        #[serde(default = "default_lazy_batch")]
        batch: u32,
    },
    /// Never clean in the background (dirty data leaves only by eviction or final flush).
    #[serde(deserialize_with = "no_fields")]
    None,
}

fn default_idle_ns() -> Nanos {
    1_000_000
}
fn default_lazy_batch() -> u32 {
    32
}

/// What a write (or promotion) does when it needs a line and the victim is dirty
/// (docs/design.md §4.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DirtyFullPolicy {
    /// Flush the victim, then write into its place (the request waits for the flush).
    EvictThenWrite,
    /// Leave the cache untouched and send the write to the backend. Victims are always clean:
    /// dirty lines are held out of the replacement policy until marked clean, then re-enter
    /// it where it inserts new lines (`partition::ReplacementOrder`), so finding a clean
    /// victim is O(1) for every policy.
    Bypass,
}

/// A static partition: a volume's share of the cache, with its own replacement list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionConfig {
    /// Volume owning the partition.
    pub volume: u32,
    /// Bytes of cache reserved for it (rounded down to whole lines).
    #[serde(deserialize_with = "de_bytes")]
    pub bytes: u64,
}

/// Complete policy configuration of one cache. Every field has a default (see [`Default`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheConfig {
    /// Cache capacity in bytes (rounded down to whole lines).
    #[serde(deserialize_with = "de_bytes")]
    pub capacity: u64,
    /// Line size in bytes: a power of two from 512 B to 1 MiB.
    #[serde(deserialize_with = "de_bytes")]
    pub line_size: u64,
    /// Replacement policy.
    pub eviction: EvictionKind,
    /// Promotion policy.
    pub promotion: PromotionConfig,
    /// Admission policy (asked after promotion, for writes too; docs/design.md §4.3).
    pub admission: AdmissionConfig,
    /// Write policy applied to every volume unless overridden.
    pub write_policy: WritePolicy,
    /// Cleaning policy.
    pub cleaning: CleaningConfig,
    /// Which dirty lines a flush batch takes and the order it writes them back in (the
    /// cleaning family's order parameter, docs/design.md §4.6): `written` (default, least
    /// recently written first), `address` or `sweep` (ascending backend address, as the
    /// kernel caches write back).
    pub cleaning_order: crate::cleaning::CleaningOrder,
    /// Answer to a needed victim being dirty.
    pub dirty_full: DirtyFullPolicy,
    /// Static partitions; volumes without one share the rest of the cache. Partitions can be
    /// resized and added at run time (`Cache::resize_partitions`, `Cache::set_partition`);
    /// this list stays the one the cache was built from.
    #[serde(default)]
    pub partitions: Vec<PartitionConfig>,
    /// Policy shards: independent policy cores (replacement, promotion and cleaning domains),
    /// each with its share of the lines and owning the lines whose 64 KiB chunk hashes to it
    /// (see [`crate::shards`]). Both executors run the same shards: the engine puts a lock on
    /// each (its fine-grained lookup, `ht-fg`, locks per shard), the simulator runs them in
    /// virtual time. 1 is one global policy. Part of the cache device's layout.
    pub shards: u32,
    /// Load balancing between the cache device and the backend (docs/design.md §4.8).
    pub balancing: crate::balancing::BalancingConfig,
    /// What happens to clean victims: dropped, or demoted to the level below (docs/design.md §4.7).
    pub victim: crate::victim::VictimConfig,
    /// How volumes share the cache: one shared cache (the default), or partitions sized
    /// per interval (docs/design.md §4.10).
    pub tenancy: crate::tenancy::TenancyConfig,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            capacity: 1 << 30,
            line_size: 4096,
            eviction: EvictionKind::Lru,
            promotion: PromotionConfig::Always,
            admission: AdmissionConfig::All,
            write_policy: WritePolicy::WriteBack,
            cleaning: CleaningConfig::Lazy {
                idle_ns: default_idle_ns(),
                batch: default_lazy_batch(),
            },
            cleaning_order: crate::cleaning::CleaningOrder::Written,
            dirty_full: DirtyFullPolicy::EvictThenWrite,
            partitions: Vec::new(),
            shards: 1,
            balancing: crate::balancing::BalancingConfig::None,
            victim: crate::victim::VictimConfig::Drop,
            tenancy: crate::tenancy::TenancyConfig::default(),
        }
    }
}

impl CacheConfig {
    /// The partition owning `volume`, if any.
    pub fn partition_of(&self, volume: VolumeId) -> Option<usize> {
        self.partitions.iter().position(|p| p.volume == volume.0)
    }

    /// Lines of `line_size` bytes that the static partitions of volumes without a fixed size
    /// take: they stay beside the fixed sizes (`tenancy.fixed`), and a fixed size replaces
    /// its volume's static partition.
    pub fn static_lines_beside_fixed(&self, line_size: u64) -> u64 {
        self.partitions
            .iter()
            .filter(|p| {
                !self
                    .tenancy
                    .fixed
                    .iter()
                    .any(|f| f.volume == p.volume && f.bytes.is_some())
            })
            .map(|p| p.bytes / line_size.max(1))
            .sum()
    }
}
