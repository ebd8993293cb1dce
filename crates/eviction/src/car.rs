//! CAR, CLOCK with adaptive replacement (Bansal & Modha, FAST '04): ARC's adaptation over two
//! CLOCKs, so a hit only sets a reference bit.
//!
//! Resident lines sit in T1 (seen once recently) or T2 (seen again), each a CLOCK whose hand
//! is its oldest line; the keys of lines evicted from them are remembered in the LRU ghost
//! lists B1 and B2. A target size `p` for T1 adapts on ghost hits. Exactly the paper's Fig. 2,
//! object counts standing for pages:
//! - a hit sets the line's reference bit;
//! - a miss with the cache full runs REPLACE: while the chosen clock's hand line is
//!   referenced, clear its bit and move it to the tail (newest end) of T2; the first
//!   unreferenced one leaves, its key at the front of B1 (from T1) or B2 (from T2). The
//!   chosen clock is T1 when `|T1| >= max(1, p)`, else T2;
//! - then, if the incoming key is in neither ghost list: drop B1's oldest key when
//!   `|T1| + |B1| = c`, else B2's oldest when the directory holds `2c` entries;
//! - the incoming line enters T1's tail, or, if its key was a ghost, T2's tail after adapting
//!   `p`: a B1 hit adds `max(1, |B2| / |B1|)` (at most `c`), a B2 hit subtracts
//!   `max(1, |B1| / |B2|)` (at least 0), sizes counted before the key leaves its list and the
//!   quotient an integer one (as libCacheSim computes it).
//!
//! Why the golden test pins this against ARC and not against libCacheSim's CAR: the PyPI
//! package does not expose CAR, and its C code differs from the paper in ways that change
//! results and memory: a B2 hit does not mark the request as a ghost hit (the line enters T1),
//! and ghost keys are discarded only after a B1 hit, so its ghost lists grow without bound.
//! CAR's claim is ARC's hit ratio with CLOCK's hits, so `tests/libcachesim_golden.rs` bounds
//! CAR's miss ratio against libCacheSim's ARC on the same streams.
//!
//! The incoming key is looked up (and leaves its ghost list) in [`Eviction::evict`]; `p`
//! adapts at the following [`Eviction::insert`], after REPLACE, as in the paper. Pinned lines
//! are passed over: a pinned unreferenced hand line is moved to its own clock's tail with its
//! bit unchanged; when a whole clock holds only pinned unreferenced lines REPLACE uses the
//! other; `None` when both do. [`Eviction::insert_cold`] puts the line at T1's hand
//! (unreferenced; a ghost key leaves its list without adapting `p`), the next victim while T1
//! is at or above its target.

use crate::ghost::Ghosts;
use crate::ring::{stale_bits, Clocks, LIST, RESIDENT};
use crate::{Eviction, Slot, NO_INCOMING};
use tiercache_core::LineKey;

const T1: usize = 0;
const T2: usize = 1;
const B1: usize = 0;
const B2: usize = 1;
/// [`Car::flags`] bit: the slot is in T2 (the clock bit of `ring.rs`'s layout).
const IN_T2: u8 = LIST;
/// [`Car::flags`] bit: the reference bit.
const REFERENCED: u8 = 2;

/// CLOCK with adaptive replacement.
#[derive(Debug, Clone)]
pub struct Car {
    /// T1 and T2, each a ring of slots from its hand to its newest line (docs/design.md §4.4).
    clocks: Clocks,
    /// Per slot: [`IN_T2`], [`REFERENCED`], and [`Clocks`]' residency and stale counts.
    flags: Vec<u8>,
    /// Key of each resident slot (remembered in a ghost list when it leaves).
    keys: Vec<u64>,
    ghosts: Ghosts<2>,
    /// Target size of T1, in lines.
    p: usize,
    capacity: usize,
    /// Ghost lookup of the last `evict`: (incoming key, ghost list it was in).
    pending: Option<(u64, Option<usize>)>,
}

impl Car {
    /// An empty CAR of `capacity` lines over slots `< slot_limit`.
    pub fn new(capacity: usize, slot_limit: usize) -> Self {
        Car {
            clocks: Clocks::new(slot_limit),
            flags: vec![0; slot_limit],
            keys: vec![0; slot_limit],
            // |T1| + |B1| <= c and the directory <= 2c with c resident: B1 + B2 <= c.
            ghosts: Ghosts::new(capacity),
            p: 0,
            capacity,
            pending: None,
        }
    }

    /// Target size of T1 (for tests and diagnostics).
    pub fn target_t1(&self) -> usize {
        self.p
    }

    /// Sizes |T1|, |T2|, |B1|, |B2|.
    pub fn list_sizes(&self) -> [usize; 4] {
        [
            self.clocks.len(T1),
            self.clocks.len(T2),
            self.ghosts.len(B1),
            self.ghosts.len(B2),
        ]
    }

    /// Adapts `p` for a ghost hit in `list`, sizes counted with the key still in it.
    fn adapt(&mut self, list: usize) {
        let b1 = self.ghosts.len(B1) + (list == B1) as usize;
        let b2 = self.ghosts.len(B2) + (list == B2) as usize;
        if list == B1 {
            self.p = (self.p + (b2 / b1).max(1)).min(self.capacity);
        } else {
            self.p = self.p.saturating_sub((b1 / b2).max(1));
        }
    }

    /// REPLACE: the victim, its key remembered in B1 or B2.
    fn replace(&mut self, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        // Pinned unreferenced lines passed over in each clock since the last bit cleared:
        // a clock whose every line was passed over is closed (bounds the loop).
        let mut rotated = [0usize; 2];
        loop {
            let t1 = self.clocks.len(T1);
            let open = |list: usize| {
                let n = self.clocks.len(list);
                n > 0 && rotated[list] < n
            };
            let (t1_open, t2_open) = (open(T1), open(T2));
            if !t1_open && !t2_open {
                return None;
            }
            let list = if t1 >= self.p.max(1) {
                if t1_open {
                    T1
                } else {
                    T2
                }
            } else if t2_open {
                T2
            } else {
                T1
            };
            let hand = self.clocks.hand(&mut self.flags, list)?;
            self.clocks.pop(list);
            let f = self.flags[hand as usize];
            if f & REFERENCED != 0 {
                self.flags[hand as usize] = stale_bits(f) | RESIDENT | IN_T2;
                self.clocks.push(&mut self.flags, T2, hand);
                rotated = [0, 0];
            } else if pinned(hand) {
                self.clocks.push(&mut self.flags, list, hand);
                rotated[list] += 1;
            } else {
                self.flags[hand as usize] = stale_bits(f);
                let ghost = if list == T1 { B1 } else { B2 };
                self.ghosts
                    .push_front(ghost, LineKey(self.keys[hand as usize]));
                return Some(hand);
            }
        }
    }
}

impl Eviction for Car {
    fn name(&self) -> &'static str {
        "car"
    }

    fn insert(&mut self, slot: Slot, key: LineKey) {
        let ghost = match self.pending.take() {
            Some((k, found)) if k == key.0 => found,
            _ => self.ghosts.remove(key),
        };
        self.keys[slot as usize] = key.0;
        let f = stale_bits(self.flags[slot as usize]);
        if let Some(list) = ghost {
            self.adapt(list);
            self.flags[slot as usize] = f | RESIDENT | IN_T2;
            self.clocks.push(&mut self.flags, T2, slot);
        } else {
            self.flags[slot as usize] = f | RESIDENT;
            self.clocks.push(&mut self.flags, T1, slot);
        }
    }

    #[inline]
    fn hit(&mut self, slot: Slot) {
        self.flags[slot as usize] |= REFERENCED;
    }

    /// The slot's entry stays in its ring, stale (skipped by the hand; `ring.rs`).
    fn remove(&mut self, slot: Slot) {
        self.clocks.remove(&mut self.flags, slot);
    }

    fn evict(&mut self, incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        if incoming == NO_INCOMING {
            return self.replace(pinned);
        }
        // Several evictions for one incoming line share one lookup (and one directory
        // replacement: the first).
        let (ghost, first) = match self.pending {
            Some((k, found)) if k == incoming.0 => (found, false),
            _ => (self.ghosts.remove(incoming), true),
        };
        self.pending = Some((incoming.0, ghost));
        let victim = self.replace(pinned)?;
        if first && ghost.is_none() {
            let [t1, t2, b1, b2] = self.list_sizes();
            if t1 + b1 >= self.capacity {
                self.ghosts.pop_back(B1);
            } else if t1 + t2 + b1 + b2 >= 2 * self.capacity {
                self.ghosts.pop_back(B2);
            }
        }
        Some(victim)
    }

    #[inline]
    fn prefetch_incoming(&self, key: LineKey) {
        self.ghosts.prefetch(key);
    }

    /// A hit sets a bit in the slot's flag byte: that is what to load.
    #[inline]
    fn prefetch(&self, slot: Slot) {
        tiercache_core::hint::prefetch(self.flags.as_ptr().wrapping_add(slot as usize));
    }

    /// The entry at the hand of the clock REPLACE starts on and the one after it (a guess: a
    /// referenced hand line goes round, a stale entry is skipped). Also starts loading the
    /// next entry's key, the ghost bucket the victim's key goes to, the ghost key a miss
    /// without a ghost hit would drop (B1's oldest when `|T1| + |B1| >= c`, else B2's) and
    /// the ring a few entries on.
    #[inline]
    fn victim_hint(&self) -> Option<(Slot, Option<Slot>)> {
        let t1 = self.clocks.len(T1);
        let mut list = if t1 >= self.p.max(1) { T1 } else { T2 };
        if self.clocks.len(list) == 0 {
            list = 1 - list;
        }
        let ring = self.clocks.ring(list);
        let (v, then) = self.clocks.live_front(&self.flags, list)?;
        if let Some(t) = then {
            tiercache_core::hint::prefetch(self.keys.as_ptr().wrapping_add(t as usize));
        }
        ring.prefetch(16);
        self.ghosts.prefetch(LineKey(self.keys[v as usize]));
        let b1 = self.ghosts.len(B1);
        self.ghosts
            .prefetch_oldest(if t1 + b1 >= self.capacity { B1 } else { B2 });
        Some((v, then))
    }

    fn len(&self) -> usize {
        self.clocks.len(T1) + self.clocks.len(T2)
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    /// `c` becomes `lines` (at most the slot limit); `p` is clamped to it and the ghosts are
    /// bounded by it (oldest keys of the longer list dropped). The caller evicts the excess.
    fn set_capacity(&mut self, lines: usize) {
        self.capacity = lines.min(self.flags.len());
        self.p = self.p.min(self.capacity);
        self.ghosts.set_limit(self.capacity);
    }

    /// At T1's hand, unreferenced; the key leaves any ghost list without adapting `p`.
    fn insert_cold(&mut self, slot: Slot, key: LineKey) {
        if !matches!(self.pending.take(), Some((k, _)) if k == key.0) {
            self.ghosts.remove(key);
        }
        self.keys[slot as usize] = key.0;
        self.flags[slot as usize] = stale_bits(self.flags[slot as usize]) | RESIDENT;
        self.clocks.push_front(&mut self.flags, T1, slot);
    }

    fn memory_bytes(&self) -> usize {
        self.clocks.memory_bytes()
            + self.flags.capacity()
            + self.keys.capacity() * 8
            + self.ghosts.memory_bytes()
    }

    fn grow_slots(&mut self, slot_limit: usize) {
        if slot_limit > self.flags.len() {
            self.clocks = self.clocks.grown(slot_limit);
            self.flags.resize(slot_limit, 0);
            self.keys.resize(slot_limit, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNPINNED: &dyn Fn(Slot) -> bool = &|_| false;

    #[test]
    fn referenced_lines_move_to_t2_and_ghost_hits_adapt() {
        let mut p = Car::new(4, 6);
        for s in 0..4 {
            p.insert(s, LineKey(s as u64));
        }
        p.hit(0);
        // T1 = [0*, 1, 2, 3] (hand first): 0 is referenced and moves to T2; 1 leaves to B1.
        assert_eq!(p.evict(LineKey(10), UNPINNED), Some(1));
        p.insert(1, LineKey(10));
        assert_eq!(p.list_sizes(), [3, 1, 1, 0]);
        // Key 1 returns: a B1 hit, p grows by max(1, 0/1) = 1 and it enters T2.
        let v = p.evict(LineKey(1), UNPINNED).unwrap();
        assert_eq!(v, 2);
        p.insert(v, LineKey(1));
        assert_eq!(p.target_t1(), 1);
        assert_eq!(p.list_sizes(), [2, 2, 1, 0]);
    }

    #[test]
    fn all_pinned_gives_none() {
        let mut p = Car::new(3, 3);
        for s in 0..3 {
            p.insert(s, LineKey(s as u64));
        }
        p.hit(1);
        assert_eq!(p.evict(LineKey(9), &|_| true), None);
        assert_eq!(p.len(), 3);
        assert_eq!(p.evict(LineKey(9), &|s| s != 1), Some(1));
    }
}
