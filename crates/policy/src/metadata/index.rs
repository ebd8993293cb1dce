//! Tag index: line key → slot, an open-addressing table of `u32` slot numbers.
//!
//! The key itself lives in the line table, so each bucket costs 4 bytes; the table is sized to a
//! power of two at least 1.5× the slot count (load ≤ 2/3, ≤ 12 bytes per line) and uses linear
//! probing with backward-shift deletion (no tombstones, so lookups stay short however long a run
//! lasts).

use tiercache_core::LineKey;
use tiercache_eviction::Slot;

const EMPTY: u32 = u32::MAX;

/// Open-addressing map from [`LineKey`] to [`Slot`]; keys are read back through a closure.
#[derive(Debug, Clone)]
pub struct SlotIndex {
    buckets: Vec<u32>,
    mask: usize,
    len: usize,
}

#[inline]
fn hash(key: LineKey) -> u64 {
    // splitmix64 finaliser: line keys are often sequential, so mix well.
    let mut z = key.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl SlotIndex {
    /// Index for up to `capacity` keys.
    pub fn with_capacity(capacity: usize) -> Self {
        let buckets = (capacity + capacity / 2 + 1).next_power_of_two().max(8);
        Self {
            buckets: vec![EMPTY; buckets],
            mask: buckets - 1,
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

    /// Slot of `key`, reading stored keys through `key_of`.
    #[inline]
    pub fn get(&self, key: LineKey, key_of: impl Fn(Slot) -> LineKey) -> Option<Slot> {
        let mut i = hash(key) as usize & self.mask;
        loop {
            let s = self.buckets[i];
            if s == EMPTY {
                return None;
            }
            if key_of(s) == key {
                return Some(s);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Inserts `key` → `slot`; `key` must not be present and the index not full.
    pub fn insert(&mut self, key: LineKey, slot: Slot, key_of: impl Fn(Slot) -> LineKey) {
        assert!(self.len < self.mask, "slot index full");
        let mut i = hash(key) as usize & self.mask;
        while self.buckets[i] != EMPTY {
            debug_assert!(key_of(self.buckets[i]) != key, "duplicate key");
            i = (i + 1) & self.mask;
        }
        self.buckets[i] = slot;
        self.len += 1;
    }

    /// Removes `key` (which must be present).
    pub fn remove(&mut self, key: LineKey, key_of: impl Fn(Slot) -> LineKey) {
        let mut i = hash(key) as usize & self.mask;
        loop {
            let s = self.buckets[i];
            assert!(s != EMPTY, "removing a key that is not indexed");
            if key_of(s) == key {
                break;
            }
            i = (i + 1) & self.mask;
        }
        // Backward-shift deletion: pull later members of the probe run into the hole.
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let s = self.buckets[j];
            if s == EMPTY {
                break;
            }
            let home = hash(key_of(s)) as usize & self.mask;
            // Move s into the hole unless its home lies cyclically in (hole, j].
            let in_range = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !in_range {
                self.buckets[hole] = s;
                hole = j;
            }
        }
        self.buckets[hole] = EMPTY;
        self.len -= 1;
    }

    /// Heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.buckets.capacity() * 4
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
