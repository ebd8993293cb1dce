//! Intrusive doubly-linked lists over a fixed array of node indices.
//!
//! Every policy orders slots with one or more lists. The links live in two `u32` arrays indexed
//! by node (slot) number, so a list operation is a handful of array writes and never allocates.
//! Each list is circular around its own sentinel node, stored just past the last real node
//! (`n_nodes + list_index`); that makes insertion and unlinking branch-free and lets a node be
//! unlinked without knowing which list holds it. Unlinked nodes carry [`NIL`] links.
//!
//! Orientation: the *front* (head) is where new nodes enter; the *back* (tail) is the oldest end.
//! `prev` points towards the front, `next` towards the back, as in libCacheSim's queues.

use crate::packed::{PackedLinks, NO_LINK};

/// Link value of a node that is in no list.
pub(crate) const NIL: u32 = NO_LINK;

/// `N` circular doubly-linked lists sharing one pair of link arrays.
#[derive(Debug, Clone)]
pub(crate) struct Lists<const N: usize> {
    /// Per node `[prev, next]`: towards the front (newer end) and towards the back (older end).
    /// Index `n_nodes + i` is list `i`'s sentinel. Both links of a node share a cache line.
    /// Packed at the width the nodes need (`packed.rs`, docs/design.md §13).
    links: PackedLinks,
    /// Number of real nodes; sentinels follow.
    n_nodes: u32,
    /// Length of each list.
    lens: [u32; N],
}

impl<const N: usize> Lists<N> {
    /// Lists over nodes `0..n_nodes`, all empty.
    ///
    /// # Panics
    /// If `n_nodes + N` does not fit below [`NIL`] (a configuration error caught at build time).
    pub(crate) fn new(n_nodes: usize) -> Self {
        let total = n_nodes
            .checked_add(N)
            .filter(|&t| t < NIL as usize)
            .unwrap_or_else(|| panic!("{n_nodes} slots exceed the u32 link space"));
        let mut links = PackedLinks::new(total, total);
        for i in 0..N {
            let s = (n_nodes + i) as u32;
            links.set_pair(s, [s, s]);
        }
        Lists {
            links,
            n_nodes: n_nodes as u32,
            lens: [0; N],
        }
    }

    #[inline]
    fn sentinel(&self, list: usize) -> u32 {
        debug_assert!(list < N);
        self.n_nodes + list as u32
    }

    /// Number of real nodes (the slot limit).
    #[inline]
    pub(crate) fn slot_limit(&self) -> usize {
        self.n_nodes as usize
    }

    /// Whether `idx` is a sentinel (the end of a walk) rather than a real node.
    #[inline]
    pub(crate) fn is_end(&self, idx: u32) -> bool {
        idx >= self.n_nodes
    }

    /// Number of nodes in `list`.
    #[inline]
    pub(crate) fn len(&self, list: usize) -> usize {
        self.lens[list] as usize
    }

    /// Whether `node` is in some list.
    #[inline]
    pub(crate) fn is_linked(&self, node: u32) -> bool {
        self.links.get(node, 1) != NIL
    }

    /// Newest node of `list`.
    #[inline]
    pub(crate) fn front(&self, list: usize) -> Option<u32> {
        let f = self.links.get(self.sentinel(list), 1);
        (!self.is_end(f)).then_some(f)
    }

    /// Oldest node of `list`.
    #[inline]
    pub(crate) fn back(&self, list: usize) -> Option<u32> {
        let b = self.links.get(self.sentinel(list), 0);
        (!self.is_end(b)).then_some(b)
    }

    /// Neighbour of `node` towards the front (newer); `None` at the front.
    #[inline]
    pub(crate) fn newer(&self, node: u32) -> Option<u32> {
        let p = self.links.get(node, 0);
        (!self.is_end(p)).then_some(p)
    }

    /// Neighbour of `node` towards the back (older); `None` at the back.
    #[inline]
    pub(crate) fn older(&self, node: u32) -> Option<u32> {
        let n = self.links.get(node, 1);
        (!self.is_end(n)).then_some(n)
    }

    /// Oldest node of `list` for which `pinned` is false.
    #[inline]
    pub(crate) fn oldest_unpinned(&self, list: usize, pinned: &dyn Fn(u32) -> bool) -> Option<u32> {
        let mut cur = self.back(list);
        while let Some(n) = cur {
            if !pinned(n) {
                return Some(n);
            }
            cur = self.newer(n);
        }
        None
    }

    /// Newest node of `list` for which `pinned` is false.
    #[inline]
    pub(crate) fn newest_unpinned(&self, list: usize, pinned: &dyn Fn(u32) -> bool) -> Option<u32> {
        let mut cur = self.front(list);
        while let Some(n) = cur {
            if !pinned(n) {
                return Some(n);
            }
            cur = self.older(n);
        }
        None
    }

    /// Links an unlinked `node` at the front of `list`.
    #[inline]
    pub(crate) fn push_front(&mut self, list: usize, node: u32) {
        debug_assert!(!self.is_linked(node), "node {node} linked twice");
        let s = self.sentinel(list);
        let old_front = self.links.get(s, 1);
        self.links.set_pair(node, [s, old_front]);
        self.links.set(old_front, 0, node);
        self.links.set(s, 1, node);
        self.lens[list] += 1;
    }

    /// Links an unlinked `node` into `list` just older than `newer` (a node of `list`, or its
    /// sentinel for the front).
    #[inline]
    fn link_older_than(&mut self, list: usize, newer: u32, node: u32) {
        debug_assert!(!self.is_linked(node), "node {node} linked twice");
        let older = self.links.get(newer, 1);
        self.links.set_pair(node, [newer, older]);
        self.links.set(older, 0, node);
        self.links.set(newer, 1, node);
        self.lens[list] += 1;
    }

    /// Links an unlinked `node` at the back (oldest end) of `list`.
    #[inline]
    pub(crate) fn push_back(&mut self, list: usize, node: u32) {
        let s = self.sentinel(list);
        // The node newer than the new back: the old back, or the sentinel of an empty list.
        let newer = self.links.get(s, 0);
        self.link_older_than(list, newer, node);
    }

    /// Links an unlinked `node` into `list` just older than `anchor`, a node of `list`.
    #[inline]
    pub(crate) fn insert_older(&mut self, list: usize, anchor: u32, node: u32) {
        debug_assert!(self.is_linked(anchor) && !self.is_end(anchor));
        self.link_older_than(list, anchor, node);
    }

    /// Links an unlinked `node` into `list` just newer than `anchor`, a node of `list`.
    #[inline]
    pub(crate) fn insert_newer(&mut self, list: usize, anchor: u32, node: u32) {
        debug_assert!(self.is_linked(anchor) && !self.is_end(anchor));
        let newer = self.links.get(anchor, 0);
        self.link_older_than(list, newer, node);
    }

    /// Unlinks `node` from `list` (which must hold it).
    #[inline]
    pub(crate) fn unlink(&mut self, list: usize, node: u32) {
        debug_assert!(self.is_linked(node), "node {node} not linked");
        let [p, n] = self.links.pair(node);
        self.links.set(p, 1, n);
        self.links.set(n, 0, p);
        self.links.set_pair(node, [NIL, NIL]);
        self.lens[list] -= 1;
    }

    /// Unlinks and returns the oldest node of `list`.
    #[inline]
    pub(crate) fn pop_back(&mut self, list: usize) -> Option<u32> {
        let node = self.back(list)?;
        self.unlink(list, node);
        Some(node)
    }

    /// Moves `node` from list `from` to the front of list `to` (`from == to` allowed).
    /// Inlined into each policy's hit, the commonest call of all.
    #[inline(always)]
    pub(crate) fn move_to_front(&mut self, from: usize, to: usize, node: u32) {
        let s = self.sentinel(to);
        let old_front = self.links.get(s, 1);
        if from == to && old_front == node {
            return; // already the newest: skip four writes on a hot line
        }
        // `unlink` then `push_front`, without writing the node's links twice (`NIL`, then
        // its new ones) or reading the front again: the hit is every policy's commonest
        // call (docs/design.md §4.4).
        let [p, n] = self.links.pair(node);
        self.links.set(p, 1, n);
        self.links.set(n, 0, p);
        // `old_front` is not `node` (that returned above, or `node` is in another list); if it
        // was `p`, only its older link changed, and its newer one is set next.
        self.links.set_pair(node, [s, old_front]);
        self.links.set(old_front, 0, node);
        self.links.set(s, 1, node);
        self.lens[from] -= 1;
        self.lens[to] += 1;
    }

    /// Nodes of `list` from front to back (for tests and debugging; allocates).
    #[cfg(test)]
    pub(crate) fn to_vec(&self, list: usize) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.len(list));
        let mut cur = self.front(list);
        while let Some(n) = cur {
            out.push(n);
            cur = self.older(n);
        }
        out
    }

    /// Hints that `node`'s links are touched soon.
    #[inline]
    pub(crate) fn prefetch(&self, node: u32) {
        self.links.prefetch(node);
    }

    /// Raises the number of real nodes to `n_nodes` (no-op if not larger): the sentinels move
    /// past the new nodes and the ends of each list are relinked to them; order and lengths
    /// are unchanged.
    ///
    /// # Panics
    /// As [`Lists::new`], if `n_nodes + N` does not fit below [`NIL`].
    pub(crate) fn grow(&mut self, n_nodes: usize) {
        let old = self.n_nodes;
        if n_nodes <= old as usize {
            return;
        }
        let total = n_nodes
            .checked_add(N)
            .filter(|&t| t < NIL as usize)
            .unwrap_or_else(|| panic!("{n_nodes} slots exceed the u32 link space"));
        let new = n_nodes as u32;
        let ends: [[u32; 2]; N] = std::array::from_fn(|i| self.links.pair(old + i as u32));
        self.links = self.links.resized(total, total);
        for i in 0..N {
            // The old sentinel's place is now a real node, in no list.
            self.links.set_pair(old + i as u32, [NIL, NIL]);
        }
        for (i, [back, front]) in ends.into_iter().enumerate() {
            let (was, s) = (old + i as u32, new + i as u32);
            if front == was {
                // Empty list: its sentinel points at itself.
                self.links.set_pair(s, [s, s]);
            } else {
                self.links.set_pair(s, [back, front]);
                self.links.set(front, 0, s);
                self.links.set(back, 1, s);
            }
        }
        self.n_nodes = new;
    }

    /// Heap bytes of the link arrays.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.links.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[derive(Debug, Clone)]
    enum Op {
        PushFront(usize, u32),
        PushBack(usize, u32),
        InsertOlder(u32, u32),
        Unlink(u32),
        MoveToFront(u32, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..2usize, 0..12u32).prop_map(|(l, n)| Op::PushFront(l, n)),
            (0..2usize, 0..12u32).prop_map(|(l, n)| Op::PushBack(l, n)),
            (0..12u32, 0..12u32).prop_map(|(a, n)| Op::InsertOlder(a, n)),
            (0..12u32).prop_map(Op::Unlink),
            (0..12u32, 0..2usize).prop_map(|(n, l)| Op::MoveToFront(n, l)),
        ]
    }

    proptest! {
        /// Two lists over 12 nodes behave like two `VecDeque`s under random operations.
        #[test]
        fn lists_match_vecdeques(ops in proptest::collection::vec(op(), 0..200)) {
            let mut lists = Lists::<2>::new(12);
            let mut model: [VecDeque<u32>; 2] = [VecDeque::new(), VecDeque::new()];
            let where_is = |m: &[VecDeque<u32>; 2], n: u32| m.iter().position(|q| q.contains(&n));
            for op in ops {
                match op {
                    Op::PushFront(l, n) => {
                        if where_is(&model, n).is_none() {
                            lists.push_front(l, n);
                            model[l].push_front(n);
                        }
                    }
                    Op::PushBack(l, n) => {
                        if where_is(&model, n).is_none() {
                            lists.push_back(l, n);
                            model[l].push_back(n);
                        }
                    }
                    Op::InsertOlder(a, n) => {
                        if let (Some(l), None) = (where_is(&model, a), where_is(&model, n)) {
                            lists.insert_older(l, a, n);
                            let i = model[l].iter().position(|&x| x == a).unwrap();
                            model[l].insert(i + 1, n);
                        }
                    }
                    Op::Unlink(n) => {
                        if let Some(l) = where_is(&model, n) {
                            lists.unlink(l, n);
                            model[l].retain(|&x| x != n);
                        }
                        prop_assert!(!lists.is_linked(n));
                    }
                    Op::MoveToFront(n, to) => {
                        if let Some(from) = where_is(&model, n) {
                            lists.move_to_front(from, to, n);
                            model[from].retain(|&x| x != n);
                            model[to].push_front(n);
                        }
                    }
                }
                for (l, q) in model.iter().enumerate() {
                    prop_assert_eq!(lists.to_vec(l), q.iter().copied().collect::<Vec<_>>());
                    prop_assert_eq!(lists.len(l), q.len());
                    prop_assert_eq!(lists.front(l), q.front().copied());
                    prop_assert_eq!(lists.back(l), q.back().copied());
                }
            }
        }
    }

    #[test]
    fn walking_from_back_visits_newer_nodes() {
        let mut lists = Lists::<1>::new(4);
        for n in [3, 1, 2] {
            lists.push_front(0, n);
        }
        // Front is the newest: 2, 1, 3.
        let mut seen = vec![];
        let mut cur = lists.back(0);
        while let Some(n) = cur {
            seen.push(n);
            cur = lists.newer(n);
        }
        assert_eq!(seen, vec![3, 1, 2]);
        assert!(lists.is_linked(1));
        assert!(!lists.is_linked(0));
    }
}
