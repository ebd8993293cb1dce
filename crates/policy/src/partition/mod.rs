//! Partitions: the replacement domains of one cache (docs/design.md §4.4, §4.10).
//!
//! Every resident line belongs to exactly one partition, which has its own replacement
//! policy, capacity and counters. A cache starts with the static partitions of its config
//! (one per named volume) and the *shared* partition holding every other volume's lines (the
//! rest of the cache). At run time a volume may get its own partition
//! ([`crate::Cache::set_partition`]) and any partition may be resized
//! ([`crate::Cache::resize_partitions`]): a multi-tenant cache gives every volume a partition
//! and resizes them at interval boundaries.
//!
//! Capacities are budgets, not reserved slots: all partitions draw free slots from one line
//! table, and their capacities sum to at most the table's size. A partition resized below the
//! lines it holds evicts the excess at once (clean lines are dropped; dirty ones are written
//! back by flush jobs and leave when those complete), so a partition may hold more than its
//! capacity only while its shrink is in progress. This type keeps the domains, their
//! counters and the volume → partition map; the cache (`cache/resize.rs`) does the evicting.

use crate::cache::PolicyError;
use crate::config::CacheConfig;
use crate::stats::PartitionStats;
use tiercache_core::{LineKey, VolumeId, MAX_VOLUMES};
use tiercache_eviction::{EvictionKind, Slot};

mod order;
use order::Numbers;
pub(crate) use order::ReplacementOrder;

/// Identifies a partition of one cache (its index; stable for the cache's life).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionId(pub u16);

/// A snapshot of one partition: its size, occupancy and counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionInfo {
    /// The partition.
    pub id: PartitionId,
    /// Volume owning it; `None` for the shared partition (volumes without their own).
    pub volume: Option<VolumeId>,
    /// Lines it may hold.
    pub capacity_lines: u64,
    /// Lines it holds, including those leaving it (see `leaving_lines`).
    pub used_lines: u64,
    /// Lines holding dirty data.
    pub dirty_lines: u64,
    /// Lines under write-back.
    pub pinned_lines: u64,
    /// Lines a shrink evicted whose write-back job has not completed yet: still readable,
    /// gone from the replacement policy, and freed when the job is done.
    pub leaving_lines: u64,
    /// Counters since the partition was created.
    pub stats: PartitionStats,
}

/// One replacement domain.
pub(crate) struct Partition {
    /// Replacement policy over the partition's lines (leaving lines excepted), with the dirty
    /// ones held out of it under `dirty_full = "bypass"`.
    pub(crate) evict: ReplacementOrder,
    /// Lines the partition may hold.
    pub(crate) capacity: u32,
    /// Resident lines (leaving ones included).
    pub(crate) used: u32,
    /// Lines with dirty sub-blocks.
    pub(crate) dirty: u32,
    /// Lines under write-back.
    pub(crate) pinned: u32,
    /// Lines under write-back written again since (counted in both `dirty` and `pinned`).
    pub(crate) dirty_pinned: u32,
    /// Lines evicted by a shrink and waiting for their write-back job (not in `evict`).
    pub(crate) leaving: u32,
    /// Counters.
    pub(crate) stats: PartitionStats,
    /// Owning volume; `None` for the shared partition.
    volume: Option<VolumeId>,
}

impl Partition {
    /// Owning volume; `None` for the shared partition.
    pub(crate) fn volume(&self) -> Option<VolumeId> {
        self.volume
    }

    /// Lines in the replacement order (resident lines not leaving: in the policy, or dirty
    /// and held out of it).
    #[inline]
    pub(crate) fn linked(&self) -> u32 {
        self.used - self.leaving
    }

    /// Resident lines neither dirty nor under write-back: the candidate victims when dirty
    /// lines may not be evicted. A line under write-back written again is counted once.
    #[inline]
    pub(crate) fn clean_unpinned(&self) -> u32 {
        self.used + self.dirty_pinned - self.dirty - self.pinned
    }

    /// Whether the partition holds more lines than its capacity outside a shrink's pending
    /// write-backs: more must be evicted.
    #[inline]
    pub(crate) fn over_capacity(&self) -> bool {
        self.linked() > self.capacity
    }
}

/// Marks a volume without its own partition in [`Partitions::part_of_volume`].
const SHARED: u16 = u16::MAX;

/// The partitions of one cache and the volume → partition map (read them through
/// [`crate::Cache::partition_stats`] and friends).
pub(crate) struct Partitions {
    parts: Vec<Partition>,
    /// Partition of each volume with its own; [`SHARED`] (or beyond the end) for the others.
    part_of_volume: Vec<u16>,
    /// Index of the shared partition.
    shared: u16,
    /// Lines of the cache (the slot limit of the shared partition's policy).
    lines: u32,
    /// Replacement policy of new partitions.
    kind: EvictionKind,
    /// Whether dirty lines are held out of the policies (`dirty_full = "bypass"`).
    holds_out_dirty: bool,
    /// Each slot's number in its numbering partition's order (allocated with the first
    /// volume partition; see `order`).
    numbers: Numbers,
}

fn config_error(field: &'static str, reason: impl Into<String>) -> PolicyError {
    PolicyError::Config {
        field,
        reason: reason.into(),
    }
}

impl Partitions {
    /// The static partitions of `cfg` (in config order) followed by the shared one holding
    /// the rest of `lines`; every invalid entry is named in the error.
    pub(crate) fn new(cfg: &CacheConfig, lines: u32) -> Result<Self, PolicyError> {
        let mut part_of_volume = Vec::new();
        let mut sizes = Vec::new();
        let mut reserved = 0u64;
        for (i, p) in cfg.partitions.iter().enumerate() {
            let plines = p.bytes / cfg.line_size;
            if plines == 0 {
                return Err(config_error(
                    "partitions",
                    format!("partition {i} (volume {}) holds no line", p.volume),
                ));
            }
            if p.volume >= MAX_VOLUMES {
                return Err(config_error(
                    "partitions",
                    format!(
                        "partition {i}: volume {} exceeds the limit of {MAX_VOLUMES} volumes",
                        p.volume
                    ),
                ));
            }
            let v = p.volume as usize;
            if part_of_volume.len() <= v {
                part_of_volume.resize(v + 1, SHARED);
            }
            if part_of_volume[v] != SHARED {
                return Err(config_error(
                    "partitions",
                    format!("volume {} has two partitions", p.volume),
                ));
            }
            part_of_volume[v] = i as u16;
            reserved += plines;
            sizes.push((Some(VolumeId(p.volume)), plines));
        }
        if reserved > lines as u64 {
            return Err(config_error(
                "partitions",
                format!("partitions need {reserved} lines, the cache has {lines}"),
            ));
        }
        sizes.push((None, lines as u64 - reserved));
        let mut parts = Partitions {
            parts: Vec::with_capacity(sizes.len()),
            part_of_volume,
            shared: (sizes.len() - 1) as u16,
            lines,
            kind: cfg.eviction,
            holds_out_dirty: cfg.dirty_full == crate::config::DirtyFullPolicy::Bypass,
            numbers: Numbers::new(),
        };
        for (volume, capacity) in sizes {
            parts.push(volume, capacity as u32);
        }
        Ok(parts)
    }

    fn push(&mut self, volume: Option<VolumeId>, capacity: u32) -> usize {
        let evict = match volume {
            // The shared partition may hold every line: its policy orders the slots.
            None => ReplacementOrder::new(
                tiercache_eviction::build(self.kind, capacity as usize, self.lines as usize),
                self.lines,
                self.holds_out_dirty,
            ),
            // A volume's own partition numbers its lines, its policy growing with them.
            Some(_) => {
                if self.numbers.is_empty() {
                    self.numbers = vec![0; self.lines as usize];
                }
                ReplacementOrder::numbered(
                    tiercache_eviction::build(self.kind, capacity as usize, capacity as usize),
                    self.holds_out_dirty,
                )
            }
        };
        self.parts.push(Partition {
            evict,
            capacity,
            used: 0,
            dirty: 0,
            pinned: 0,
            dirty_pinned: 0,
            leaving: 0,
            stats: PartitionStats::default(),
            volume,
        });
        self.parts.len() - 1
    }

    /// Adds an empty partition of capacity 0 owned by `volume`, which must not have one.
    pub(crate) fn add(&mut self, volume: VolumeId) -> Result<usize, PolicyError> {
        if volume.0 >= MAX_VOLUMES {
            return Err(config_error(
                "partitions",
                format!(
                    "volume {} exceeds the limit of {MAX_VOLUMES} volumes",
                    volume.0
                ),
            ));
        }
        debug_assert!(self.own(volume).is_none());
        // Index SHARED marks "no partition": one fewer partitions than u16 values.
        if self.parts.len() >= SHARED as usize {
            return Err(config_error(
                "partitions",
                format!("no room for a partition of volume {}", volume.0),
            ));
        }
        let p = self.push(Some(volume), 0);
        let v = volume.0 as usize;
        if self.part_of_volume.len() <= v {
            self.part_of_volume.resize(v + 1, SHARED);
        }
        self.part_of_volume[v] = p as u16;
        Ok(p)
    }

    /// Partition holding `volume`'s new lines.
    #[inline]
    pub(crate) fn of_volume(&self, volume: VolumeId) -> usize {
        match self.part_of_volume.get(volume.0 as usize) {
            Some(&p) if p != SHARED => p as usize,
            _ => self.shared as usize,
        }
    }

    /// `volume`'s own partition, if it has one.
    pub(crate) fn own(&self, volume: VolumeId) -> Option<usize> {
        match self.part_of_volume.get(volume.0 as usize) {
            Some(&p) if p != SHARED => Some(p as usize),
            _ => None,
        }
    }

    /// Index of the shared partition.
    pub(crate) fn shared(&self) -> usize {
        self.shared as usize
    }

    /// The only partition, when there is just one (no static or dynamic partitions).
    #[inline]
    pub(crate) fn single(&self) -> Option<&Partition> {
        match &self.parts[..] {
            [only] => Some(only),
            _ => None,
        }
    }

    /// Number of partitions (at least 1: the shared one always exists).
    pub(crate) fn len(&self) -> usize {
        self.parts.len()
    }

    /// Lines all partitions may hold together.
    pub(crate) fn total_capacity(&self) -> u64 {
        self.parts.iter().map(|p| p.capacity as u64).sum()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Partition> {
        self.parts.iter()
    }

    /// Snapshot of partition `p`.
    pub(crate) fn info(&self, p: usize) -> PartitionInfo {
        let part = &self.parts[p];
        PartitionInfo {
            id: PartitionId(p as u16),
            volume: part.volume,
            capacity_lines: part.capacity as u64,
            used_lines: part.used as u64,
            dirty_lines: part.dirty as u64,
            pinned_lines: part.pinned as u64,
            leaving_lines: part.leaving as u64,
            stats: part.stats,
        }
    }

    /// Partition `p`'s replacement order, for the calls that name a slot.
    #[inline]
    pub(crate) fn order(&mut self, p: usize) -> Order<'_> {
        Order {
            order: &mut self.parts[p].evict,
            numbers: &mut self.numbers,
        }
    }

    /// Each slot's number in its numbering partition's order (for the read-only calls of a
    /// [`ReplacementOrder`] that name a slot).
    #[inline]
    pub(crate) fn numbers(&self) -> &[u32] {
        &self.numbers
    }

    /// Heap bytes of the shared slot numbers.
    pub(crate) fn numbers_bytes(&self) -> usize {
        self.numbers.capacity() * 4
    }

    /// Sets partition `p`'s capacity (its policy adapts; nothing is evicted here).
    pub(crate) fn set_capacity(&mut self, p: usize, lines: u32) {
        let part = &mut self.parts[p];
        part.capacity = lines;
        part.evict.set_capacity(lines as usize);
    }
}

/// A partition's replacement order with the slot numbers all partitions share: the calls that
/// name a slot, as [`ReplacementOrder`]'s.
pub(crate) struct Order<'a> {
    order: &'a mut ReplacementOrder,
    numbers: &'a mut Numbers,
}

impl Order<'_> {
    /// See [`ReplacementOrder::insert`].
    #[inline]
    pub(crate) fn insert(&mut self, slot: Slot, key: LineKey, dirty: bool) {
        self.order.insert(self.numbers, slot, key, dirty);
    }

    /// See [`ReplacementOrder::keep_victim`].
    pub(crate) fn keep_victim(&mut self, slot: Slot, key: LineKey) {
        self.order.keep_victim(self.numbers, slot, key);
    }

    /// See [`ReplacementOrder::insert_demoted`].
    pub(crate) fn insert_demoted(&mut self, slot: Slot, key: LineKey) {
        self.order.insert_demoted(self.numbers, slot, key);
    }

    /// See [`ReplacementOrder::move_demoted`].
    pub(crate) fn move_demoted(&mut self, slot: Slot, key: LineKey) {
        self.order.move_demoted(self.numbers, slot, key);
    }

    /// See [`ReplacementOrder::hit`].
    #[inline]
    pub(crate) fn hit(&mut self, slot: Slot) {
        self.order.hit(self.numbers, slot);
    }

    /// See [`ReplacementOrder::remove`].
    pub(crate) fn remove(&mut self, slot: Slot) {
        self.order.remove(self.numbers, slot);
    }

    /// See [`ReplacementOrder::became_dirty`].
    #[inline]
    pub(crate) fn became_dirty(&mut self, slot: Slot) {
        self.order.became_dirty(self.numbers, slot);
    }

    /// See [`ReplacementOrder::became_clean`].
    #[inline]
    pub(crate) fn became_clean(&mut self, slot: Slot, key: LineKey) {
        self.order.became_clean(self.numbers, slot, key);
    }
}

impl std::ops::Index<usize> for Partitions {
    type Output = Partition;

    #[inline]
    fn index(&self, p: usize) -> &Partition {
        &self.parts[p]
    }
}

impl std::ops::IndexMut<usize> for Partitions {
    #[inline]
    fn index_mut(&mut self, p: usize) -> &mut Partition {
        &mut self.parts[p]
    }
}
