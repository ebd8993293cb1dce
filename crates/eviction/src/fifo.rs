//! FIFO: evict the line that entered first; hits change nothing.
//!
//! Matches libCacheSim `FIFO`. With pinned slots the victim is the oldest unpinned slot.

use crate::list::Lists;
use crate::{Eviction, Slot};
use tiercache_core::LineKey;

/// First-in-first-out replacement.
#[derive(Debug, Clone)]
pub struct Fifo {
    lists: Lists<1>,
    /// Capacity the owner set (the order does not depend on it).
    capacity: usize,
}

impl Fifo {
    /// An empty policy for slots `< slot_limit`.
    pub fn new(slot_limit: usize) -> Self {
        Fifo {
            lists: Lists::new(slot_limit),
            capacity: slot_limit,
        }
    }
}

impl Eviction for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
    }

    #[inline]
    fn insert(&mut self, slot: Slot, _key: LineKey) {
        self.lists.push_front(0, slot);
    }

    #[inline]
    fn hit(&mut self, _slot: Slot) {}

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

    /// The oldest slot and the one entered after it: exactly the next two victims when nothing
    /// is pinned.
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

    /// Inserts at the back: the line is the next victim (hits change nothing in FIFO).
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

    #[test]
    fn hits_do_not_change_the_order() {
        let mut p = Fifo::new(4);
        for s in [2, 0, 3] {
            p.insert(s, LineKey(s as u64));
        }
        p.hit(2);
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(2));
        assert_eq!(p.evict(LineKey(9), &|s| s == 0), Some(3));
        // 4 nodes and a sentinel, two 3-bit links each (30 bits: 4 bytes), 8 of padding.
        assert_eq!(p.memory_bytes(), 4 + 8);
    }
}
