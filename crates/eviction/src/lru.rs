//! LRU: evict the least recently used line.
//!
//! One recency list: inserts and hits move a slot to the front, the victim is the back.
//! Matches libCacheSim `LRU`. With pinned slots the victim is the least recent unpinned slot.

use crate::list::Lists;
use crate::{Eviction, Slot};
use tiercache_core::LineKey;

/// Least-recently-used replacement.
#[derive(Debug, Clone)]
pub struct Lru {
    lists: Lists<1>,
    /// Capacity the owner set (the order does not depend on it).
    capacity: usize,
}

impl Lru {
    /// An empty policy for slots `< slot_limit`.
    pub fn new(slot_limit: usize) -> Self {
        Lru {
            lists: Lists::new(slot_limit),
            capacity: slot_limit,
        }
    }
}

impl Eviction for Lru {
    fn name(&self) -> &'static str {
        "lru"
    }

    #[inline]
    fn insert(&mut self, slot: Slot, _key: LineKey) {
        self.lists.push_front(0, slot);
    }

    #[inline]
    fn hit(&mut self, slot: Slot) {
        self.lists.move_to_front(0, 0, slot);
    }

    fn remove(&mut self, slot: Slot) {
        if self.lists.is_linked(slot) {
            self.lists.unlink(0, slot);
        }
    }

    #[inline]
    fn evict(&mut self, _incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        let victim = self.lists.oldest_unpinned(0, pinned)?;
        self.lists.unlink(0, victim);
        Some(victim)
    }

    #[inline]
    fn prefetch(&self, slot: Slot) {
        self.lists.prefetch(slot);
    }

    #[inline]
    fn victim_hint(&self) -> Option<(Slot, Option<Slot>)> {
        let v = self.lists.back(0)?;
        Some((v, self.lists.newer(v)))
    }

    fn len(&self) -> usize {
        self.lists.len(0)
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn set_capacity(&mut self, lines: usize) {
        self.capacity = lines.min(self.lists.slot_limit());
    }

    /// Inserts at the back: the line is the next victim unless it is hit first.
    #[inline]
    fn insert_cold(&mut self, slot: Slot, _key: LineKey) {
        self.lists.push_back(0, slot);
    }

    fn memory_bytes(&self) -> usize {
        self.lists.memory_bytes()
    }

    fn grow_slots(&mut self, slot_limit: usize) {
        self.lists.grow(slot_limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNPINNED: &dyn Fn(Slot) -> bool = &|_| false;

    #[test]
    fn evicts_least_recent_and_skips_pinned() {
        let mut p = Lru::new(8);
        assert_eq!(p.evict(LineKey(0), UNPINNED), None);
        for s in [5, 1, 7] {
            p.insert(s, LineKey(s as u64));
        }
        p.hit(5);
        // Recency, oldest first: 1, 7, 5.
        assert_eq!(p.evict(LineKey(9), &|s| s == 1), Some(7));
        assert_eq!(p.evict(LineKey(9), UNPINNED), Some(1));
        p.remove(5);
        p.remove(5);
        assert!(p.is_empty());
        assert_eq!(p.evict(LineKey(9), UNPINNED), None);
    }
}
