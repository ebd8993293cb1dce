//! LRU-K with K = 2 (O'Neil, O'Neil & Weikum, SIGMOD '93): evict the line whose second most
//! recent access is oldest; lines accessed once go first, oldest first.
//!
//! Follows libCacheSim `LRU_K` (default `k=2`): a line's history is its last two access times
//! (a clock counting inserts and hits, as libCacheSim's request counter orders them); a line
//! with one access has an infinite backward 2-distance and is evicted before any other, in
//! insertion order; among lines with two or more, the one whose previous access is oldest goes.
//! As in libCacheSim, and unlike the paper's retained-information period, history is kept only
//! while a line is resident.
//!
//! Not O(1): a hit can move a line anywhere in the order (its new rank is its *previous*
//! access time), so slots sit in an indexed 4-ary heap keyed by
//! (two accesses or more, the time that ranks it): hit, insert and evict are `O(log n)` and
//! allocation-free. A pinned top is passed over by a scan of the heap for the smallest
//! unpinned key (`O(n)`, only while the top line is under write-back).
//!
//! [`Eviction::insert_cold`] gives the line an access time older than every other (it is the
//! next victim, and after one hit it ranks as the line with the oldest previous access);
//! [`Eviction::insert_demoted`] is `insert`. Capacity changes nothing in the order.

use crate::heap::SlotHeap;
use crate::{Eviction, Slot};
use tiercache_core::LineKey;

/// Key bit of lines accessed at least twice (they rank after every line accessed once).
const TWICE: u64 = 1 << 63;
/// First clock value: inserts count up from here, cold inserts down from below it.
const CLOCK_START: u64 = 1 << 62;

/// LRU-2 replacement.
#[derive(Debug, Clone)]
pub struct LruK {
    heap: SlotHeap<u64>,
    /// Most recent access time of each resident slot.
    last: Vec<u64>,
    clock: u64,
    /// Next time given by `insert_cold` (counts down).
    cold_clock: u64,
    capacity: usize,
}

impl LruK {
    /// An empty policy for slots `< slot_limit`.
    pub fn new(slot_limit: usize) -> Self {
        LruK {
            heap: SlotHeap::new(slot_limit),
            last: vec![0; slot_limit],
            clock: CLOCK_START,
            cold_clock: CLOCK_START - 1,
            capacity: slot_limit,
        }
    }

    /// Whether the resident line in `slot` has been accessed at least twice.
    pub fn has_two_accesses(&self, slot: Slot) -> bool {
        self.heap.key(slot) & TWICE != 0
    }
}

impl Eviction for LruK {
    fn name(&self) -> &'static str {
        "lru-k"
    }

    #[inline]
    fn insert(&mut self, slot: Slot, _key: LineKey) {
        self.clock += 1;
        self.last[slot as usize] = self.clock;
        self.heap.push(slot, self.clock);
    }

    #[inline]
    fn hit(&mut self, slot: Slot) {
        self.clock += 1;
        // The previous access becomes the second most recent: the line's rank.
        let previous = std::mem::replace(&mut self.last[slot as usize], self.clock);
        self.heap.update(slot, TWICE | previous);
    }

    fn remove(&mut self, slot: Slot) {
        if self.heap.contains(slot) {
            self.heap.remove(slot);
        }
    }

    #[inline]
    fn evict(&mut self, _incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        let victim = self.heap.min_unpinned(pinned)?;
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
        self.capacity = lines.min(self.last.len());
    }

    /// With an access time older than every other line's: the next victim.
    #[inline]
    fn insert_cold(&mut self, slot: Slot, _key: LineKey) {
        self.last[slot as usize] = self.cold_clock;
        self.heap.push(slot, self.cold_clock);
        self.cold_clock -= 1;
    }

    fn memory_bytes(&self) -> usize {
        self.heap.memory_bytes() + self.last.capacity() * 8
    }

    #[inline]
    fn prefetch(&self, slot: Slot) {
        self.heap.prefetch(slot);
        tiercache_core::hint::prefetch(self.last.as_ptr().wrapping_add(slot as usize));
    }

    fn grow_slots(&mut self, slot_limit: usize) {
        if slot_limit > self.last.len() {
            self.heap.grow(slot_limit);
            self.last.resize(slot_limit, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_accessed_lines_go_first_then_the_oldest_previous_access() {
        let mut p = LruK::new(5);
        for s in 0..5 {
            p.insert(s, LineKey(s as u64));
        }
        p.hit(3); // previous access: its insert (time 4)
        p.hit(0); // previous access: time 1
        p.hit(3); // previous access: the hit above
        assert!(p.has_two_accesses(0) && !p.has_two_accesses(1));
        // Once-accessed 1, 2, 4 in insertion order, then 0 (previous access oldest), then 3.
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(1));
        assert_eq!(p.evict(LineKey(9), &|s| s == 2), Some(4));
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(2));
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(0));
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(3));
        assert_eq!(p.evict(LineKey(9), &|_| false), None);
    }
}
