//! LHD, least hit density (Beckmann, Chen & Cidon, NSDI '18): evict the line expected to
//! give the fewest hits per unit of space and time it will still occupy, that expectation
//! learned online from the ages at which lines were hit or evicted.
//!
//! Follows libCacheSim `LHD` (the authors' code) with its constants, every line of size 1:
//! - each line has an *age*, the requests since its last access shifted right by a
//!   coarsening (`10` at first, re-chosen at the 6th and 26th reconfiguration so that the
//!   lines resident span about 1 % of the 20 000 age buckets per bucket), capped at 19 999;
//! - a line's *class* is its last two hit ages summed, bucketed by powers of two (16 classes;
//!   a line never hit is in the class of a huge sum); each class keeps, per age, the hits and
//!   the evictions that happened at that age (EWMA-decayed by 0.9 at each reconfiguration);
//! - every `2^20` accesses the *hit density* of each (class, age) is recomputed: the hits a
//!   line of that class still gets after that age over the total lifetime it still spends
//!   (events at later ages, summed). Until the first reconfiguration the densities are
//!   libCacheSim's GDSF-like start, `(class + 17) / (age + 1)` (its classes of the default
//!   application 1 are numbered 16..31);
//! - a victim is the lowest density among 8 lines drawn at random from the residents (32
//!   after 50 reconfigurations) and the 8 lines most recently admitted with a density below
//!   the running average of victims' densities; a line at the maximum age ranks lowest;
//! - on each access one draw in 32 makes the line an *explorer* (density + 1, so it is
//!   rarely evicted), while explorers hold less than 1 % of the cache and fewer than 50
//!   reconfigurations have passed.
//!
//! Residents are kept as libCacheSim keeps them, a dense array in which a leaving line's
//! entry is replaced by the last one, so a random index is a random resident.
//!
//! Difference from libCacheSim, pinned by `tests/libcachesim_golden.rs` as a miss-ratio bound
//! rather than hit by hit: the draws come from a fixed-seed xorshift generator, not
//! libCacheSim's process-wide random stream (whose state depends on everything else that drew
//! from it), so the two sample different candidates. Runs are deterministic here. A removal
//! (a trim, not an eviction) returns an explorer's share of the budget; libCacheSim's
//! `LHD_remove` keeps it spent.
//!
//! Pinned lines are passed over: a pinned candidate is not ranked; when every candidate is
//! pinned the lowest unpinned resident is found by a scan (`None` when all are pinned).
//! [`Eviction::insert_cold`] and [`Eviction::insert_demoted`] are `insert` (LHD has no
//! order to put a line at: victims are sampled). Memory: 36 bytes per line and 3.84 MB of
//! class statistics (16 classes × 20 000 ages × hits, evictions and density, `f32`).

use crate::list::NIL;
use crate::{Eviction, Slot};
use tiercache_core::LineKey;

/// Candidates sampled per eviction once 50 reconfigurations have passed.
const ASSOCIATIVITY: usize = 32;
/// Candidates sampled per eviction before that (a faster warm-up, as libCacheSim does).
const EARLY_CANDIDATES: usize = 8;
/// Recently admitted low-density lines that are always candidates.
const ADMISSIONS: usize = 8;
/// Share of the cache explorers may hold.
const EXPLORER_BUDGET_FRACTION: f32 = 0.01;
/// One access in this many makes its line an explorer.
const EXPLORE_INVERSE_PROBABILITY: u64 = 32;
/// Classes by the sum of the last two hit ages.
const HIT_AGE_CLASSES: usize = 16;
/// libCacheSim's class number of the first class (its default application is 1, its
/// classes are `app × 16 + hit-age class`): only the starting densities depend on it.
const FIRST_CLASS_ID: usize = HIT_AGE_CLASSES;
const AGE_COARSENING_ERROR_TOLERANCE: f32 = 0.01;
/// Age buckets per class.
const MAX_AGE: usize = 20_000;
/// Accesses between reconfigurations.
const ACCESSES_PER_RECONFIGURATION: u64 = 1 << 20;
const EWMA_DECAY: f32 = 0.9;
/// Reconfigurations after which explorers stop and sampling widens.
const EXPLORATION_RECONFIGURATIONS: u32 = 50;
/// Seed of the draws (any fixed value: runs must repeat).
const SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// One resident line, in the dense array of residents.
#[derive(Debug, Clone, Copy)]
struct Tag {
    /// Access count (the policy's clock) at its last access.
    timestamp: u64,
    /// Its key (a recently admitted candidate is still one only if its slot holds it).
    key: u64,
    slot: u32,
    /// Age at its last hit (0 when never hit).
    last_hit_age: u16,
    /// Age at the hit before (`MAX_AGE` when none).
    last_last_hit_age: u16,
    explorer: bool,
}

/// Per-age statistics of one class.
#[derive(Debug, Clone)]
struct Class {
    hits: Vec<f32>,
    evictions: Vec<f32>,
    hit_densities: Vec<f32>,
}

/// LHD replacement.
#[derive(Debug, Clone)]
pub struct Lhd {
    /// Residents, densely (a removal moves the last entry into the hole).
    tags: Vec<Tag>,
    /// Position of each slot's entry in `tags` ([`NIL`]: not resident).
    pos: Vec<u32>,
    classes: Vec<Class>,
    /// Accesses so far (the clock ages are measured on).
    timestamp: u64,
    next_reconfiguration: u64,
    reconfigurations: u32,
    age_coarsening_shift: u32,
    ewma_num_objects: f32,
    ewma_num_objects_mass: f32,
    /// Ring of recently admitted lines whose density was below the victims' average:
    /// (slot, key), checked against the slot's current key when used; a key re-inserted
    /// while in the ring has its slot updated.
    recently_admitted: [(u32, u64); ADMISSIONS],
    recently_admitted_head: usize,
    ewma_victim_hit_density: f32,
    /// Lines more explorers may take (may go negative by one line, as libCacheSim's).
    explorer_budget: i64,
    capacity: usize,
    rng: u64,
}

impl Lhd {
    /// An empty LHD of `capacity` lines over slots `< slot_limit`.
    pub fn new(capacity: usize, slot_limit: usize) -> Self {
        assert!(slot_limit < NIL as usize, "slot numbers fit in u32");
        let capacity = capacity.min(slot_limit);
        let classes = (0..HIT_AGE_CLASSES)
            .map(|c| Class {
                hits: vec![0.0; MAX_AGE],
                evictions: vec![0.0; MAX_AGE],
                // libCacheSim's start, computed in double and stored as float as there.
                hit_densities: (0..MAX_AGE)
                    .map(|a| ((FIRST_CLASS_ID + c + 1) as f64 / (a + 1) as f64) as f32)
                    .collect(),
            })
            .collect();
        Lhd {
            tags: Vec::with_capacity(slot_limit),
            pos: vec![NIL; slot_limit],
            classes,
            timestamp: 0,
            next_reconfiguration: ACCESSES_PER_RECONFIGURATION,
            reconfigurations: 0,
            age_coarsening_shift: 10,
            ewma_num_objects: 0.0,
            ewma_num_objects_mass: 0.0,
            recently_admitted: [(NIL, 0); ADMISSIONS],
            recently_admitted_head: 0,
            ewma_victim_hit_density: 0.0,
            explorer_budget: Self::budget(capacity),
            capacity,
            rng: SEED,
        }
    }

    /// Explorer lines allowed in a cache of `capacity` lines (libCacheSim truncates).
    fn budget(capacity: usize) -> i64 {
        (capacity as f32 * EXPLORER_BUDGET_FRACTION) as i64
    }

    /// Reconfigurations so far and the age coarsening shift (for tests and diagnostics).
    pub fn model_state(&self) -> (u32, u32) {
        (self.reconfigurations, self.age_coarsening_shift)
    }

    /// The next draw (xorshift64*).
    #[inline]
    fn next_rand(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Class of `sum`, the last two hit ages summed: about `log2(MAX_AGE / sum)`.
    #[inline]
    fn hit_age_class(mut age: u64) -> usize {
        if age == 0 {
            return HIT_AGE_CLASSES - 1;
        }
        let mut log = 0;
        while age < MAX_AGE as u64 && log < HIT_AGE_CLASSES - 1 {
            age <<= 1;
            log += 1;
        }
        log
    }

    #[inline]
    fn class_of(tag: &Tag) -> usize {
        Self::hit_age_class(u64::from(tag.last_hit_age) + u64::from(tag.last_last_hit_age))
    }

    #[inline]
    fn age(&self, tag: &Tag) -> usize {
        let age = (self.timestamp - tag.timestamp) >> self.age_coarsening_shift;
        (age as usize).min(MAX_AGE - 1)
    }

    #[inline]
    fn hit_density(&self, tag: &Tag) -> f32 {
        let age = self.age(tag);
        if age == MAX_AGE - 1 {
            return f32::MIN;
        }
        let density = self.classes[Self::class_of(tag)].hit_densities[age];
        if tag.explorer {
            density + 1.0
        } else {
            density
        }
    }

    /// The access part shared by hits and inserts (libCacheSim's `update`).
    fn touch(&mut self, index: usize, inserted: bool) {
        let timestamp = self.timestamp;
        let tag = &mut self.tags[index];
        tag.timestamp = timestamp;
        let explore = self.next_rand().is_multiple_of(EXPLORE_INVERSE_PROBABILITY);
        let tag = &mut self.tags[index];
        if explore
            && self.explorer_budget > 0
            && self.reconfigurations < EXPLORATION_RECONFIGURATIONS
        {
            tag.explorer = true;
            self.explorer_budget -= 1;
        } else {
            tag.explorer = false;
        }
        let tag = self.tags[index];
        if inserted && !explore && self.hit_density(&tag) < self.ewma_victim_hit_density {
            self.recently_admitted[self.recently_admitted_head % ADMISSIONS] = (tag.slot, tag.key);
            self.recently_admitted_head += 1;
        }
        self.timestamp += 1;
        self.next_reconfiguration -= 1;
        if self.next_reconfiguration == 0 {
            self.reconfigure();
            self.next_reconfiguration = ACCESSES_PER_RECONFIGURATION;
            self.reconfigurations += 1;
        }
    }

    /// Takes the entry at `index` out of the dense array.
    fn take_out(&mut self, index: usize) {
        let tag = self.tags.swap_remove(index);
        self.pos[tag.slot as usize] = NIL;
        if let Some(moved) = self.tags.get(index) {
            self.pos[moved.slot as usize] = index as u32;
        }
    }

    /// The lowest-density unpinned resident among the sampled and recently admitted ones,
    /// else among all; its index in `tags` and its density.
    fn rank(&mut self, pinned: &dyn Fn(Slot) -> bool) -> Option<(usize, f32)> {
        let n = self.tags.len();
        if n == 0 {
            return None;
        }
        let candidates = if self.reconfigurations > EXPLORATION_RECONFIGURATIONS {
            ASSOCIATIVITY
        } else {
            EARLY_CANDIDATES
        };
        // Draw every sampled index first and start loading their entries, so the cache misses
        // overlap; they are then ranked in the order drawn (the same victim as one by one).
        let mut sampled = [0usize; ASSOCIATIVITY];
        for index in sampled.iter_mut().take(candidates) {
            *index = (self.next_rand() % n as u64) as usize;
            tiercache_core::hint::prefetch(self.tags.as_ptr().wrapping_add(*index));
        }
        // Candidates with their ranks, in the order considered; `pinned` is asked only of the
        // best, then the next best (the policy holds dirty lines out of the order, so most
        // evictions ask once, docs/design.md §4.4), and the victim is the same as skipping
        // pinned candidates while ranking.
        let mut ranked = [(0usize, 0f32); ASSOCIATIVITY + ADMISSIONS];
        let mut m = 0;
        for &index in &sampled[..candidates] {
            ranked[m] = (index, self.hit_density(&self.tags[index]));
            m += 1;
        }
        for i in 0..ADMISSIONS {
            let (slot, key) = self.recently_admitted[i];
            if slot == NIL {
                continue;
            }
            let index = self.pos[slot as usize];
            if index != NIL && self.tags[index as usize].key == key {
                let index = index as usize;
                ranked[m] = (index, self.hit_density(&self.tags[index]));
                m += 1;
            }
        }
        let mut excluded = [false; ASSOCIATIVITY + ADMISSIONS];
        loop {
            let mut best: Option<usize> = None;
            for j in 0..m {
                if !excluded[j] && best.is_none_or(|b| ranked[j].1 < ranked[b].1) {
                    best = Some(j);
                }
            }
            let Some(j) = best else { break };
            let (index, rank) = ranked[j];
            if !pinned(self.tags[index].slot) {
                return Some((index, rank));
            }
            for k in 0..m {
                excluded[k] |= ranked[k].0 == index;
            }
        }
        // Every candidate was pinned: the lowest unpinned resident, if any.
        let mut victim: Option<(usize, f32)> = None;
        for index in 0..n {
            let tag = &self.tags[index];
            if pinned(tag.slot) {
                continue;
            }
            let rank = self.hit_density(tag);
            if victim.is_none_or(|(_, best)| rank < best) {
                victim = Some((index, rank));
            }
        }
        victim
    }

    fn reconfigure(&mut self) {
        for cl in &mut self.classes {
            for age in 0..MAX_AGE {
                cl.hits[age] *= EWMA_DECAY;
                cl.evictions[age] *= EWMA_DECAY;
            }
        }
        self.adapt_age_coarsening();
        self.model_hit_density();
    }

    /// Re-chooses the age coarsening at the 6th and 26th reconfiguration from the average
    /// number of residents, rescaling the statistics to the new bucket width.
    fn adapt_age_coarsening(&mut self) {
        self.ewma_num_objects *= EWMA_DECAY;
        self.ewma_num_objects_mass *= EWMA_DECAY;
        self.ewma_num_objects += self.tags.len() as f32;
        self.ewma_num_objects_mass += 1.0;
        let num_objects = self.ewma_num_objects / self.ewma_num_objects_mass;
        let optimal = (f64::from(num_objects)
            / f64::from(AGE_COARSENING_ERROR_TOLERANCE * MAX_AGE as f32))
            as f32;
        if self.reconfigurations != 5 && self.reconfigurations != 25 {
            return;
        }
        let mut log2 = 1u32;
        while ((1u64 << log2) as f32) < optimal {
            log2 += 1;
        }
        let delta = log2 as i64 - i64::from(self.age_coarsening_shift);
        self.age_coarsening_shift = log2;
        self.ewma_num_objects *= 8.0;
        self.ewma_num_objects_mass *= 8.0;
        if delta < 0 {
            // Stretch: ages past the new range fold into the last bucket.
            let d = (-delta) as u32;
            for cl in &mut self.classes {
                for a in (MAX_AGE >> d)..MAX_AGE - 1 {
                    cl.hits[MAX_AGE - 1] += cl.hits[a];
                    cl.evictions[MAX_AGE - 1] += cl.evictions[a];
                }
                for a in (0..MAX_AGE - 1).rev() {
                    cl.hits[a] = cl.hits[a >> d] / (1u32 << d) as f32;
                    cl.evictions[a] = cl.evictions[a >> d] / (1u32 << d) as f32;
                }
            }
        } else if delta > 0 {
            // Compress: 2^delta buckets become one.
            let d = delta as u32;
            for cl in &mut self.classes {
                for a in 0..MAX_AGE >> d {
                    cl.hits[a] = cl.hits[a << d];
                    cl.evictions[a] = cl.evictions[a << d];
                    for i in 1..(1usize << d) {
                        cl.hits[a] += cl.hits[(a << d) + i];
                        cl.evictions[a] += cl.evictions[(a << d) + i];
                    }
                }
                for a in (MAX_AGE >> d)..MAX_AGE - 1 {
                    cl.hits[a] = 0.0;
                    cl.evictions[a] = 0.0;
                }
            }
        }
    }

    /// Hit density per (class, age): hits still to come over lifetime still to spend, both
    /// summed over the later ages in one backward pass.
    fn model_hit_density(&mut self) {
        for cl in &mut self.classes {
            let mut total_events = cl.hits[MAX_AGE - 1] + cl.evictions[MAX_AGE - 1];
            let mut total_hits = cl.hits[MAX_AGE - 1];
            let mut lifetime = total_events;
            for a in (0..MAX_AGE - 1).rev() {
                total_hits += cl.hits[a];
                total_events += cl.hits[a] + cl.evictions[a];
                lifetime += total_events;
                cl.hit_densities[a] = if total_events > 1e-5 {
                    total_hits / lifetime
                } else {
                    0.0
                };
            }
        }
    }
}

impl Eviction for Lhd {
    fn name(&self) -> &'static str {
        "lhd"
    }

    fn insert(&mut self, slot: Slot, key: LineKey) {
        debug_assert_eq!(self.pos[slot as usize], NIL, "slot {slot} inserted twice");
        let index = self.tags.len();
        debug_assert!(index < self.tags.capacity(), "the array never allocates");
        self.tags.push(Tag {
            timestamp: 0,
            key: key.0,
            slot,
            last_hit_age: 0,
            last_last_hit_age: MAX_AGE as u16,
            explorer: false,
        });
        self.pos[slot as usize] = index as u32;
        // The ring names lines by key, as libCacheSim's does: a key that left and comes back
        // is a candidate again, now in this slot.
        for entry in &mut self.recently_admitted {
            if entry.1 == key.0 && entry.0 != NIL {
                entry.0 = slot;
            }
        }
        self.touch(index, true);
    }

    #[inline]
    fn hit(&mut self, slot: Slot) {
        let index = self.pos[slot as usize] as usize;
        let tag = self.tags[index];
        let age = self.age(&tag);
        self.classes[Self::class_of(&tag)].hits[age] += 1.0;
        if tag.explorer {
            self.explorer_budget += 1;
        }
        let tag = &mut self.tags[index];
        tag.last_last_hit_age = tag.last_hit_age;
        tag.last_hit_age = age as u16;
        self.touch(index, false);
    }

    fn remove(&mut self, slot: Slot) {
        let index = self.pos[slot as usize];
        if index != NIL {
            if self.tags[index as usize].explorer {
                self.explorer_budget += 1;
            }
            self.take_out(index as usize);
        }
    }

    fn evict(&mut self, _incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        let (index, rank) = self.rank(pinned)?;
        self.ewma_victim_hit_density =
            EWMA_DECAY * self.ewma_victim_hit_density + (1.0 - EWMA_DECAY) * rank;
        let tag = self.tags[index];
        let age = self.age(&tag);
        self.classes[Self::class_of(&tag)].evictions[age] += 1.0;
        if tag.explorer {
            self.explorer_budget += 1;
        }
        self.take_out(index);
        Some(tag.slot)
    }

    #[inline]
    fn prefetch(&self, slot: Slot) {
        tiercache_core::hint::prefetch(self.pos.as_ptr().wrapping_add(slot as usize));
    }

    fn len(&self) -> usize {
        self.tags.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    /// `c` becomes `lines` (at most the slot limit); the explorer budget follows its 1 %.
    fn set_capacity(&mut self, lines: usize) {
        let lines = lines.min(self.pos.len());
        self.explorer_budget += Self::budget(lines) - Self::budget(self.capacity);
        self.capacity = lines;
    }

    fn memory_bytes(&self) -> usize {
        self.tags.capacity() * std::mem::size_of::<Tag>()
            + self.pos.capacity() * 4
            + self
                .classes
                .iter()
                .map(|c| {
                    (c.hits.capacity() + c.evictions.capacity() + c.hit_densities.capacity()) * 4
                })
                .sum::<usize>()
    }

    fn grow_slots(&mut self, slot_limit: usize) {
        if slot_limit > self.pos.len() {
            assert!(slot_limit < NIL as usize, "slot numbers fit in u32");
            self.tags.reserve_exact(slot_limit - self.tags.len());
            self.pos.resize(slot_limit, NIL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNPINNED: &dyn Fn(Slot) -> bool = &|_| false;

    #[test]
    fn hit_age_classes_are_log_scaled() {
        assert_eq!(Lhd::hit_age_class(0), HIT_AGE_CLASSES - 1);
        assert_eq!(Lhd::hit_age_class(MAX_AGE as u64), 0);
        assert_eq!(Lhd::hit_age_class(MAX_AGE as u64 / 2), 1);
        assert_eq!(Lhd::hit_age_class(1), HIT_AGE_CLASSES - 1);
        // A line never hit sums MAX_AGE: the lowest class.
        assert_eq!(Lhd::hit_age_class(MAX_AGE as u64 + 5), 0);
    }

    #[test]
    fn densities_model_hits_over_remaining_lifetime() {
        let mut p = Lhd::new(4, 4);
        // Class 0: every line hit at age 2, never evicted: a line of age 0 gets one hit in 3
        // ages of lifetime, one of age 2 one hit in 1.
        p.classes[0].hits[2] = 10.0;
        p.model_hit_density();
        let d = &p.classes[0].hit_densities;
        assert!((d[0] - 1.0 / 3.0).abs() < 1e-6, "{}", d[0]);
        assert!((d[1] - 1.0 / 2.0).abs() < 1e-6, "{}", d[1]);
        assert!((d[2] - 1.0).abs() < 1e-6, "{}", d[2]);
        assert_eq!(d[3], 0.0, "no events later: no density");
        // Evictions at age 2 halve the hits a line of age 0 can expect.
        p.classes[0].evictions[2] = 10.0;
        p.model_hit_density();
        assert!((p.classes[0].hit_densities[0] - 1.0 / 6.0).abs() < 1e-6);
    }

    #[test]
    fn evicts_the_lowest_density_and_passes_over_pinned() {
        let mut p = Lhd::new(3, 3);
        for s in 0..3 {
            p.insert(s, LineKey(u64::from(s)));
        }
        // A hit at age 0 puts a line in the class of short hit ages, whose starting density
        // (class + 17) / (age + 1) is the highest; the line never hit ranks lowest.
        p.hit(0);
        p.hit(2);
        assert_eq!(p.evict(LineKey(9), UNPINNED), Some(1));
        p.insert(1, LineKey(9));
        assert_eq!(p.len(), 3);
        assert_eq!(p.evict(LineKey(10), &|_| true), None);
        assert_eq!(p.evict(LineKey(10), &|s| s != 2), Some(2));
        assert_eq!(p.len(), 2);
        assert_eq!(p.pos[2], NIL);
        assert!(p.tags.iter().all(|t| p.pos[t.slot as usize] != NIL));
    }

    #[test]
    fn reconfiguration_rescales_ages() {
        let mut p = Lhd::new(1000, 1000);
        for s in 0..1000 {
            p.insert(s, LineKey(u64::from(s)));
        }
        // Six reconfigurations (the sixth adapts the coarsening to ~1000 residents: 1000 /
        // (0.01 × 20000) = 5, so a shift of 3).
        let mut s = 0u32;
        while p.model_state().0 < 6 {
            p.hit(s % 1000);
            s += 1;
        }
        assert_eq!(p.model_state(), (6, 3));
        assert_eq!(p.len(), 1000);
    }
}
