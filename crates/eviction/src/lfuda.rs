//! LFUDA, LFU with dynamic aging (Arlitt et al., 2000): a line's priority is its hit count
//! plus the cache's age `L`, the priority of the last victim; the smallest priority goes.
//!
//! As published (with unit cost and size): a line enters with count 1 and priority `L + 1`;
//! a hit adds 1 to its count and sets its priority to `L + count` with the current `L`; the
//! victim is the line of smallest priority (on a tie, the one whose priority was set first,
//! as libCacheSim's per-priority FIFO lists order it), and `L` becomes its priority. Old
//! popular lines thus age out once newer lines' priorities pass theirs.
//!
//! libCacheSim `LFUDA` differs, and tests/libcachesim_golden.rs pins the difference: its hit
//! adds `L` to the priority (not 1 to a count added to `L`), so a line's priority grows by the
//! age at every hit, and before the first eviction (`L = 0`) a hit leaves the priority at 1
//! (it only moves the line to the back of its list); its search for the next smallest
//! priority also stops at the largest priority a *hit* produced, ignoring lines inserted
//! above it. The published definition is kept here.
//!
//! Not O(1): a hit moves a line to a priority anywhere in the order, so slots sit in an
//! indexed 4-ary heap keyed by (priority, time the priority was set): hit, insert and evict
//! are `O(log n)` and allocation-free. A pinned top is passed over by a scan of the heap for
//! the smallest unpinned key (`O(n)`, only while the top line is under write-back); `L` then
//! becomes the victim's priority. [`Eviction::insert_cold`] enters with priority `L` and a
//! time before every other (the next victim); [`Eviction::insert_demoted`] is `insert`.
//! Capacity changes nothing in the order.

use crate::heap::SlotHeap;
use crate::{Eviction, Slot};
use tiercache_core::LineKey;

/// First clock value: priorities set count up from here, cold inserts down from below it.
const CLOCK_START: u64 = 1 << 62;

/// LFU with dynamic aging.
#[derive(Debug, Clone)]
pub struct Lfuda {
    /// Keyed by (priority, time it was set).
    heap: SlotHeap<(u64, u64)>,
    /// Hit count (plus one) of each resident slot.
    count: Vec<u32>,
    /// The age `L`: the priority of the last victim.
    age: u64,
    clock: u64,
    cold_clock: u64,
    capacity: usize,
}

impl Lfuda {
    /// An empty policy for slots `< slot_limit`.
    pub fn new(slot_limit: usize) -> Self {
        Lfuda {
            heap: SlotHeap::new(slot_limit),
            count: vec![0; slot_limit],
            age: 0,
            clock: CLOCK_START,
            cold_clock: CLOCK_START - 1,
            capacity: slot_limit,
        }
    }

    /// The cache's age `L` (the priority of the last victim).
    pub fn age(&self) -> u64 {
        self.age
    }

    /// Priority of the resident line in `slot`.
    pub fn priority(&self, slot: Slot) -> u64 {
        self.heap.key(slot).0
    }
}

impl Eviction for Lfuda {
    fn name(&self) -> &'static str {
        "lfuda"
    }

    #[inline]
    fn insert(&mut self, slot: Slot, _key: LineKey) {
        self.clock += 1;
        self.count[slot as usize] = 1;
        self.heap.push(slot, (self.age + 1, self.clock));
    }

    #[inline]
    fn hit(&mut self, slot: Slot) {
        self.clock += 1;
        let c = &mut self.count[slot as usize];
        *c = c.saturating_add(1);
        let priority = self.age + u64::from(*c);
        self.heap.update(slot, (priority, self.clock));
    }

    fn remove(&mut self, slot: Slot) {
        if self.heap.contains(slot) {
            self.heap.remove(slot);
        }
    }

    #[inline]
    fn evict(&mut self, _incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        let victim = self.heap.min_unpinned(pinned)?;
        self.age = self.heap.key(victim).0;
        self.heap.remove(victim);
        Some(victim)
    }

    #[inline]
    fn victim_hint(&self) -> Option<(Slot, Option<Slot>)> {
        Some((self.heap.peek()?, None))
    }

    fn len(&self) -> usize {
        self.heap.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn set_capacity(&mut self, lines: usize) {
        self.capacity = lines.min(self.count.len());
    }

    /// Priority `L`, set before every other: the next victim.
    #[inline]
    fn insert_cold(&mut self, slot: Slot, _key: LineKey) {
        self.count[slot as usize] = 1;
        self.heap.push(slot, (self.age, self.cold_clock));
        self.cold_clock -= 1;
    }

    fn memory_bytes(&self) -> usize {
        self.heap.memory_bytes() + self.count.capacity() * 4
    }

    #[inline]
    fn prefetch(&self, slot: Slot) {
        self.heap.prefetch(slot);
        tiercache_core::hint::prefetch(self.count.as_ptr().wrapping_add(slot as usize));
    }

    fn grow_slots(&mut self, slot_limit: usize) {
        if slot_limit > self.count.len() {
            self.heap.grow(slot_limit);
            self.count.resize(slot_limit, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_popular_lines_age_out() {
        let mut p = Lfuda::new(3);
        p.insert(0, LineKey(0));
        for _ in 0..3 {
            p.hit(0); // priority 4
        }
        p.insert(1, LineKey(1));
        p.insert(2, LineKey(2));
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(1));
        assert_eq!(p.age(), 1);
        p.insert(1, LineKey(3)); // priority 2
        p.hit(1); // count 2: priority 3
        assert_eq!(p.priority(1), 3);
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(2));
        assert_eq!(p.age(), 1);
        p.insert(2, LineKey(4));
        p.hit(2);
        p.hit(2); // count 3: priority 4, set after line 0's
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(1));
        assert_eq!(p.age(), 3);
        // Line 0 (priority 4) now ties with line 2 and goes first, although it was hit more.
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(0));
        assert_eq!(p.age(), 4);
    }
}
