//! The line index of the batched hit-ratio path: resident line key → slot, open addressing.
//!
//! One 16-byte entry holds both the key and its slot, so a lookup costs one cache line (the
//! general core's index keeps slots in buckets and keys in the line table: two). Linear probing
//! with backward-shift deletion keeps probe runs short without tombstones; the table is sized
//! once, for the cache's capacity at a load of at most one half.

use tiercache_core::LineKey;

/// A key no request can carry: volume ids are below [`tiercache_core::MAX_VOLUMES`] (2^16), and
/// this key's volume bits are all ones.
const EMPTY: u64 = u64::MAX;

#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Entry {
    key: u64,
    slot: u32,
}

/// Resident line key → slot, for at most `capacity` lines.
pub(crate) struct LineIndex {
    entries: Vec<Entry>,
    mask: usize,
    shift: u32,
    len: usize,
}

impl LineIndex {
    /// An empty index for up to `capacity` keys.
    pub(crate) fn new(capacity: usize) -> Self {
        let size = (capacity.max(8) * 2).next_power_of_two();
        Self {
            entries: vec![
                Entry {
                    key: EMPTY,
                    slot: 0
                };
                size
            ],
            mask: size - 1,
            shift: 64 - size.trailing_zeros(),
            len: 0,
        }
    }

    /// Home bucket of `key` (Fibonacci hashing: the top bits of key × 2^64/φ).
    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// Starts loading `key`'s home bucket.
    #[inline(always)]
    pub(crate) fn prefetch(&self, key: LineKey) {
        tiercache_core::hint::prefetch(self.entries.as_ptr().wrapping_add(self.home(key.0)));
    }

    /// The slot holding `key`.
    #[inline(always)]
    pub(crate) fn get(&self, key: LineKey) -> Option<u32> {
        let mut i = self.home(key.0);
        loop {
            let e = self.entries[i];
            if e.key == key.0 {
                return Some(e.slot);
            }
            if e.key == EMPTY {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Adds `key` (not present) at `slot`.
    #[inline]
    pub(crate) fn insert(&mut self, key: LineKey, slot: u32) {
        debug_assert!(key.0 != EMPTY && self.len < self.entries.len() / 2);
        let mut i = self.home(key.0);
        while self.entries[i].key != EMPTY {
            debug_assert!(self.entries[i].key != key.0, "key inserted twice");
            i = (i + 1) & self.mask;
        }
        self.entries[i] = Entry { key: key.0, slot };
        self.len += 1;
    }

    /// Removes `key` if present; later entries of its probe run shift back into the hole so
    /// every remaining key stays reachable from its home bucket.
    #[inline]
    pub(crate) fn remove(&mut self, key: LineKey) {
        let mut i = self.home(key.0);
        loop {
            let k = self.entries[i].key;
            if k == key.0 {
                break;
            }
            if k == EMPTY {
                return;
            }
            i = (i + 1) & self.mask;
        }
        self.len -= 1;
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let e = self.entries[j];
            if e.key == EMPTY {
                break;
            }
            // `e` may fill the hole when its home is not cyclically within (hole, j].
            let home = self.home(e.key);
            if (j.wrapping_sub(home) & self.mask) >= (j.wrapping_sub(hole) & self.mask) {
                self.entries[hole] = e;
                hole = j;
            }
        }
        self.entries[hole].key = EMPTY;
    }

    /// Keys held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Heap bytes.
    #[cfg(test)]
    pub(crate) fn memory_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Entry>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// The index agrees with a HashMap under random inserts and removes over a small key
        /// space (long probe runs, wrap-around and backward shifts all happen).
        #[test]
        fn agrees_with_a_hash_map(ops in proptest::collection::vec((0u64..64, any::<bool>()), 1..600)) {
            let mut idx = LineIndex::new(32);
            let mut model: HashMap<u64, u32> = HashMap::new();
            for (n, (k, add)) in ops.into_iter().enumerate() {
                // Spread a few keys over distant values too, so hashes differ in high bits.
                let key = LineKey(k.wrapping_mul(0x1_0000_0001) ^ (k << 40));
                if add && !model.contains_key(&key.0) && model.len() < 32 {
                    idx.insert(key, n as u32);
                    model.insert(key.0, n as u32);
                } else if !add {
                    idx.remove(key);
                    model.remove(&key.0);
                }
                prop_assert_eq!(idx.len(), model.len());
                for probe in 0u64..64 {
                    let pk = LineKey(probe.wrapping_mul(0x1_0000_0001) ^ (probe << 40));
                    prop_assert_eq!(idx.get(pk), model.get(&pk.0).copied());
                }
            }
        }
    }

    #[test]
    fn sized_for_half_load() {
        let idx = LineIndex::new(1000);
        assert_eq!(idx.memory_bytes(), 2048 * 16);
        assert_eq!(idx.get(LineKey(5)), None);
    }
}
