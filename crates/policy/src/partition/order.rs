//! A partition's replacement order: its eviction policy, with dirty lines held out of it when
//! the cache only ever evicts clean lines.
//!
//! Under `dirty_full = "bypass"` a victim must be clean: a request that finds no clean line
//! goes around the cache instead of waiting for a write-back (SPEC §4.6). Asking the policy
//! for its victim while passing over dirty lines costs a walk past every dirty line at its
//! evict-next end, and under a burst of writes with lazy cleaning that is most of the cache,
//! on every miss. So, as Open CAS keeps clean and dirty lines on separate LRU lists, a line
//! that becomes dirty leaves the policy (it is then on the line table's dirty list only,
//! least recently written first, where the cleaners take it) and re-enters it through the
//! policy's own `insert` when it is marked clean, i.e. when its write-back job is made; it is
//! pinned until the job completes. Finding a clean victim is then the policy's ordinary
//! `evict`, O(1) for every policy but for passing over those pinned lines, at most the lines
//! of the write-back jobs in flight (at the evict-next end only for MRU, whose insert end it
//! is).
//!
//! What this changes, by design: while a line is dirty its hits do not reach the policy, and
//! once clean it re-enters where the policy puts new lines (for LRU, Open CAS's choice: the
//! head of the clean list). Under `dirty_full = "evict-then-write"`, where a dirty victim is
//! written back before its slot is reused, every line stays in the one order.
//!
//! The set of held-out slots is explicit (a bit per slot) so that every operation on a slot
//! is checked against it: a hit on a held-out line is a no-op, removing one only clears its
//! bit, and the audit checks that a slot is held out exactly when it is dirty and resident.

use tiercache_core::LineKey;
use tiercache_eviction::{Eviction, Slot};

/// A partition's eviction policy and the dirty lines held out of it.
pub(crate) struct ReplacementOrder {
    policy: Box<dyn Eviction>,
    /// Whether dirty lines are held out (`dirty_full = "bypass"`).
    holds_out_dirty: bool,
    /// One bit per slot: held out of `policy`.
    out: Vec<u64>,
    out_count: usize,
}

impl ReplacementOrder {
    /// `policy` over up to `slots` slots, holding dirty lines out of it if `holds_out_dirty`.
    pub(crate) fn new(policy: Box<dyn Eviction>, slots: u32, holds_out_dirty: bool) -> Self {
        let words = if holds_out_dirty {
            (slots as usize).div_ceil(64)
        } else {
            0
        };
        Self {
            policy,
            holds_out_dirty,
            out: vec![0; words],
            out_count: 0,
        }
    }

    /// Whether dirty lines are held out of the policy.
    #[inline]
    pub(crate) fn holds_out_dirty(&self) -> bool {
        self.holds_out_dirty
    }

    /// Whether `slot` is held out of the policy.
    #[inline]
    pub(crate) fn is_out(&self, slot: Slot) -> bool {
        self.holds_out_dirty && self.out[slot as usize / 64] & (1 << (slot % 64)) != 0
    }

    fn set_out(&mut self, slot: Slot, out: bool) {
        let (w, b) = (slot as usize / 64, 1u64 << (slot % 64));
        debug_assert_eq!(
            self.out[w] & b != 0,
            !out,
            "slot {slot} held out twice or never"
        );
        if out {
            self.out[w] |= b;
            self.out_count += 1;
        } else {
            self.out[w] &= !b;
            self.out_count -= 1;
        }
    }

    /// A line entered `slot`: into the policy, or held out if it is `dirty` and dirty lines
    /// are held out.
    #[inline]
    pub(crate) fn insert(&mut self, slot: Slot, key: LineKey, dirty: bool) {
        if dirty && self.holds_out_dirty {
            self.set_out(slot, true);
        } else {
            self.policy.insert(slot, key);
        }
    }

    /// As [`insert`](Self::insert), at the policy's evict-last end for demoted lines.
    pub(crate) fn insert_demoted(&mut self, slot: Slot, key: LineKey) {
        self.policy.insert_demoted(slot, key);
    }

    /// A demoted block the partition already holds moves to the evict-last end, unless it is
    /// held out (dirty: it stays out until marked clean).
    pub(crate) fn move_demoted(&mut self, slot: Slot, key: LineKey) {
        if !self.is_out(slot) {
            self.policy.remove(slot);
            self.policy.insert_demoted(slot, key);
        }
    }

    /// The resident line in `slot` was accessed.
    #[inline]
    pub(crate) fn hit(&mut self, slot: Slot) {
        if !self.is_out(slot) {
            self.policy.hit(slot);
        }
    }

    /// The line in `slot` leaves the partition other than as a victim.
    pub(crate) fn remove(&mut self, slot: Slot) {
        if self.is_out(slot) {
            self.set_out(slot, false);
        } else {
            self.policy.remove(slot);
        }
    }

    /// The line in `slot` became dirty: held out of the policy if dirty lines are.
    #[inline]
    pub(crate) fn became_dirty(&mut self, slot: Slot) {
        if self.holds_out_dirty && !self.is_out(slot) {
            self.policy.remove(slot);
            self.set_out(slot, true);
        }
    }

    /// The line in `slot` (holding `key`) became clean: back into the policy if it was held
    /// out, where the policy inserts new lines.
    #[inline]
    pub(crate) fn became_clean(&mut self, slot: Slot, key: LineKey) {
        if self.is_out(slot) {
            self.set_out(slot, false);
            self.policy.insert(slot, key);
        }
    }

    /// The policy's victim, passing over slots `pinned` answers true for (held-out lines are
    /// not candidates).
    #[inline]
    pub(crate) fn evict(
        &mut self,
        incoming: LineKey,
        pinned: &dyn Fn(Slot) -> bool,
    ) -> Option<Slot> {
        self.policy.evict(incoming, pinned)
    }

    /// Lines tracked: in the policy or held out.
    pub(crate) fn len(&self) -> usize {
        self.policy.len() + self.out_count
    }

    /// Lines held out of the policy.
    pub(crate) fn held_out(&self) -> usize {
        self.out_count
    }

    /// Capacity the policy adapts to.
    pub(crate) fn capacity(&self) -> usize {
        self.policy.capacity()
    }

    /// Sets the capacity the policy adapts to.
    pub(crate) fn set_capacity(&mut self, lines: usize) {
        self.policy.set_capacity(lines);
    }

    /// Heap bytes of the policy and the held-out bits.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.policy.memory_bytes() + self.out.len() * 8
    }

    /// Prefetch hint for `slot`'s entry in the policy.
    #[inline]
    pub(crate) fn prefetch(&self, slot: Slot) {
        self.policy.prefetch(slot);
    }

    /// The policy's likely next victims, for prefetching.
    #[inline]
    pub(crate) fn victim_hint(&self) -> Option<(Slot, Option<Slot>)> {
        self.policy.victim_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiercache_eviction::{build, EvictionKind};

    /// With dirty lines held out, the victim is the least recently used *clean* line found
    /// without a predicate, and a cleaned line re-enters at the most recently used end.
    #[test]
    fn lru_victims_are_clean_and_cleaned_lines_reenter_as_recent() {
        let mut o = ReplacementOrder::new(build(EvictionKind::Lru, 4, 4), 4, true);
        for s in 0..4 {
            o.insert(s, LineKey(s as u64), false);
        }
        o.became_dirty(0);
        o.became_dirty(1);
        assert_eq!(o.len(), 4);
        assert_eq!(o.held_out(), 2);
        o.hit(0); // no-op while held out
        assert_eq!(o.evict(LineKey(9), &|_| false), Some(2));
        o.became_clean(1, LineKey(1));
        assert_eq!(o.evict(LineKey(9), &|_| false), Some(3));
        assert_eq!(o.evict(LineKey(9), &|_| false), Some(1));
        assert_eq!(
            o.evict(LineKey(9), &|_| false),
            None,
            "only the dirty line is left"
        );
        o.remove(0);
        assert_eq!((o.len(), o.held_out()), (0, 0));
    }

    /// Without holding out, dirtiness changes nothing: one order.
    #[test]
    fn evict_then_write_keeps_one_order() {
        let mut o = ReplacementOrder::new(build(EvictionKind::Lru, 3, 3), 3, false);
        for s in 0..3 {
            o.insert(s, LineKey(s as u64), s == 0);
        }
        o.became_dirty(1);
        o.became_clean(1, LineKey(1));
        assert_eq!(o.held_out(), 0);
        assert_eq!(o.evict(LineKey(9), &|_| false), Some(0));
    }

    /// Holding dirty lines out works for every policy: with 9,999 of 10,000 lines dirty, the
    /// victim is the one clean line, found after at most 2 candidates (passing over dirty
    /// lines in the policy would have examined up to all of them).
    #[test]
    fn a_clean_victim_costs_the_same_however_many_lines_are_dirty() {
        const N: u32 = 10_000;
        for kind in EvictionKind::ALL {
            let mut o = ReplacementOrder::new(build(kind, N as usize, N as usize), N, true);
            let clean = N / 2;
            for s in 0..N {
                o.insert(s, LineKey(s as u64), false);
            }
            for s in (0..N).filter(|&s| s != clean) {
                o.became_dirty(s);
            }
            let calls = std::cell::Cell::new(0u32);
            let victim = o.evict(LineKey(u64::from(N)), &|_| {
                calls.set(calls.get() + 1);
                false
            });
            assert_eq!(victim, Some(clean), "{kind:?}");
            assert!(
                calls.get() <= 2,
                "{kind:?}: {} candidates examined",
                calls.get()
            );
            assert_eq!(o.len(), N as usize - 1);
        }
    }
}
