//! MRU: evict the most recently used line.
//!
//! One recency list: inserts and hits move a slot to the front, the victim is the front (what was just used).
//! Matches libCacheSim `MRU`; it suits loops larger than the cache, and the lower level of an
//! exclusive hierarchy. With pinned slots the victim is the most recent unpinned slot.

use crate::list::Lists;
use crate::{Eviction, Slot};
use tiercache_core::LineKey;

/// Most-recently-used replacement.
#[derive(Debug, Clone)]
pub struct Mru {
    lists: Lists<1>,
    /// Capacity the owner set (the order does not depend on it).
    capacity: usize,
}

impl Mru {
    /// An empty policy for slots `< slot_limit`.
    pub fn new(slot_limit: usize) -> Self {
        Mru {
            lists: Lists::new(slot_limit),
            capacity: slot_limit,
        }
    }
}

impl Eviction for Mru {
    fn name(&self) -> &'static str {
        "mru"
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
        let victim = self.lists.newest_unpinned(0, pinned)?;
        self.lists.unlink(0, victim);
        Some(victim)
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

    /// Same as `insert`: MRU's victim end is the front, where every line enters. (The "MRU
    /// array" of docs/design.md §4.7, which inserts disk-read blocks at its evict-next end and
    /// demoted ones at its evict-last end, is an [`crate::Lru`] with `insert_cold` for disk reads.)
    #[inline]
    fn insert_cold(&mut self, slot: Slot, _key: LineKey) {
        self.lists.push_front(0, slot);
    }

    /// At the back (the least recent end), which MRU evicts last: a demoted line waits there
    /// while the lines read for the level above (now held there) go first (docs/design.md §4.7).
    #[inline]
    fn insert_demoted(&mut self, slot: Slot, _key: LineKey) {
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

    #[test]
    fn evicts_most_recent_and_skips_pinned() {
        let mut p = Mru::new(8);
        for s in [5, 1, 7] {
            p.insert(s, LineKey(s as u64));
        }
        p.hit(1);
        // Recency, newest first: 1, 7, 5.
        assert_eq!(p.evict(LineKey(9), &|s| s == 1), Some(7));
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(1));
        assert_eq!(p.len(), 1);
        assert_eq!(p.evict(LineKey(9), &|_| true), None);
    }

    #[test]
    fn demoted_lines_are_evicted_last() {
        let mut p = Mru::new(8);
        p.insert_demoted(3, LineKey(3));
        p.insert(1, LineKey(1));
        p.insert_demoted(4, LineKey(4));
        p.insert(2, LineKey(2));
        // Newest first: 2, 1, 3, 4 (demoted lines behind the read ones, oldest demote first).
        let order: Vec<_> = (0..4)
            .map(|_| p.evict(LineKey(9), &|_| false).unwrap())
            .collect();
        assert_eq!(order, vec![2, 1, 3, 4]);
    }
}
