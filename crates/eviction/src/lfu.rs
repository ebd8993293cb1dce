//! LFU: evict the least frequently used line, the one that reached that count first on a tie.
//!
//! Follows libCacheSim `LFU`: a line enters with count 1, every hit adds 1; the victim is,
//! among the lines of the smallest count, the one that has held that count longest
//! (libCacheSim's per-count FIFO lists). Counts are kept only while a line is resident.
//!
//! O(1) layout (the classic bucket list): one list of every slot, ordered by count and, within
//! a count, by when the slot reached it, oldest at the back; the slots of one count are
//! contiguous and form a *bucket* that records its count and its first (oldest) and last
//! (newest) slot. A hit moves the slot just newer than the last slot of the next bucket (or
//! opens a bucket there, or, as its bucket's only slot, just raises the bucket's count). A
//! neighbouring bucket is found through the slot next to a bucket's end, so buckets need no
//! links of their own. At most one bucket per resident line: the pool is sized with the slot
//! limit and free buckets are threaded through their `first` field.
//!
//! Pinned slots are passed over: the victim is the first unpinned slot from the back (the next
//! smallest count when every line of the smallest is pinned). [`Eviction::insert_cold`] puts
//! the line at the back (count 1, evicted next unless hit first); [`Eviction::insert_demoted`]
//! is `insert` (counts are not carried between levels). Capacity changes nothing in the order.

use crate::list::{Lists, NIL};
use crate::{Eviction, Slot};
use tiercache_core::LineKey;

/// A run of slots with the same count.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    count: u64,
    /// Oldest slot (towards the back); the next free bucket while free.
    first: u32,
    /// Newest slot (towards the front).
    last: u32,
}

/// Least-frequently-used replacement.
#[derive(Debug, Clone)]
pub struct Lfu {
    lists: Lists<1>,
    /// Bucket of each resident slot.
    bucket_of: Vec<u32>,
    buckets: Vec<Bucket>,
    /// Head of the free-bucket chain ([`NIL`] when none is free).
    free: u32,
    capacity: usize,
}

impl Lfu {
    /// An empty policy for slots `< slot_limit`.
    pub fn new(slot_limit: usize) -> Self {
        let mut p = Lfu {
            lists: Lists::new(slot_limit),
            bucket_of: vec![NIL; slot_limit],
            buckets: Vec::with_capacity(slot_limit),
            free: NIL,
            capacity: slot_limit,
        };
        p.add_free_buckets(slot_limit);
        p
    }

    /// Grows the bucket pool to `n` (one per slot: never exhausted).
    fn add_free_buckets(&mut self, n: usize) {
        for b in self.buckets.len()..n {
            self.buckets.push(Bucket {
                count: 0,
                first: self.free,
                last: NIL,
            });
            self.free = b as u32;
        }
    }

    /// Count of the resident line in `slot` (for tests and reports).
    pub fn count(&self, slot: Slot) -> u64 {
        self.buckets[self.bucket_of[slot as usize] as usize].count
    }

    #[inline]
    fn new_bucket(&mut self, count: u64, slot: Slot) -> u32 {
        let b = self.free;
        debug_assert!(b != NIL, "the pool holds one bucket per slot");
        self.free = self.buckets[b as usize].first;
        self.buckets[b as usize] = Bucket {
            count,
            first: slot,
            last: slot,
        };
        self.bucket_of[slot as usize] = b;
        b
    }

    /// Links `slot` just newer than `anchor` (a linked slot).
    #[inline]
    fn link_newer_than(&mut self, anchor: Slot, slot: Slot) {
        match self.lists.newer(anchor) {
            Some(n) => self.lists.insert_older(0, n, slot),
            None => self.lists.push_front(0, slot),
        }
    }

    /// Unlinks `slot` from the list and its bucket (freeing the bucket if it empties).
    #[inline]
    fn detach(&mut self, slot: Slot) {
        let b = self.bucket_of[slot as usize];
        let bucket = self.buckets[b as usize];
        if bucket.first == slot && bucket.last == slot {
            self.buckets[b as usize].first = self.free;
            self.free = b;
        } else if bucket.first == slot {
            self.buckets[b as usize].first = self.lists.newer(slot).expect("bucket continues");
        } else if bucket.last == slot {
            self.buckets[b as usize].last = self.lists.older(slot).expect("bucket continues");
        }
        self.lists.unlink(0, slot);
        self.bucket_of[slot as usize] = NIL;
    }

    /// The bucket just above `b` (of a larger count), if any.
    #[inline]
    fn next_bucket(&self, b: u32) -> Option<u32> {
        let after = self.lists.newer(self.buckets[b as usize].last)?;
        Some(self.bucket_of[after as usize])
    }
}

impl Eviction for Lfu {
    fn name(&self) -> &'static str {
        "lfu"
    }

    #[inline]
    fn insert(&mut self, slot: Slot, _key: LineKey) {
        // Count 1 is the lowest count: its bucket, if any, is the one at the back.
        match self.lists.back(0).map(|s| self.bucket_of[s as usize]) {
            Some(b) if self.buckets[b as usize].count == 1 => {
                let last = self.buckets[b as usize].last;
                self.link_newer_than(last, slot);
                self.buckets[b as usize].last = slot;
                self.bucket_of[slot as usize] = b;
            }
            _ => {
                self.lists.push_back(0, slot);
                self.new_bucket(1, slot);
            }
        }
    }

    #[inline]
    fn hit(&mut self, slot: Slot) {
        let b = self.bucket_of[slot as usize];
        let bucket = self.buckets[b as usize];
        let count = bucket.count + 1;
        let next = self.next_bucket(b);
        match next {
            Some(n) if self.buckets[n as usize].count == count => {
                self.detach(slot);
                let last = self.buckets[n as usize].last;
                self.link_newer_than(last, slot);
                self.buckets[n as usize].last = slot;
                self.bucket_of[slot as usize] = n;
            }
            _ if bucket.first == slot && bucket.last == slot => {
                // Alone in its bucket and no bucket of `count` yet: the bucket moves up.
                self.buckets[b as usize].count = count;
            }
            _ => {
                self.detach(slot);
                let last = self.buckets[b as usize].last;
                self.link_newer_than(last, slot);
                self.new_bucket(count, slot);
            }
        }
    }

    fn remove(&mut self, slot: Slot) {
        if self.lists.is_linked(slot) {
            self.detach(slot);
        }
    }

    #[inline]
    fn evict(&mut self, _incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        let victim = self.lists.oldest_unpinned(0, pinned)?;
        self.detach(victim);
        Some(victim)
    }

    #[inline]
    fn prefetch(&self, slot: Slot) {
        self.lists.prefetch(slot);
    }

    #[inline]
    fn victim_hint(&self) -> Option<(Slot, Option<Slot>)> {
        let v = self.lists.back(0)?;
        Some((v, self.lists.newer(v)))
    }

    fn len(&self) -> usize {
        self.lists.len(0)
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn set_capacity(&mut self, lines: usize) {
        self.capacity = lines.min(self.lists.slot_limit());
    }

    /// At the back with count 1: the next victim unless hit first.
    #[inline]
    fn insert_cold(&mut self, slot: Slot, _key: LineKey) {
        match self.lists.back(0).map(|s| self.bucket_of[s as usize]) {
            Some(b) if self.buckets[b as usize].count == 1 => {
                self.lists.push_back(0, slot);
                self.buckets[b as usize].first = slot;
                self.bucket_of[slot as usize] = b;
            }
            _ => {
                self.lists.push_back(0, slot);
                self.new_bucket(1, slot);
            }
        }
    }

    fn memory_bytes(&self) -> usize {
        self.lists.memory_bytes()
            + self.bucket_of.capacity() * 4
            + self.buckets.capacity() * std::mem::size_of::<Bucket>()
    }

    fn grow_slots(&mut self, slot_limit: usize) {
        if slot_limit > self.bucket_of.len() {
            self.lists.grow(slot_limit);
            self.bucket_of.resize(slot_limit, NIL);
            self.buckets.reserve_exact(slot_limit - self.buckets.len());
            self.add_free_buckets(slot_limit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_smallest_count_oldest_first() {
        let mut p = Lfu::new(6);
        for s in 0..5 {
            p.insert(s, LineKey(s as u64));
        }
        p.hit(0);
        p.hit(0);
        p.hit(1);
        p.hit(2);
        // Counts: 0→3, 1→2, 2→2, 3→1, 4→1.
        assert_eq!(p.count(0), 3);
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(3));
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(4));
        // Count 2: slot 1 reached it before slot 2.
        assert_eq!(p.evict(LineKey(9), &|s| s == 1), Some(2));
        p.insert(5, LineKey(5));
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(5));
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(1));
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(0));
        assert!(p.is_empty());
        assert_eq!(p.evict(LineKey(9), &|_| false), None);
    }
}
