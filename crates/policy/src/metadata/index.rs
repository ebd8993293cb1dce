//! Tag index: line key → slot, an open-addressing table.
//!
//! Each bucket is a `u64` holding the slot number and a 32-bit tag (the high half of the key's
//! hash). The tag decides the home bucket (`tag × buckets >> 32`), so probing compares tags
//! without touching the line table, and deletion (backward shift, no tombstones, so lookups
//! stay short however long a run lasts) finds each entry's home from its tag alone. The table
//! has 4/3 buckets per line (load ≤ 0.75, about 10.7 bytes per line); only a tag match reads the
//! stored key to confirm.

use tiercache_core::LineKey;
use tiercache_eviction::Slot;

const EMPTY: u64 = u64::MAX;

/// Open-addressing map from [`LineKey`] to [`Slot`]; keys are read back through a closure.
#[derive(Debug, Clone)]
pub struct SlotIndex {
    buckets: Vec<u64>,
    len: usize,
}

#[inline]
fn tag_of(key: LineKey) -> u32 {
    // splitmix64 finaliser: line keys are often sequential, so mix well.
    let mut z = key.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) >> 32) as u32
}

impl SlotIndex {
    /// Index for up to `capacity` keys.
    pub fn with_capacity(capacity: usize) -> Self {
        let buckets = (capacity + capacity / 3 + 2).max(8);
        assert!(buckets < u32::MAX as usize, "slot index too large");
        Self {
            buckets: vec![EMPTY; buckets],
            len: 0,
        }
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn home(&self, tag: u32) -> usize {
        ((tag as u64 * self.buckets.len() as u64) >> 32) as usize
    }

    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.buckets.len() {
            0
        } else {
            i + 1
        }
    }

    /// Position of `key`'s bucket, if present.
    #[inline]
    fn find(&self, key: LineKey, key_of: impl Fn(Slot) -> LineKey) -> Option<usize> {
        let tag = tag_of(key);
        let mut i = self.home(tag);
        loop {
            let e = self.buckets[i];
            if e == EMPTY {
                return None;
            }
            if (e >> 32) as u32 == tag && key_of(e as u32) == key {
                return Some(i);
            }
            i = self.next(i);
        }
    }

    /// Hints that `key` is looked up soon: loads its home bucket.
    #[inline]
    pub fn prefetch(&self, key: LineKey) {
        let home = self.home(tag_of(key));
        tiercache_core::hint::prefetch(self.buckets.as_ptr().wrapping_add(home));
    }

    /// The slot of the first bucket whose tag matches `key`'s, without confirming the key (a
    /// guess for prefetching: reads no line entry).
    #[inline]
    pub fn guess(&self, key: LineKey) -> Option<Slot> {
        let tag = tag_of(key);
        let mut i = self.home(tag);
        for _ in 0..8 {
            let e = self.buckets[i];
            if e == EMPTY {
                return None;
            }
            if (e >> 32) as u32 == tag {
                return Some(e as u32);
            }
            i = self.next(i);
        }
        None
    }

    /// Slot of `key`, reading stored keys through `key_of`.
    #[inline]
    pub fn get(&self, key: LineKey, key_of: impl Fn(Slot) -> LineKey) -> Option<Slot> {
        self.find(key, key_of).map(|i| self.buckets[i] as u32)
    }

    /// Inserts `key` → `slot`; `key` must not be present and the index not full.
    pub fn insert(&mut self, key: LineKey, slot: Slot, key_of: impl Fn(Slot) -> LineKey) {
        assert!(self.len + 1 < self.buckets.len(), "slot index full");
        debug_assert!(self.find(key, &key_of).is_none(), "duplicate key");
        let tag = tag_of(key);
        let mut i = self.home(tag);
        while self.buckets[i] != EMPTY {
            i = self.next(i);
        }
        self.buckets[i] = ((tag as u64) << 32) | slot as u64;
        self.len += 1;
    }

    /// Removes `key` (which must be present).
    pub fn remove(&mut self, key: LineKey, key_of: impl Fn(Slot) -> LineKey) {
        let i = self
            .find(key, key_of)
            .expect("removing a key that is not indexed");
        // Backward-shift deletion: pull later members of the probe run into the hole.
        let mut hole = i;
        let mut j = i;
        loop {
            j = self.next(j);
            let e = self.buckets[j];
            if e == EMPTY {
                break;
            }
            let home = self.home((e >> 32) as u32);
            // Move e into the hole unless its home lies cyclically in (hole, j].
            let in_range = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !in_range {
                self.buckets[hole] = e;
                hole = j;
            }
        }
        self.buckets[hole] = EMPTY;
        self.len -= 1;
    }

    /// Heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.buckets.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// The index agrees with a HashMap under random inserts and removes.
        #[test]
        fn agrees_with_hashmap(ops in proptest::collection::vec((0u64..64, any::<bool>()), 1..400)) {
            let slots = 64usize;
            let mut keys: Vec<LineKey> = vec![LineKey(u64::MAX); slots];
            let mut free: Vec<u32> = (0..slots as u32).collect();
            let mut idx = SlotIndex::with_capacity(slots);
            let mut model: HashMap<u64, u32> = HashMap::new();
            for (k, insert) in ops {
                let key = LineKey(k * 7919);
                if insert {
                    if let std::collections::hash_map::Entry::Vacant(e) = model.entry(key.0) {
                        let s = free.pop().unwrap();
                        keys[s as usize] = key;
                        idx.insert(key, s, |s| keys[s as usize]);
                        e.insert(s);
                    }
                } else if let Some(s) = model.remove(&key.0) {
                    idx.remove(key, |s| keys[s as usize]);
                    keys[s as usize] = LineKey(u64::MAX);
                    free.push(s);
                }
                prop_assert_eq!(idx.len(), model.len());
                for q in 0..64u64 {
                    let qk = LineKey(q * 7919);
                    prop_assert_eq!(idx.get(qk, |s| keys[s as usize]), model.get(&qk.0).copied());
                }
            }
        }
    }
}
