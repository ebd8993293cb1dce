//! An indexed 4-ary min-heap of slots, for a policy whose order a hit can move anywhere
//! (LRU-K): keys change in place (`O(log n)`), any slot can leave, nothing allocates
//! after construction (or [`SlotHeap::grow`]).
//!
//! Keys must be unique among the slots held (the policies make them so with a clock), so the
//! minimum, and hence the victim, does not depend on the heap's shape.
//!
//! Each entry holds its key beside its slot, so a sift compares entries it has already
//! loaded (children are adjacent) instead of looking each slot's key up elsewhere; four
//! children per node halve the depth, and a sift moves a hole rather than swapping (one
//! position write per level). Per slot: the entry (key, slot, padded) and a `u32` position.

use crate::list::NIL;

/// Children per node.
const ARITY: usize = 4;

/// A slot and its key, in heap order.
#[derive(Debug, Clone, Copy)]
struct Entry<K> {
    key: K,
    slot: u32,
}

/// Min-heap of slots `< slot_limit` keyed by `K`.
#[derive(Debug, Clone)]
pub(crate) struct SlotHeap<K> {
    /// Entries in heap order.
    heap: Vec<Entry<K>>,
    /// Position of each slot in `heap`, [`NIL`] when absent.
    pos: Vec<u32>,
}

impl<K: Copy + Ord> SlotHeap<K> {
    /// An empty heap for slots `< slot_limit`.
    pub(crate) fn new(slot_limit: usize) -> Self {
        SlotHeap {
            heap: Vec::with_capacity(slot_limit),
            pos: vec![NIL; slot_limit],
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    #[inline]
    pub(crate) fn contains(&self, slot: u32) -> bool {
        self.pos[slot as usize] != NIL
    }

    /// Key of `slot`, which must be held.
    #[inline]
    pub(crate) fn key(&self, slot: u32) -> K {
        self.heap[self.pos[slot as usize] as usize].key
    }

    /// The slot of the smallest key.
    #[inline]
    pub(crate) fn peek(&self) -> Option<u32> {
        self.heap.first().map(|e| e.slot)
    }

    /// Starts loading `slot`'s position and entry (a hint: changes nothing). The entry's
    /// address needs the position, so it is loaded only if the position already is.
    #[inline]
    pub(crate) fn prefetch(&self, slot: u32) {
        tiercache_core::hint::prefetch(self.pos.as_ptr().wrapping_add(slot as usize));
    }

    /// The slot of the smallest key that is not pinned: the top, else a scan (`O(n)`, only
    /// while the top is pinned).
    pub(crate) fn min_unpinned(&self, pinned: &dyn Fn(u32) -> bool) -> Option<u32> {
        let top = self.peek()?;
        if !pinned(top) {
            return Some(top);
        }
        self.heap
            .iter()
            .filter(|e| !pinned(e.slot))
            .min_by_key(|e| e.key)
            .map(|e| e.slot)
    }

    /// Adds `slot` (not held) with `key`.
    #[inline]
    pub(crate) fn push(&mut self, slot: u32, key: K) {
        debug_assert!(!self.contains(slot), "slot {slot} pushed twice");
        let i = self.heap.len();
        debug_assert!(
            i < self.heap.capacity(),
            "no room: the heap never allocates"
        );
        self.heap.push(Entry { key, slot });
        self.sift_up(i);
    }

    /// Changes the key of `slot` (held).
    #[inline]
    pub(crate) fn update(&mut self, slot: u32, key: K) {
        let i = self.pos[slot as usize] as usize;
        let old = std::mem::replace(&mut self.heap[i].key, key);
        if key < old {
            self.sift_up(i);
        } else {
            self.sift_down(i);
        }
    }

    /// Takes `slot` (held) out.
    #[inline]
    pub(crate) fn remove(&mut self, slot: u32) {
        let i = self.pos[slot as usize] as usize;
        let last = self.heap.pop().expect("slot is held");
        self.pos[slot as usize] = NIL;
        if i < self.heap.len() {
            self.heap[i] = last;
            if i > 0 && last.key < self.heap[(i - 1) / ARITY].key {
                self.sift_up(i);
            } else {
                self.sift_down(i);
            }
        }
    }

    /// Moves the entry at `i` up to its place.
    #[inline]
    fn sift_up(&mut self, mut i: usize) {
        let e = self.heap[i];
        while i > 0 {
            let parent = (i - 1) / ARITY;
            let p = self.heap[parent];
            if e.key >= p.key {
                break;
            }
            self.heap[i] = p;
            self.pos[p.slot as usize] = i as u32;
            i = parent;
        }
        self.heap[i] = e;
        self.pos[e.slot as usize] = i as u32;
    }

    /// Moves the entry at `i` down to its place.
    #[inline]
    fn sift_down(&mut self, mut i: usize) {
        let e = self.heap[i];
        let n = self.heap.len();
        loop {
            let first = ARITY * i + 1;
            if first >= n {
                break;
            }
            let mut m = first;
            for c in first + 1..(first + ARITY).min(n) {
                if self.heap[c].key < self.heap[m].key {
                    m = c;
                }
            }
            let child = self.heap[m];
            if child.key >= e.key {
                break;
            }
            self.heap[i] = child;
            self.pos[child.slot as usize] = i as u32;
            i = m;
        }
        self.heap[i] = e;
        self.pos[e.slot as usize] = i as u32;
    }

    /// Raises the slot limit (allocates).
    pub(crate) fn grow(&mut self, slot_limit: usize) {
        if slot_limit > self.pos.len() {
            self.heap.reserve_exact(slot_limit - self.heap.len());
            self.pos.resize(slot_limit, NIL);
        }
    }

    /// Heap bytes: entries and positions.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.heap.capacity() * std::mem::size_of::<Entry<K>>() + self.pos.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Pushes, key changes and removals keep the minimum of a `BTreeMap` model.
        #[test]
        fn heap_tracks_the_minimum(ops in proptest::collection::vec((0..3u8, 0..16u32, 0..1000u64), 0..300)) {
            let mut heap = SlotHeap::<(u64, u32)>::new(16);
            let mut model: BTreeMap<u32, (u64, u32)> = BTreeMap::new();
            for (op, slot, k) in ops {
                let key = (k, slot); // unique per slot
                match op {
                    0 if !model.contains_key(&slot) => { heap.push(slot, key); model.insert(slot, key); }
                    1 if model.contains_key(&slot) => { heap.update(slot, key); model.insert(slot, key); }
                    2 if model.contains_key(&slot) => { heap.remove(slot); model.remove(&slot); }
                    _ => {}
                }
                let want = model.iter().min_by_key(|e| e.1).map(|e| *e.0);
                prop_assert_eq!(heap.peek(), want);
                prop_assert_eq!(heap.len(), model.len());
                let want_odd = model.iter().filter(|e| e.0 % 2 == 1).min_by_key(|e| e.1).map(|e| *e.0);
                prop_assert_eq!(heap.min_unpinned(&|s| s % 2 == 0), want_odd);
            }
        }
    }
}
