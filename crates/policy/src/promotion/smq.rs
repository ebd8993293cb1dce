//! SMQ-style admission, after Linux dm-cache's stochastic multiqueue (docs/design.md §4.3).
//!
//! Hotspot entries track regions of `hotspot_lines` lines in a 64-level queue. Every access to a
//! region moves its entry up one level; every period the levels are redistributed so each holds
//! an equal share of the entries (which moves stale entries down). A missed line is promoted when
//! its region's level reaches `promote_level`, or at once while the cache still has free lines.
//! The promote level adapts each period: if misses in regions at or above it earned more accesses
//! per line than the cache earned hits per line, promotion gets easier, otherwise harder.

use super::Promotion;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use tiercache_core::LineKey;

const LEVELS: u8 = 64;

/// SMQ-style promotion policy state.
#[derive(Debug)]
pub struct Smq {
    hotspot_lines: u64,
    cache_lines: u64,
    capacity: usize,
    levels: FxHashMap<u64, u8>,
    order: VecDeque<u64>,
    promote_level: u8,
    period: u64,
    accesses: u64,
    cache_hits: u64,
    hot_misses: u64,
}

impl Smq {
    /// SMQ admission for a cache of `cache_lines` lines and regions of `hotspot_lines` lines.
    pub fn new(cache_lines: u64, hotspot_lines: u32) -> Self {
        let hotspot_lines = hotspot_lines.max(1) as u64;
        // Track regions covering about four times the cache, as dm-cache sizes its hotspot table
        // to see beyond what the cache holds.
        let capacity = ((4 * cache_lines / hotspot_lines) as usize).max(64);
        Self {
            hotspot_lines,
            cache_lines: cache_lines.max(1),
            capacity,
            levels: FxHashMap::with_capacity_and_hasher(capacity, Default::default()),
            order: VecDeque::with_capacity(capacity),
            promote_level: LEVELS / 2,
            period: (capacity as u64).max(1024),
            accesses: 0,
            cache_hits: 0,
            hot_misses: 0,
        }
    }

    /// Current promotion level (1..=63).
    pub fn promote_level(&self) -> u8 {
        self.promote_level
    }

    fn touch(&mut self, key: LineKey) -> u8 {
        let region = key.0 / self.hotspot_lines;
        let level = match self.levels.get_mut(&region) {
            Some(l) => {
                *l = (*l + 1).min(LEVELS - 1);
                *l
            }
            None => {
                while self.levels.len() >= self.capacity {
                    let old = self.order.pop_front().expect("order holds every region");
                    self.levels.remove(&old);
                }
                self.levels.insert(region, 0);
                self.order.push_back(region);
                0
            }
        };
        self.accesses += 1;
        if self.accesses.is_multiple_of(self.period) {
            self.end_period();
        }
        level
    }

    fn end_period(&mut self) {
        let entries_hot = self
            .levels
            .values()
            .filter(|&&l| l >= self.promote_level)
            .count() as f64;
        let hot_density =
            self.hot_misses as f64 / (entries_hot.max(1.0) * self.hotspot_lines as f64);
        let cache_density = self.cache_hits as f64 / self.cache_lines as f64;
        if hot_density > cache_density {
            self.promote_level = (self.promote_level - 1).max(1);
        } else {
            self.promote_level = (self.promote_level + 1).min(LEVELS - 1);
        }
        self.hot_misses = 0;
        self.cache_hits = 0;
        // Redistribute: equal population per level, keeping the order by level (ties by region
        // for determinism).
        let mut all: Vec<(u8, u64)> = self.levels.iter().map(|(&r, &l)| (l, r)).collect();
        all.sort_unstable();
        let n = all.len().max(1);
        for (rank, (_, region)) in all.into_iter().enumerate() {
            let level = (rank * LEVELS as usize / n) as u8;
            self.levels.insert(region, level);
        }
    }
}

impl Promotion for Smq {
    fn name(&self) -> &'static str {
        "smq"
    }

    fn should_promote(&mut self, key: LineKey, occupancy: f64) -> bool {
        let level = self.touch(key);
        let hot = level >= self.promote_level;
        if hot {
            self.hot_misses += 1;
        }
        occupancy < 1.0 || hot
    }

    fn on_hit(&mut self, key: LineKey) {
        self.cache_hits += 1;
        self.touch(key);
    }

    fn learns_from_hits(&self) -> bool {
        true
    }

    fn memory_bytes(&self) -> usize {
        self.levels.capacity() * 10 + self.order.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_promotes_everything() {
        let mut s = Smq::new(1000, 16);
        assert!(s.should_promote(LineKey(5), 0.5));
    }

    #[test]
    fn hot_region_is_promoted_cold_is_not() {
        let mut s = Smq::new(1000, 16);
        // A cold region seen once is not promoted when the cache is full.
        assert!(!s.should_promote(LineKey(1 << 20), 1.0));
        // A region accessed repeatedly climbs to the promote level.
        let hot = LineKey(7);
        let mut promoted = false;
        for _ in 0..64 {
            promoted |= s.should_promote(hot, 1.0);
        }
        assert!(promoted);
    }

    #[test]
    fn table_bounded_and_levels_valid() {
        let mut s = Smq::new(256, 16);
        for k in 0..100_000u64 {
            s.should_promote(LineKey(k * 16 + (k % 3)), 1.0);
        }
        assert!(s.levels.len() <= s.capacity);
        assert!(s.levels.values().all(|&l| l < LEVELS));
        assert!((1..LEVELS).contains(&s.promote_level()));
    }
}
