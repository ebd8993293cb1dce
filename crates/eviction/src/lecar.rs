//! LeCaR, learning cache replacement (Vietri et al., HotStorage '18): two experts, LRU and
//! LFU, and a weight per expert learned by regret from the keys each one evicted too early.
//!
//! Follows libCacheSim `LeCaR` with its defaults (learning rate 0.45, discount rate
//! `0.005^(1/c)`, both weights 0.5 at first, each history `floor(c/2)` keys):
//! - a hit moves the line to the recency list's front and raises its frequency by one (a line
//!   enters with frequency 1, at the end of its frequency's group: within one frequency the
//!   line that reached it first is LFU's choice);
//! - a miss whose key is in a history forgets it there and penalises the expert that evicted
//!   it: `w ← w·e^(−0.45·d^t) + 1e-10`, both weights then normalised, `t` the requests since
//!   that eviction (the line enters with frequency 1 like any other);
//! - an eviction takes LRU's choice (least recent) and LFU's (least frequent); if they are the
//!   same line it leaves without a history entry; otherwise one is drawn with probability
//!   `w_lru` for LRU (`r = (rand mod 100) / 100 < w_lru`) and its key enters the front of that
//!   expert's history (dropping the history's oldest key beyond `floor(c/2)`).
//!
//! Requests are counted as the trait sees them: one per [`Eviction::hit`] and one per
//! [`Eviction::insert`]; an eviction happens during the request whose insert follows.
//!
//! Difference from libCacheSim, pinned by `tests/libcachesim_golden.rs` as a miss-ratio bound
//! rather than hit by hit: the draw uses a fixed-seed xorshift generator, not libCacheSim's
//! process-wide random stream (whose state depends on everything else that drew from it), so
//! the two take different experts on the same draw. Runs are deterministic here.
//!
//! Pinned lines are passed over: each expert's choice is its first unpinned line. The LFU
//! order is a list of frequency groups (ascending), each a list of lines: hit, insert, remove
//! and choice are O(1) (a choice walks past pinned lines only). [`Eviction::insert_cold`]
//! puts the line at LRU's end with frequency 1 at the head of its group, so both experts
//! choose it next.

use crate::ghost::Ghosts;
use crate::list::{Lists, NIL};
use crate::{Eviction, Slot, NO_INCOMING};
use tiercache_core::LineKey;

const H_LRU: usize = 0;
const H_LFU: usize = 1;
const LEARNING_RATE: f64 = 0.45;
/// Seed of the eviction draws (any fixed value: runs must repeat).
const SEED: u64 = 0x2545_F491_4F6C_DD1D;

/// A frequency group: its lines (first = reached this frequency first) and its neighbours in
/// ascending frequency order.
#[derive(Debug, Clone, Copy)]
struct Group {
    freq: u32,
    first: u32,
    last: u32,
    lower: u32,
    higher: u32,
}

const NO_GROUP: Group = Group {
    freq: 0,
    first: NIL,
    last: NIL,
    lower: NIL,
    higher: NIL,
};

/// Lines ordered by (frequency, time they reached it): the LFU expert.
#[derive(Debug, Clone)]
struct FrequencyOrder {
    /// Per slot: [previous, next] line of its group.
    links: Vec<[u32; 2]>,
    /// Per slot: its group.
    group_of: Vec<u32>,
    /// Group pool: at most one group per resident line, so `slot_limit` groups suffice.
    groups: Vec<Group>,
    /// Unused groups, a stack.
    free: Vec<u32>,
    /// Lowest-frequency group, or [`NIL`].
    lowest: u32,
}

impl FrequencyOrder {
    fn new(slot_limit: usize) -> Self {
        FrequencyOrder {
            links: vec![[NIL, NIL]; slot_limit],
            group_of: vec![NIL; slot_limit],
            groups: vec![NO_GROUP; slot_limit],
            free: (0..slot_limit as u32).rev().collect(),
            lowest: NIL,
        }
    }

    fn grow(&mut self, slot_limit: usize) {
        let old = self.links.len();
        if slot_limit > old {
            self.links.resize(slot_limit, [NIL, NIL]);
            self.group_of.resize(slot_limit, NIL);
            self.groups.resize(slot_limit, NO_GROUP);
            // Lowest group numbers are taken first, as in a pool built this large.
            let mut free: Vec<u32> = (old as u32..slot_limit as u32).rev().collect();
            free.extend_from_slice(&self.free);
            self.free = free;
        }
    }

    /// A new group of frequency `freq` between `lower` and `higher` (either may be [`NIL`]).
    fn new_group(&mut self, freq: u32, lower: u32, higher: u32) -> u32 {
        let g = self.free.pop().expect("a group per resident line at most");
        self.groups[g as usize] = Group {
            freq,
            first: NIL,
            last: NIL,
            lower,
            higher,
        };
        if lower == NIL {
            self.lowest = g;
        } else {
            self.groups[lower as usize].higher = g;
        }
        if higher != NIL {
            self.groups[higher as usize].lower = g;
        }
        g
    }

    /// Appends `slot` at the end of group `g`.
    fn append(&mut self, g: u32, slot: Slot) {
        let last = self.groups[g as usize].last;
        self.links[slot as usize] = [last, NIL];
        if last == NIL {
            self.groups[g as usize].first = slot;
        } else {
            self.links[last as usize][1] = slot;
        }
        self.groups[g as usize].last = slot;
        self.group_of[slot as usize] = g;
    }

    /// Takes `slot` out of its group (freeing the group if it empties); returns the groups
    /// below and above where it was, for a re-insertion.
    fn detach(&mut self, slot: Slot) -> (u32, u32) {
        let g = self.group_of[slot as usize];
        let [prev, next] = self.links[slot as usize];
        if prev == NIL {
            self.groups[g as usize].first = next;
        } else {
            self.links[prev as usize][1] = next;
        }
        if next == NIL {
            self.groups[g as usize].last = prev;
        } else {
            self.links[next as usize][0] = prev;
        }
        self.links[slot as usize] = [NIL, NIL];
        self.group_of[slot as usize] = NIL;
        let Group { lower, higher, .. } = self.groups[g as usize];
        if self.groups[g as usize].first != NIL {
            return (g, higher);
        }
        // The group emptied: unlink it.
        if lower == NIL {
            self.lowest = higher;
        } else {
            self.groups[lower as usize].higher = higher;
        }
        if higher != NIL {
            self.groups[higher as usize].lower = lower;
        }
        self.free.push(g);
        (lower, higher)
    }

    /// Adds `slot` with frequency 1, at the end (`at_head` false) or the head of its group.
    fn add(&mut self, slot: Slot, at_head: bool) {
        let g = if self.lowest != NIL && self.groups[self.lowest as usize].freq == 1 {
            self.lowest
        } else {
            self.new_group(1, NIL, self.lowest)
        };
        if at_head && self.groups[g as usize].first != NIL {
            let first = self.groups[g as usize].first;
            self.links[slot as usize] = [NIL, first];
            self.links[first as usize][0] = slot;
            self.groups[g as usize].first = slot;
            self.group_of[slot as usize] = g;
        } else {
            self.append(g, slot);
        }
    }

    /// Raises `slot`'s frequency by one (saturating), to the end of the next group.
    fn bump(&mut self, slot: Slot) {
        let freq = self.groups[self.group_of[slot as usize] as usize].freq;
        if freq == u32::MAX {
            return;
        }
        let (lower, higher) = self.detach(slot);
        let g = if higher != NIL && self.groups[higher as usize].freq == freq + 1 {
            higher
        } else {
            self.new_group(freq + 1, lower, higher)
        };
        self.append(g, slot);
    }

    /// First unpinned line in (frequency, arrival) order.
    fn first_unpinned(&self, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        let mut g = self.lowest;
        while g != NIL {
            let mut s = self.groups[g as usize].first;
            while s != NIL {
                if !pinned(s) {
                    return Some(s);
                }
                s = self.links[s as usize][1];
            }
            g = self.groups[g as usize].higher;
        }
        None
    }

    #[cfg(test)]
    fn frequency(&self, slot: Slot) -> u32 {
        self.groups[self.group_of[slot as usize] as usize].freq
    }

    fn memory_bytes(&self) -> usize {
        self.links.capacity() * 8
            + self.group_of.capacity() * 4
            + self.groups.capacity() * std::mem::size_of::<Group>()
            + self.free.capacity() * 4
    }
}

/// LeCaR replacement.
#[derive(Debug, Clone)]
pub struct LeCaR {
    recency: Lists<1>,
    frequency: FrequencyOrder,
    keys: Vec<u64>,
    /// Histories H_LRU and H_LFU; the pool has a node per slot (each holds `floor(c/2)`).
    history: Ghosts<2>,
    /// Request count at each history entry's eviction, by ghost node.
    evicted_at: Vec<u64>,
    w_lru: f64,
    discount: f64,
    /// Requests seen (hits and inserts).
    now: u64,
    rng: u64,
    capacity: usize,
    /// Incoming key whose history lookup the last `evict` made.
    looked_up: Option<u64>,
}

impl LeCaR {
    /// An empty LeCaR of `capacity` lines over slots `< slot_limit`.
    pub fn new(capacity: usize, slot_limit: usize) -> Self {
        let mut p = LeCaR {
            recency: Lists::new(slot_limit),
            frequency: FrequencyOrder::new(slot_limit),
            keys: vec![0; slot_limit],
            history: Ghosts::new(slot_limit),
            evicted_at: vec![0; slot_limit],
            w_lru: 0.5,
            discount: 1.0,
            now: 0,
            rng: SEED,
            capacity: 0,
            looked_up: None,
        };
        p.set_capacity(capacity);
        p
    }

    /// The LRU expert's weight (LFU's is `1 -` it).
    pub fn lru_weight(&self) -> f64 {
        self.w_lru
    }

    /// Keys each history may hold.
    fn history_limit(&self) -> usize {
        self.capacity / 2
    }

    /// xorshift64*: the next draw.
    fn next_rand(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A miss on `key`, during request `now + 1`: a history hit penalises its expert.
    fn look_up(&mut self, key: LineKey) {
        let Some((list, node)) = self.history.remove_node(key) else {
            return;
        };
        let t = (self.now + 1).saturating_sub(self.evicted_at[node as usize]);
        let r = self.discount.powf(t as f64);
        let (mut w_up, mut w_other) = if list == H_LRU {
            (self.w_lru, 1.0 - self.w_lru)
        } else {
            (1.0 - self.w_lru, self.w_lru)
        };
        // libCacheSim's update_weight, term for term.
        w_up = w_up * (-LEARNING_RATE * r).exp() + 1e-10;
        let s = w_up + w_other + 2e-10;
        w_up /= s;
        w_other = (w_other + 1e-10) / s;
        self.w_lru = if list == H_LRU { w_up } else { w_other };
    }

    /// Remembers `key` in `list`, dropping the list's oldest key beyond its share.
    fn remember(&mut self, list: usize, key: LineKey) {
        let limit = self.history_limit();
        if limit == 0 {
            return;
        }
        while self.history.len(list) >= limit {
            self.history.pop_back(list);
        }
        if let Some(node) = self.history.push_front_node(list, key) {
            self.evicted_at[node as usize] = self.now + 1;
        }
    }

    fn unlink(&mut self, slot: Slot) {
        self.recency.unlink(0, slot);
        self.frequency.detach(slot);
    }
}

impl Eviction for LeCaR {
    fn name(&self) -> &'static str {
        "lecar"
    }

    fn insert(&mut self, slot: Slot, key: LineKey) {
        if self.looked_up.take() != Some(key.0) {
            self.look_up(key);
        }
        self.now += 1;
        self.keys[slot as usize] = key.0;
        self.recency.push_front(0, slot);
        self.frequency.add(slot, false);
    }

    #[inline]
    fn hit(&mut self, slot: Slot) {
        self.now += 1;
        self.recency.move_to_front(0, 0, slot);
        self.frequency.bump(slot);
    }

    fn remove(&mut self, slot: Slot) {
        if self.recency.is_linked(slot) {
            self.unlink(slot);
        }
    }

    fn evict(&mut self, incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        if incoming != NO_INCOMING && self.looked_up != Some(incoming.0) {
            self.look_up(incoming);
            self.looked_up = Some(incoming.0);
        }
        let by_lru = self.recency.oldest_unpinned(0, pinned)?;
        let by_lfu = self.frequency.first_unpinned(pinned)?;
        if by_lru == by_lfu {
            self.unlink(by_lru);
            return Some(by_lru);
        }
        let r = (self.next_rand() % 100) as f64 / 100.0;
        let (victim, list) = if r < self.w_lru {
            (by_lru, H_LRU)
        } else {
            (by_lfu, H_LFU)
        };
        self.unlink(victim);
        self.remember(list, LineKey(self.keys[victim as usize]));
        Some(victim)
    }

    #[inline]
    fn prefetch_incoming(&self, key: LineKey) {
        self.history.prefetch(key);
    }

    fn len(&self) -> usize {
        self.recency.len(0)
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    /// `c` becomes `lines` (at most the slot limit): the discount rate becomes
    /// `0.005^(1/c)` and each history keeps its newest `floor(c/2)` keys. The weights stay.
    fn set_capacity(&mut self, lines: usize) {
        self.capacity = lines.min(self.keys.len());
        self.discount = 0.005f64.powf(1.0 / self.capacity.max(1) as f64);
        let limit = self.history_limit();
        for list in [H_LRU, H_LFU] {
            while self.history.len(list) > limit {
                self.history.pop_back(list);
            }
        }
    }

    /// At LRU's end and at the head of the frequency-1 group: both experts choose it next.
    fn insert_cold(&mut self, slot: Slot, key: LineKey) {
        if self.looked_up.take() != Some(key.0) {
            self.look_up(key);
        }
        self.now += 1;
        self.keys[slot as usize] = key.0;
        self.recency.push_back(0, slot);
        self.frequency.add(slot, true);
    }

    fn memory_bytes(&self) -> usize {
        self.recency.memory_bytes()
            + self.frequency.memory_bytes()
            + self.keys.capacity() * 8
            + self.history.memory_bytes()
            + self.evicted_at.capacity() * 8
    }

    /// Grows the per-slot arrays and rebuilds the history pool one node per slot, moving
    /// each entry's eviction time to its new node (same keys, same order).
    fn grow_slots(&mut self, slot_limit: usize) {
        if slot_limit <= self.keys.len() {
            return;
        }
        self.recency.grow(slot_limit);
        self.frequency.grow(slot_limit);
        self.keys.resize(slot_limit, 0);
        let mut history = Ghosts::new(slot_limit);
        let mut evicted_at = vec![0; slot_limit];
        for list in [H_LRU, H_LFU] {
            for (old, key) in self.history.nodes_oldest_first(list) {
                if let Some(new) = history.push_front_node(list, key) {
                    evicted_at[new as usize] = self.evicted_at[old as usize];
                }
            }
        }
        self.history = history;
        self.evicted_at = evicted_at;
    }

    /// A hit moves the slot's recency links and its frequency links and group: all three
    /// are loaded.
    #[inline]
    fn prefetch(&self, slot: Slot) {
        self.recency.prefetch(slot);
        let f = &self.frequency;
        tiercache_core::hint::prefetch(f.links.as_ptr().wrapping_add(slot as usize));
        tiercache_core::hint::prefetch(f.group_of.as_ptr().wrapping_add(slot as usize));
    }

    /// Both experts' choices (with nothing pinned), the likelier one first by the current
    /// weights: the draw decides which leaves, so the caller loads both. Also starts loading
    /// what the eviction touches of each (its key, its links in the other expert's order) and
    /// the oldest key of the likelier expert's history.
    #[inline]
    fn victim_hint(&self) -> Option<(Slot, Option<Slot>)> {
        let by_lru = self.recency.back(0)?;
        let g = self.frequency.lowest;
        if g == NIL {
            return Some((by_lru, None));
        }
        let by_lfu = self.frequency.groups[g as usize].first;
        let keys = self.keys.as_ptr();
        tiercache_core::hint::prefetch(keys.wrapping_add(by_lru as usize));
        tiercache_core::hint::prefetch(keys.wrapping_add(by_lfu as usize));
        self.recency.prefetch(by_lfu);
        let f = &self.frequency;
        tiercache_core::hint::prefetch(f.links.as_ptr().wrapping_add(by_lru as usize));
        tiercache_core::hint::prefetch(f.group_of.as_ptr().wrapping_add(by_lru as usize));
        Some(if self.w_lru >= 0.5 {
            self.history.prefetch_oldest(H_LRU);
            (by_lru, Some(by_lfu))
        } else {
            self.history.prefetch_oldest(H_LFU);
            (by_lfu, Some(by_lru))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNPINNED: &dyn Fn(Slot) -> bool = &|_| false;

    #[test]
    fn frequency_order_groups_by_count_then_arrival() {
        let mut f = FrequencyOrder::new(6);
        for s in 0..4 {
            f.add(s, false);
        }
        f.bump(0);
        f.bump(2);
        f.bump(0);
        assert_eq!((f.frequency(0), f.frequency(2), f.frequency(1)), (3, 2, 1));
        assert_eq!(f.first_unpinned(UNPINNED), Some(1));
        assert_eq!(f.first_unpinned(&|s| s == 1 || s == 3), Some(2));
        f.detach(1);
        f.detach(3);
        assert_eq!(f.first_unpinned(UNPINNED), Some(2));
        f.add(5, false);
        f.add(4, true);
        assert_eq!(f.first_unpinned(UNPINNED), Some(4));
        // Every group freed again once empty.
        for s in [0, 2, 4, 5] {
            f.detach(s);
        }
        assert_eq!(f.lowest, NIL);
        assert_eq!(f.free.len(), 6);
    }

    #[test]
    fn same_choice_leaves_without_history_and_history_hits_move_the_weight() {
        let mut p = LeCaR::new(4, 4);
        for s in 0..4 {
            p.insert(s, LineKey(s as u64));
        }
        // LRU and LFU both choose slot 0: no history entry.
        assert_eq!(p.evict(LineKey(10), UNPINNED), Some(0));
        p.insert(0, LineKey(10));
        assert_eq!(p.history.total_len(), 0);
        // Make the choices differ: slot 1 is LRU's, but hit it twice so LFU picks slot 2.
        p.hit(1);
        p.hit(1);
        p.hit(2);
        p.hit(3);
        p.hit(0);
        let v = p.evict(LineKey(11), UNPINNED).unwrap();
        let list = if v == 1 { H_LRU } else { H_LFU };
        assert_eq!(p.history.len(list), 1);
        p.insert(v, LineKey(11));
        // The evicted key returns: its expert loses weight.
        let before = p.lru_weight();
        let w = p.evict(LineKey(v as u64), UNPINNED).unwrap();
        p.insert(w, LineKey(v as u64));
        if list == H_LRU {
            assert!(p.lru_weight() < before);
        } else {
            assert!(p.lru_weight() > before);
        }
        assert!((0.0..=1.0).contains(&p.lru_weight()));
    }
}
