//! CLOCK (second chance): a FIFO whose lines get one more round if referenced.
//!
//! Matches libCacheSim `Clock` with its default one-bit counter (`n-bit-counter=1`): a slot
//! enters at the front with counter 0, a hit raises the counter to at most its maximum, and
//! eviction looks at the back: a slot with a non-zero counter has it decremented and is moved
//! to the front (the hand passes it), the first slot found with counter 0 is the victim.
//! Pinned slots with counter 0 are passed over the same way, without being evicted.
//!
//! Implemented as a ring with a hand rather than by moving passed slots: the hand walks from
//! old to new (wrapping), passing a slot leaves it where it is, and a new slot is linked just
//! behind the hand (last in the hand's order). That visits slots in exactly the order of
//! libCacheSim's move-to-head list, and a passed slot costs one link read instead of the
//! four link writes of a move (CLOCK's eviction walk was its slowest part).

use crate::list::{Lists, NIL};
use crate::{Eviction, Slot};
use tiercache_core::LineKey;

/// CLOCK with an n-bit reference counter per slot.
#[derive(Debug, Clone)]
pub struct Clock {
    lists: Lists<1>,
    counter: Vec<u8>,
    max_counter: u8,
    /// Next slot the hand examines; [`NIL`] means "start from the back" (the oldest).
    hand: u32,
    /// Capacity the owner set (the order does not depend on it).
    capacity: usize,
}

impl Clock {
    /// One-bit CLOCK (the classic second-chance algorithm) for slots `< slot_limit`.
    pub fn new(slot_limit: usize) -> Self {
        Self::with_counter_bits(slot_limit, 1)
    }

    /// CLOCK whose counters saturate at `2^bits - 1` (`bits` is clamped to `1..=8`).
    pub fn with_counter_bits(slot_limit: usize, bits: u32) -> Self {
        let bits = bits.clamp(1, 8);
        Clock {
            lists: Lists::new(slot_limit),
            counter: vec![0; slot_limit],
            max_counter: ((1u32 << bits) - 1) as u8,
            hand: NIL,
            capacity: slot_limit,
        }
    }
}

impl Clock {
    /// The slot the hand examines first.
    #[inline]
    fn hand_slot(&self) -> Option<u32> {
        if self.hand == NIL {
            self.lists.back(0)
        } else {
            Some(self.hand)
        }
    }

    /// The slot after `slot` in the hand's order (newer, wrapping from the front to the back).
    #[inline]
    fn advance(&self, slot: u32) -> Option<u32> {
        self.lists.newer(slot).or_else(|| self.lists.back(0))
    }

    /// Links `slot` last in the hand's order: just older than the hand (at the front when the
    /// hand starts from the back).
    #[inline]
    fn link_behind_hand(&mut self, slot: Slot) {
        if self.hand == NIL {
            self.lists.push_front(0, slot);
        } else {
            self.lists.insert_older(0, self.hand, slot);
        }
    }
}

impl Eviction for Clock {
    fn name(&self) -> &'static str {
        "clock"
    }

    #[inline]
    fn insert(&mut self, slot: Slot, _key: LineKey) {
        self.counter[slot as usize] = 0;
        self.link_behind_hand(slot);
    }

    #[inline]
    fn hit(&mut self, slot: Slot) {
        let c = &mut self.counter[slot as usize];
        if *c < self.max_counter {
            *c += 1;
        }
    }

    fn remove(&mut self, slot: Slot) {
        if self.lists.is_linked(slot) {
            if self.hand == slot {
                self.hand = self.lists.newer(slot).unwrap_or(NIL);
            }
            self.lists.unlink(0, slot);
        }
    }

    fn evict(&mut self, _incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        let mut cur = self.hand_slot()?;
        // Each full turn of the hand lowers every counter by one, so after `max + 1` turns an
        // unpinned slot must have been found; beyond that every slot is pinned.
        let max_steps = (self.max_counter as usize + 1) * self.lists.len(0);
        for _ in 0..max_steps {
            let c = &mut self.counter[cur as usize];
            if *c > 0 {
                *c -= 1;
            } else if !pinned(cur) {
                // The hand stays on the next newer slot (the back after the front).
                self.hand = self.lists.newer(cur).unwrap_or(NIL);
                self.lists.unlink(0, cur);
                return Some(cur);
            }
            cur = self.advance(cur)?;
        }
        self.hand = cur;
        None
    }

    /// Of the hand's slot and the next one, the first the hand would take (counter 0), and
    /// the slot after it; a guess when both are referenced (the hand then moves on further).
    #[inline]
    fn victim_hint(&self) -> Option<(Slot, Option<Slot>)> {
        let v = self.hand_slot()?;
        let then = self.advance(v);
        match then {
            Some(t) if self.counter[v as usize] > 0 => Some((t, self.advance(t))),
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

    /// Inserts with counter 0 where the hand looks first (just older than the hand, which
    /// moves onto it; at the back when the hand starts from there): the line is the next
    /// victim unless it is hit before the next eviction.
    #[inline]
    fn insert_cold(&mut self, slot: Slot, _key: LineKey) {
        self.counter[slot as usize] = 0;
        if self.hand == NIL {
            self.lists.push_back(0, slot);
        } else {
            self.lists.insert_older(0, self.hand, slot);
            self.hand = slot;
        }
    }

    fn memory_bytes(&self) -> usize {
        self.lists.memory_bytes() + self.counter.capacity()
    }

    fn grow_slots(&mut self, slot_limit: usize) {
        if slot_limit > self.counter.len() {
            self.lists.grow(slot_limit);
            self.counter.resize(slot_limit, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn referenced_slots_get_a_second_chance() {
        let mut p = Clock::new(4);
        for s in 0..4 {
            p.insert(s, LineKey(s as u64));
        }
        p.hit(0);
        p.hit(0); // one bit: a second hit adds nothing
        p.hit(1);
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(2));
        // 0 and 1 lost their bits when the hand passed them.
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(3));
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(0));
    }

    #[test]
    fn two_bit_counter_survives_two_passes() {
        let mut p = Clock::with_counter_bits(3, 2);
        for s in 0..3 {
            p.insert(s, LineKey(s as u64));
        }
        for _ in 0..5 {
            p.hit(0);
        }
        p.hit(1);
        // Slot 0 saturates at 3: it outlives 1 (one hit) and 2 (none).
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(2));
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(1));
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(0));
    }

    #[test]
    fn all_pinned_gives_none_and_keeps_every_slot() {
        let mut p = Clock::new(3);
        for s in 0..3 {
            p.insert(s, LineKey(s as u64));
            p.hit(s);
        }
        assert_eq!(p.evict(LineKey(9), &|_| true), None);
        assert_eq!(p.len(), 3);
        assert_eq!(p.evict(LineKey(9), &|s| s != 1), Some(1));
    }
}
