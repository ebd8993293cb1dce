//! SIEVE: a FIFO queue with a hand that sweeps from old to new, sparing visited lines.
//!
//! Matches libCacheSim `Sieve`: a slot enters at the front unvisited; a hit marks it visited.
//! The hand starts at the back (oldest) and moves towards the front, clearing the mark of each
//! visited slot it passes, wrapping to the back after the front; the first unvisited slot is
//! evicted in place (survivors are never moved) and the hand stays at the next newer slot.
//! Pinned unvisited slots are passed over like visited ones (their mark is already clear).

use crate::list::{Lists, NIL};
use crate::{Eviction, Slot};
use tiercache_core::LineKey;

/// SIEVE replacement.
#[derive(Debug, Clone)]
pub struct Sieve {
    lists: Lists<1>,
    visited: Vec<bool>,
    /// Next slot the hand examines; [`NIL`] means "start from the back".
    hand: u32,
    /// Capacity the owner set (the order does not depend on it).
    capacity: usize,
}

impl Sieve {
    /// An empty policy for slots `< slot_limit`.
    pub fn new(slot_limit: usize) -> Self {
        Sieve {
            lists: Lists::new(slot_limit),
            visited: vec![false; slot_limit],
            hand: NIL,
            capacity: slot_limit,
        }
    }

    /// The slot newer than `slot`, wrapping from the front to the back.
    #[inline]
    fn advance(&self, slot: u32) -> Option<u32> {
        self.lists.newer(slot).or_else(|| self.lists.back(0))
    }
}

impl Eviction for Sieve {
    fn name(&self) -> &'static str {
        "sieve"
    }

    #[inline]
    fn insert(&mut self, slot: Slot, _key: LineKey) {
        self.visited[slot as usize] = false;
        self.lists.push_front(0, slot);
    }

    #[inline]
    fn hit(&mut self, slot: Slot) {
        self.visited[slot as usize] = true;
    }

    fn remove(&mut self, slot: Slot) {
        if !self.lists.is_linked(slot) {
            return;
        }
        if self.hand == slot {
            self.hand = self.lists.newer(slot).unwrap_or(NIL);
        }
        self.lists.unlink(0, slot);
    }

    fn evict(&mut self, _incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        let mut cur = if self.hand == NIL {
            self.lists.back(0)?
        } else {
            self.hand
        };
        // Two sweeps clear every mark and then visit every slot unmarked.
        for _ in 0..2 * self.lists.len(0) {
            if self.visited[cur as usize] {
                self.visited[cur as usize] = false;
            } else if !pinned(cur) {
                self.hand = self.lists.newer(cur).unwrap_or(NIL);
                self.lists.unlink(0, cur);
                return Some(cur);
            }
            cur = self.advance(cur)?;
        }
        self.hand = cur;
        None
    }

    /// Of the hand's slot and the next one it visits, the first unvisited, and the slot after
    /// it; a guess when both are visited (the hand then moves on further).
    #[inline]
    fn victim_hint(&self) -> Option<(Slot, Option<Slot>)> {
        let v = if self.hand == NIL {
            self.lists.back(0)?
        } else {
            self.hand
        };
        let then = self.advance(v);
        match then {
            Some(t) if self.visited[v as usize] => Some((t, self.advance(t))),
            _ => Some((v, then)),
        }
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

    /// Inserts unvisited where the hand looks next: just older than the hand's slot, and the
    /// hand moves onto it (at the back when the hand starts from there). The line is the next
    /// victim unless it is hit first; survivors keep their order.
    #[inline]
    fn insert_cold(&mut self, slot: Slot, _key: LineKey) {
        self.visited[slot as usize] = false;
        if self.hand == NIL {
            self.lists.push_back(0, slot);
        } else {
            self.lists.insert_older(0, self.hand, slot);
            self.hand = slot;
        }
    }

    fn memory_bytes(&self) -> usize {
        self.lists.memory_bytes() + self.visited.capacity()
    }

    fn grow_slots(&mut self, slot_limit: usize) {
        if slot_limit > self.visited.len() {
            self.lists.grow(slot_limit);
            self.visited.resize(slot_limit, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_stays_where_it_stopped() {
        let mut p = Sieve::new(5);
        for s in 0..4 {
            p.insert(s, LineKey(s as u64));
        }
        p.hit(0);
        p.hit(2);
        // Oldest first: 0(v) 1 2(v) 3. The hand clears 0, evicts 1, stops at 2.
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(1));
        p.insert(4, LineKey(4));
        // Clears 2, evicts 3 (the new 4 is newer still), stops at 4.
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(3));
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(4));
        // Hand wraps to the back: 0 (cleared before) and 2 (cleared) remain.
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(0));
    }

    #[test]
    fn removing_the_hand_slot_moves_the_hand_to_the_newer_neighbour() {
        let mut p = Sieve::new(4);
        for s in 0..4 {
            p.insert(s, LineKey(s as u64));
        }
        p.hit(0);
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(1));
        p.remove(2); // the hand was on 2
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(3));
        assert_eq!(p.evict(LineKey(9), &|_| true), None);
        assert_eq!(p.len(), 1);
    }
}
