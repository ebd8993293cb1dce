//! SLRU (segmented LRU, Karedla et al. 1994) with libCacheSim's default four segments.
//!
//! Follows libCacheSim `SLRU` with its defaults: four LRU segments of `floor(c / 4)` lines
//! each, segment 0 the lowest (probation), 3 the highest (protected).
//! - a new line enters the front of the lowest segment with room; if every segment is full it
//!   enters segment 0 (after the core's eviction made room);
//! - a hit in segment 3 moves the line to that segment's front; a hit in a lower segment moves
//!   it to the front of the next segment up, and while that segment holds more than its share
//!   its back line is *cooled* to the front of the segment below, and so on downwards;
//! - the victim is the back line of the lowest non-empty segment.
//!
//! One difference from libCacheSim, pinned by tests/libcachesim_golden.rs: when `c` is not a
//! multiple of 4 the segments hold `4 floor(c / 4) < c` lines together, so segment 0 takes the
//! remainder beyond its share. libCacheSim then cools a line into an over-full segment 0 by
//! *evicting* its back line during a hit, which leaves the cache below its size until the next
//! misses; a policy here never evicts on a hit (the core owns residency, [`Eviction`]), so
//! segment 0 simply stays over its share. With `c` a multiple of 4 segment 0 never exceeds its
//! share and the two agree request by request. A second difference, also pinned: libCacheSim's
//! `SLRU_remove` does not lower the segment's counts, so after a removal its segments count a
//! line they no longer hold; [`Eviction::remove`] here frees the room.
//!
//! Pinned slots are passed over: the victim is the oldest unpinned line of the lowest segment
//! holding one. [`Eviction::insert_cold`] puts the line at the *back* of the segment `insert`
//! would choose (segment 0 once the cache has filled: the next victim). [`Eviction::set_capacity`]
//! re-derives the four shares; lines stay where they are (evictions take the lowest segment
//! first and later cooling brings the segments back to their shares).

use crate::list::Lists;
use crate::{Eviction, Slot};
use tiercache_core::LineKey;

/// Number of segments (libCacheSim's default `n-seg=4`).
const SEGMENTS: usize = 4;
const TOP: usize = SEGMENTS - 1;

/// Segmented-LRU replacement.
#[derive(Debug, Clone)]
pub struct Slru {
    lists: Lists<SEGMENTS>,
    /// Segment of each slot.
    segment: Vec<u8>,
    /// Lines each segment holds before cooling pushes its back line down.
    share: usize,
    capacity: usize,
}

impl Slru {
    /// An empty policy of `capacity` lines for slots `< slot_limit`.
    pub fn new(capacity: usize, slot_limit: usize) -> Self {
        let mut p = Slru {
            lists: Lists::new(slot_limit),
            segment: vec![0; slot_limit],
            share: 0,
            capacity: 0,
        };
        p.set_capacity(capacity);
        p
    }

    /// Lines in each segment, lowest first.
    pub fn segment_sizes(&self) -> [usize; SEGMENTS] {
        std::array::from_fn(|i| self.lists.len(i))
    }

    /// Moves segment `id`'s back line to the front of segment `id - 1`, then cools that
    /// segment while it holds more than its share, as libCacheSim's `SLRU_cool` recursion
    /// does (depth at most 3); segment 0 absorbs what comes down (see the module doc).
    fn cool(&mut self, id: usize) {
        let back = self.lists.back(id).expect("over-full segment has a back");
        self.segment[back as usize] = (id - 1) as u8;
        self.lists.move_to_front(id, id - 1, back);
        while id > 1 && self.lists.len(id - 1) > self.share {
            self.cool(id - 1);
        }
    }

    /// The segment a new line enters: the lowest with room, else 0.
    #[inline]
    fn entry_segment(&self) -> usize {
        (0..SEGMENTS)
            .find(|&i| self.lists.len(i) < self.share)
            .unwrap_or(0)
    }
}

impl Eviction for Slru {
    fn name(&self) -> &'static str {
        "slru"
    }

    #[inline]
    fn insert(&mut self, slot: Slot, _key: LineKey) {
        let seg = self.entry_segment();
        self.segment[slot as usize] = seg as u8;
        self.lists.push_front(seg, slot);
    }

    #[inline]
    fn hit(&mut self, slot: Slot) {
        let seg = self.segment[slot as usize] as usize;
        if seg == TOP {
            self.lists.move_to_front(TOP, TOP, slot);
            return;
        }
        let up = seg + 1;
        self.segment[slot as usize] = up as u8;
        self.lists.move_to_front(seg, up, slot);
        while self.lists.len(up) > self.share {
            self.cool(up);
        }
    }

    fn remove(&mut self, slot: Slot) {
        if self.lists.is_linked(slot) {
            self.lists
                .unlink(self.segment[slot as usize] as usize, slot);
        }
    }

    #[inline]
    fn evict(&mut self, _incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        for seg in 0..SEGMENTS {
            if let Some(victim) = self.lists.oldest_unpinned(seg, pinned) {
                self.lists.unlink(seg, victim);
                return Some(victim);
            }
        }
        None
    }

    #[inline]
    fn prefetch(&self, slot: Slot) {
        self.lists.prefetch(slot);
    }

    #[inline]
    fn victim_hint(&self) -> Option<(Slot, Option<Slot>)> {
        let seg = (0..SEGMENTS).find(|&i| self.lists.len(i) > 0)?;
        let v = self.lists.back(seg)?;
        Some((v, self.lists.newer(v)))
    }

    fn len(&self) -> usize {
        (0..SEGMENTS).map(|i| self.lists.len(i)).sum()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    /// Each segment's share becomes `floor(lines / 4)` (lines at most the slot limit).
    fn set_capacity(&mut self, lines: usize) {
        self.capacity = lines.min(self.lists.slot_limit());
        self.share = self.capacity / SEGMENTS;
    }

    /// At the back of the segment [`Eviction::insert`] would choose.
    #[inline]
    fn insert_cold(&mut self, slot: Slot, _key: LineKey) {
        let seg = self.entry_segment();
        self.segment[slot as usize] = seg as u8;
        self.lists.push_back(seg, slot);
    }

    fn memory_bytes(&self) -> usize {
        self.lists.memory_bytes() + self.segment.capacity()
    }

    fn grow_slots(&mut self, slot_limit: usize) {
        if slot_limit > self.segment.len() {
            self.lists.grow(slot_limit);
            self.segment.resize(slot_limit, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_climb_one_segment_per_hit_and_cool_down() {
        // Shares of 2 lines.
        let mut p = Slru::new(8, 8);
        for s in 0..8 {
            p.insert(s, LineKey(s as u64));
        }
        assert_eq!(p.segment_sizes(), [2, 2, 2, 2]);
        // Slot 0 (segment 0) climbs to 1; segment 1's back (slot 2) cools to segment 0.
        p.hit(0);
        assert_eq!(p.segment_sizes(), [2, 2, 2, 2]);
        assert_eq!(p.segment[0], 1);
        assert_eq!(p.segment[2], 0);
        // The victim is segment 0's back: slot 1 (slot 2 entered its front).
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(1));
        // Segment 0 holds only the pinned slot 2: segment 1's back goes.
        assert_eq!(p.evict(LineKey(9), &|s| s == 2), Some(3));
    }
}
