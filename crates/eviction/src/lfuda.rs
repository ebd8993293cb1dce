//! LFUDA, LFU with dynamic aging (Arlitt et al., 2000): a line's priority is its hit count
//! plus the cache's age `L`, the priority of the last victim; the smallest priority goes.
//!
//! As published (with unit cost and size): a line enters with count 1 and priority `L + 1`;
//! a hit adds 1 to its count and sets its priority to `L + count` with the current `L`; the
//! victim is the line of smallest priority (on a tie, the one whose priority was set first,
//! as libCacheSim's per-priority FIFO lists order it), and `L` becomes its priority. Old
//! popular lines thus age out once newer lines' priorities pass theirs.
//!
//! libCacheSim `LFUDA` differs, and tests/libcachesim_golden.rs pins the difference: its hit
//! adds `L` to the priority (not 1 to a count added to `L`), so a line's priority grows by the
//! age at every hit, and before the first eviction (`L = 0`) a hit leaves the priority at 1
//! (it only moves the line to the back of its list); its search for the next smallest
//! priority also stops at the largest priority a *hit* produced, ignoring lines inserted
//! above it. The published definition is kept here.
//!
//! The order is one list of the resident lines sorted by (priority, time the priority was set),
//! the next victim at its back, cut into *buckets* of equal priority (a bucket is its priority
//! and its lowest and highest line: within a bucket the list keeps the order the priorities
//! were set, libCacheSim's per-priority FIFO). The bucket above one is the bucket of the line
//! after its highest, so no bucket links are needed. An eviction takes the back line, `O(1)`;
//! an insert (priority `L + 1`, just above the lowest buckets) and a hit (priority
//! `L + count`, from the line's own bucket upwards) walk up past the buckets whose priority
//! lies between where they start and the new priority, usually none or a few (a line's
//! priority rises by one plus the age gained since its last hit). Nothing allocates after
//! construction. (An indexed heap of slots keyed by (priority, time) did the same in
//! `O(log n)`; its sifts took most of an LFUDA replay's time.) A pinned back line is passed
//! over by walking the list to the first unpinned line, the smallest unpinned key; `L` then
//! becomes the victim's priority. [`Eviction::insert_cold`] enters with priority `L` before
//! every other line of that priority (the next victim); [`Eviction::insert_demoted`] is
//! `insert`. Capacity changes nothing in the order.

use crate::list::{Lists, NIL};
use crate::{Eviction, Slot};
use tiercache_core::LineKey;

/// The one list of [`Lfuda::order`].
const ORDER: usize = 0;

/// A run of lines of equal priority in the order: `low` leaves first, `high` was set last.
/// A free bucket's `low` is the next free bucket.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    priority: u64,
    low: u32,
    high: u32,
}

const FREE_BUCKET: Bucket = Bucket {
    priority: 0,
    low: NIL,
    high: NIL,
};

/// LFU with dynamic aging.
#[derive(Debug, Clone)]
pub struct Lfuda {
    /// Resident lines by (priority, time set): back = smallest (the next victim).
    order: Lists<1>,
    /// Per slot: its bucket and its hit count plus one (one load for both).
    meta: Vec<[u32; 2]>,
    /// Bucket pool: a bucket holds at least one line, so one per slot suffices.
    buckets: Vec<Bucket>,
    /// Top of the free bucket stack ([`NIL`]: none).
    free: u32,
    /// The age `L`: the priority of the last victim.
    age: u64,
    capacity: usize,
}

impl Lfuda {
    /// An empty policy for slots `< slot_limit`.
    pub fn new(slot_limit: usize) -> Self {
        let mut p = Lfuda {
            order: Lists::new(slot_limit),
            meta: Vec::new(),
            buckets: Vec::new(),
            free: NIL,
            age: 0,
            capacity: slot_limit,
        };
        p.grow_pool(slot_limit);
        p
    }

    /// Grows the per-slot arrays and the bucket pool to `slot_limit` (new buckets free).
    fn grow_pool(&mut self, slot_limit: usize) {
        let old = self.buckets.len();
        self.meta.resize(slot_limit, [NIL, 0]);
        self.buckets.resize(slot_limit, FREE_BUCKET);
        // Lowest numbers on top, as in a pool built this large.
        for b in (old..slot_limit).rev() {
            self.buckets[b].low = self.free;
            self.free = b as u32;
        }
    }

    /// The cache's age `L` (the priority of the last victim).
    pub fn age(&self) -> u64 {
        self.age
    }

    /// Priority of the resident line in `slot`.
    pub fn priority(&self, slot: Slot) -> u64 {
        self.buckets[self.meta[slot as usize][0] as usize].priority
    }

    /// A new bucket of `priority` holding only `slot` (already linked where it belongs).
    #[inline]
    fn new_bucket(&mut self, priority: u64, slot: Slot) {
        let b = self.free;
        debug_assert!(b != NIL, "a bucket per resident line at most");
        self.free = self.buckets[b as usize].low;
        self.buckets[b as usize] = Bucket {
            priority,
            low: slot,
            high: slot,
        };
        self.meta[slot as usize][0] = b;
    }

    /// Takes `slot` (still linked) out of its bucket's bounds, freeing the bucket if it held
    /// only `slot`. The list is not touched.
    #[inline]
    fn leave_bucket(&mut self, slot: Slot) {
        let b = self.meta[slot as usize][0];
        let bucket = &mut self.buckets[b as usize];
        if bucket.low == slot && bucket.high == slot {
            *bucket = Bucket {
                low: self.free,
                ..FREE_BUCKET
            };
            self.free = b;
        } else if bucket.low == slot {
            bucket.low = self.order.newer(slot).expect("a higher line in the bucket");
        } else if bucket.high == slot {
            bucket.high = self.order.older(slot).expect("a lower line in the bucket");
        }
    }

    /// The highest bucket of priority `<= q`, walking up from `from` (of priority `<= q`) or
    /// from the lowest bucket; `None` when every bucket's priority is above `q`.
    #[inline]
    fn floor_bucket(&self, q: u64, from: Option<u32>) -> Option<u32> {
        let mut cur = match from {
            Some(b) => b,
            None => {
                let b = self.meta[self.order.back(ORDER)? as usize][0];
                if self.buckets[b as usize].priority > q {
                    return None;
                }
                b
            }
        };
        while let Some(n) = self.order.newer(self.buckets[cur as usize].high) {
            let next = self.meta[n as usize][0];
            if self.buckets[next as usize].priority > q {
                break;
            }
            cur = next;
        }
        Some(cur)
    }

    /// Links the unlinked `slot` as the last line set to priority `q`, given `floor`, the
    /// highest bucket of priority `<= q` ([`Lfuda::floor_bucket`]).
    #[inline]
    fn place(&mut self, slot: Slot, q: u64, floor: Option<u32>) {
        match floor {
            Some(f) => {
                let high = self.buckets[f as usize].high;
                self.order.insert_newer(ORDER, high, slot);
                if self.buckets[f as usize].priority == q {
                    self.buckets[f as usize].high = slot;
                    self.meta[slot as usize][0] = f;
                } else {
                    self.new_bucket(q, slot);
                }
            }
            None => {
                self.order.push_back(ORDER, slot);
                self.new_bucket(q, slot);
            }
        }
    }
}

impl Eviction for Lfuda {
    fn name(&self) -> &'static str {
        "lfuda"
    }

    #[inline]
    fn insert(&mut self, slot: Slot, _key: LineKey) {
        self.meta[slot as usize][1] = 1;
        let q = self.age + 1;
        let floor = self.floor_bucket(q, None);
        self.place(slot, q, floor);
    }

    #[inline]
    fn hit(&mut self, slot: Slot) {
        let [b, count] = self.meta[slot as usize];
        let count = count.saturating_add(1);
        self.meta[slot as usize][1] = count;
        let q = self.age + u64::from(count);
        // A priority only rises, except after a pinned line's low priority became the age.
        let from = (self.buckets[b as usize].priority <= q).then_some(b);
        let floor = self.floor_bucket(q, from);
        if floor.map(|f| self.buckets[f as usize].high) == Some(slot) {
            // The line stays where it is: last of its bucket, or first of a new one above.
            if self.buckets[b as usize].priority != q {
                self.leave_bucket(slot);
                self.new_bucket(q, slot);
            }
            return;
        }
        // `floor` survives leave_bucket: it is another bucket, or `b` with `slot` not its
        // highest line (so `b` keeps a line).
        self.leave_bucket(slot);
        self.order.unlink(ORDER, slot);
        self.place(slot, q, floor);
    }

    fn remove(&mut self, slot: Slot) {
        if self.order.is_linked(slot) {
            self.leave_bucket(slot);
            self.order.unlink(ORDER, slot);
        }
    }

    #[inline]
    fn evict(&mut self, _incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        let victim = self.order.oldest_unpinned(ORDER, pinned)?;
        self.age = self.priority(victim);
        self.leave_bucket(victim);
        self.order.unlink(ORDER, victim);
        Some(victim)
    }

    #[inline]
    fn victim_hint(&self) -> Option<(Slot, Option<Slot>)> {
        let v = self.order.back(ORDER)?;
        Some((v, self.order.newer(v)))
    }

    fn len(&self) -> usize {
        self.order.len(ORDER)
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn set_capacity(&mut self, lines: usize) {
        self.capacity = lines.min(self.meta.len());
    }

    /// Priority `L`, set before every other: the next victim.
    #[inline]
    fn insert_cold(&mut self, slot: Slot, _key: LineKey) {
        self.meta[slot as usize][1] = 1;
        let q = self.age;
        match self.floor_bucket(q, None) {
            Some(f) if self.buckets[f as usize].priority == q => {
                let low = self.buckets[f as usize].low;
                self.order.insert_older(ORDER, low, slot);
                self.buckets[f as usize].low = slot;
                self.meta[slot as usize][0] = f;
            }
            floor => self.place(slot, q, floor),
        }
    }

    fn memory_bytes(&self) -> usize {
        self.order.memory_bytes()
            + self.meta.capacity() * 8
            + self.buckets.capacity() * std::mem::size_of::<Bucket>()
    }

    /// A hit reads the slot's bucket and count, then its links: both are loaded.
    #[inline]
    fn prefetch(&self, slot: Slot) {
        self.order.prefetch(slot);
        tiercache_core::hint::prefetch(self.meta.as_ptr().wrapping_add(slot as usize));
    }

    fn grow_slots(&mut self, slot_limit: usize) {
        if slot_limit > self.meta.len() {
            self.order.grow(slot_limit);
            self.grow_pool(slot_limit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_popular_lines_age_out() {
        let mut p = Lfuda::new(3);
        p.insert(0, LineKey(0));
        for _ in 0..3 {
            p.hit(0); // priority 4
        }
        p.insert(1, LineKey(1));
        p.insert(2, LineKey(2));
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(1));
        assert_eq!(p.age(), 1);
        p.insert(1, LineKey(3)); // priority 2
        p.hit(1); // count 2: priority 3
        assert_eq!(p.priority(1), 3);
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(2));
        assert_eq!(p.age(), 1);
        p.insert(2, LineKey(4));
        p.hit(2);
        p.hit(2); // count 3: priority 4, set after line 0's
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(1));
        assert_eq!(p.age(), 3);
        // Line 0 (priority 4) now ties with line 2 and goes first, although it was hit more.
        assert_eq!(p.evict(LineKey(9), &|_| false), Some(0));
        assert_eq!(p.age(), 4);
    }

    /// The heap this file used before buckets, kept as the model: (priority, time set) per
    /// slot, the victim the smallest unpinned key.
    #[derive(Default)]
    struct HeapModel {
        lines: std::collections::BTreeMap<Slot, (u32, u64, u64)>,
        age: u64,
        clock: u64,
        cold_clock: u64,
    }

    impl HeapModel {
        fn new() -> Self {
            HeapModel {
                clock: 1 << 62,
                cold_clock: (1 << 62) - 1,
                ..Default::default()
            }
        }
        fn insert(&mut self, slot: Slot) {
            self.clock += 1;
            self.lines.insert(slot, (1, self.age + 1, self.clock));
        }
        fn insert_cold(&mut self, slot: Slot) {
            self.lines.insert(slot, (1, self.age, self.cold_clock));
            self.cold_clock -= 1;
        }
        fn hit(&mut self, slot: Slot) {
            self.clock += 1;
            let e = self.lines.get_mut(&slot).unwrap();
            e.0 = e.0.saturating_add(1);
            e.1 = self.age + u64::from(e.0);
            e.2 = self.clock;
        }
        fn evict(&mut self, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
            let (&slot, &(_, priority, _)) = self
                .lines
                .iter()
                .filter(|(s, _)| !pinned(**s))
                .min_by_key(|(_, e)| (e.1, e.2))?;
            self.age = priority;
            self.lines.remove(&slot);
            Some(slot)
        }
    }

    proptest::proptest! {
        /// The bucketed order makes the heap's choices: inserts (normal and cold), hits,
        /// removals and evictions with pinned slots (which let the age fall back) give the
        /// same victims, priorities and age.
        #[test]
        fn buckets_choose_as_the_heap_did(
            ops in proptest::collection::vec((0..5u8, 0..12u32, 0..4u32), 0..400),
        ) {
            let mut p = Lfuda::new(12);
            let mut m = HeapModel::new();
            for (op, slot, pin) in ops {
                let resident = m.lines.contains_key(&slot);
                match op {
                    0 if !resident => { p.insert(slot, LineKey(0)); m.insert(slot); }
                    1 if !resident => { p.insert_cold(slot, LineKey(0)); m.insert_cold(slot); }
                    2 | 3 if resident => { p.hit(slot); m.hit(slot); }
                    4 if resident => { p.remove(slot); m.lines.remove(&slot); }
                    _ => {
                        // Pinned: the slots equal to `pin` modulo 4 (none when `pin` is 3).
                        let pinned = |s: Slot| pin < 3 && s % 4 == pin;
                        proptest::prop_assert_eq!(p.evict(LineKey(0), &pinned), m.evict(&pinned));
                    }
                }
                proptest::prop_assert_eq!(p.len(), m.lines.len());
                proptest::prop_assert_eq!(p.age(), m.age);
                for (&s, &(_, priority, _)) in &m.lines {
                    proptest::prop_assert_eq!(p.priority(s), priority);
                }
            }
            // Draining with nothing pinned gives the model's whole order.
            while let Some(v) = m.evict(&|_| false) {
                proptest::prop_assert_eq!(p.evict(LineKey(0), &|_| false), Some(v));
            }
            proptest::prop_assert!(p.is_empty());
        }
    }
}
