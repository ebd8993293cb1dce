//! Ghost lists: bounded FIFO/LRU lists of *keys* of lines that recently left the cache.
//!
//! ARC (B1, B2), CAR, CLOCK-Pro, LeCaR, S3-FIFO and 2Q remember evicted keys without data. A
//! ghost entry is a node of a fixed pool: one 16-byte record holding its key and its two list
//! links, so reaching an entry (to check its key, unlink it or drop it as the oldest) loads
//! one cache line, not a key in one array and links in another. Each list is circular around
//! its own sentinel node (just past the pool), so unlinking needs no branch on the ends.
//! Unused nodes form a stack threaded through their links: the node a removal or a drop just
//! freed (whose line is loaded) is the one the next key takes, which is what an eviction does
//! (drop the oldest ghost, then remember the victim's key).
//!
//! Keys are found through an open-addressing table of (node number, hash tag) buckets (linear
//! probing, at most half full, deletion by backward shift so no tombstones build up). The tag
//! is the top 32 bits of the key's hash, which gives its home bucket too: a probe compares tags
//! and reads a node's key only on a tag match, and a deletion shifts buckets without reading any
//! key (one cache miss per lookup instead of one per bucket probed). Dropping the oldest key
//! looks its bucket up by node number, reading no other node. Everything is sized at
//! construction: ghost operations never allocate. Per entry this costs 16 bytes of node (key
//! and links), 1 of owner (with two lists) and 16 of table (the table is sized to the capacity,
//! not rounded up to a power of two: a home bucket is the tag scaled to the table's length).
//!
//! New entries enter at the front of a list, the oldest leave at the back, a hit removes an
//! entry from the middle.

use tiercache_core::LineKey;

/// Node number of an empty bucket, and the end of the free stack.
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
/// Number of lists a [`Ghosts`] may use.
const MAX_LISTS: usize = 2;

/// A pool node: a key and its links. `newer` points towards the front of its list, `older`
/// towards the back (a sentinel's `newer` is its list's oldest node, its `older` the newest);
/// a free node's `older` is the next free node.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(16))]
struct Node {
    key: u64,
    newer: u32,
    older: u32,
}

/// Up to `capacity` keys spread over `N` (at most 2) ordered lists.
#[derive(Debug, Clone)]
pub(crate) struct Ghosts<const N: usize> {
    /// Nodes `0..pool` hold keys; node `pool + l` is list `l`'s sentinel.
    nodes: Vec<Node>,
    /// Number of pool nodes (sentinels follow).
    pool: u32,
    /// Top of the stack of unused nodes ([`EMPTY`]: none).
    free: u32,
    /// Keys in each list.
    lens: [u32; N],
    /// List holding each node (meaningful only while it is in use).
    owner: Vec<u8>,
    /// Open-addressing table of nodes and tags, always with an empty bucket (it has more
    /// buckets than the pool has nodes).
    table: Vec<Bucket>,
    /// Entries in use.
    used: usize,
    /// Most entries held at once (at most the pool size).
    limit: usize,
    /// The oldest node [`Ghosts::prefetch_oldest`] last started loading ([`EMPTY`]: none):
    /// when the next call finds it still oldest, its key is loaded and its bucket can be.
    hinted_oldest: std::cell::Cell<u32>,
    /// The node after the oldest that [`Ghosts::prefetch_oldest`] last started loading.
    hinted_next: std::cell::Cell<u32>,
}

impl<const N: usize> Ghosts<N> {
    /// An empty set able to hold `capacity` keys.
    pub(crate) fn new(capacity: usize) -> Self {
        assert!(N <= MAX_LISTS, "at most {MAX_LISTS} ghost lists");
        let pool = u32::try_from(capacity)
            .ok()
            .filter(|&p| (p as usize) + N < EMPTY as usize)
            .unwrap_or_else(|| panic!("{capacity} ghost keys exceed the u32 node space"));
        let mut nodes: Vec<Node> = Vec::with_capacity(pool as usize + N);
        nodes.extend((0..pool).map(|i| Node {
            key: 0,
            newer: EMPTY,
            older: if i + 1 < pool { i + 1 } else { EMPTY },
        }));
        for l in 0..N as u32 {
            let s = pool + l;
            nodes.push(Node {
                key: 0,
                newer: s,
                older: s,
            });
        }
        // At most half full keeps probe sequences short (a miss probes about 2.5 buckets,
        // and a deletion shifts few); at 60 % an S3-FIFO replay took 11 % more CPU.
        let buckets = (2 * capacity).clamp(2, MAX_BUCKETS);
        Ghosts {
            nodes,
            pool,
            free: if pool > 0 { 0 } else { EMPTY },
            lens: [0; N],
            // With a single list every node belongs to list 0: no need to record it.
            owner: if N > 1 { vec![0; capacity] } else { Vec::new() },
            table: vec![EMPTY_BUCKET; buckets],
            used: 0,
            limit: capacity,
            hinted_oldest: std::cell::Cell::new(EMPTY),
            hinted_next: std::cell::Cell::new(EMPTY),
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
        if limit > self.pool as usize {
            let mut grown = Ghosts::<N>::new(limit);
            for list in 0..N {
                // Oldest first, so pushing at the front rebuilds the same order.
                for (_, key) in self.nodes_oldest_first(list) {
                    grown.push_front(list, key);
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
            if self.lens[l] > self.lens[best] {
                l
            } else {
                best
            }
        })
    }

    /// Keys in `list`.
    #[inline]
    pub(crate) fn len(&self, list: usize) -> usize {
        self.lens[list] as usize
    }

    /// Keys in all lists.
    #[inline]
    pub(crate) fn total_len(&self) -> usize {
        self.used
    }

    /// Sentinel node of `list`.
    #[inline]
    fn sentinel(&self, list: usize) -> u32 {
        debug_assert!(list < N);
        self.pool + list as u32
    }

    /// Oldest node of `list`.
    #[inline]
    fn back(&self, list: usize) -> Option<u32> {
        let n = self.nodes[self.sentinel(list) as usize].newer;
        (n < self.pool).then_some(n)
    }

    /// The node after `node` towards the front of its list.
    #[inline]
    fn newer(&self, node: u32) -> Option<u32> {
        let n = self.nodes[node as usize].newer;
        (n < self.pool).then_some(n)
    }

    /// Links `node` at the front of `list`.
    #[inline]
    fn link_front(&mut self, list: usize, node: u32) {
        let s = self.sentinel(list);
        let front = self.nodes[s as usize].older;
        self.nodes[node as usize].newer = s;
        self.nodes[node as usize].older = front;
        self.nodes[front as usize].newer = node;
        self.nodes[s as usize].older = node;
        self.lens[list] += 1;
    }

    /// Unlinks `node` from `list` and pushes it on the free stack.
    #[inline]
    fn release(&mut self, list: usize, node: u32) {
        let Node { newer, older, .. } = self.nodes[node as usize];
        self.nodes[newer as usize].older = older;
        self.nodes[older as usize].newer = newer;
        self.nodes[node as usize].newer = EMPTY;
        self.nodes[node as usize].older = self.free;
        self.free = node;
        self.lens[list] -= 1;
        self.used -= 1;
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
    /// loading its node (key and links) and, once an earlier call has loaded that node (as
    /// the oldest or as the one after it), its table bucket and the next oldest node, whose
    /// links the drop rewrites. Changes nothing the set answers.
    #[inline]
    pub(crate) fn prefetch_oldest(&self, list: usize) {
        let Some(node) = self.back(list) else {
            return;
        };
        if self.hinted_oldest.get() == node || self.hinted_next.get() == node {
            let n = self.nodes[node as usize];
            self.prefetch(LineKey(n.key));
            if n.newer < self.pool {
                tiercache_core::hint::prefetch(self.nodes.as_ptr().wrapping_add(n.newer as usize));
                self.hinted_next.set(n.newer);
            }
        } else {
            tiercache_core::hint::prefetch(self.nodes.as_ptr().wrapping_add(node as usize));
        }
        self.hinted_oldest.set(node);
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
            if b.tag == tag && self.nodes[b.node as usize].key == key {
                return Some(i);
            }
            i = self.next(i);
        }
    }

    /// Bucket of `node` (in use, holding `key`): probes by node number, reading no other key.
    #[inline]
    fn find_node(&self, node: u32, key: u64) -> usize {
        let mut i = self.home(Self::tag(key));
        while self.table[i].node != node {
            debug_assert!(self.table[i].node != EMPTY, "ghost node is indexed");
            i = self.next(i);
        }
        i
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
        self.release(list, node);
        Some((list, node))
    }

    /// Removes and returns the oldest key of `list`.
    #[inline]
    pub(crate) fn pop_back(&mut self, list: usize) -> Option<LineKey> {
        let node = self.back(list)?;
        let key = self.nodes[node as usize].key;
        let bucket = self.find_node(node, key);
        self.delete_bucket(bucket);
        self.release(list, node);
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
        let node = self.free;
        if node == EMPTY {
            return None;
        }
        self.free = self.nodes[node as usize].older;
        self.nodes[node as usize].key = key.0;
        if N > 1 {
            self.owner[node as usize] = list as u8;
        }
        self.link_front(list, node);
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
        let mut cur = self.back(list);
        while let Some(node) = cur {
            out.push((node, LineKey(self.nodes[node as usize].key)));
            cur = self.newer(node);
        }
        out
    }

    /// Keys of `list` from newest to oldest (tests only).
    #[cfg(test)]
    pub(crate) fn keys_of(&self, list: usize) -> Vec<LineKey> {
        let mut keys: Vec<LineKey> = self
            .nodes_oldest_first(list)
            .into_iter()
            .map(|(_, k)| k)
            .collect();
        keys.reverse();
        keys
    }

    /// Heap bytes: the nodes (with the sentinels), owners and the table.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
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
