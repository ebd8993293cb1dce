//! 2Q (Johnson & Shasha, VLDB '94), the full version: a FIFO `A1in`, an LRU `Am` and a ghost
//! FIFO `A1out` of keys.
//!
//! Follows libCacheSim `TwoQ` with its defaults (`Ain-size-ratio=0.25`,
//! `Aout-size-ratio=0.5`): `A1in` gets `floor(0.25 c)` lines, `Am` the rest, `A1out`
//! remembers `floor(0.5 c)` keys.
//! - a miss whose key is in `A1out` enters `Am`'s front (and leaves `A1out`); any other miss
//!   enters `A1in`'s front;
//! - a hit in `A1in` changes nothing (a correlated reference); a hit in `Am` moves the line
//!   to `Am`'s front;
//! - the victim is `A1in`'s back when `A1in` holds more than its share (its key enters
//!   `A1out`, whose oldest key is dropped when full), else `Am`'s back.
//!
//! The incoming key given to [`Eviction::evict`] is looked up (and removed) in `A1out` before
//! the victim is chosen, as libCacheSim's lookup precedes its eviction; further evictions for
//! the same key and the following [`Eviction::insert`] reuse that answer.
//!
//! Differences from libCacheSim, both outside what its golden test compares:
//! - libCacheSim admits nothing when `A1in`'s share is zero (`c < 4`); every line is admitted
//!   here whatever the capacity;
//! - libCacheSim's `Am` is a cache of its own size: after removals left the whole cache
//!   below `c`, a ghost hit finding `Am` at its share evicts `Am`'s back *during the insert*.
//!   A policy here evicts only when the core asks (when the cache is full), so `Am` may then
//!   exceed its share until the next eviction, which takes `Am`'s back as libCacheSim's
//!   would have.
//!
//! Pinned slots are passed over: the oldest unpinned line of the queue chosen, else of the
//! other queue. [`Eviction::insert_cold`] and [`Eviction::insert_demoted`] are `insert`
//! (a ghost hit sends a line to `Am` whatever the caller's intent, as in S3-FIFO).
//! [`Eviction::set_capacity`] re-derives both shares and the ghost size (dropping its oldest
//! keys beyond it); lines stay in their queues.

use crate::ghost::Ghosts;
use crate::list::Lists;
use crate::{Eviction, Slot, NO_INCOMING};
use tiercache_core::LineKey;

const A1IN: usize = 0;
const AM: usize = 1;
/// libCacheSim's `Ain-size-ratio`.
const A1IN_RATIO: f64 = 0.25;
/// libCacheSim's `Aout-size-ratio`.
const A1OUT_RATIO: f64 = 0.5;

/// 2Q replacement.
#[derive(Debug, Clone)]
pub struct TwoQ {
    lists: Lists<2>,
    /// Per slot: whether the line is in `Am`.
    in_am: Vec<bool>,
    /// Key of each resident slot (remembered in `A1out` when it leaves `A1in`).
    keys: Vec<u64>,
    a1out: Ghosts<1>,
    a1in_share: usize,
    capacity: usize,
    /// `A1out` lookup made by the last `evict`: (incoming key, found).
    pending: Option<(u64, bool)>,
}

impl TwoQ {
    /// An empty policy of `capacity` lines for slots `< slot_limit`.
    pub fn new(capacity: usize, slot_limit: usize) -> Self {
        let mut p = TwoQ {
            lists: Lists::new(slot_limit),
            in_am: vec![false; slot_limit],
            keys: vec![0; slot_limit],
            a1out: Ghosts::new(0),
            a1in_share: 0,
            capacity: 0,
            pending: None,
        };
        p.set_capacity(capacity);
        p
    }

    /// Lines in `A1in` and `Am`, and keys in `A1out`.
    pub fn queue_sizes(&self) -> [usize; 3] {
        [
            self.lists.len(A1IN),
            self.lists.len(AM),
            self.a1out.total_len(),
        ]
    }

    /// Whether `key` was in `A1out` (removing it), reusing the last `evict`'s lookup.
    #[inline]
    fn ghost_hit(&mut self, key: LineKey) -> bool {
        match self.pending {
            Some((k, found)) if k == key.0 => found,
            _ => self.a1out.remove(key).is_some(),
        }
    }

    #[inline]
    fn take(&mut self, list: usize, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        let victim = self.lists.oldest_unpinned(list, pinned)?;
        self.lists.unlink(list, victim);
        if list == A1IN {
            self.a1out
                .push_front(0, LineKey(self.keys[victim as usize]));
        }
        Some(victim)
    }
}

impl Eviction for TwoQ {
    fn name(&self) -> &'static str {
        "2q"
    }

    fn insert(&mut self, slot: Slot, key: LineKey) {
        let to_am = self.ghost_hit(key);
        self.pending = None;
        self.keys[slot as usize] = key.0;
        self.in_am[slot as usize] = to_am;
        self.lists.push_front(if to_am { AM } else { A1IN }, slot);
    }

    #[inline]
    fn hit(&mut self, slot: Slot) {
        if self.in_am[slot as usize] {
            self.lists.move_to_front(AM, AM, slot);
        }
    }

    fn remove(&mut self, slot: Slot) {
        if self.lists.is_linked(slot) {
            let list = if self.in_am[slot as usize] { AM } else { A1IN };
            self.lists.unlink(list, slot);
        }
    }

    fn evict(&mut self, incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        if incoming != NO_INCOMING {
            let found = self.ghost_hit(incoming);
            self.pending = Some((incoming.0, found));
        }
        let first = if self.lists.len(A1IN) > self.a1in_share {
            A1IN
        } else {
            AM
        };
        self.take(first, pinned)
            .or_else(|| self.take(1 - first, pinned))
    }

    /// A hit reads the slot's queue byte and, in `Am`, moves its links: both are loaded.
    #[inline]
    fn prefetch(&self, slot: Slot) {
        self.lists.prefetch(slot);
        tiercache_core::hint::prefetch(self.in_am.as_ptr().wrapping_add(slot as usize));
    }

    #[inline]
    fn prefetch_incoming(&self, key: LineKey) {
        self.a1out.prefetch(key);
    }

    #[inline]
    fn victim_hint(&self) -> Option<(Slot, Option<Slot>)> {
        let list = if self.lists.len(A1IN) > self.a1in_share {
            A1IN
        } else {
            AM
        };
        let v = self.lists.back(list)?;
        let then = self.lists.newer(v);
        // The next victim's key, and for `A1in` the `A1out` bucket the victim's key goes to
        // and, `A1out` full, the key its end drops.
        if let Some(t) = then {
            tiercache_core::hint::prefetch(self.keys.as_ptr().wrapping_add(t as usize));
        }
        if list == A1IN {
            self.a1out.prefetch(LineKey(self.keys[v as usize]));
            if self.a1out.total_len() >= (self.capacity as f64 * A1OUT_RATIO) as usize {
                self.a1out.prefetch_oldest(0);
            }
        }
        Some((v, then))
    }

    fn len(&self) -> usize {
        self.lists.len(A1IN) + self.lists.len(AM)
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    /// `A1in`'s share becomes `floor(0.25 c)` and `A1out` `floor(0.5 c)` keys (libCacheSim's
    /// truncated products), `c` at most the slot limit.
    fn set_capacity(&mut self, lines: usize) {
        self.capacity = lines.min(self.in_am.len());
        self.a1in_share = (self.capacity as f64 * A1IN_RATIO) as usize;
        self.a1out
            .set_limit((self.capacity as f64 * A1OUT_RATIO) as usize);
    }

    fn memory_bytes(&self) -> usize {
        self.lists.memory_bytes()
            + self.in_am.capacity()
            + self.keys.capacity() * 8
            + self.a1out.memory_bytes()
    }

    fn grow_slots(&mut self, slot_limit: usize) {
        if slot_limit > self.in_am.len() {
            self.lists.grow(slot_limit);
            self.in_am.resize(slot_limit, false);
            self.keys.resize(slot_limit, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a1in_overflow_goes_to_the_ghost_and_a_ghost_hit_enters_am() {
        // c = 8: A1in share 2, A1out 4 keys.
        let mut p = TwoQ::new(8, 8);
        for s in 0..8 {
            p.insert(s, LineKey(100 + s as u64));
        }
        assert_eq!(p.queue_sizes(), [8, 0, 0]);
        p.hit(0); // a hit in A1in changes nothing
        assert_eq!(p.evict(LineKey(1), &|_| false), Some(0));
        p.insert(0, LineKey(1));
        assert_eq!(p.queue_sizes(), [8, 0, 1]);
        // Key 100 (slot 0's first line) is in A1out: it comes back into Am.
        assert_eq!(p.evict(LineKey(100), &|s| s == 1), Some(2));
        p.insert(2, LineKey(100));
        // Key 100 left the ghost, slot 2's key 102 entered it.
        assert_eq!(p.queue_sizes(), [7, 1, 1]);
    }
}
