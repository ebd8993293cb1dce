//! W-TinyLFU (Einziger, Friedman & Manes, ACM TOS 2017; Caffeine's policy): a small LRU
//! window in front of a segmented-LRU main cache, with admission to main decided by a
//! frequency sketch.
//!
//! Sizes follow libCacheSim `WTinyLFU` defaults: the window holds 1 % of the capacity (here
//! `c - floor(0.99 c)`, so at least one line, as Caffeine rounds), main the rest, split as
//! libCacheSim's SLRU `seg-size=1:4`: probation 20 %, protected 80 %.
//! - every access (hit or miss) counts the key in a [`FrequencySketch`] sized for `c` keys;
//! - a miss enters the window's front; a window hit moves the line to the window's front;
//! - a probation hit moves the line to protected's front, demoting protected's least recent
//!   line to probation's front when protected exceeds its share; a protected hit moves it to
//!   protected's front;
//! - an eviction (the window overflows) takes the window's least recent line as the
//!   *candidate*: while main has room it simply moves to probation; otherwise it duels main's
//!   *victim* (probation's least recent line, protected's if probation is empty): the candidate
//!   is admitted to probation's front and the victim leaves if the candidate's estimate is
//!   strictly higher, else the candidate leaves. With the window below its share, main's victim
//!   leaves.
//!
//! Differences from libCacheSim, pinned by `tests/libcachesim_golden.rs` as a miss-ratio bound
//! rather than hit by hit: libCacheSim estimates with a minimal-increment counting Bloom filter
//! (its own hashing, error 0.001, decayed after `32 ×` main's size additions) whose estimates
//! cannot be reproduced with this sketch; it counts window hits not at all; and one eviction
//! there keeps moving window lines into main until a candidate loses a duel (so the window
//! drains), where Caffeine, followed here, holds one duel per eviction.
//!
//! Pinned slots are passed over: the candidate is the least recent unpinned window line, the
//! victim the least recent unpinned line of probation (then protected); when one side has no
//! unpinned line the other side's line leaves.
//!
//! [`Eviction::insert_cold`] puts the line at the window's back: it is the next candidate and
//! stays only if its frequency beats main's victim. [`Eviction::insert_demoted`] keeps the
//! default (the window's front). [`Eviction::set_capacity`] re-splits window and segments; the
//! sketch keeps its width (sized at build), so nothing is allocated.

use crate::list::Lists;
use crate::sketch::FrequencySketch;
use crate::{Eviction, Slot};
use tiercache_core::LineKey;

const WINDOW: u8 = 0;
const PROBATION: u8 = 1;
const PROTECTED: u8 = 2;

/// Window-TinyLFU replacement.
#[derive(Debug, Clone)]
pub struct WTinyLfu {
    lists: Lists<3>,
    /// Which list holds each slot.
    list_of: Vec<u8>,
    /// Key of each resident slot (the sketch counts keys).
    keys: Vec<u64>,
    sketch: FrequencySketch,
    capacity: usize,
    window_capacity: usize,
    protected_capacity: usize,
}

impl WTinyLfu {
    /// An empty W-TinyLFU of `capacity` lines over slots `< slot_limit`.
    pub fn new(capacity: usize, slot_limit: usize) -> Self {
        let mut p = WTinyLfu {
            lists: Lists::new(slot_limit),
            list_of: vec![WINDOW; slot_limit],
            keys: vec![0; slot_limit],
            sketch: FrequencySketch::new(capacity),
            capacity: 0,
            window_capacity: 0,
            protected_capacity: 0,
        };
        p.set_capacity(capacity);
        p
    }

    /// Lines in the window, probation and protected.
    pub fn segment_sizes(&self) -> [usize; 3] {
        [
            self.lists.len(WINDOW as usize),
            self.lists.len(PROBATION as usize),
            self.lists.len(PROTECTED as usize),
        ]
    }

    fn main_len(&self) -> usize {
        self.lists.len(PROBATION as usize) + self.lists.len(PROTECTED as usize)
    }

    /// Moves `slot` (in list `from`) to the front of `to`.
    #[inline]
    fn move_to(&mut self, slot: Slot, from: u8, to: u8) {
        self.lists.move_to_front(from as usize, to as usize, slot);
        self.list_of[slot as usize] = to;
    }

    /// Main's victim: least recent unpinned line of probation, else of protected.
    fn main_victim(&self, pinned: &dyn Fn(Slot) -> bool) -> Option<(u8, Slot)> {
        self.lists
            .oldest_unpinned(PROBATION as usize, pinned)
            .map(|s| (PROBATION, s))
            .or_else(|| {
                self.lists
                    .oldest_unpinned(PROTECTED as usize, pinned)
                    .map(|s| (PROTECTED, s))
            })
    }

    fn take(&mut self, list: u8, slot: Slot) -> Option<Slot> {
        self.lists.unlink(list as usize, slot);
        Some(slot)
    }
}

impl Eviction for WTinyLfu {
    fn name(&self) -> &'static str {
        "w-tinylfu"
    }

    fn insert(&mut self, slot: Slot, key: LineKey) {
        self.sketch.increment(key.0);
        self.keys[slot as usize] = key.0;
        self.list_of[slot as usize] = WINDOW;
        self.lists.push_front(WINDOW as usize, slot);
    }

    #[inline]
    fn hit(&mut self, slot: Slot) {
        self.sketch.increment(self.keys[slot as usize]);
        match self.list_of[slot as usize] {
            WINDOW => self.move_to(slot, WINDOW, WINDOW),
            PROBATION => {
                self.move_to(slot, PROBATION, PROTECTED);
                if self.lists.len(PROTECTED as usize) > self.protected_capacity {
                    if let Some(old) = self.lists.back(PROTECTED as usize) {
                        self.move_to(old, PROTECTED, PROBATION);
                    }
                }
            }
            _ => self.move_to(slot, PROTECTED, PROTECTED),
        }
    }

    fn remove(&mut self, slot: Slot) {
        if self.lists.is_linked(slot) {
            self.lists
                .unlink(self.list_of[slot as usize] as usize, slot);
        }
    }

    fn evict(&mut self, _incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        let main_capacity = self.capacity - self.window_capacity;
        // The incoming line will enter the window: while it is at (or above) its share, its
        // least recent lines move on, to main while main has room.
        while self.lists.len(WINDOW as usize) >= self.window_capacity.max(1)
            && self.main_len() < main_capacity
        {
            let Some(c) = self.lists.oldest_unpinned(WINDOW as usize, pinned) else {
                break;
            };
            self.move_to(c, WINDOW, PROBATION);
        }
        let candidate = if self.lists.len(WINDOW as usize) >= self.window_capacity.max(1) {
            self.lists.oldest_unpinned(WINDOW as usize, pinned)
        } else {
            None
        };
        let victim = self.main_victim(pinned);
        match (candidate, victim) {
            (Some(c), Some((list, v))) => {
                let admit = self.sketch.estimate(self.keys[c as usize])
                    > self.sketch.estimate(self.keys[v as usize]);
                if admit {
                    self.move_to(c, WINDOW, PROBATION);
                    self.take(list, v)
                } else {
                    self.take(WINDOW, c)
                }
            }
            (Some(c), None) => self.take(WINDOW, c),
            (None, Some((list, v))) => self.take(list, v),
            // The window is below its share and main has nothing unpinned: any window line.
            (None, None) => {
                let c = self.lists.oldest_unpinned(WINDOW as usize, pinned)?;
                self.take(WINDOW, c)
            }
        }
    }

    fn len(&self) -> usize {
        self.lists.len(WINDOW as usize) + self.main_len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    /// Window `c - floor(0.99 c)`, protected `floor(0.8 × main)`, probation the rest (at most
    /// the slot limit). Lines stay where they are; evictions bring the segments back.
    fn set_capacity(&mut self, lines: usize) {
        let c = lines.min(self.keys.len());
        self.capacity = c;
        self.window_capacity = c - (c as f64 * 0.99) as usize;
        let main = c - self.window_capacity;
        self.protected_capacity = (main as f64 * 0.8) as usize;
    }

    /// At the window's back: the next candidate, admitted to main only on frequency.
    fn insert_cold(&mut self, slot: Slot, key: LineKey) {
        self.sketch.increment(key.0);
        self.keys[slot as usize] = key.0;
        self.list_of[slot as usize] = WINDOW;
        self.lists.push_back(WINDOW as usize, slot);
    }

    fn memory_bytes(&self) -> usize {
        self.lists.memory_bytes()
            + self.list_of.capacity()
            + self.keys.capacity() * 8
            + self.sketch.memory_bytes()
    }

    fn grow_slots(&mut self, slot_limit: usize) {
        if slot_limit > self.keys.len() {
            self.lists.grow(slot_limit);
            self.list_of.resize(slot_limit, WINDOW);
            self.keys.resize(slot_limit, 0);
        }
    }

    #[inline]
    fn prefetch(&self, slot: Slot) {
        self.lists.prefetch(slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNPINNED: &dyn Fn(Slot) -> bool = &|_| false;

    #[test]
    fn segments_follow_the_default_split() {
        let p = WTinyLfu::new(1000, 1000);
        assert_eq!((p.window_capacity, p.protected_capacity), (10, 792));
        let p = WTinyLfu::new(20, 20);
        assert_eq!((p.window_capacity, p.protected_capacity), (1, 15));
    }

    #[test]
    fn frequent_candidate_displaces_main_victim_rare_one_does_not() {
        // 10 lines: window 1, main 9.
        let mut p = WTinyLfu::new(10, 10);
        for s in 0..10 {
            p.insert(s, LineKey(s as u64));
        }
        // Inserting fills the window, then every eviction moves window lines to main.
        assert_eq!(p.segment_sizes(), [10, 0, 0]);
        let v = p.evict(LineKey(100), UNPINNED).unwrap();
        // Main filled with 0..8 (9 lines); slot 9 duels slot 0: equal counts, 9 leaves.
        assert_eq!(v, 9);
        p.insert(v, LineKey(100));
        // Key 100 seen three more times before its duel: it wins against probation's back.
        for _ in 0..3 {
            p.hit(v);
        }
        let v2 = p.evict(LineKey(101), UNPINNED).unwrap();
        assert_eq!(
            v2, 0,
            "probation's least recent line loses to the frequent candidate"
        );
        assert_eq!(p.segment_sizes(), [0, 9, 0]);
    }

    #[test]
    fn probation_hit_promotes_and_protected_overflow_demotes() {
        let mut p = WTinyLfu::new(10, 10);
        for s in 0..10 {
            p.insert(s, LineKey(s as u64));
        }
        let v = p.evict(LineKey(100), UNPINNED).unwrap();
        p.insert(v, LineKey(100));
        // Protected holds floor(0.8 × 9) = 7.
        for s in 0..8 {
            p.hit(s);
        }
        assert_eq!(p.segment_sizes(), [1, 2, 7]);
        assert_eq!(
            p.lists.front(PROBATION as usize),
            Some(0),
            "demoted to probation's front"
        );
    }

    #[test]
    fn pinned_lines_are_passed_over() {
        let mut p = WTinyLfu::new(4, 4);
        for s in 0..4 {
            p.insert(s, LineKey(s as u64));
        }
        let mut left = vec![];
        while let Some(s) = p.evict(crate::NO_INCOMING, &|s| s == 2) {
            left.push(s);
        }
        left.sort();
        assert_eq!(left, vec![0, 1, 3]);
        assert_eq!(p.len(), 1);
    }
}
