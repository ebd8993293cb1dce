//! Ghost lists: bounded FIFO/LRU lists of *keys* of lines that recently left the cache.
//!
//! ARC (B1, B2) and S3-FIFO (its ghost queue) remember evicted keys without data. A ghost entry
//! is a node of a fixed pool (its key plus intrusive links, see [`crate::list`]); unused nodes
//! wait in a free list threaded through the same links. Keys are found through an
//! open-addressing table of (node number, hash tag) buckets (linear probing, at most half
//! full, deletion by backward shift so no tombstones build up). The tag is the top 32 bits of the
//! key's hash, which gives its home bucket too: a probe compares tags and reads a node's key
//! only on a tag match, and a deletion shifts buckets without reading any key (one cache miss
//! per lookup instead of one per bucket probed). Everything is sized at construction: ghost
//! operations never allocate. Per entry this costs 8 bytes of key, 8 of links, 1 of owner (with
//! two lists) and 16 of table (the table is sized to the capacity, not rounded up to a power
//! of two: a home bucket is the tag scaled to the table's length).
//!
//! New entries enter at the front of a list, the oldest leave at the back, a hit removes an
//! entry from the middle.

use crate::list::Lists;
use tiercache_core::LineKey;

/// Node number of an empty bucket.
const EMPTY: u32 = u32::MAX;
/// Most buckets a table has (a home is a 32-bit tag scaled to the length).
const MAX_BUCKETS: usize = 1 << 32;

/// A bucket of the key table: a node and the top 32 bits of its key's hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(8))]
struct Bucket {
    node: u32,
    tag: u32,
}

const EMPTY_BUCKET: Bucket = Bucket {
    node: EMPTY,
    tag: 0,
};
/// Number of lists a [`Ghosts`] may use; the pool's free list is the last list.
const MAX_LISTS: usize = 2;
const FREE: usize = MAX_LISTS;

/// Up to `capacity` keys spread over `N` (at most 2) ordered lists.
#[derive(Debug, Clone)]
pub(crate) struct Ghosts<const N: usize> {
    /// Lists `0..N` hold entries, list [`FREE`] holds unused nodes.
    lists: Lists<{ MAX_LISTS + 1 }>,
    /// Key held by each node.
    keys: Vec<u64>,
    /// List holding each node (meaningful only while it is in use).
    owner: Vec<u8>,
    /// Open-addressing table of nodes and tags, always with an empty bucket (it has more
    /// buckets than the pool has nodes).
    table: Vec<Bucket>,
    /// Entries in use.
    used: usize,
    /// Most entries held at once (at most the pool size, `keys.len()`).
    limit: usize,
    /// The oldest node [`Ghosts::prefetch_oldest`] last started loading ([`EMPTY`]: none):
    /// when the next call finds it still oldest, its key is loaded and its bucket can be.
    hinted_oldest: std::cell::Cell<u32>,
}

impl<const N: usize> Ghosts<N> {
    /// An empty set able to hold `capacity` keys.
    pub(crate) fn new(capacity: usize) -> Self {
        assert!(N <= MAX_LISTS, "at most {MAX_LISTS} ghost lists");
        let mut lists = Lists::new(capacity);
        for node in 0..capacity as u32 {
            lists.push_front(FREE, node);
        }
        // At most half full keeps probe sequences short (a miss probes about 2.5 buckets,
        // and a deletion shifts few); at 60 % an S3-FIFO replay took 11 % more CPU.
        let buckets = (2 * capacity).clamp(2, MAX_BUCKETS);
        Ghosts {
            lists,
            keys: vec![0; capacity],
            // With a single list every node belongs to list 0: no need to record it.
            owner: if N > 1 { vec![0; capacity] } else { Vec::new() },
            table: vec![EMPTY_BUCKET; buckets],
            used: 0,
            limit: capacity,
            hinted_oldest: std::cell::Cell::new(EMPTY),
        }
    }

    /// Most keys held at once.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.limit
    }

    /// Changes the most keys held at once. Shrinking drops the oldest keys of the longest
    /// list (the first on a tie) until the set fits, as [`Ghosts::push_front`] would; growing
    /// past the pool allocated so far rebuilds it (the only allocation after construction),
    /// keeping every key and its order.
    pub(crate) fn set_limit(&mut self, limit: usize) {
        if limit > self.keys.len() {
            let mut grown = Ghosts::<N>::new(limit);
            for list in 0..N {
                // Oldest first, so pushing at the front rebuilds the same order.
                let mut cur = self.lists.back(list);
                while let Some(node) = cur {
                    grown.push_front(list, LineKey(self.keys[node as usize]));
                    cur = self.lists.newer(node);
                }
            }
            *self = grown;
        }
        self.limit = limit;
        while self.used > self.limit {
            let longest = self.longest();
            self.pop_back(longest);
        }
    }

    /// The first of the longest lists.
    #[inline]
    fn longest(&self) -> usize {
        (1..N).fold(0, |best, l| {
            if self.lists.len(l) > self.lists.len(best) {
                l
            } else {
                best
            }
        })
    }

    /// Keys in `list`.
    #[inline]
    pub(crate) fn len(&self, list: usize) -> usize {
        self.lists.len(list)
    }

    /// Keys in all lists.
    #[inline]
    pub(crate) fn total_len(&self) -> usize {
        self.used
    }

    /// Tag of `key`: the top 32 bits of its Fibonacci hash (the multiply spreads the key into
    /// the top bits, which line keys with few distinct high bits need).
    #[inline]
    fn tag(key: u64) -> u32 {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32
    }

    /// Home bucket of a key with tag `tag`: the tag scaled to the table's length (Lemire's
    /// multiply-shift, uniform as the tag is).
    #[inline]
    fn home(&self, tag: u32) -> usize {
        ((tag as u64 * self.table.len() as u64) >> 32) as usize
    }

    /// The bucket after `i`, wrapping at the table's end.
    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.table.len() {
            0
        } else {
            i + 1
        }
    }

    /// Starts loading the bucket where a lookup of `key` begins (a hint: changes nothing).
    #[inline]
    pub(crate) fn prefetch(&self, key: LineKey) {
        let home = self.home(Self::tag(key.0));
        tiercache_core::hint::prefetch(self.table.as_ptr().wrapping_add(home));
    }

    /// Hint that `list`'s oldest key may be dropped soon ([`Ghosts::pop_back`]): starts
    /// loading its node (key and links) and, when an earlier call already loaded that key,
    /// its table bucket. Changes nothing the set answers.
    #[inline]
    pub(crate) fn prefetch_oldest(&self, list: usize) {
        let Some(node) = self.lists.back(list) else {
            return;
        };
        if self.hinted_oldest.get() == node {
            self.prefetch(LineKey(self.keys[node as usize]));
        } else {
            tiercache_core::hint::prefetch(self.keys.as_ptr().wrapping_add(node as usize));
            self.lists.prefetch(node);
            self.hinted_oldest.set(node);
        }
    }

    /// Bucket holding `key`, if present.
    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        let tag = Self::tag(key);
        let mut i = self.home(tag);
        loop {
            let b = self.table[i];
            if b.node == EMPTY {
                return None;
            }
            if b.tag == tag && self.keys[b.node as usize] == key {
                return Some(i);
            }
            i = self.next(i);
        }
    }

    /// Empties bucket `hole`, shifting later members of its probe run back so that every key
    /// stays reachable from its home bucket without tombstones.
    fn delete_bucket(&mut self, mut hole: usize) {
        let mut j = hole;
        loop {
            j = self.next(j);
            let b = self.table[j];
            if b.node == EMPTY {
                break;
            }
            let home = self.home(b.tag);
            // The entry at j may fill the hole if its home is not cyclically in (hole, j].
            let home_in_between = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !home_in_between {
                self.table[hole] = b;
                hole = j;
            }
        }
        self.table[hole] = EMPTY_BUCKET;
    }

    /// Removes `key` if present and returns the list that held it.
    #[inline]
    pub(crate) fn remove(&mut self, key: LineKey) -> Option<usize> {
        self.remove_node(key).map(|(list, _)| list)
    }

    /// Removes `key` if present and returns the list that held it and the node it used (a
    /// caller keeping per-entry data in its own array indexed by node reads it there).
    #[inline]
    pub(crate) fn remove_node(&mut self, key: LineKey) -> Option<(usize, u32)> {
        if self.used == 0 {
            return None;
        }
        let bucket = self.find(key.0)?;
        let node = self.table[bucket].node;
        self.delete_bucket(bucket);
        let list = if N > 1 {
            self.owner[node as usize] as usize
        } else {
            0
        };
        self.lists.move_to_front(list, FREE, node);
        self.used -= 1;
        Some((list, node))
    }

    /// Removes and returns the oldest key of `list`.
    #[inline]
    pub(crate) fn pop_back(&mut self, list: usize) -> Option<LineKey> {
        let node = self.lists.back(list)?;
        let key = self.keys[node as usize];
        let bucket = self.find(key).expect("ghost node is indexed");
        self.delete_bucket(bucket);
        self.lists.move_to_front(list, FREE, node);
        self.used -= 1;
        Some(LineKey(key))
    }

    /// Adds `key` (not present) at the front of `list`. When the set is full the oldest key
    /// of the longest list (the first on a tie) is dropped first, so the set never exceeds its capacity; a set of
    /// capacity zero ignores the call.
    #[inline]
    pub(crate) fn push_front(&mut self, list: usize, key: LineKey) {
        self.push_front_node(list, key);
    }

    /// [`Ghosts::push_front`], returning the node that holds the key (below the capacity
    /// given at construction), or `None` for a set of capacity zero.
    #[inline]
    pub(crate) fn push_front_node(&mut self, list: usize, key: LineKey) -> Option<u32> {
        debug_assert!(list < N);
        debug_assert!(self.find(key.0).is_none(), "ghost key {key:?} added twice");
        if self.used >= self.limit && self.pop_back(self.longest()).is_none() {
            return None; // a set of limit zero
        }
        let node = self.lists.pop_back(FREE)?;
        self.keys[node as usize] = key.0;
        if N > 1 {
            self.owner[node as usize] = list as u8;
        }
        self.lists.push_front(list, node);
        let tag = Self::tag(key.0);
        let mut i = self.home(tag);
        while self.table[i].node != EMPTY {
            i = self.next(i);
        }
        self.table[i] = Bucket { node, tag };
        self.used += 1;
        Some(node)
    }

    /// Nodes and keys of `list`, oldest first (allocates: for rebuilding a caller's
    /// per-node data when it regrows the set).
    pub(crate) fn nodes_oldest_first(&self, list: usize) -> Vec<(u32, LineKey)> {
        let mut out = Vec::with_capacity(self.len(list));
        let mut cur = self.lists.back(list);
        while let Some(node) = cur {
            out.push((node, LineKey(self.keys[node as usize])));
            cur = self.lists.newer(node);
        }
        out
    }

    /// Keys of `list` from newest to oldest (tests only).
    #[cfg(test)]
    pub(crate) fn keys_of(&self, list: usize) -> Vec<LineKey> {
        self.lists
            .to_vec(list)
            .into_iter()
            .map(|n| LineKey(self.keys[n as usize]))
            .collect()
    }

    /// Heap bytes: node arrays and the table.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.lists.memory_bytes()
            + self.keys.capacity() * 8
            + self.owner.capacity()
            + self.table.capacity() * std::mem::size_of::<Bucket>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn fifo_order_removal_and_capacity_bound() {
        let mut g = Ghosts::<2>::new(3);
        g.push_front(0, LineKey(1));
        g.push_front(0, LineKey(2));
        g.push_front(1, LineKey(3));
        assert_eq!(g.total_len(), 3);
        assert_eq!(g.remove(LineKey(2)), Some(0));
        assert_eq!(g.remove(LineKey(2)), None);
        g.push_front(1, LineKey(4));
        // Full: adding drops the oldest of the longest list (list 1: key 3).
        g.push_front(0, LineKey(5));
        assert_eq!(g.total_len(), 3);
        assert_eq!(g.keys_of(0), vec![LineKey(5), LineKey(1)]);
        assert_eq!(g.keys_of(1), vec![LineKey(4)]);
        assert_eq!(g.pop_back(0), Some(LineKey(1)));
        assert_eq!(g.remove(LineKey(1)), None);
        assert_eq!(g.len(0), 1);
    }

    #[test]
    fn zero_capacity_holds_nothing() {
        let mut g = Ghosts::<1>::new(0);
        g.push_front(0, LineKey(7));
        assert_eq!(g.total_len(), 0);
        assert_eq!(g.remove(LineKey(7)), None);
        assert_eq!(g.capacity(), 0);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(usize, u64),
        Remove(u64),
        PopBack(usize),
        SetLimit(usize),
    }

    proptest! {
        /// The pool-and-table set behaves like two bounded deques searched linearly, including
        /// keys that collide in the table (keys spaced by a multiple of the table size).
        #[test]
        fn ghosts_match_deques(
            capacity in 0usize..9,
            spread in prop_oneof![Just(1u64), Just(1u64 << 40), Just(16u64)],
            ops in proptest::collection::vec(prop_oneof![
                (0..2usize, 0..24u64).prop_map(|(l, k)| Op::Push(l, k)),
                (0..24u64).prop_map(Op::Remove),
                (0..2usize).prop_map(Op::PopBack),
                (0..12usize).prop_map(Op::SetLimit),
            ], 0..300),
        ) {
            let mut g = Ghosts::<2>::new(capacity);
            let mut capacity = capacity;
            let mut model: [VecDeque<u64>; 2] = [VecDeque::new(), VecDeque::new()];
            for op in ops {
                match op {
                    Op::Push(l, k) => {
                        let k = k.wrapping_mul(spread);
                        if model.iter().any(|q| q.contains(&k)) {
                            continue;
                        }
                        g.push_front(l, LineKey(k));
                        if capacity > 0 {
                            if model[0].len() + model[1].len() == capacity {
                                let longest = if model[1].len() > model[0].len() { 1 } else { 0 };
                                model[longest].pop_back();
                            }
                            model[l].push_front(k);
                        }
                    }
                    Op::Remove(k) => {
                        let k = k.wrapping_mul(spread);
                        let want = model.iter().position(|q| q.contains(&k));
                        if let Some(l) = want {
                            model[l].retain(|&x| x != k);
                        }
                        prop_assert_eq!(g.remove(LineKey(k)), want);
                    }
                    Op::PopBack(l) => {
                        prop_assert_eq!(g.pop_back(l), model[l].pop_back().map(LineKey));
                    }
                    Op::SetLimit(n) => {
                        g.set_limit(n);
                        capacity = n;
                        while model[0].len() + model[1].len() > n {
                            let longest = if model[1].len() > model[0].len() { 1 } else { 0 };
                            model[longest].pop_back();
                        }
                    }
                }
                for (l, q) in model.iter().enumerate() {
                    prop_assert_eq!(g.keys_of(l), q.iter().map(|&k| LineKey(k)).collect::<Vec<_>>());
                }
                prop_assert_eq!(g.total_len(), model[0].len() + model[1].len());
                prop_assert!(g.total_len() <= g.capacity());
            }
        }
    }
}
