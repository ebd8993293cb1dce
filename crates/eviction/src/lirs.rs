//! LIRS (Jiang & Zhang, SIGMETRICS '02): lines with a short reuse distance (LIR) stay; the
//! rest (HIR) pass through a small queue.
//!
//! As published, with libCacheSim's sizes: the HIR share is `max(1, floor(0.01 c))` lines,
//! the LIR set the rest.
//! - the stack `S` orders by recency the LIR lines, resident HIR lines and *non-resident*
//!   HIR entries (keys of lines that left, remembered while in `S`); its bottom is always LIR
//!   (*pruning* drops HIR entries from the bottom); the queue `Q` holds the resident HIR lines,
//!   its front the next victim;
//! - until the LIR set is full every new line is LIR; a line that becomes LIR is pruned
//!   below (with no other LIR line, HIR entries may sit in `S` and the bottom must become
//!   LIR again);
//! - a hit on an LIR line moves it to `S`'s top (pruning if it was the bottom); a hit on a
//!   resident HIR line in `S` makes it LIR at `S`'s top (leaving `Q`), and if the LIR set is
//!   then over its share, `S`'s bottom LIR line becomes HIR at `Q`'s end (then pruning); a
//!   hit on a resident HIR line not in `S` puts it at `S`'s top and `Q`'s end;
//! - the victim is `Q`'s front; if it is in `S` its entry stays there, non-resident;
//! - a miss whose key is non-resident in `S` enters as LIR (with the bottom LIR line demoted
//!   as for a hit); any other miss enters as resident HIR at `S`'s top and `Q`'s end.
//!
//! Non-resident entries are bounded by `c` (so `S` holds at most `2c`, as libCacheSim bounds
//! it): beyond that the entry that became non-resident first is dropped. They live in a
//! fixed pool with an open-addressing key index; the stack links run over slots and pool
//! entries alike, so everything is O(1) and nothing allocates after `build`.
//!
//! libCacheSim `LIRS` cannot be matched request by request, and tests/libcachesim_golden.rs
//! pins the difference: a hit on a resident HIR line not in `S` there runs its LIR-overflow
//! step (`hit_RD_HIRinQ`) although the line stays HIR, which demotes `S`'s bottom LIR line
//! and, with `Q` full, *evicts* `Q`'s front during the hit; a policy here never evicts on a hit
//! (the core owns residency, [`Eviction`]). The published algorithm is kept.
//!
//! Pinned slots are passed over: the oldest unpinned line of `Q`, else the bottom-most
//! unpinned LIR line of `S`. [`Eviction::insert_cold`] enters a resident HIR line at `Q`'s
//! front, not in `S` (the next victim); [`Eviction::insert_demoted`] is `insert`.
//! [`Eviction::set_capacity`] re-derives both shares (demoting bottom LIR lines to `Q` while
//! the LIR set is over its share) and the bound on non-resident entries.

use crate::list::{Lists, NIL};
use crate::{Eviction, Slot};
use tiercache_core::LineKey;

/// Per-slot state.
const ABSENT: u8 = 0;
const LIR: u8 = 1;
const HIR: u8 = 2;

/// libCacheSim's `hirs_ratio`.
const HIR_RATIO: f64 = 0.01;

/// Non-resident lists over the pool: in use (oldest at the back) and free.
const NH: usize = 0;
const FREE: usize = 1;

/// LIRS replacement.
#[derive(Debug, Clone)]
pub struct Lirs {
    /// Stack `S` over nodes: slot `s` is node `s`, pool entry `g` node `slot_limit + g`.
    stack: Lists<1>,
    /// Queue `Q` of resident HIR slots (front = newest end, back = next victim).
    queue: Lists<1>,
    /// [`LIR`], [`HIR`] or [`ABSENT`] per slot.
    state: Vec<u8>,
    /// Key of each resident slot.
    keys: Vec<u64>,
    /// Non-resident entries: order in which they became non-resident, and the free pool.
    nh: Lists<2>,
    nh_keys: Vec<u64>,
    /// Open-addressing index key → pool entry ([`NIL`] = empty bucket), at most half full.
    index: Vec<u32>,
    lir_count: usize,
    lir_share: usize,
    nh_limit: usize,
    capacity: usize,
}

impl Lirs {
    /// An empty policy of `capacity` lines for slots `< slot_limit`.
    pub fn new(capacity: usize, slot_limit: usize) -> Self {
        let mut nh = Lists::new(slot_limit);
        for g in 0..slot_limit as u32 {
            nh.push_front(FREE, g);
        }
        let mut p = Lirs {
            stack: Lists::new(2 * slot_limit),
            queue: Lists::new(slot_limit),
            state: vec![ABSENT; slot_limit],
            keys: vec![0; slot_limit],
            nh,
            nh_keys: vec![0; slot_limit],
            index: vec![NIL; (2 * slot_limit).max(2)],
            lir_count: 0,
            lir_share: 0,
            nh_limit: 0,
            capacity: 0,
        };
        p.set_capacity(capacity);
        p
    }

    /// LIR lines, resident HIR lines and non-resident entries.
    pub fn sizes(&self) -> [usize; 3] {
        [self.lir_count, self.queue.len(0), self.nh.len(NH)]
    }

    #[inline]
    fn slot_limit(&self) -> u32 {
        self.state.len() as u32
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ((h >> 32) as usize * self.index.len()) >> 32
    }

    /// Bucket holding `key`'s entry, if any.
    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        let mut i = self.home(key);
        loop {
            let g = self.index[i];
            if g == NIL {
                return None;
            }
            if self.nh_keys[g as usize] == key {
                return Some(i);
            }
            i = (i + 1) % self.index.len();
        }
    }

    /// Empties bucket `i`, shifting later buckets of the probe run back (no tombstones).
    fn clear_bucket(&mut self, mut i: usize) {
        let n = self.index.len();
        self.index[i] = NIL;
        let mut j = i;
        loop {
            j = (j + 1) % n;
            let g = self.index[j];
            if g == NIL {
                return;
            }
            let home = self.home(self.nh_keys[g as usize]);
            // Move g back to i if i lies cyclically in [home, j).
            let movable = if i <= j {
                home <= i || home > j
            } else {
                home <= i && home > j
            };
            if movable {
                self.index[i] = g;
                self.index[j] = NIL;
                i = j;
            }
        }
    }

    /// Forgets pool entry `g` (index, stack and non-resident list).
    fn drop_entry(&mut self, g: u32) {
        let bucket = self
            .find(self.nh_keys[g as usize])
            .expect("entry is indexed");
        self.clear_bucket(bucket);
        self.stack.unlink(0, self.slot_limit() + g);
        self.nh.unlink(NH, g);
        self.nh.push_front(FREE, g);
    }

    /// Removes HIR entries from the stack's bottom until it is an LIR line.
    fn prune(&mut self) {
        while let Some(bottom) = self.stack.back(0) {
            if bottom < self.slot_limit() {
                if self.state[bottom as usize] == LIR {
                    return;
                }
                self.stack.unlink(0, bottom);
            } else {
                self.drop_entry(bottom - self.slot_limit());
            }
        }
    }

    /// While the LIR set is over its share, its bottom line becomes HIR at `Q`'s end.
    fn demote_excess_lir(&mut self) {
        while self.lir_count > self.lir_share {
            // With no LIR line below them (the LIR set was empty), HIR entries may sit at
            // the bottom: prune first so the bottom is the LIR line to demote.
            self.prune();
            let Some(bottom) = self.stack.back(0) else {
                return;
            };
            debug_assert!(bottom < self.slot_limit() && self.state[bottom as usize] == LIR);
            self.stack.unlink(0, bottom);
            self.state[bottom as usize] = HIR;
            self.lir_count -= 1;
            self.queue.push_front(0, bottom);
            self.prune();
        }
    }

    /// Makes a resident line LIR at the stack's top (it is in no list or only in the stack).
    fn become_lir(&mut self, slot: Slot) {
        if self.stack.is_linked(slot) {
            self.stack.unlink(0, slot);
        }
        self.stack.push_front(0, slot);
        self.state[slot as usize] = LIR;
        self.lir_count += 1;
        // The first LIR line may land on HIR entries (pushed while the LIR set was empty:
        // a hit on a cold-inserted line, or after a resize to one line): prune them so the
        // bottom is LIR again. Otherwise the bottom is already LIR and this is O(1).
        self.prune();
        self.demote_excess_lir();
    }

    /// Takes `slot` out of every list as it leaves the cache (`victim`: keep its place in the
    /// stack as a non-resident entry).
    fn leave(&mut self, slot: Slot, victim: bool) {
        match self.state[slot as usize] {
            LIR => {
                self.lir_count -= 1;
                self.stack.unlink(0, slot);
                self.prune();
            }
            HIR => {
                self.queue.unlink(0, slot);
                if self.stack.is_linked(slot) {
                    if victim && self.nh_limit > 0 {
                        self.remember(slot);
                    }
                    self.stack.unlink(0, slot);
                    self.prune();
                }
            }
            _ => {}
        }
        self.state[slot as usize] = ABSENT;
    }

    /// Puts a non-resident entry for `slot`'s key just below `slot` in the stack.
    fn remember(&mut self, slot: Slot) {
        if self.nh.len(NH) >= self.nh_limit {
            let oldest = self.nh.back(NH).expect("limit is positive");
            self.drop_entry(oldest);
        }
        let g = self
            .nh
            .pop_back(FREE)
            .expect("pool holds one entry per slot");
        let key = self.keys[slot as usize];
        self.nh_keys[g as usize] = key;
        self.nh.push_front(NH, g);
        self.stack.insert_older(0, slot, self.slot_limit() + g);
        let mut i = self.home(key);
        while self.index[i] != NIL {
            i = (i + 1) % self.index.len();
        }
        self.index[i] = g;
    }
}

impl Eviction for Lirs {
    fn name(&self) -> &'static str {
        "lirs"
    }

    fn insert(&mut self, slot: Slot, key: LineKey) {
        self.keys[slot as usize] = key.0;
        if let Some(bucket) = self.find(key.0) {
            // Non-resident in S: its entry gives way to the line, which becomes LIR.
            let g = self.index[bucket];
            self.drop_entry(g);
            self.become_lir(slot);
        } else if self.lir_count < self.lir_share {
            self.become_lir(slot);
        } else {
            self.state[slot as usize] = HIR;
            self.stack.push_front(0, slot);
            self.queue.push_front(0, slot);
        }
    }

    fn hit(&mut self, slot: Slot) {
        match self.state[slot as usize] {
            LIR => {
                let was_bottom = self.stack.back(0) == Some(slot);
                self.stack.move_to_front(0, 0, slot);
                if was_bottom {
                    self.prune();
                }
            }
            _ if self.stack.is_linked(slot) => {
                self.queue.unlink(0, slot);
                self.become_lir(slot);
            }
            _ => {
                self.stack.push_front(0, slot);
                self.queue.move_to_front(0, 0, slot);
            }
        }
    }

    fn remove(&mut self, slot: Slot) {
        self.leave(slot, false);
    }

    fn evict(&mut self, _incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        let victim = match self.queue.oldest_unpinned(0, pinned) {
            Some(v) => v,
            None => {
                // Every resident HIR line is pinned: the bottom-most unpinned LIR line.
                let mut cur = self.stack.back(0);
                loop {
                    let n = cur?;
                    if n < self.slot_limit() && self.state[n as usize] == LIR && !pinned(n) {
                        break n;
                    }
                    cur = self.stack.newer(n);
                }
            }
        };
        self.leave(victim, true);
        Some(victim)
    }

    fn victim_hint(&self) -> Option<(Slot, Option<Slot>)> {
        let v = self.queue.back(0)?;
        Some((v, self.queue.newer(v)))
    }

    fn len(&self) -> usize {
        self.lir_count + self.queue.len(0)
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    /// HIR share `max(1, floor(0.01 c))` (0 for `c = 0`), LIR share the rest, at most `c`
    /// non-resident entries (the oldest dropped beyond); LIR lines beyond the new share are
    /// demoted, bottom first.
    fn set_capacity(&mut self, lines: usize) {
        self.capacity = lines.min(self.state.len());
        let hir = ((self.capacity as f64 * HIR_RATIO) as usize)
            .max(1)
            .min(self.capacity);
        self.lir_share = self.capacity - hir;
        self.nh_limit = self.capacity;
        while self.nh.len(NH) > self.nh_limit {
            let oldest = self.nh.back(NH).expect("non-empty");
            self.drop_entry(oldest);
        }
        self.prune();
        self.demote_excess_lir();
    }

    /// A resident HIR line at `Q`'s front, not in `S`: the next victim.
    fn insert_cold(&mut self, slot: Slot, key: LineKey) {
        // A non-resident entry of the key is forgotten: the line re-enters cold.
        if let Some(bucket) = self.find(key.0) {
            self.drop_entry(self.index[bucket]);
        }
        self.keys[slot as usize] = key.0;
        self.state[slot as usize] = HIR;
        self.queue.push_back(0, slot);
    }

    fn memory_bytes(&self) -> usize {
        self.stack.memory_bytes()
            + self.queue.memory_bytes()
            + self.state.capacity()
            + self.keys.capacity() * 8
            + self.nh.memory_bytes()
            + self.nh_keys.capacity() * 8
            + self.index.capacity() * 4
    }

    /// Rebuilds the structures for the larger limit (the stack's node numbers of
    /// non-resident entries move), keeping every order.
    fn grow_slots(&mut self, slot_limit: usize) {
        if slot_limit <= self.state.len() {
            return;
        }
        let old = self.slot_limit();
        let mut grown = Lirs::new(0, slot_limit);
        grown.lir_share = self.lir_share;
        grown.nh_limit = self.nh_limit;
        grown.capacity = self.capacity;
        grown.lir_count = self.lir_count;
        grown.state[..old as usize].copy_from_slice(&self.state);
        grown.keys[..old as usize].copy_from_slice(&self.keys);
        // Queue, oldest first.
        let mut cur = self.queue.back(0);
        while let Some(s) = cur {
            grown.queue.push_front(0, s);
            cur = self.queue.newer(s);
        }
        // Non-resident entries in the order they became so, then the stack bottom up.
        let mut cur = self.nh.back(NH);
        while let Some(g) = cur {
            let ng = grown.nh.pop_back(FREE).expect("pool");
            grown.nh_keys[ng as usize] = self.nh_keys[g as usize];
            grown.nh.push_front(NH, ng);
            let key = self.nh_keys[g as usize];
            let mut i = grown.home(key);
            while grown.index[i] != NIL {
                i = (i + 1) % grown.index.len();
            }
            grown.index[i] = ng;
            cur = self.nh.newer(g);
        }
        let mut cur = self.stack.back(0);
        while let Some(n) = cur {
            let node = if n < old {
                n
            } else {
                let key = self.nh_keys[(n - old) as usize];
                let bucket = grown.find(key).expect("entry copied");
                grown.slot_limit() + grown.index[bucket]
            };
            grown.stack.push_front(0, node);
            cur = self.stack.newer(n);
        }
        *self = grown;
    }
}
