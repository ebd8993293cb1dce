//! Tag index: line key → slot, a bucketed cuckoo table.
//!
//! Each entry is one word holding the slot number and a fingerprint of the key (other bits of
//! its hash). Entries live in groups of [`WAYS`]; a key may sit in either of two groups, both
//! derived from its hash, so a lookup reads at most two groups (the first, where inserts go
//! first, holds most keys) and compares fingerprints without touching the line table; only a
//! match reads the stored key to confirm. A removal clears one entry: nothing shifts. An insert
//! finding both groups full moves an entry to its other group (cuckoo kicks), which at the
//! table's load (≤ 0.75) is rare and short. What finds no room in its two groups (a walk
//! that fails, or more than `2 × WAYS` keys sharing two groups) is searched last: in a small
//! table (fewer than [`SMALL`] entries, where a few crowded groups are likely) it goes to any
//! empty entry and the whole table is searched after its groups, so the table never grows; in a
//! large one, where this is vanishingly rare, to an overflow list.
//!
//! Entry width (docs/design.md §13): a table of at most 2^[`NARROW_SLOT_BITS`] slots keeps
//! 32-bit entries, the slot in the low bits and a fingerprint of the remaining bits (at
//! least 6) above it — about 5.3 bytes per line at 4/3 entries per line. A larger table keeps
//! 64-bit entries (a 31-bit tag and a 32-bit slot, about 10.7 bytes per line). A wide entry's
//! tag is the hash its groups come from, so a kick finds an entry's other group from the entry
//! alone; a narrow entry's fingerprint is too short for that, so a kick reads the entry's key
//! back through the line table. The unused edge entries (fewer than a group) align the groups
//! to their size, so a group never straddles a cache line.

use tiercache_core::LineKey;
use tiercache_eviction::Slot;

/// Entries per group.
const WAYS: usize = 4;
/// Most entries one insert moves before parking the homeless one in the overflow list.
const MAX_KICKS: usize = 128;
/// Tables of fewer entries spill into their own empty entries (see the module doc).
const SMALL: usize = 256;
/// Overflow entries a table has room for from the start: a spill (rare) then allocates
/// nothing on the request path, and the table's memory stays what it was at build, so a run's
/// `metadata_bytes` does not depend on which keys happened to spill (the hit-ratio fast path
/// reports the memory of the cache it was given, before the run).
const OVERFLOW_RESERVED: usize = 64;
/// Tables whose slot numbers fit this many bits keep 32-bit entries (fingerprints of at
/// least 6 bits: a lookup that misses compares eight of them, so about one miss in eight
/// reads a line entry for nothing).
const NARROW_SLOT_BITS: u32 = 26;

/// The 31-bit hash a key's groups come from (never all ones as a 32-bit value, so a wide
/// table's [`Word::EMPTY`] never matches it as a tag).
///
/// Fibonacci hashing (one multiplication, the high half kept): line keys are mostly runs of
/// neighbouring indices, which it spreads evenly over the whole range (their products step by
/// the golden ratio of 2^64), and a key's volume bits reach the high half too.
#[inline(always)]
fn tag_of(key: LineKey) -> u32 {
    (key.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 33) as u32
}

/// An entry word: `u64` (31-bit tag above a 32-bit slot) or `u32` (fingerprint above the
/// slot's bits). Entries are handled as `u64` values; [`Word`] only stores them.
trait Word: Copy + Eq + std::fmt::Debug {
    /// No entry: all ones (a fingerprint never is, see [`Table::fingerprint`]).
    const EMPTY: Self;
    fn widen(self) -> u64;
    fn narrow(v: u64) -> Self;
}

impl Word for u64 {
    const EMPTY: u64 = u64::MAX;
    #[inline(always)]
    fn widen(self) -> u64 {
        self
    }
    #[inline(always)]
    fn narrow(v: u64) -> Self {
        v
    }
}

impl Word for u32 {
    const EMPTY: u32 = u32::MAX;
    #[inline(always)]
    fn widen(self) -> u64 {
        u64::from(self)
    }
    #[inline(always)]
    fn narrow(v: u64) -> Self {
        v as u32
    }
}

/// Where group 0 starts in a table of `n` entries of `size` bytes at address `addr`, and how
/// many groups it has: a large table skips up to `WAYS - 1` entries so its groups are aligned
/// to their size, and always sets that many aside, so the group count depends on `n` alone.
fn group_layout(n: usize, addr: usize, size: usize) -> (usize, usize) {
    if n < SMALL {
        return (0, n / WAYS);
    }
    let misalign = addr % (WAYS * size);
    let first = ((WAYS * size - misalign) % (WAYS * size)) / size;
    (first, (n - (WAYS - 1)) / WAYS)
}

/// Open-addressing map from [`LineKey`] to [`Slot`]; keys are read back through a closure.
#[derive(Debug, Clone)]
pub struct SlotIndex(Width);

/// The table, by entry width (see the module doc).
#[derive(Debug, Clone)]
enum Width {
    Narrow(Table<u32>),
    Wide(Table<u64>),
}

/// Calls `$body` with `$t` bound to the table, whatever its width.
macro_rules! each_width {
    ($self:expr, $t:ident => $body:expr) => {
        match $self {
            Width::Narrow($t) => $body,
            Width::Wide($t) => $body,
        }
    };
}

impl SlotIndex {
    /// Index for up to `capacity` keys (slots `0..capacity`): 32-bit entries when the slot
    /// numbers fit [`NARROW_SLOT_BITS`] bits.
    pub fn with_capacity(capacity: usize) -> Self {
        if capacity < 1 << NARROW_SLOT_BITS {
            Self(Width::Narrow(Table::new(capacity)))
        } else {
            Self::wide(capacity)
        }
    }

    /// Index for up to `capacity` keys with 64-bit entries whatever its size (for tests of
    /// the wide layout at sizes that would be narrow).
    fn wide(capacity: usize) -> Self {
        Self(Width::Wide(Table::new(capacity)))
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        each_width!(&self.0, t => t.len)
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hints that `key` is looked up soon: loads both its groups (a miss, and a key placed in
    /// its second group, read both).
    #[inline]
    pub fn prefetch(&self, key: LineKey) {
        each_width!(&self.0, t => t.prefetch(key))
    }

    /// The slot of the first entry in `key`'s first group, else its second, whose fingerprint
    /// matches `key`'s, without confirming the key (a guess for prefetching: reads no line
    /// entry).
    #[inline]
    pub fn guess(&self, key: LineKey) -> Option<Slot> {
        each_width!(&self.0, t => t.guess(key))
    }

    /// Slot of `key`, reading stored keys through `key_of`.
    #[inline(always)]
    pub fn get(&self, key: LineKey, key_of: impl Fn(Slot) -> LineKey) -> Option<Slot> {
        each_width!(&self.0, t => t.get(key, &key_of))
    }

    /// Inserts `key` → `slot`; `key` must not be present and the index not full. `key_of`
    /// reads the keys of the slots already indexed.
    pub fn insert(&mut self, key: LineKey, slot: Slot, key_of: impl Fn(Slot) -> LineKey) {
        each_width!(&mut self.0, t => t.insert(key, slot, &key_of))
    }

    /// Removes `key`, which must be present in `slot`. `key_of` reads the keys of the other
    /// slots indexed (a narrow table moving overflow entries back reads theirs).
    pub fn remove(&mut self, key: LineKey, slot: Slot, key_of: impl Fn(Slot) -> LineKey) {
        each_width!(&mut self.0, t => t.remove(key, slot, &key_of))
    }

    /// Heap bytes.
    pub fn memory_bytes(&self) -> usize {
        each_width!(&self.0, t => t.memory_bytes())
    }
}

/// The table proper, of entries `W`.
#[derive(Debug, Clone)]
struct Table<W: Word> {
    entries: Vec<W>,
    /// First entry of group 0 (aligns groups when the table is large).
    first: usize,
    /// Number of groups (at least 2).
    groups: usize,
    len: usize,
    /// Whether entries without room in their groups spill into the table (see [`SMALL`]).
    small: bool,
    /// A large table's entries that found no room in their groups (empty in practice).
    overflow: Vec<W>,
    /// Bits of an entry below its fingerprint (the slot's): 32 for wide entries.
    slot_bits: u32,
}

impl<W: Word> Table<W> {
    fn new(capacity: usize) -> Self {
        // A narrow table's slot field holds every slot and one more value, so that EMPTY's
        // slot half is no slot (and its fingerprint half, all ones, no fingerprint).
        let slot_bits = if std::mem::size_of::<W>() == 8 {
            32
        } else {
            (64 - (capacity as u64).leading_zeros()).max(1)
        };
        Self::with_slot_bits(capacity, slot_bits)
    }

    /// A table for `capacity` keys whose entries keep `slot_bits` bits for the slot.
    fn with_slot_bits(capacity: usize, slot_bits: u32) -> Self {
        let n = (capacity + capacity / 3 + 2).max(8);
        assert!(n < u32::MAX as usize, "slot index too large");
        let size = std::mem::size_of::<W>();
        assert!(
            size == 8 || (slot_bits <= NARROW_SLOT_BITS && capacity < 1 << slot_bits),
            "too many slots for 32-bit entries"
        );
        let entries = vec![W::EMPTY; n];
        // Large tables set WAYS - 1 entries aside to align their groups; small ones keep
        // every group they can (at least two, as n >= 8). The number of groups, and so where
        // every key goes, does not depend on where the allocator put the table: the same keys
        // make the same table in every run.
        let small = n < SMALL;
        let (first, groups) = group_layout(n, entries.as_ptr() as usize, size);
        Self {
            groups,
            entries,
            first,
            len: 0,
            small,
            overflow: Vec::with_capacity(OVERFLOW_RESERVED),
            slot_bits,
        }
    }

    /// Whether entries are 64-bit (their tag is the hash their groups come from).
    #[inline(always)]
    fn wide(&self) -> bool {
        std::mem::size_of::<W>() == 8
    }

    /// The fingerprint a key's entry carries: its tag in a wide table; in a narrow one the
    /// top bits of a second hash, never all ones (EMPTY's).
    #[inline(always)]
    fn fingerprint(&self, key: LineKey, tag: u32) -> u64 {
        if self.wide() {
            u64::from(tag)
        } else {
            let bits = 32 - self.slot_bits;
            let h = key.0.wrapping_mul(0xd6e8_feb8_6659_fd93) >> (64 - bits);
            h.min((1 << bits) - 2)
        }
    }

    #[inline(always)]
    fn entry(&self, fp: u64, slot: Slot) -> W {
        W::narrow((fp << self.slot_bits) | u64::from(slot))
    }

    #[inline(always)]
    fn entry_fp(&self, e: W) -> u64 {
        e.widen() >> self.slot_bits
    }

    #[inline(always)]
    fn entry_slot(&self, e: W) -> Slot {
        (e.widen() & ((1 << self.slot_bits) - 1)) as Slot
    }

    /// The hash an entry's groups come from: its tag when wide, else its key's.
    #[inline]
    fn entry_tag(&self, e: W, key_of: &impl Fn(Slot) -> LineKey) -> u32 {
        if self.wide() {
            self.entry_fp(e) as u32
        } else {
            tag_of(key_of(self.entry_slot(e)))
        }
    }

    /// The tag's first group.
    #[inline(always)]
    fn home(&self, tag: u32) -> usize {
        ((u64::from(tag) * self.groups as u64) >> 31) as usize
    }

    /// The tag's second group: another group than `home` (the tables have two or more).
    #[inline]
    fn second(&self, tag: u32, home: usize) -> usize {
        // A second multiplicative hash of the tag picks one of the other groups.
        let h = tag.wrapping_mul(0x2545_f491).rotate_left(16);
        let g = home + 1 + ((u64::from(h) * (self.groups as u64 - 1)) >> 32) as usize;
        if g >= self.groups {
            g - self.groups
        } else {
            g
        }
    }

    /// The group other than `g` where an entry with `tag` (sitting in `g`) may live.
    #[inline]
    fn other(&self, tag: u32, g: usize) -> usize {
        let home = self.home(tag);
        if home == g {
            self.second(tag, home)
        } else {
            home
        }
    }

    /// The entries of group `g`.
    #[inline(always)]
    fn group(&self, g: usize) -> &[W; WAYS] {
        let at = self.first + g * WAYS;
        self.entries[at..at + WAYS]
            .try_into()
            .expect("a group is WAYS entries")
    }

    #[inline]
    fn group_mut(&mut self, g: usize) -> &mut [W; WAYS] {
        let at = self.first + g * WAYS;
        (&mut self.entries[at..at + WAYS])
            .try_into()
            .expect("a group is WAYS entries")
    }

    /// The slot of `key` among `entries`: a fingerprint match confirmed by the stored key.
    #[inline(always)]
    fn find_among(
        &self,
        entries: &[W],
        fp: u64,
        key: LineKey,
        key_of: &impl Fn(Slot) -> LineKey,
    ) -> Option<Slot> {
        entries
            .iter()
            .find(|&&e| self.entry_fp(e) == fp && key_of(self.entry_slot(e)) == key)
            .map(|&e| self.entry_slot(e))
    }

    fn prefetch(&self, key: LineKey) {
        let tag = tag_of(key);
        let home = self.home(tag);
        for g in [home, self.second(tag, home)] {
            tiercache_core::hint::prefetch(self.group(g).as_ptr());
        }
    }

    fn guess(&self, key: LineKey) -> Option<Slot> {
        let tag = tag_of(key);
        let fp = self.fingerprint(key, tag);
        let home = self.home(tag);
        [home, self.second(tag, home)]
            .into_iter()
            .flat_map(|g| self.group(g).iter())
            .find(|&&e| self.entry_fp(e) == fp)
            .map(|&e| self.entry_slot(e))
    }

    #[inline(always)]
    fn get(&self, key: LineKey, key_of: &impl Fn(Slot) -> LineKey) -> Option<Slot> {
        let tag = tag_of(key);
        let fp = self.fingerprint(key, tag);
        let home = self.home(tag);
        if let Some(s) = self.find_among(self.group(home), fp, key, key_of) {
            return Some(s);
        }
        self.get_elsewhere(home, tag, fp, key, key_of)
    }

    /// [`get`](Self::get) past the first group: the second, then the spilled entries (a miss,
    /// or a key whose first group was full when it came).
    #[inline(never)]
    fn get_elsewhere(
        &self,
        home: usize,
        tag: u32,
        fp: u64,
        key: LineKey,
        key_of: &impl Fn(Slot) -> LineKey,
    ) -> Option<Slot> {
        let second = self.group(self.second(tag, home));
        if let Some(s) = self.find_among(second, fp, key, key_of) {
            return Some(s);
        }
        self.find_among(self.spilled(), fp, key, key_of)
    }

    /// Where entries without room in their groups may be: the whole of a small table, a large
    /// one's overflow list.
    #[inline]
    fn spilled(&self) -> &[W] {
        if self.small {
            &self.entries
        } else {
            &self.overflow
        }
    }

    /// Puts `e` in an empty way of group `g`; false if it is full.
    #[inline]
    fn put(&mut self, g: usize, e: W) -> bool {
        match self.group_mut(g).iter_mut().find(|x| **x == W::EMPTY) {
            Some(x) => {
                *x = e;
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, key: LineKey, slot: Slot, key_of: &impl Fn(Slot) -> LineKey) {
        debug_assert!(self.get(key, key_of).is_none(), "duplicate key");
        debug_assert!(
            self.wide() || u64::from(slot) < (1 << self.slot_bits) - 1,
            "slot beyond the table's capacity"
        );
        let tag = tag_of(key);
        let home = self.home(tag);
        let e = self.entry(self.fingerprint(key, tag), slot);
        self.len += 1;
        if self.put(home, e) || self.put(self.second(tag, home), e) {
            return;
        }
        self.kick(home, e, key_of);
    }

    /// Places `e` in full group `g`, moving entries to their other groups until one finds an
    /// empty way; after [`MAX_KICKS`] moves the entry in hand goes to the overflow list. A
    /// small table puts `e` in any empty entry instead (it has more entries than keys).
    #[cold]
    fn kick(&mut self, mut g: usize, mut e: W, key_of: &impl Fn(Slot) -> LineKey) {
        if self.small {
            let x = self
                .entries
                .iter_mut()
                .find(|x| **x == W::EMPTY)
                .expect("the table has more entries than keys");
            *x = e;
            return;
        }
        for k in 0..MAX_KICKS {
            // Rotating the way taken keeps a walk from bouncing between two entries.
            let w = (k + self.entry_fp(e) as usize) % WAYS;
            std::mem::swap(&mut self.group_mut(g)[w], &mut e);
            g = self.other(self.entry_tag(e, key_of), g);
            if self.put(g, e) {
                return;
            }
        }
        self.overflow.push(e);
    }

    fn remove(&mut self, key: LineKey, slot: Slot, key_of: &impl Fn(Slot) -> LineKey) {
        let tag = tag_of(key);
        let e = self.entry(self.fingerprint(key, tag), slot);
        let home = self.home(tag);
        // The slot identifies the entry: whole entries are compared, no key is read.
        for g in [home, self.second(tag, home)] {
            if let Some(x) = self.group_mut(g).iter_mut().find(|x| **x == e) {
                *x = W::EMPTY;
                self.len -= 1;
                if !self.overflow.is_empty() {
                    self.refill_from_overflow(key_of);
                }
                return;
            }
        }
        self.len -= 1;
        if self.small {
            let x = self
                .entries
                .iter_mut()
                .find(|x| **x == e)
                .expect("removing a key that is not indexed");
            *x = W::EMPTY;
        } else {
            let at = self
                .overflow
                .iter()
                .position(|&x| x == e)
                .expect("removing a key that is not indexed");
            self.overflow.swap_remove(at);
        }
    }

    /// Moves overflow entries back into their groups when a removal made room.
    #[cold]
    fn refill_from_overflow(&mut self, key_of: &impl Fn(Slot) -> LineKey) {
        let mut i = 0;
        while i < self.overflow.len() {
            let e = self.overflow[i];
            let tag = self.entry_tag(e, key_of);
            let home = self.home(tag);
            if self.put(home, e) || self.put(self.second(tag, home), e) {
                self.overflow.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    fn memory_bytes(&self) -> usize {
        (self.entries.capacity() + self.overflow.capacity()) * std::mem::size_of::<W>()
    }

    /// Entries outside their two groups (for tests).
    #[cfg(test)]
    fn spilled_count(&self, key_of: &impl Fn(Slot) -> LineKey) -> usize {
        if !self.small {
            return self.overflow.len();
        }
        (0..self.entries.len())
            .filter(|&i| {
                let e = self.entries[i];
                let in_group = i >= self.first && i < self.first + self.groups * WAYS;
                let g = (i - self.first.min(i)) / WAYS;
                e != W::EMPTY
                    && !(in_group && {
                        let tag = self.entry_tag(e, key_of);
                        let home = self.home(tag);
                        g == home || g == self.second(tag, home)
                    })
            })
            .count()
    }
}

#[cfg(test)]
impl SlotIndex {
    fn spilled_count(&self, key_of: &impl Fn(Slot) -> LineKey) -> usize {
        each_width!(&self.0, t => t.spilled_count(key_of))
    }

    fn is_small(&self) -> bool {
        each_width!(&self.0, t => t.small)
    }

    fn is_narrow(&self) -> bool {
        matches!(self.0, Width::Narrow(_))
    }

    /// A key's two groups.
    fn groups_of(&self, key: LineKey) -> (usize, usize) {
        each_width!(&self.0, t => {
            let tag = tag_of(key);
            (t.home(tag), t.second(tag, t.home(tag)))
        })
    }

    /// The grouped entries (as `u64`), the overflow list, the group count and the aligning
    /// offset.
    fn layout(&self) -> (Vec<u64>, Vec<u64>, usize, usize) {
        each_width!(&self.0, t => (
            t.entries[t.first..t.first + t.groups * WAYS].iter().map(|e| e.widen()).collect(),
            t.overflow.iter().map(|e| e.widen()).collect(),
            t.groups,
            t.first,
        ))
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
