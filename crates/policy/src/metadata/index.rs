//! Tag index: line key → slot, a bucketed cuckoo table.
//!
//! Each entry is a `u64` holding the slot number and a 31-bit tag (the high bits of the key's
//! hash). Entries live in groups of [`WAYS`]; a key may sit in either of two groups, both
//! derived from its tag, so a lookup reads at most two groups (the first, where inserts go
//! first, holds most keys) and compares tags without touching the line table; only a tag match
//! reads the stored key to confirm. A removal clears one entry: nothing shifts. An insert
//! finding both groups full moves an entry to its other group (cuckoo kicks), which at the
//! table's load (≤ 0.75) is rare and short. What finds no room in its two groups (a walk
//! that fails, or more than `2 × WAYS` keys sharing two groups) is searched last: in a small
//! table (fewer than [`SMALL`] entries, where a few crowded groups are likely) it goes to any
//! empty entry and the whole table is searched after its groups, so the table never grows; in a
//! large one, where this is vanishingly rare, to an overflow list.
//!
//! The table keeps the linear-probing layout's size, 4/3 entries per line (about 10.7 bytes
//! per line): the figure is part of the cache's metadata budget. Its unused edge entries (fewer
//! than a group) align the groups to 32 bytes, so a group is one cache line.

use tiercache_core::LineKey;
use tiercache_eviction::Slot;

/// No entry. Its tag half never matches: tags have 31 bits.
const EMPTY: u64 = u64::MAX;
/// Entries per group.
const WAYS: usize = 4;
/// Most entries one insert moves before parking the homeless one in the overflow list.
const MAX_KICKS: usize = 128;
/// Tables of fewer entries spill into their own empty entries (see the module doc).
const SMALL: usize = 256;

/// Open-addressing map from [`LineKey`] to [`Slot`]; keys are read back through a closure.
#[derive(Debug, Clone)]
pub struct SlotIndex {
    entries: Vec<u64>,
    /// First entry of group 0 (aligns groups to 32 bytes when the table is large).
    first: usize,
    /// Number of groups (at least 2).
    groups: usize,
    len: usize,
    /// Whether entries without room in their groups spill into the table (see [`SMALL`]).
    small: bool,
    /// A large table's entries that found no room in their groups (empty in practice).
    overflow: Vec<u64>,
}

/// The key's tag: a 31-bit hash (so never the tag half of [`EMPTY`], with no test for it).
///
/// Fibonacci hashing (one multiplication, the high half kept): line keys are mostly runs of
/// neighbouring indices, which it spreads evenly over the whole range (their products step by
/// the golden ratio of 2^64), and a key's volume bits reach the high half too.
#[inline(always)]
fn tag_of(key: LineKey) -> u32 {
    (key.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 33) as u32
}

#[inline]
fn entry(tag: u32, slot: Slot) -> u64 {
    (u64::from(tag) << 32) | u64::from(slot)
}

#[inline]
fn entry_tag(e: u64) -> u32 {
    (e >> 32) as u32
}

/// Where group 0 starts in a table of `n` entries at address `addr`, and how many groups it
/// has: a large table skips up to `WAYS - 1` entries so its groups are 32-byte aligned, and
/// always sets that many aside, so the group count depends on `n` alone.
fn group_layout(n: usize, addr: usize) -> (usize, usize) {
    if n < SMALL {
        return (0, n / WAYS);
    }
    let misalign = addr % (WAYS * 8);
    let first = ((WAYS * 8 - misalign) % (WAYS * 8)) / 8;
    (first, (n - (WAYS - 1)) / WAYS)
}

/// The slot of `key` among `entries`: a tag match confirmed by the stored key.
#[inline(always)]
fn find_among(
    entries: &[u64],
    tag: u32,
    key: LineKey,
    key_of: &impl Fn(Slot) -> LineKey,
) -> Option<Slot> {
    entries
        .iter()
        .find(|&&e| entry_tag(e) == tag && key_of(e as u32) == key)
        .map(|&e| e as u32)
}

impl SlotIndex {
    /// Index for up to `capacity` keys.
    pub fn with_capacity(capacity: usize) -> Self {
        let n = (capacity + capacity / 3 + 2).max(8);
        assert!(n < u32::MAX as usize, "slot index too large");
        let entries = vec![EMPTY; n];
        // Large tables set WAYS - 1 entries aside to align groups to cache-line halves; small
        // ones keep every group they can (at least two, as n >= 8). The number of groups, and
        // so where every key goes, does not depend on where the allocator put the table: the
        // same keys make the same table in every run.
        let small = n < SMALL;
        let (first, groups) = group_layout(n, entries.as_ptr() as usize);
        Self {
            groups,
            entries,
            first,
            len: 0,
            small,
            overflow: Vec::new(),
        }
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
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
    fn group(&self, g: usize) -> &[u64; WAYS] {
        let at = self.first + g * WAYS;
        self.entries[at..at + WAYS]
            .try_into()
            .expect("a group is WAYS entries")
    }

    #[inline]
    fn group_mut(&mut self, g: usize) -> &mut [u64; WAYS] {
        let at = self.first + g * WAYS;
        (&mut self.entries[at..at + WAYS])
            .try_into()
            .expect("a group is WAYS entries")
    }

    /// The slot of `key` in group `g`, if there.
    #[inline(always)]
    fn find_in(
        &self,
        g: usize,
        tag: u32,
        key: LineKey,
        key_of: &impl Fn(Slot) -> LineKey,
    ) -> Option<Slot> {
        find_among(self.group(g), tag, key, key_of)
    }

    /// Hints that `key` is looked up soon: loads both its groups (a miss, and a key placed in
    /// its second group, read both).
    #[inline]
    pub fn prefetch(&self, key: LineKey) {
        let tag = tag_of(key);
        let home = self.home(tag);
        for g in [home, self.second(tag, home)] {
            tiercache_core::hint::prefetch(self.group(g).as_ptr());
        }
    }

    /// The slot of the first entry in `key`'s first group, else its second, whose tag matches
    /// `key`'s, without confirming the key (a guess for prefetching: reads no line entry).
    #[inline]
    pub fn guess(&self, key: LineKey) -> Option<Slot> {
        let tag = tag_of(key);
        let home = self.home(tag);
        [home, self.second(tag, home)]
            .into_iter()
            .flat_map(|g| self.group(g).iter())
            .find(|&&e| entry_tag(e) == tag)
            .map(|&e| e as u32)
    }

    /// Slot of `key`, reading stored keys through `key_of`.
    #[inline(always)]
    pub fn get(&self, key: LineKey, key_of: impl Fn(Slot) -> LineKey) -> Option<Slot> {
        let tag = tag_of(key);
        let home = self.home(tag);
        if let Some(s) = self.find_in(home, tag, key, &key_of) {
            return Some(s);
        }
        self.get_elsewhere(home, tag, key, &key_of)
    }

    /// [`get`](Self::get) past the first group: the second, then the spilled entries (a miss,
    /// or a key whose first group was full when it came).
    #[inline(never)]
    fn get_elsewhere(
        &self,
        home: usize,
        tag: u32,
        key: LineKey,
        key_of: &impl Fn(Slot) -> LineKey,
    ) -> Option<Slot> {
        if let Some(s) = self.find_in(self.second(tag, home), tag, key, key_of) {
            return Some(s);
        }
        find_among(self.spilled(), tag, key, key_of)
    }

    /// Where entries without room in their groups may be: the whole of a small table, a large
    /// one's overflow list.
    #[inline]
    fn spilled(&self) -> &[u64] {
        if self.small {
            &self.entries
        } else {
            &self.overflow
        }
    }

    /// Puts `e` in an empty way of group `g`; false if it is full.
    #[inline]
    fn put(&mut self, g: usize, e: u64) -> bool {
        match self.group_mut(g).iter_mut().find(|x| **x == EMPTY) {
            Some(x) => {
                *x = e;
                true
            }
            None => false,
        }
    }

    /// Inserts `key` → `slot`; `key` must not be present and the index not full.
    pub fn insert(&mut self, key: LineKey, slot: Slot, key_of: impl Fn(Slot) -> LineKey) {
        debug_assert!(self.get(key, &key_of).is_none(), "duplicate key");
        let tag = tag_of(key);
        let home = self.home(tag);
        let e = entry(tag, slot);
        self.len += 1;
        if self.put(home, e) || self.put(self.second(tag, home), e) {
            return;
        }
        self.kick(home, e);
    }

    /// Places `e` in full group `g`, moving entries to their other groups until one finds an
    /// empty way; after [`MAX_KICKS`] moves the entry in hand goes to the overflow list. A
    /// small table puts `e` in any empty entry instead (it has more entries than keys).
    #[cold]
    fn kick(&mut self, mut g: usize, mut e: u64) {
        if self.small {
            let x = self
                .entries
                .iter_mut()
                .find(|x| **x == EMPTY)
                .expect("the table has more entries than keys");
            *x = e;
            return;
        }
        for k in 0..MAX_KICKS {
            // Rotating the way taken keeps a walk from bouncing between two entries.
            let w = (k + entry_tag(e) as usize) % WAYS;
            std::mem::swap(&mut self.group_mut(g)[w], &mut e);
            g = self.other(entry_tag(e), g);
            if self.put(g, e) {
                return;
            }
        }
        self.overflow.push(e);
    }

    /// Removes `key`, which must be present in `slot`.
    pub fn remove(&mut self, key: LineKey, slot: Slot) {
        let tag = tag_of(key);
        let e = entry(tag, slot);
        let home = self.home(tag);
        // The slot identifies the entry: whole entries are compared, no key is read.
        for g in [home, self.second(tag, home)] {
            if let Some(x) = self.group_mut(g).iter_mut().find(|x| **x == e) {
                *x = EMPTY;
                self.len -= 1;
                if !self.overflow.is_empty() {
                    self.refill_from_overflow();
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
            *x = EMPTY;
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
    fn refill_from_overflow(&mut self) {
        let mut i = 0;
        while i < self.overflow.len() {
            let e = self.overflow[i];
            let home = self.home(entry_tag(e));
            if self.put(home, e) || self.put(self.second(entry_tag(e), home), e) {
                self.overflow.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Heap bytes.
    pub fn memory_bytes(&self) -> usize {
        (self.entries.capacity() + self.overflow.capacity()) * 8
    }

    /// Entries outside their two groups (for tests).
    #[cfg(test)]
    fn spilled_count(&self) -> usize {
        if !self.small {
            return self.overflow.len();
        }
        (0..self.entries.len())
            .filter(|&i| {
                let e = self.entries[i];
                let in_group = i >= self.first && i < self.first + self.groups * WAYS;
                let g = (i - self.first.min(i)) / WAYS;
                e != EMPTY
                    && !(in_group && {
                        let home = self.home(entry_tag(e));
                        g == home || g == self.second(entry_tag(e), home)
                    })
            })
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Runs `ops` (key of `universe` by position, insert?) against an index of `slots` slots
    /// and a HashMap, checking every key of `universe` after each; returns the most entries
    /// the index had outside their groups at once. A small table's memory never changes.
    fn run_against_model(slots: usize, universe: &[u64], ops: &[(usize, bool)]) -> usize {
        let mut keys: Vec<LineKey> = vec![LineKey(u64::MAX); slots];
        let mut free: Vec<u32> = (0..slots as u32).rev().collect();
        let mut idx = SlotIndex::with_capacity(slots);
        let bytes = idx.memory_bytes();
        let mut model: HashMap<u64, u32> = HashMap::new();
        let mut most_spilled = 0;
        for &(i, insert) in ops {
            let key = LineKey(universe[i]);
            if insert {
                if let std::collections::hash_map::Entry::Vacant(e) = model.entry(key.0) {
                    let Some(s) = free.pop() else { continue };
                    keys[s as usize] = key;
                    idx.insert(key, s, |s| keys[s as usize]);
                    e.insert(s);
                }
            } else if let Some(s) = model.remove(&key.0) {
                idx.remove(key, s);
                keys[s as usize] = LineKey(u64::MAX);
                free.push(s);
            }
            most_spilled = most_spilled.max(idx.spilled_count());
            assert_eq!(idx.len(), model.len());
            if idx.small {
                assert_eq!(idx.memory_bytes(), bytes, "a small table does not grow");
            }
            for &q in universe {
                assert_eq!(
                    idx.get(LineKey(q), |s| keys[s as usize]),
                    model.get(&q).copied(),
                    "key {q}"
                );
            }
            // A guess, when there is one, is the slot of a key with the same tag: here the
            // key's own (these keys' tags are distinct).
            for (&k, &s) in &model {
                if let Some(g) = idx.guess(LineKey(k)) {
                    assert_eq!(g, s, "a guess names the key's slot");
                }
            }
        }
        most_spilled
    }

    /// `n` keys spread over the key space.
    fn spread_keys(n: usize) -> Vec<u64> {
        (0..n as u64).map(|k| k.wrapping_mul(7919)).collect()
    }

    /// `n` keys whose two groups in `idx` are groups 0 and 1.
    fn crowding_keys(idx: &SlotIndex, n: usize) -> Vec<u64> {
        (0u64..)
            .map(|k| k.wrapping_mul(7919))
            .filter(|&k| {
                let t = tag_of(LineKey(k));
                let (h, s) = (idx.home(t), idx.second(t, idx.home(t)));
                h.min(s) == 0 && h.max(s) == 1
            })
            .take(n)
            .collect()
    }

    proptest! {
        /// The index agrees with a HashMap under random inserts and removes.
        #[test]
        fn agrees_with_hashmap(ops in proptest::collection::vec((0usize..64, any::<bool>()), 1..400)) {
            run_against_model(64, &spread_keys(64), &ops);
        }

        /// Tiny tables, always full, where groups overflow and kicks run long.
        #[test]
        fn agrees_with_hashmap_when_crowded(
            slots in 1usize..24,
            ops in proptest::collection::vec((0usize..48, prop::bool::weighted(0.7)), 1..300),
        ) {
            run_against_model(slots, &spread_keys(48), &ops);
        }

        /// Keys crowding two groups of a large table, among others: the overflow list takes
        /// what the groups cannot, and gives it back as room is made.
        #[test]
        fn agrees_with_hashmap_when_a_large_table_overflows(
            ops in proptest::collection::vec((0usize..40, prop::bool::weighted(0.6)), 1..200),
        ) {
            // Twelve keys on groups 0 and 1, then 28 others.
            let mut universe = crowding_keys(&SlotIndex::with_capacity(200), 12);
            universe.extend(spread_keys(28).iter().map(|k| k + 1));
            run_against_model(200, &universe, &ops);
        }
    }

    /// Every address an entry array can have (8-byte aligned) gets the same number of groups,
    /// aligned to 32 bytes and inside the array, for small and large tables.
    #[test]
    fn the_group_count_depends_on_the_size_alone() {
        for n in (8..600).chain([4_000, 4_001, 4_002, 4_003, 87_383]) {
            let counts: Vec<usize> = (0..WAYS)
                .map(|k| {
                    let addr = 0x1000 + 8 * k;
                    let (first, groups) = group_layout(n, addr);
                    assert!(
                        groups >= 2 && first + groups * WAYS <= n,
                        "{n} at {addr:#x}"
                    );
                    if n >= SMALL {
                        assert_eq!((addr + 8 * first) % (WAYS * 8), 0, "{n} at {addr:#x}");
                    }
                    groups
                })
                .collect();
            assert!(counts.windows(2).all(|w| w[0] == w[1]), "{n}: {counts:?}");
        }
    }

    /// The same keys make the same table wherever the allocator puts it: only the aligning
    /// offset moves with the address, never the number of groups or a key's place in them.
    #[test]
    fn a_table_does_not_depend_on_its_address() {
        // 2,999 keys: 4,000 entries, so an aligning offset of 2 or 3 would cost a group.
        let keys = spread_keys(2_999);
        let mut layouts = Vec::new();
        // Odd-sized allocations held in between move the tables to differently aligned
        // addresses.
        let mut padding = Vec::new();
        let mut offsets = std::collections::HashSet::new();
        for pad in 1..=12usize {
            padding.push(vec![0u8; pad * 8 + 1]);
            let mut idx = SlotIndex::with_capacity(keys.len());
            for (slot, &k) in keys.iter().enumerate() {
                idx.insert(LineKey(k), slot as Slot, |s| LineKey(keys[s as usize]));
            }
            offsets.insert(idx.first);
            let grouped = idx.entries[idx.first..idx.first + idx.groups * WAYS].to_vec();
            layouts.push((idx.groups, grouped, idx.overflow.clone()));
        }
        assert!(layouts.windows(2).all(|w| w[0] == w[1]), "layouts differ");
        // Not a proof that addresses varied, but the check above is moot if they never did.
        eprintln!("aligning offsets seen: {offsets:?}");
    }

    /// Keys sharing two groups beyond their room spill, stay found, and are removed; a small
    /// table spills into itself, a large one into its overflow list; a full large table of
    /// ordinary keys needs neither.
    #[test]
    fn what_two_groups_cannot_hold_spills() {
        for slots in [10, 200] {
            let probe = SlotIndex::with_capacity(slots);
            assert_eq!(probe.small, slots == 10);
            // Two groups hold eight entries: the ninth and tenth key spill.
            let crowd = crowding_keys(&probe, 10);
            let mut ops: Vec<(usize, bool)> = (0..10).map(|i| (i, true)).collect();
            ops.extend((0..10).map(|i| (i, false)));
            let most = run_against_model(slots, &crowd, &ops);
            assert_eq!(most, 2, "{slots} slots");
        }

        let slots = 1 << 16;
        let mut keys: Vec<LineKey> = Vec::with_capacity(slots);
        let mut idx = SlotIndex::with_capacity(slots);
        for s in 0..slots as u32 {
            keys.push(LineKey(u64::from(s) * 3 + 5));
            idx.insert(keys[s as usize], s, |s| keys[s as usize]);
        }
        assert_eq!(idx.spilled_count(), 0);
        for (s, &k) in keys.iter().enumerate() {
            assert_eq!(idx.get(k, |s| keys[s as usize]), Some(s as u32));
        }
    }
}
