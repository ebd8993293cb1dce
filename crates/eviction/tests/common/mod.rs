//! Test support: a tiny stand-in for the policy core, and simple O(n) reference models.
#![allow(dead_code)]

pub mod compared_models;
pub mod learned_models;
pub mod models;
pub mod newer_models;

use std::collections::{HashMap, HashSet, VecDeque};
use tiercache_core::LineKey;
use tiercache_eviction::{build, Eviction, EvictionKind, Slot, NO_INCOMING};

/// What one access did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The key was resident.
    Hit,
    /// The key entered the cache, evicting `victim` if the cache was full.
    Miss { victim: Option<u64> },
    /// The cache was full and every resident line was pinned: nothing was inserted.
    Bypass,
}

/// Mimics the policy core: a key → slot map, a free-slot queue and the call protocol of
/// [`Eviction`] (hit on hit; on a miss, `evict` then `insert` when full, else `insert`).
pub struct Harness {
    pub policy: Box<dyn Eviction>,
    capacity: usize,
    slot_of: HashMap<u64, Slot>,
    key_of: Vec<Option<u64>>,
    /// FIFO of free slots, so an insert usually lands in another slot than the one freed.
    free: VecDeque<Slot>,
    /// The policy was built with the smallest slot limit and grows as slots and capacities
    /// need ([`Eviction::grow_slots`]).
    grows: bool,
}

impl Harness {
    /// A harness over `capacity` lines, with a few spare slot numbers beyond it.
    pub fn new(kind: EvictionKind, capacity: usize) -> Self {
        let slot_limit = capacity + 3;
        Self::with_policy(build(kind, capacity, slot_limit), capacity, slot_limit)
    }

    /// A harness over `capacity` lines whose capacity may later grow up to `slot_limit`.
    pub fn with_slot_limit(kind: EvictionKind, capacity: usize, slot_limit: usize) -> Self {
        Self::with_policy(build(kind, capacity, slot_limit), capacity, slot_limit)
    }

    /// As [`Harness::with_slot_limit`], the policy built with a slot limit of `capacity` and
    /// grown before each insert into a slot past its limit and each capacity beyond it.
    pub fn growing(kind: EvictionKind, capacity: usize, slot_limit: usize) -> Self {
        let mut h = Self::with_policy(build(kind, capacity, capacity), capacity, slot_limit);
        h.grows = true;
        h
    }

    /// A harness around an already built policy.
    pub fn with_policy(policy: Box<dyn Eviction>, capacity: usize, slot_limit: usize) -> Self {
        Harness {
            grows: false,
            policy,
            capacity,
            slot_of: HashMap::new(),
            key_of: vec![None; slot_limit],
            // Spread slot numbers: odd ones first.
            free: (0..slot_limit as Slot)
                .filter(|s| s % 2 == 1)
                .chain((0..slot_limit as Slot).filter(|s| s % 2 == 0))
                .collect(),
        }
    }

    pub fn is_resident(&self, key: u64) -> bool {
        self.slot_of.contains_key(&key)
    }

    pub fn resident_count(&self) -> usize {
        self.slot_of.len()
    }

    /// One access to `key`; `pinned` keys may not be evicted.
    pub fn access(&mut self, key: u64, pinned: &HashSet<u64>) -> Outcome {
        self.access_as(key, pinned, false)
    }

    /// An access whose miss inserts with `insert_cold`.
    pub fn access_cold(&mut self, key: u64, pinned: &HashSet<u64>) -> Outcome {
        self.access_as(key, pinned, true)
    }

    /// Changes the capacity (`set_capacity`), then evicts with [`NO_INCOMING`] until the
    /// cache fits or every resident line is pinned; returns the victims in order.
    pub fn set_capacity(&mut self, capacity: usize, pinned: &HashSet<u64>) -> Vec<u64> {
        self.capacity = capacity;
        if self.grows {
            self.policy.grow_slots(capacity);
        }
        self.policy.set_capacity(capacity);
        let mut victims = Vec::new();
        while self.slot_of.len() > capacity {
            let key_of = &self.key_of;
            let is_pinned = |s: Slot| key_of[s as usize].is_some_and(|k| pinned.contains(&k));
            let Some(slot) = self.policy.evict(NO_INCOMING, &is_pinned) else {
                break;
            };
            let old = self.key_of[slot as usize]
                .take()
                .expect("victim slot holds a line");
            assert!(!pinned.contains(&old), "evicted pinned key {old}");
            self.slot_of.remove(&old);
            self.free.push_back(slot);
            victims.push(old);
        }
        victims
    }

    fn access_as(&mut self, key: u64, pinned: &HashSet<u64>, cold: bool) -> Outcome {
        if let Some(&slot) = self.slot_of.get(&key) {
            self.policy.hit(slot);
            return Outcome::Hit;
        }
        let mut victim = None;
        if self.slot_of.len() >= self.capacity {
            let key_of = &self.key_of;
            let is_pinned = |s: Slot| key_of[s as usize].is_some_and(|k| pinned.contains(&k));
            let Some(slot) = self.policy.evict(LineKey(key), &is_pinned) else {
                return Outcome::Bypass;
            };
            let old = self.key_of[slot as usize]
                .take()
                .expect("victim slot holds a line");
            assert!(!pinned.contains(&old), "evicted pinned key {old}");
            self.slot_of.remove(&old);
            self.free.push_back(slot);
            victim = Some(old);
        }
        let slot = self.free.pop_front().expect("a free slot");
        if self.grows {
            self.policy.grow_slots(slot as usize + 1);
        }
        self.slot_of.insert(key, slot);
        self.key_of[slot as usize] = Some(key);
        if cold {
            self.policy.insert_cold(slot, LineKey(key));
        } else {
            self.policy.insert(slot, LineKey(key));
        }
        Outcome::Miss { victim }
    }

    /// Removes `key` if resident (a trim); returns whether it was.
    pub fn remove(&mut self, key: u64) -> bool {
        let Some(slot) = self.slot_of.remove(&key) else {
            return false;
        };
        self.key_of[slot as usize] = None;
        self.free.push_back(slot);
        self.policy.remove(slot);
        true
    }
}

/// Runs `keys` (all gets) through a fresh cache; returns the hit count.
pub fn count_hits(
    kind: EvictionKind,
    capacity: usize,
    keys: impl IntoIterator<Item = u64>,
) -> usize {
    let mut h = Harness::new(kind, capacity);
    let none = HashSet::new();
    keys.into_iter()
        .filter(|&k| h.access(k, &none) == Outcome::Hit)
        .count()
}
