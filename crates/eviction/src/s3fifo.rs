//! S3-FIFO (Yang et al., SOSP '23): a small FIFO, a main FIFO and a ghost FIFO.
//!
//! Follows libCacheSim `S3FIFO` with its defaults: the small queue gets
//! `floor(0.10 c)` lines, main the rest, the ghost remembers `floor(0.90 c)` keys.
//! - a miss whose key is in the ghost enters main (and leaves the ghost); any other miss
//!   enters small, except that before the first eviction a miss finding small full enters
//!   main (see [`S3FifoConfig::fill_main_before_first_eviction`]); every hit increments the
//!   line's counter (kept at most 3);
//! - eviction works on main when main holds more than its share or small is empty, else on
//!   small;
//! - small evicts from its back: a line with counter >= `move_to_main_threshold` (default 2,
//!   i.e. at least two hits while in small) moves to main's front with counter 0 and the
//!   scan goes on; the first other line is evicted and its key enters the ghost (dropping the
//!   ghost's oldest key when full). If small empties without a victim, main evicts;
//! - main is a CLOCK with a 2-bit counter: its back line, if its counter is non-zero, goes to
//!   the front with `min(counter, 3) - 1`, else it is evicted (no ghost entry).
//!
//! The incoming key given to [`Eviction::evict`] is looked up (and removed) in the ghost
//! before any victim is chosen, as libCacheSim's lookup precedes its eviction; further
//! evictions for the same key and the following [`Eviction::insert`] reuse that answer.
//!
//! One deliberate difference: libCacheSim refuses to insert an object whose size is not
//! below the small queue's, so with unit objects its S3-FIFO caches nothing below 20 objects
//! (and refuses to start below 10); here every line is admitted whatever the capacity.
//!
//! Pinned slots are passed over: in small a pinned line that would be evicted is moved to
//! small's front; in main it is moved to main's front with its counter unchanged.
//!
//! [`Eviction::insert_cold`] is `insert`: which queue evicts next depends on the queues'
//! sizes, and a ghost hit sends a line to main whatever the caller's intent.

use crate::ghost::Ghosts;
use crate::list::Lists;
use crate::{Eviction, Slot, NO_INCOMING};
use tiercache_core::LineKey;

const SMALL: usize = 0;
const MAIN: usize = 1;
/// Bit of [`S3Fifo::meta`] set for slots in main; the low bits hold the counter.
const IN_MAIN: u8 = 0x80;
const COUNTER: u8 = 0x7f;
/// Hits counted per line, as libCacheSim's main queue uses (`min(freq, 3)`).
const MAX_COUNTER: u8 = 3;

/// Tunables of [`S3Fifo`]; [`Default`] gives libCacheSim's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct S3FifoConfig {
    /// Share of the capacity given to the small queue (default 0.10).
    pub small_ratio: f64,
    /// Ghost size as a share of the capacity (default 0.90).
    pub ghost_ratio: f64,
    /// Hits a line needs while in small to be moved to main (default 2, at most 3).
    pub move_to_main_threshold: u8,
    /// Before the first eviction, send new lines to main once small is full (on by default).
    /// libCacheSim does this since December 2024 (the `libcachesim` 0.3.5 Python package,
    /// checked request by request in tests/libcachesim_golden.rs); older versions kept
    /// inserting into small until the cache was full.
    pub fill_main_before_first_eviction: bool,
}

impl Default for S3FifoConfig {
    fn default() -> Self {
        S3FifoConfig {
            small_ratio: 0.10,
            ghost_ratio: 0.90,
            move_to_main_threshold: 2,
            fill_main_before_first_eviction: true,
        }
    }
}

/// S3-FIFO replacement.
#[derive(Debug, Clone)]
pub struct S3Fifo {
    lists: Lists<2>,
    /// Per slot: [`IN_MAIN`] bit and hit counter.
    meta: Vec<u8>,
    /// Key of each resident slot (needed to remember it in the ghost).
    keys: Vec<u64>,
    ghost: Ghosts<1>,
    small_capacity: usize,
    main_capacity: usize,
    config: S3FifoConfig,
    has_evicted: bool,
    /// Ghost lookup made by the last `evict`: (incoming key, found).
    pending: Option<(u64, bool)>,
}

impl S3Fifo {
    /// S3-FIFO with libCacheSim's default parameters.
    pub fn new(capacity: usize, slot_limit: usize) -> Self {
        Self::with_config(capacity, slot_limit, S3FifoConfig::default())
    }

    /// S3-FIFO with explicit parameters (ratios are clamped to `0..=1`).
    pub fn with_config(capacity: usize, slot_limit: usize, config: S3FifoConfig) -> Self {
        let (small_capacity, main_capacity, ghost_capacity) = Self::split(capacity, &config);
        let config = S3FifoConfig {
            move_to_main_threshold: config.move_to_main_threshold.min(MAX_COUNTER),
            ..config
        };
        S3Fifo {
            lists: Lists::new(slot_limit),
            meta: vec![0; slot_limit],
            keys: vec![0; slot_limit],
            ghost: Ghosts::new(ghost_capacity),
            small_capacity,
            main_capacity,
            config,
            has_evicted: false,
            pending: None,
        }
    }

    /// Small-queue lines, main-queue lines and ghost keys for a capacity of `capacity` lines.
    fn split(capacity: usize, config: &S3FifoConfig) -> (usize, usize, usize) {
        // Same arithmetic as libCacheSim (truncation of a double product), so sizes agree.
        let small = (capacity as f64 * config.small_ratio.clamp(0.0, 1.0)) as usize;
        let ghost = (capacity as f64 * config.ghost_ratio.clamp(0.0, 1.0)) as usize;
        (small, capacity - small, ghost)
    }

    /// Lines in the small and the main queue, and keys in the ghost.
    pub fn queue_sizes(&self) -> [usize; 3] {
        [
            self.lists.len(SMALL),
            self.lists.len(MAIN),
            self.ghost.total_len(),
        ]
    }

    #[inline]
    fn counter(&self, slot: Slot) -> u8 {
        self.meta[slot as usize] & COUNTER
    }

    /// Whether the next eviction works on main first: main holds more than its share, or
    /// small is empty.
    #[inline]
    fn evicts_from_main(&self) -> bool {
        self.lists.len(MAIN) > self.main_capacity || self.lists.len(SMALL) == 0
    }

    /// Evicts from small; `None` if small empties (into main) or holds only pinned lines.
    fn evict_small(&mut self, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        let mut passed_pinned = 0;
        while let Some(tail) = self.lists.back(SMALL) {
            if self.counter(tail) >= self.config.move_to_main_threshold {
                self.meta[tail as usize] = IN_MAIN;
                self.lists.move_to_front(SMALL, MAIN, tail);
            } else if pinned(tail) {
                if passed_pinned >= self.lists.len(SMALL) {
                    return None;
                }
                passed_pinned += 1;
                self.lists.move_to_front(SMALL, SMALL, tail);
            } else {
                self.lists.unlink(SMALL, tail);
                self.ghost.push_front(0, LineKey(self.keys[tail as usize]));
                return Some(tail);
            }
        }
        None
    }

    /// Evicts from main; `None` if main is empty or holds only pinned lines.
    fn evict_main(&mut self, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        // Each pass lowers every counter by one: after MAX_COUNTER + 1 passes an unpinned
        // line has been found if there is one.
        let max_steps = (MAX_COUNTER as usize + 1) * self.lists.len(MAIN);
        for _ in 0..max_steps {
            let tail = self.lists.back(MAIN)?;
            let counter = self.counter(tail);
            if counter > 0 {
                self.meta[tail as usize] = IN_MAIN | (counter.min(MAX_COUNTER) - 1);
            } else if !pinned(tail) {
                self.lists.unlink(MAIN, tail);
                return Some(tail);
            }
            self.lists.move_to_front(MAIN, MAIN, tail);
        }
        None
    }
}

impl Eviction for S3Fifo {
    fn name(&self) -> &'static str {
        "s3-fifo"
    }

    fn insert(&mut self, slot: Slot, key: LineKey) {
        let ghost_hit = match self.pending.take() {
            Some((k, found)) if k == key.0 => found,
            _ => self.ghost.remove(key).is_some(),
        };
        self.keys[slot as usize] = key.0;
        let to_main = ghost_hit
            || (self.config.fill_main_before_first_eviction
                && !self.has_evicted
                && self.lists.len(SMALL) >= self.small_capacity);
        if to_main {
            self.meta[slot as usize] = IN_MAIN;
            self.lists.push_front(MAIN, slot);
        } else {
            self.meta[slot as usize] = 0;
            self.lists.push_front(SMALL, slot);
        }
    }

    #[inline]
    fn hit(&mut self, slot: Slot) {
        let m = &mut self.meta[slot as usize];
        if *m & COUNTER < MAX_COUNTER {
            *m += 1;
        }
    }

    fn remove(&mut self, slot: Slot) {
        if self.lists.is_linked(slot) {
            let list = if self.meta[slot as usize] & IN_MAIN != 0 {
                MAIN
            } else {
                SMALL
            };
            self.lists.unlink(list, slot);
        }
    }

    fn evict(&mut self, incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        // Several evictions for one incoming line share the first lookup; evictions for no
        // line (a shrink) look nothing up.
        if incoming != NO_INCOMING {
            let ghost_hit = match self.pending {
                Some((k, found)) if k == incoming.0 => found,
                _ => self.ghost.remove(incoming).is_some(),
            };
            self.pending = Some((incoming.0, ghost_hit));
        }
        self.has_evicted = true;
        if self.evicts_from_main() {
            // Small may move its last lines to main without a victim: main is tried again
            // (with only pinned lines in main at first, a shrink stopped with lines left).
            self.evict_main(pinned)
                .or_else(|| self.evict_small(pinned))
                .or_else(|| self.evict_main(pinned))
        } else {
            self.evict_small(pinned).or_else(|| self.evict_main(pinned))
        }
    }

    #[inline]
    fn prefetch_incoming(&self, key: LineKey) {
        self.ghost.prefetch(key);
    }

    /// The back of the queue the next eviction works on and the line after it (a guess: a
    /// line of small with enough hits moves to main instead, one of main with a count goes
    /// round again). Also starts loading the key of that next line and, for small, the ghost
    /// bucket the victim's key goes to (its key was loaded as an earlier hint's next line).
    #[inline]
    fn victim_hint(&self) -> Option<(Slot, Option<Slot>)> {
        let from_main = self.evicts_from_main();
        let v = self.lists.back(if from_main { MAIN } else { SMALL })?;
        let then = self.lists.newer(v);
        if let Some(t) = then {
            tiercache_core::hint::prefetch(self.keys.as_ptr().wrapping_add(t as usize));
        }
        if !from_main {
            self.ghost.prefetch(LineKey(self.keys[v as usize]));
        }
        Some((v, then))
    }

    fn len(&self) -> usize {
        self.lists.len(SMALL) + self.lists.len(MAIN)
    }

    fn capacity(&self) -> usize {
        self.small_capacity + self.main_capacity
    }

    /// Re-splits `lines` (at most the slot limit) with the configured ratios, as at build:
    /// small gets `floor(small_ratio c)`, main the rest, the ghost `floor(ghost_ratio c)` keys
    /// (its oldest keys dropped if it holds more). Lines stay in their queues; evictions
    /// (main's when it holds more than its share) bring the queues back to their sizes.
    fn set_capacity(&mut self, lines: usize) {
        let (small, main, ghost) = Self::split(lines.min(self.meta.len()), &self.config);
        self.small_capacity = small;
        self.main_capacity = main;
        self.ghost.set_limit(ghost);
    }

    fn memory_bytes(&self) -> usize {
        self.lists.memory_bytes()
            + self.meta.capacity()
            + self.keys.capacity() * 8
            + self.ghost.memory_bytes()
    }

    fn grow_slots(&mut self, slot_limit: usize) {
        if slot_limit > self.meta.len() {
            self.lists.grow(slot_limit);
            self.meta.resize(slot_limit, 0);
            self.keys.resize(slot_limit, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_libcachesim_ratios() {
        let p = S3Fifo::new(105, 105);
        assert_eq!((p.small_capacity, p.main_capacity), (10, 95));
        assert_eq!(p.ghost.capacity(), 94);
    }

    #[test]
    fn set_capacity_resplits_the_queues_and_trims_the_ghost() {
        let mut p = S3Fifo::new(20, 40);
        for s in 0..20 {
            p.insert(s, LineKey(s as u64));
        }
        for k in 0..18 {
            let v = p.evict(LineKey(100 + k), &|_| false).unwrap();
            p.insert(v, LineKey(100 + k));
        }
        assert!(p.queue_sizes()[2] > 5);
        p.set_capacity(5);
        assert_eq!((p.small_capacity, p.main_capacity), (0, 5));
        assert!(p.queue_sizes()[2] <= 4, "ghost holds at most 0.9 c keys");
        p.set_capacity(40);
        assert_eq!(
            (p.small_capacity, p.main_capacity, p.ghost.capacity()),
            (4, 36, 36)
        );
        assert_eq!(p.len(), 20, "nothing evicted by a capacity change");
    }

    /// 20 lines: small holds 2, main 18.
    fn warm() -> S3Fifo {
        let mut p = S3Fifo::with_config(
            20,
            20,
            S3FifoConfig {
                fill_main_before_first_eviction: false,
                ..S3FifoConfig::default()
            },
        );
        for s in 0..20 {
            p.insert(s, LineKey(100 + s as u64));
        }
        p
    }

    #[test]
    fn one_hit_in_small_is_not_enough_two_move_to_main() {
        let mut p = warm();
        assert_eq!(p.queue_sizes(), [20, 0, 0]);
        p.hit(0);
        p.hit(1);
        p.hit(1);
        // Small's back is slot 0 (one hit): evicted into the ghost.
        assert_eq!(p.evict(LineKey(1), &|_| false), Some(0));
        p.insert(0, LineKey(1));
        assert_eq!(p.queue_sizes(), [20, 0, 1]);
        // Slot 1 (two hits) moves to main; slot 2 is evicted.
        assert_eq!(p.evict(LineKey(2), &|_| false), Some(2));
        p.insert(2, LineKey(2));
        assert_eq!(p.queue_sizes(), [19, 1, 2]);
        // Key 100 (slot 0's old line) is in the ghost: it comes back straight into main.
        let v = p.evict(LineKey(100), &|_| false).unwrap();
        assert_eq!(v, 3);
        p.insert(v, LineKey(100));
        assert_eq!(p.queue_sizes(), [18, 2, 2]);
    }

    #[test]
    fn early_main_fill_sends_lines_to_main_once_small_is_full() {
        let mut p = S3Fifo::new(20, 20);
        for s in 0..20 {
            p.insert(s, LineKey(s as u64));
        }
        assert_eq!(p.queue_sizes(), [2, 18, 0]);
        // Main is not over its share and small is not empty: small evicts.
        assert_eq!(p.evict(LineKey(50), &|_| false), Some(0));
    }

    #[test]
    fn main_is_a_two_bit_clock() {
        let mut p = S3Fifo::new(10, 10);
        // small 1 line, main 9: the first line goes to small, the rest to main.
        for s in 0..10 {
            p.insert(s, LineKey(s as u64));
        }
        p.hit(1);
        p.hit(1);
        p.hit(1);
        p.hit(1);
        p.hit(2);
        // Small is not empty and main is at its share: small's line 0 goes.
        assert_eq!(p.evict(LineKey(20), &|_| false), Some(0));
        p.insert(0, LineKey(20));
        // Key 0 is a ghost hit: the eviction still works on small (line 20 goes), but key 0
        // enters main, which then holds more than its share.
        assert_eq!(p.evict(LineKey(0), &|_| false), Some(0));
        p.insert(0, LineKey(0));
        assert_eq!(p.queue_sizes(), [0, 10, 1]);
        // Main evicts: its back (1, counter 3) returns with 2, then 2 (counter 1) with 0,
        // and 3 is the victim.
        assert_eq!(p.evict(LineKey(30), &|_| false), Some(3));
        assert_eq!(p.counter(1), 2);
        assert_eq!(p.counter(2), 0);
    }
}
