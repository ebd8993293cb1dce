//! An indexed binary min-heap of slots, for the policies whose order a hit can move anywhere
//! (LRU-K, LFUDA): keys change in place (`O(log n)`), any slot can leave, nothing allocates
//! after construction (or [`SlotHeap::grow`]).
//!
//! Keys must be unique among the slots held (the policies make them so with a clock), so the
//! minimum, and hence the victim, does not depend on the heap's shape.

use crate::list::NIL;

/// Min-heap of slots `< slot_limit` keyed by `K`.
#[derive(Debug, Clone)]
pub(crate) struct SlotHeap<K> {
    /// Slots in heap order.
    heap: Vec<u32>,
    /// Position of each slot in `heap`, [`NIL`] when absent.
    pos: Vec<u32>,
    /// Key of each slot (meaningful while present).
    keys: Vec<K>,
}

impl<K: Copy + Ord + Default> SlotHeap<K> {
    /// An empty heap for slots `< slot_limit`.
    pub(crate) fn new(slot_limit: usize) -> Self {
        SlotHeap {
            heap: Vec::with_capacity(slot_limit),
            pos: vec![NIL; slot_limit],
            keys: vec![K::default(); slot_limit],
        }
    }

    /// Slots held.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether `slot` is held.
    #[inline]
    pub(crate) fn contains(&self, slot: u32) -> bool {
        self.pos[slot as usize] != NIL
    }

    /// Key of a held `slot`.
    #[inline]
    pub(crate) fn key(&self, slot: u32) -> K {
        self.keys[slot as usize]
    }

    /// Slot of the smallest key.
    #[inline]
    pub(crate) fn peek(&self) -> Option<u32> {
        self.heap.first().copied()
    }

    /// The slot of smallest key for which `pinned` is false: the top, else (only when the
    /// top is pinned) a scan of every slot held.
    pub(crate) fn min_unpinned(&self, pinned: &dyn Fn(u32) -> bool) -> Option<u32> {
        let top = self.peek()?;
        if !pinned(top) {
            return Some(top);
        }
        self.heap
            .iter()
            .copied()
            .filter(|&s| !pinned(s))
            .min_by_key(|&s| self.keys[s as usize])
    }

    /// Adds an absent `slot` with `key`.
    #[inline]
    pub(crate) fn push(&mut self, slot: u32, key: K) {
        debug_assert!(!self.contains(slot), "slot {slot} pushed twice");
        self.keys[slot as usize] = key;
        let i = self.heap.len();
        debug_assert!(
            i < self.heap.capacity(),
            "no room: the heap never allocates"
        );
        self.heap.push(slot);
        self.pos[slot as usize] = i as u32;
        self.sift_up(i);
    }

    /// Changes the key of a held `slot`.
    #[inline]
    pub(crate) fn update(&mut self, slot: u32, key: K) {
        let old = std::mem::replace(&mut self.keys[slot as usize], key);
        let i = self.pos[slot as usize] as usize;
        if key < old {
            self.sift_up(i);
        } else {
            self.sift_down(i);
        }
    }

    /// Removes a held `slot`.
    #[inline]
    pub(crate) fn remove(&mut self, slot: u32) {
        let i = self.pos[slot as usize] as usize;
        let last = self.heap.pop().expect("slot is held");
        self.pos[slot as usize] = NIL;
        if i < self.heap.len() {
            self.heap[i] = last;
            self.pos[last as usize] = i as u32;
            // The moved slot may belong above or below its new place.
            self.sift_up(i);
            let j = self.pos[last as usize] as usize;
            self.sift_down(j);
        }
    }

    #[inline]
    fn less(&self, a: usize, b: usize) -> bool {
        self.keys[self.heap[a] as usize] < self.keys[self.heap[b] as usize]
    }

    #[inline]
    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a] as usize] = a as u32;
        self.pos[self.heap[b] as usize] = b as u32;
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if !self.less(i, parent) {
                break;
            }
            self.swap(i, parent);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < n && self.less(l, m) {
                m = l;
            }
            if r < n && self.less(r, m) {
                m = r;
            }
            if m == i {
                break;
            }
            self.swap(i, m);
            i = m;
        }
    }

    /// Raises the slot limit to `slot_limit` (no-op if not larger).
    pub(crate) fn grow(&mut self, slot_limit: usize) {
        if slot_limit > self.pos.len() {
            self.heap.reserve_exact(slot_limit - self.heap.len());
            self.pos.resize(slot_limit, NIL);
            self.keys.resize(slot_limit, K::default());
        }
    }

    /// Heap bytes of the three arrays.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.heap.capacity() * 4
            + self.pos.capacity() * 4
            + self.keys.capacity() * std::mem::size_of::<K>()
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
