//! TinyLFU admission (Einziger, Friedman and Manes, ACM ToS 2017): every access is counted in
//! a count-min sketch with aging ([`FrequencySketch`]), and a candidate that would displace a
//! victim is admitted only if its estimated frequency is higher than the victim's. A line
//! taking a free line is admitted. One-off lines (a scan) cannot push out lines used again.

use super::Admission;
use tiercache_core::LineKey;
use tiercache_eviction::FrequencySketch;

/// TinyLFU's frequency filter in front of any eviction policy.
#[derive(Debug, Clone)]
pub struct TinyLfu {
    sketch: FrequencySketch,
}

impl TinyLfu {
    /// A filter whose sketch is sized for `expected_items` keys (its width; halved after ten
    /// times that many accesses).
    pub fn new(expected_items: usize) -> Self {
        Self {
            sketch: FrequencySketch::new(expected_items),
        }
    }

    /// The estimated recent accesses to `key`.
    pub fn estimate(&self, key: LineKey) -> u8 {
        self.sketch.estimate(key.0)
    }
}

impl Admission for TinyLfu {
    fn name(&self) -> &'static str {
        "tinylfu"
    }

    fn admit(&mut self, key: LineKey, victim: Option<LineKey>) -> bool {
        victim.is_none_or(|v| self.sketch.estimate(key.0) > self.sketch.estimate(v.0))
    }

    fn on_access(&mut self, key: LineKey) {
        self.sketch.increment(key.0);
    }

    fn learns_from_accesses(&self) -> bool {
        true
    }

    fn memory_bytes(&self) -> usize {
        self.sketch.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn free_lines_admit_and_a_victim_must_be_beaten() {
        let mut t = TinyLfu::new(1024);
        let (hot, cold) = (LineKey(1), LineKey(2));
        assert!(t.admit(cold, None));
        for _ in 0..3 {
            t.on_access(hot);
        }
        t.on_access(cold);
        assert!(!t.admit(cold, Some(hot)), "1 access does not beat 3");
        assert!(t.admit(hot, Some(cold)));
        t.on_access(cold);
        t.on_access(cold);
        assert!(!t.admit(cold, Some(hot)), "a tie keeps the victim");
    }

    proptest! {
        /// Against exact counts (the reference model), with a sketch wide enough that keys do
        /// not collide and too few accesses to age: admitted exactly when the candidate's
        /// count (capped at 15) exceeds the victim's.
        #[test]
        fn matches_exact_counts(ops in proptest::collection::vec((0u64..40, 0u64..40), 1..300)) {
            let mut t = TinyLfu::new(1 << 16);
            let mut exact: HashMap<u64, u64> = HashMap::new();
            for (k, v) in ops {
                t.on_access(LineKey(k));
                let c = exact.entry(k).or_insert(0);
                *c = (*c + 1).min(15);
                let (ck, cv) = (exact[&k], exact.get(&v).copied().unwrap_or(0));
                prop_assert_eq!(t.admit(LineKey(k), Some(LineKey(v))), ck > cv);
            }
        }
    }
}
