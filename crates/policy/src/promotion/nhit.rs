//! nhit-N: promote a line on the N-th access while missing, counted in a bounded table.

use super::Promotion;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use tiercache_core::LineKey;

/// Counter table with FIFO replacement of its own: when full, the longest-counted key is dropped
/// (its count restarts from zero if seen again). FIFO entries carry the sequence number of the
/// count they belong to, so a stale entry (its key since promoted and counted afresh) never
/// drops the newer count.
#[derive(Debug)]
pub struct NHit {
    n: u32,
    capacity: usize,
    occupancy_threshold: f64,
    /// key → (accesses, sequence number of this count).
    counts: FxHashMap<u64, (u32, u64)>,
    order: VecDeque<(u64, u64)>,
    seq: u64,
}

impl NHit {
    /// nhit-`n` with a table of `capacity` counters, filtering only above `occupancy_threshold`.
    pub fn new(n: u32, capacity: usize, occupancy_threshold: f64) -> Self {
        assert!(n >= 1 && capacity >= 1);
        Self {
            n,
            capacity,
            occupancy_threshold,
            // Grown with the keys counted, up to `capacity`: a large `table_ratio` over a cache
            // whose workload misses on few lines reserves nothing for the rest.
            counts: FxHashMap::default(),
            order: VecDeque::new(),
            seq: 0,
        }
    }

    /// Counters currently held.
    pub fn tracked(&self) -> usize {
        self.counts.len()
    }

    fn pop_oldest(&mut self) {
        while let Some((key, seq)) = self.order.pop_front() {
            if self.counts.get(&key).is_some_and(|&(_, s)| s == seq) {
                self.counts.remove(&key);
                return;
            }
        }
    }
}

impl Promotion for NHit {
    fn name(&self) -> &'static str {
        "nhit"
    }

    fn should_promote(&mut self, key: LineKey, occupancy: f64) -> bool {
        if occupancy < self.occupancy_threshold || self.n <= 1 {
            self.counts.remove(&key.0);
            return true;
        }
        if let Some((c, _)) = self.counts.get_mut(&key.0) {
            *c += 1;
            if *c >= self.n {
                // Promoted: the counter is spent; its FIFO entry goes stale.
                self.counts.remove(&key.0);
                return true;
            }
            return false;
        }
        while self.counts.len() >= self.capacity {
            self.pop_oldest();
        }
        if self.order.len() >= 2 * self.capacity {
            // Too many stale entries: keep only live ones (amortised O(1) per insert).
            let counts = &self.counts;
            self.order
                .retain(|(k, s)| counts.get(k).is_some_and(|&(_, cs)| cs == *s));
        }
        self.seq += 1;
        self.counts.insert(key.0, (1, self.seq));
        self.order.push_back((key.0, self.seq));
        false
    }

    fn memory_bytes(&self) -> usize {
        self.counts.capacity() * 25 + self.order.capacity() * 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The table's memory follows the keys counted, not its bound (it reserved the bound up
    /// front: 64 × a 1 GiB cache's lines took 1 GB for a footprint of 256 lines).
    #[test]
    fn memory_follows_the_keys_counted() {
        let mut p = NHit::new(2, 64 * 262_144, 0.0);
        for k in 0..100 {
            p.should_promote(LineKey(k), 1.0);
        }
        assert_eq!(p.tracked(), 100);
        assert!(p.memory_bytes() < 64 << 10, "{} bytes", p.memory_bytes());
    }

    /// Reference: unbounded counts (the bounded table must agree while it never overflows).
    #[test]
    fn promotes_on_nth_access() {
        let mut p = NHit::new(3, 100, 0.0);
        let k = LineKey(42);
        assert!(!p.should_promote(k, 1.0));
        assert!(!p.should_promote(k, 1.0));
        assert!(p.should_promote(k, 1.0));
        // Counter spent: starts over.
        assert!(!p.should_promote(k, 1.0));
    }

    #[test]
    fn occupancy_threshold_admits_everything_below() {
        let mut p = NHit::new(4, 100, 0.5);
        assert!(p.should_promote(LineKey(1), 0.2));
        assert!(!p.should_promote(LineKey(1), 0.9));
    }

    #[test]
    fn table_is_bounded() {
        let mut p = NHit::new(2, 8, 0.0);
        for k in 0..1000 {
            p.should_promote(LineKey(k), 1.0);
            assert!(p.tracked() <= 8);
        }
        // Key 0 was dropped long ago: its first access again is not a promotion.
        assert!(!p.should_promote(LineKey(0), 1.0));
    }

    proptest! {
        /// While the table never overflows, nhit equals a plain per-key counter model.
        #[test]
        fn agrees_with_counter_model(keys in proptest::collection::vec(0u64..20, 1..300), n in 1u32..5) {
            let mut p = NHit::new(n, 64, 0.0);
            let mut model = std::collections::HashMap::<u64, u32>::new();
            for k in keys {
                let c = model.entry(k).or_insert(0);
                *c += 1;
                let expect = *c >= n;
                if expect { model.remove(&k); }
                prop_assert_eq!(p.should_promote(LineKey(k), 1.0), expect);
            }
        }
    }
}
