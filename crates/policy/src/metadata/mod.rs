//! Cache metadata: the line table (one entry per slot), the tag index and the dirty list.
//!
//! Budget (docs/design.md §13): a line's entry is 6 bytes and a quarter for 4 KiB lines
//! (a 32-bit key and 8-bit masks; two bits beside; 8 bytes for lines of up to 16 sub-blocks,
//! 12 once a key does not fit 32 bits), the index about 5.3 bytes (10.7
//! in tables of more than 2^26 slots), the dirty-list links 4.5 bytes at 2^17 slots (two links
//! of the width the slots need, 6.5 at 2^25) and the LRU/FIFO/CLOCK-family eviction policies
//! as much, a byte more for CLOCK (ARC and S3-FIFO keep ghost lists on top).

mod entries;
mod index;
mod list;

use entries::Entries;

pub use index::SlotIndex;
pub use list::SlotList;

use tiercache_core::LineKey;
use tiercache_eviction::Slot;

/// Heap bytes of a policy core's metadata, by structure (docs/design.md §13): what the
/// memory benchmark (`crates/engine/examples/memory_per_line.rs`) prints per line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MetadataMemory {
    /// The line entries: key, valid and dirty sub-block masks, partition, flags.
    pub line_entries: usize,
    /// The key → slot index.
    pub index: usize,
    /// The stack of freed slots.
    pub free_slots: usize,
    /// The dirty list's links (least recently written first).
    pub dirty_list: usize,
    /// The replacement policies' lists, bits and ghosts.
    pub eviction: usize,
    /// The partitions' per-slot numbers.
    pub partitions: usize,
    /// The promotion (admission) policy's tables.
    pub promotion: usize,
    /// The admission policy's sketch or filters.
    pub admission: usize,
    /// Slots changed since the executor last took them (the journal's pending list).
    pub journal: usize,
}

impl MetadataMemory {
    /// Every structure's bytes.
    pub fn total(&self) -> usize {
        self.line_entries
            + self.index
            + self.free_slots
            + self.dirty_list
            + self.eviction
            + self.partitions
            + self.promotion
            + self.admission
            + self.journal
    }

    /// The sum, structure by structure, of two (the shards of one cache).
    pub fn plus(&self, o: &MetadataMemory) -> MetadataMemory {
        MetadataMemory {
            line_entries: self.line_entries + o.line_entries,
            index: self.index + o.index,
            free_slots: self.free_slots + o.free_slots,
            dirty_list: self.dirty_list + o.dirty_list,
            eviction: self.eviction + o.eviction,
            partitions: self.partitions + o.partitions,
            promotion: self.promotion + o.promotion,
            admission: self.admission + o.admission,
            journal: self.journal + o.journal,
        }
    }
}

/// State of one resident line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineMeta {
    /// Backend line held in this slot.
    pub key: LineKey,
    /// Sub-blocks holding valid data.
    pub valid: u64,
    /// Sub-blocks newer in the cache than on the backend (always a subset of `valid`).
    pub dirty: u64,
    /// Partition owning the slot.
    pub partition: u16,
    /// Under write-back: must not be evicted or reused until the flush job completes.
    pub pinned: bool,
    /// Slot holds a line (false: free).
    pub resident: bool,
}

/// One bit per slot.
#[derive(Debug, Clone)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(slots: usize) -> Self {
        Self(vec![0; slots.div_ceil(64)])
    }

    #[inline(always)]
    fn get(&self, slot: Slot) -> bool {
        self.0[slot as usize / 64] >> (slot % 64) & 1 != 0
    }

    #[inline(always)]
    fn set(&mut self, slot: Slot, on: bool) {
        let w = &mut self.0[slot as usize / 64];
        let bit = 1u64 << (slot % 64);
        *w = if on { *w | bit } else { *w & !bit };
    }

    fn bytes(&self) -> usize {
        self.0.capacity() * 8
    }
}

/// All slots of the cache with their metadata, the key → slot index, the free-slot stack and
/// the dirty list (least recently written first).
#[derive(Debug)]
pub struct LineTable {
    /// Every slot's key and (for lines of up to 16 sub-blocks) masks, 6, 8 or 12 bytes
    /// (`entries.rs`). Whether the slot holds a line and whether it is pinned are bits beside
    /// them, the partition a number beside them only once a line is in another partition
    /// than 0 (docs/design.md §13).
    lines: Entries,
    /// Slots holding a line.
    resident: Bits,
    /// Slots whose line is pinned.
    pinned: Bits,
    /// Every slot's partition once one is not partition 0 (until then empty: all are 0).
    partitions: Vec<u16>,
    /// Valid and dirty masks of every slot when lines have more than 16 sub-blocks (else
    /// empty: they are in the entries).
    wide: Vec<[u64; 2]>,
    index: SlotIndex,
    /// Slots never used yet are `fresh..slots`; slots freed later are recycled from `free`.
    fresh: Slot,
    free: Vec<Slot>,
    dirty: SlotList,
    dirty_count: u64,
    /// Slots whose line state changed since the last [`take_touched`](Self::take_touched), when
    /// journaling is on (the real engine persists these; the simulator leaves it off).
    touched: Option<Vec<Slot>>,
}

impl LineTable {
    /// Table of `slots` free slots, for lines of up to 64 sub-blocks.
    pub fn new(slots: u32) -> Self {
        Self::with_sub_blocks(slots, 64)
    }

    /// Table of `slots` free slots, for lines of `subs` sub-blocks (at most 64): up to 16,
    /// the masks are kept in the entries (`entries.rs`).
    pub fn with_sub_blocks(slots: u32, subs: u32) -> Self {
        assert!(subs <= 64, "a line has at most 64 sub-blocks");
        Self {
            lines: Entries::new(slots as usize, if subs > 16 { 0 } else { subs }),
            resident: Bits::new(slots as usize),
            pinned: Bits::new(slots as usize),
            partitions: Vec::new(),
            wide: if subs > 16 {
                vec![[0; 2]; slots as usize]
            } else {
                Vec::new()
            },
            index: SlotIndex::with_capacity(slots as usize),
            fresh: 0,
            free: Vec::new(),
            dirty: SlotList::new(slots as usize),
            dirty_count: 0,
            touched: None,
        }
    }

    /// Turns recording of changed slots on or off.
    pub fn set_journal(&mut self, on: bool) {
        self.touched = on.then(Vec::new);
    }

    /// Appends the slots changed since the last call (each once, ascending) to `out`.
    pub fn take_touched(&mut self, out: &mut Vec<Slot>) {
        if let Some(t) = &mut self.touched {
            t.sort_unstable();
            t.dedup();
            out.append(t);
            // A recovery or a resize touches every slot at once; requests touch a few. Keep
            // no room for the former (4 bytes a line) once it is taken.
            if t.capacity() > 1 << 10 {
                t.shrink_to(1 << 8);
            }
        }
    }

    #[inline]
    fn touch(&mut self, slot: Slot) {
        if let Some(t) = &mut self.touched {
            t.push(slot);
        }
    }

    /// Recovery: places `key` with the given masks in `slot`, which must be free and never
    /// handed out. Restoring in ascending slot order costs O(1) a line.
    pub fn restore(&mut self, slot: Slot, key: LineKey, partition: u16, valid: u64, dirty: u64) {
        assert!(slot < self.slots(), "restored slot out of range");
        if slot >= self.fresh {
            self.free.extend(self.fresh..slot);
            self.fresh = slot + 1;
        } else {
            let at = self
                .free
                .iter()
                .position(|&s| s == slot)
                .expect("restoring a slot already in use");
            self.free.swap_remove(at);
        }
        self.install(slot, key, partition);
        self.add_valid(slot, valid);
        if dirty != 0 {
            self.make_dirty(slot, dirty);
        }
    }

    /// Slot holding `key`, if resident.
    #[inline]
    pub fn lookup(&self, key: LineKey) -> Option<Slot> {
        self.index.get(key, |s| self.lines.key(s))
    }

    /// Hints that `key` is accessed soon, first stage: loads its index bucket.
    #[inline]
    pub fn prefetch_bucket(&self, key: LineKey) {
        self.index.prefetch(key);
    }

    /// Hints that `key` is accessed soon, second stage (a few requests after
    /// [`prefetch_bucket`](Self::prefetch_bucket), when the bucket has arrived): loads its
    /// line entry and returns the slot guessed from the tag, for the replacement policy's own
    /// hint.
    #[inline]
    pub fn prefetch_entry(&self, key: LineKey) -> Option<Slot> {
        let slot = self.index.guess(key)?;
        self.lines.prefetch(slot);
        Some(slot)
    }

    /// Hints that `victim` is evicted soon (its entry should be cached already: it was hinted as
    /// the `then` of an earlier call): loads its index bucket, and the entry of `then`.
    #[inline]
    pub fn prefetch_victim(&self, victim: Slot, then: Option<Slot>) {
        if (victim as usize) < self.lines.len() && self.resident.get(victim) {
            self.index.prefetch(self.lines.key(victim));
        }
        if let Some(t) = then {
            self.lines.prefetch(t);
        }
    }

    /// Metadata of a slot.
    #[inline]
    pub fn meta(&self, slot: Slot) -> LineMeta {
        let (valid, dirty) = self.masks(slot);
        LineMeta {
            key: self.lines.key(slot),
            valid,
            dirty,
            partition: self.partition(slot),
            pinned: self.pinned.get(slot),
            resident: self.resident.get(slot),
        }
    }

    /// A slot's partition.
    #[inline(always)]
    fn partition(&self, slot: Slot) -> u16 {
        self.partitions.get(slot as usize).copied().unwrap_or(0)
    }

    /// Sets a slot's partition, keeping a number per slot from the first that is not 0.
    #[inline]
    fn put_partition(&mut self, slot: Slot, partition: u16) {
        if self.partitions.is_empty() {
            if partition == 0 {
                return;
            }
            self.partitions = vec![0; self.lines.len()];
        }
        self.partitions[slot as usize] = partition;
    }

    /// Valid and dirty sub-blocks of a slot.
    #[inline]
    fn masks(&self, slot: Slot) -> (u64, u64) {
        if self.wide.is_empty() {
            self.lines.masks(slot)
        } else {
            let [v, d] = self.wide[slot as usize];
            (v, d)
        }
    }

    /// Sets a slot's valid and dirty sub-blocks (which fit the table's line).
    #[inline]
    fn set_masks(&mut self, slot: Slot, valid: u64, dirty: u64) {
        if self.wide.is_empty() {
            self.lines.set_masks(slot, valid, dirty);
        } else {
            self.wide[slot as usize] = [valid, dirty];
        }
    }

    /// Takes a free slot, if any.
    pub fn take_free(&mut self) -> Option<Slot> {
        if let Some(s) = self.free.pop() {
            return Some(s);
        }
        if (self.fresh as usize) < self.lines.len() {
            self.fresh += 1;
            return Some(self.fresh - 1);
        }
        None
    }

    /// Places `key` in a free slot taken with [`take_free`](Self::take_free) or freed by
    /// [`remove`](Self::remove).
    pub fn install(&mut self, slot: Slot, key: LineKey, partition: u16) {
        debug_assert!(!self.resident.get(slot), "installing into an occupied slot");
        self.place(slot, key, partition);
        let lines = &self.lines;
        self.index.insert(key, slot, |s| lines.key(s));
        self.touch(slot);
    }

    /// Removes a resident, clean, unpinned line; the slot is *not* returned to the free stack
    /// (the caller reuses it or calls [`release`](Self::release)).
    pub fn remove(&mut self, slot: Slot) {
        let m = self.meta(slot);
        check_removable(&m);
        let lines = &self.lines;
        self.index.remove(m.key, slot, |s| lines.key(s));
        self.lines.clear(slot);
        self.resident.set(slot, false);
        self.put_partition(slot, 0);
        self.set_masks(slot, 0, 0);
        self.touch(slot);
    }

    /// [`remove`](Self::remove) then [`install`](Self::install) of `key` in the same slot (an
    /// eviction reusing its victim's slot), in one call: the slot's entry is written once.
    /// The slot is touched once: [`take_touched`](Self::take_touched) reports a slot once
    /// however often it changed.
    pub fn replace(&mut self, slot: Slot, key: LineKey, partition: u16) {
        let m = self.meta(slot);
        check_removable(&m);
        let old = m.key;
        self.place(slot, key, partition);
        let lines = &self.lines;
        self.index.remove(old, slot, |s| lines.key(s));
        self.index.insert(key, slot, |s| lines.key(s));
        self.touch(slot);
    }

    /// A line just placed in `slot`: resident, nothing valid or dirty yet, unpinned.
    #[inline]
    fn place(&mut self, slot: Slot, key: LineKey, partition: u16) {
        self.lines.place(slot, key);
        self.resident.set(slot, true);
        self.pinned.set(slot, false);
        self.put_partition(slot, partition);
        if !self.wide.is_empty() {
            self.wide[slot as usize] = [0; 2];
        }
    }

    /// Returns a removed slot to the free stack.
    pub fn release(&mut self, slot: Slot) {
        debug_assert!(!self.resident.get(slot));
        self.free.push(slot);
    }

    /// Marks sub-blocks valid.
    pub fn add_valid(&mut self, slot: Slot, mask: u64) {
        let (v, d) = self.masks(slot);
        self.set_masks(slot, v | mask, d);
        self.touch(slot);
    }

    /// Marks sub-blocks invalid (and not dirty): their cached copy is stale or discarded.
    /// Returns the dirty sub-blocks that were discarded.
    pub fn invalidate(&mut self, slot: Slot, mask: u64) -> u64 {
        let (v, d) = self.masks(slot);
        let dropped = d & mask;
        self.set_masks(slot, v & !mask, d & !mask);
        // The line was dirty and is clean now: it leaves the dirty list.
        if dropped != 0 && d & !mask == 0 {
            self.dirty.unlink(slot);
            self.dirty_count -= 1;
        }
        self.touch(slot);
        dropped
    }

    /// Marks sub-blocks valid and dirty, moving the line to the most recently written end.
    pub fn make_dirty(&mut self, slot: Slot, mask: u64) {
        let (v, d) = self.masks(slot);
        if d == 0 {
            self.dirty_count += 1;
        } else {
            self.dirty.unlink(slot);
        }
        self.set_masks(slot, v | mask, d | mask);
        self.dirty.push_back(slot);
        self.touch(slot);
    }

    /// Marks a line clean (after its dirty data was handed to a write-back). Returns the dirty
    /// mask it had.
    pub fn make_clean(&mut self, slot: Slot) -> u64 {
        let (v, was) = self.masks(slot);
        if was != 0 {
            self.set_masks(slot, v, 0);
            self.dirty.unlink(slot);
            self.dirty_count -= 1;
        }
        self.touch(slot);
        was
    }

    /// Moves a resident line to another partition (the caller moves it between policies).
    pub fn set_partition(&mut self, slot: Slot, partition: u16) {
        debug_assert!(self.resident.get(slot));
        self.put_partition(slot, partition);
    }

    /// Pins or unpins a line.
    pub fn set_pinned(&mut self, slot: Slot, pinned: bool) {
        self.pinned.set(slot, pinned);
    }

    /// Dirty lines, least recently written first.
    pub fn dirty_iter(&self) -> impl Iterator<Item = Slot> + '_ {
        self.dirty.iter()
    }

    /// Number of dirty lines.
    pub fn dirty_count(&self) -> u64 {
        self.dirty_count
    }

    /// Number of resident lines.
    pub fn resident_count(&self) -> u64 {
        self.index.len() as u64
    }

    /// Total slots.
    pub fn slots(&self) -> u32 {
        self.lines.len() as u32
    }

    /// [`memory_bytes`](Self::memory_bytes) once `key` has been placed too: the entries'
    /// width depends on the keys held (`entries.rs`), so an executor that models the table
    /// without it (the simulator's batched path) asks with the largest volume and line index
    /// it placed.
    pub fn memory_bytes_holding(&self, key: LineKey) -> usize {
        self.memory_bytes() - self.lines.bytes() + self.lines.bytes_holding(key)
    }

    /// Heap bytes of the table, index and dirty list.
    pub fn memory_bytes(&self) -> usize {
        let m = self.memory();
        m.line_entries + m.index + m.free_slots + m.dirty_list
    }

    /// Heap bytes of the table by structure (the replacement, partition and promotion
    /// fields are the caller's to fill).
    pub fn memory(&self) -> MetadataMemory {
        MetadataMemory {
            line_entries: self.lines.bytes()
                + self.wide.capacity() * std::mem::size_of::<[u64; 2]>()
                + self.resident.bytes()
                + self.pinned.bytes()
                + self.partitions.capacity() * std::mem::size_of::<u16>(),
            index: self.index.memory_bytes(),
            free_slots: self.free.capacity() * std::mem::size_of::<Slot>(),
            dirty_list: self.dirty.memory_bytes(),
            journal: self
                .touched
                .as_ref()
                .map_or(0, |t| t.capacity() * std::mem::size_of::<Slot>()),
            ..MetadataMemory::default()
        }
    }

    /// Every resident slot (for audits and tests).
    pub fn resident_slots(&self) -> impl Iterator<Item = Slot> + '_ {
        (0..self.lines.len() as Slot).filter(|&s| self.resident.get(s))
    }

    /// Checks the table's invariants; panics with a description on violation.
    pub fn audit(&self) {
        let mut resident = 0;
        for i in 0..self.lines.len() {
            let m = self.meta(i as Slot);
            if m.resident {
                resident += 1;
                assert_eq!(
                    m.dirty & !m.valid,
                    0,
                    "slot {i}: dirty sub-blocks not valid"
                );
                assert_eq!(
                    self.lookup(m.key),
                    Some(i as Slot),
                    "slot {i}: index disagrees"
                );
            } else {
                assert_eq!(m.dirty, 0, "slot {i}: free slot with dirty data");
            }
        }
        assert_eq!(resident, self.index.len(), "index size");
        let free = self.free.len() + self.lines.len() - self.fresh as usize;
        assert_eq!(
            resident + free,
            self.lines.len(),
            "slots lost or duplicated"
        );
        let dirty: Vec<Slot> = self.dirty.iter().collect();
        assert_eq!(dirty.len() as u64, self.dirty_count, "dirty count");
        assert!(
            dirty.iter().all(|&s| self.masks(s).1 != 0),
            "clean line on dirty list"
        );
    }
}

/// A line may leave its slot only resident, unpinned and clean (its data would be lost).
#[inline]
fn check_removable(m: &LineMeta) {
    assert!(
        m.resident && !m.pinned,
        "removing a non-resident or pinned line"
    );
    assert_eq!(m.dirty, 0, "removing a dirty line would lose data");
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tiercache_core::VolumeId;

    proptest! {
        /// `replace` leaves the table (line entries, index answers, journal records) as
        /// `remove` then `install` do, over random fills and evictions of a small table.
        #[test]
        fn replace_is_remove_then_install(
            steps in prop::collection::vec((0u64..96, 0u32..24, any::<bool>()), 1..200),
        ) {
            let slots = 24;
            let (mut fast, mut plain) = (LineTable::new(slots), LineTable::new(slots));
            fast.set_journal(true);
            plain.set_journal(true);
            let mut keys: Vec<LineKey> = Vec::new();
            for (index, pick, second_volume) in steps {
                let key = LineKey::new(VolumeId(u32::from(second_volume)), index);
                if fast.lookup(key).is_some() {
                    continue;
                }
                keys.push(key);
                match fast.take_free() {
                    Some(slot) => {
                        prop_assert_eq!(plain.take_free(), Some(slot));
                        fast.install(slot, key, 1);
                        plain.install(slot, key, 1);
                    }
                    None => {
                        prop_assert_eq!(plain.take_free(), None);
                        fast.replace(pick, key, 2);
                        plain.remove(pick);
                        plain.install(pick, key, 2);
                    }
                }
                for s in 0..slots {
                    prop_assert_eq!(fast.meta(s), plain.meta(s));
                }
                for &k in &keys {
                    prop_assert_eq!(fast.lookup(k), plain.lookup(k));
                }
                let (mut a, mut b) = (Vec::new(), Vec::new());
                fast.take_touched(&mut a);
                plain.take_touched(&mut b);
                prop_assert_eq!(a, b);
                fast.audit();
            }
        }
    }

    /// The reference for [`LineTable`]: each slot's line as plain fields, the dirty order
    /// as a vector.
    #[derive(Debug, Clone, Default)]
    struct ModelTable {
        lines: Vec<Option<LineMeta>>,
        dirty_order: Vec<Slot>,
    }

    #[derive(Debug, Clone)]
    enum Op {
        Place(u64),
        Evict(u32, u64),
        Remove(u32),
        Valid(u32, u64),
        Invalidate(u32, u64),
        Dirty(u32, u64),
        Clean(u32),
        Pin(u32, bool),
        Partition(u32, u16),
    }

    fn op(subs: u32) -> impl Strategy<Value = Op> {
        let mask = move || {
            (any::<u64>()).prop_map(move |m| if subs == 64 { m } else { m & ((1 << subs) - 1) })
        };
        // Mostly keys of volume 0 below 2^32, some of other volumes (which lower the narrow
        // keys' split), some wider (which then widen the entries) and the widest that fits
        // volume 0 alone (u32::MAX).
        let key = || {
            prop_oneof![
                16 => 0u64..40,
                2 => (1u64..300, 0u64..40).prop_map(|(v, i)| v << 48 | i),
                1 => (0u64..4).prop_map(|k| u64::from(u32::MAX) + k),
            ]
        };
        prop_oneof![
            key().prop_map(Op::Place),
            (0u32..12, key()).prop_map(|(s, k)| Op::Evict(s, k)),
            (0u32..12).prop_map(Op::Remove),
            (0u32..12, mask()).prop_map(|(s, m)| Op::Valid(s, m)),
            (0u32..12, mask()).prop_map(|(s, m)| Op::Invalidate(s, m)),
            (0u32..12, mask()).prop_map(|(s, m)| Op::Dirty(s, m)),
            (0u32..12).prop_map(Op::Clean),
            (0u32..12, any::<bool>()).prop_map(|(s, p)| Op::Pin(s, p)),
            (0u32..12, 0u16..3).prop_map(|(s, p)| Op::Partition(s, p)),
        ]
    }

    proptest! {
        /// The compact table (32-bit keys until a wider one arrives, then 64-bit; masks inside
        /// the entries for lines of up to 16 sub-blocks, beside them for wider ones) answers
        /// as the plain model over random placements, evictions, removals, mask changes, pins
        /// and partition moves.
        #[test]
        fn compact_entries_match_the_model(
            subs in prop::sample::select(vec![1u32, 8, 16, 32, 64]),
            ops in prop::collection::vec(op(64), 1..150),
        ) {
            let slots = 12;
            let full = if subs == 64 { u64::MAX } else { (1u64 << subs) - 1 };
            let mut t = LineTable::with_sub_blocks(slots, subs);
            let mut m = ModelTable { lines: vec![None; slots as usize], ..Default::default() };
            for o in ops {
                let held = |m: &ModelTable, s: u32| m.lines[s as usize];
                match o {
                    Op::Place(k) => {
                        let key = LineKey(k);
                        if t.lookup(key).is_some() { continue; }
                        if let Some(s) = t.take_free() {
                            prop_assert!(held(&m, s).is_none());
                            t.install(s, key, 0);
                            m.lines[s as usize] = Some(LineMeta { key, valid: 0, dirty: 0, partition: 0, pinned: false, resident: true });
                        }
                    }
                    Op::Evict(s, k) => {
                        let key = LineKey(k);
                        match held(&m, s) {
                            Some(l) if !l.pinned && l.dirty == 0 && t.lookup(key).is_none() => {
                                t.replace(s, key, 1);
                                m.lines[s as usize] = Some(LineMeta { key, valid: 0, dirty: 0, partition: 1, pinned: false, resident: true });
                            }
                            _ => continue,
                        }
                    }
                    Op::Remove(s) => match held(&m, s) {
                        Some(l) if !l.pinned && l.dirty == 0 => {
                            t.remove(s);
                            t.release(s);
                            m.lines[s as usize] = None;
                        }
                        _ => continue,
                    },
                    Op::Valid(s, mask) => if let Some(l) = &mut m.lines[s as usize] {
                        t.add_valid(s, mask & full);
                        l.valid |= mask & full;
                    },
                    Op::Invalidate(s, mask) => if let Some(l) = &mut m.lines[s as usize] {
                        let dropped = t.invalidate(s, mask & full);
                        prop_assert_eq!(dropped, l.dirty & mask & full);
                        l.valid &= !(mask & full);
                        l.dirty &= !(mask & full);
                        if dropped != 0 && l.dirty == 0 {
                            m.dirty_order.retain(|&x| x != s);
                        }
                    },
                    Op::Dirty(s, mask) => if let Some(l) = &mut m.lines[s as usize] {
                        if mask & full == 0 { continue; }
                        t.make_dirty(s, mask & full);
                        l.valid |= mask & full;
                        l.dirty |= mask & full;
                        m.dirty_order.retain(|&x| x != s);
                        m.dirty_order.push(s);
                    },
                    Op::Clean(s) => if let Some(l) = &mut m.lines[s as usize] {
                        prop_assert_eq!(t.make_clean(s), l.dirty);
                        l.dirty = 0;
                        m.dirty_order.retain(|&x| x != s);
                    },
                    Op::Pin(s, p) => if let Some(l) = &mut m.lines[s as usize] {
                        t.set_pinned(s, p);
                        l.pinned = p;
                    },
                    Op::Partition(s, p) => if let Some(l) = &mut m.lines[s as usize] {
                        t.set_partition(s, p);
                        l.partition = p;
                    },
                }
                for s in 0..slots {
                    match held(&m, s) {
                        Some(l) => {
                            prop_assert_eq!(t.meta(s), l);
                            prop_assert_eq!(t.lookup(l.key), Some(s));
                        }
                        None => prop_assert!(!t.meta(s).resident && t.meta(s).dirty == 0),
                    }
                }
                prop_assert_eq!(t.dirty_iter().collect::<Vec<_>>(), m.dirty_order.clone());
                prop_assert_eq!(t.dirty_count(), m.dirty_order.len() as u64);
                t.audit();
            }
        }
    }
}
