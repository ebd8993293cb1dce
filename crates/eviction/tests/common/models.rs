//! Reference models: each policy written the plain way, over keys, with `VecDeque`/`Vec`
//! and O(n) searches, to check the optimised slot-array versions against.

use super::Outcome;
use std::collections::{HashSet, VecDeque};
use tiercache_eviction::EvictionKind;

/// A policy over keys, called with the same protocol as [`tiercache_eviction::Eviction`].
pub trait Model {
    fn hit(&mut self, key: u64);
    fn insert(&mut self, key: u64);
    fn evict(&mut self, incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64>;
    fn remove(&mut self, key: u64);
    fn len(&self) -> usize;
    /// Inserts at the "evict next" end (default: as `insert`).
    fn insert_cold(&mut self, key: u64) {
        self.insert(key);
    }
    /// The capacity the policy adapts to changed (default: nothing depends on it).
    fn set_capacity(&mut self, _capacity: usize) {}
}

/// The reference model of `kind` for a cache of `capacity` lines.
pub fn model(kind: EvictionKind, capacity: usize) -> Box<dyn Model> {
    match kind {
        EvictionKind::Lru => Box::new(Recency {
            evict_newest: false,
            reorder_on_hit: true,
            q: VecDeque::new(),
        }),
        EvictionKind::Mru => Box::new(Recency {
            evict_newest: true,
            reorder_on_hit: true,
            q: VecDeque::new(),
        }),
        EvictionKind::Fifo => Box::new(Recency {
            evict_newest: false,
            reorder_on_hit: false,
            q: VecDeque::new(),
        }),
        EvictionKind::Clock => Box::new(ClockRing {
            ring: Vec::new(),
            hand: 0,
        }),
        EvictionKind::Sieve => Box::new(SieveVec {
            q: Vec::new(),
            hand: None,
        }),
        EvictionKind::Arc => Box::new(ArcModel::new(capacity)),
        EvictionKind::S3Fifo => Box::new(S3FifoModel::new(capacity, true)),
        EvictionKind::Car => Box::new(super::newer_models::CarModel::new(capacity)),
        EvictionKind::ClockPro => Box::new(super::newer_models::ClockProModel::new(capacity)),
        EvictionKind::WTinyLfu => Box::new(super::newer_models::WTinyLfuModel::new(capacity)),
        EvictionKind::LeCaR => Box::new(super::newer_models::LeCaRModel::new(capacity)),
        // Policies researchers compare against (issue 35).
        EvictionKind::Slru => Box::new(super::compared_models::SlruModel::new(capacity)),
        EvictionKind::TwoQ => Box::new(super::compared_models::TwoQModel::new(capacity)),
        EvictionKind::Lfu => Box::new(super::compared_models::LfuModel::default()),
        EvictionKind::Lfuda => Box::new(super::compared_models::LfudaModel::default()),
        EvictionKind::LruK => Box::new(super::compared_models::LruKModel::default()),
        EvictionKind::Lirs => Box::new(super::compared_models::LirsModel::new(capacity)),
        EvictionKind::Lhd => Box::new(super::learned_models::LhdModel::new(capacity)),
        // Offline (tiercache-optimal has its own exhaustive-search tests); never in `ALL`.
        EvictionKind::Belady => unreachable!("belady is not an online policy"),
    }
}

/// Runs a model with the core's protocol (same as [`super::Harness`]).
pub struct ModelHarness {
    pub model: Box<dyn Model>,
    capacity: usize,
    resident: HashSet<u64>,
}

impl ModelHarness {
    pub fn new(kind: EvictionKind, capacity: usize) -> Self {
        Self::with_model(model(kind, capacity), capacity)
    }

    pub fn with_model(model: Box<dyn Model>, capacity: usize) -> Self {
        ModelHarness {
            model,
            capacity,
            resident: HashSet::new(),
        }
    }

    pub fn access(&mut self, key: u64, pinned: &HashSet<u64>) -> Outcome {
        self.access_as(key, pinned, false)
    }

    /// An access whose miss inserts at the "evict next" end.
    pub fn access_cold(&mut self, key: u64, pinned: &HashSet<u64>) -> Outcome {
        self.access_as(key, pinned, true)
    }

    /// Changes the capacity, then evicts (for no incoming key) until the cache fits or every
    /// resident line is pinned; returns the victims in order.
    pub fn set_capacity(&mut self, capacity: usize, pinned: &HashSet<u64>) -> Vec<u64> {
        self.capacity = capacity;
        self.model.set_capacity(capacity);
        let mut victims = Vec::new();
        while self.resident.len() > capacity {
            let Some(v) = self.model.evict(NO_KEY, &|k| pinned.contains(&k)) else {
                break;
            };
            assert!(self.resident.remove(&v), "model evicted non-resident {v}");
            victims.push(v);
        }
        victims
    }

    fn access_as(&mut self, key: u64, pinned: &HashSet<u64>, cold: bool) -> Outcome {
        if self.resident.contains(&key) {
            self.model.hit(key);
            return Outcome::Hit;
        }
        let mut victim = None;
        if self.resident.len() >= self.capacity {
            let Some(v) = self.model.evict(key, &|k| pinned.contains(&k)) else {
                return Outcome::Bypass;
            };
            assert!(self.resident.remove(&v), "model evicted non-resident {v}");
            victim = Some(v);
        }
        self.resident.insert(key);
        if cold {
            self.model.insert_cold(key);
        } else {
            self.model.insert(key);
        }
        Outcome::Miss { victim }
    }

    pub fn remove(&mut self, key: u64) -> bool {
        if self.resident.remove(&key) {
            self.model.remove(key);
            true
        } else {
            false
        }
    }
}

/// The models' stand-in for `NO_INCOMING`: no ghost lookup.
pub const NO_KEY: u64 = u64::MAX;

fn position<T: PartialEq>(q: &VecDeque<T>, x: &T) -> Option<usize> {
    q.iter().position(|y| y == x)
}

/// LRU, MRU and FIFO: one deque, newest at the front.
struct Recency {
    evict_newest: bool,
    reorder_on_hit: bool,
    q: VecDeque<u64>,
}

impl Model for Recency {
    fn hit(&mut self, key: u64) {
        if self.reorder_on_hit {
            let i = position(&self.q, &key).unwrap();
            self.q.remove(i);
            self.q.push_front(key);
        }
    }
    fn insert(&mut self, key: u64) {
        self.q.push_front(key);
    }
    fn evict(&mut self, _incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        let i = if self.evict_newest {
            (0..self.q.len()).find(|&i| !pinned(self.q[i]))?
        } else {
            (0..self.q.len()).rev().find(|&i| !pinned(self.q[i]))?
        };
        self.q.remove(i)
    }
    fn remove(&mut self, key: u64) {
        self.q.retain(|&k| k != key);
    }
    fn len(&self) -> usize {
        self.q.len()
    }
    fn insert_cold(&mut self, key: u64) {
        // The evict-next end: the back for LRU and FIFO, the front for MRU.
        if self.evict_newest {
            self.q.push_front(key);
        } else {
            self.q.push_back(key);
        }
    }
}

/// Textbook CLOCK: frames in a ring, a hand at the oldest frame, new lines placed just
/// behind the hand.
struct ClockRing {
    ring: Vec<(u64, bool)>,
    hand: usize,
}

impl Model for ClockRing {
    fn hit(&mut self, key: u64) {
        self.ring.iter_mut().find(|e| e.0 == key).unwrap().1 = true;
    }
    fn insert(&mut self, key: u64) {
        self.ring.insert(self.hand, (key, false));
        self.hand += 1;
        if self.hand == self.ring.len() {
            self.hand = 0;
        }
    }
    fn evict(&mut self, _incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        for _ in 0..2 * self.ring.len() {
            let (key, referenced) = self.ring[self.hand];
            if referenced {
                self.ring[self.hand].1 = false;
            } else if !pinned(key) {
                self.ring.remove(self.hand);
                if self.hand == self.ring.len() {
                    self.hand = 0;
                }
                return Some(key);
            }
            self.hand = (self.hand + 1) % self.ring.len();
        }
        None
    }
    fn remove(&mut self, key: u64) {
        let i = self.ring.iter().position(|e| e.0 == key).unwrap();
        self.ring.remove(i);
        if i < self.hand {
            self.hand -= 1;
        }
        if self.hand >= self.ring.len() {
            self.hand = 0;
        }
    }
    fn len(&self) -> usize {
        self.ring.len()
    }
    fn insert_cold(&mut self, key: u64) {
        // Under the hand: examined first.
        self.ring.insert(self.hand, (key, false));
    }
}

/// SIEVE over a vector ordered oldest (index 0) to newest, with the hand as an index.
struct SieveVec {
    q: Vec<(u64, bool)>,
    hand: Option<usize>,
}

impl Model for SieveVec {
    fn hit(&mut self, key: u64) {
        self.q.iter_mut().find(|e| e.0 == key).unwrap().1 = true;
    }
    fn insert(&mut self, key: u64) {
        self.q.push((key, false));
    }
    fn evict(&mut self, _incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        if self.q.is_empty() {
            return None;
        }
        let mut i = self.hand.unwrap_or(0);
        for _ in 0..2 * self.q.len() {
            let (key, visited) = self.q[i];
            if visited {
                self.q[i].1 = false;
            } else if !pinned(key) {
                self.q.remove(i);
                // The hand stays on the next newer line, or restarts from the oldest.
                self.hand = (i < self.q.len()).then_some(i);
                return Some(key);
            }
            i = (i + 1) % self.q.len();
        }
        self.hand = Some(i);
        None
    }
    fn remove(&mut self, key: u64) {
        let j = self.q.iter().position(|e| e.0 == key).unwrap();
        self.q.remove(j);
        self.hand = match self.hand {
            Some(h) if h == j => (j < self.q.len()).then_some(j),
            Some(h) if j < h => Some(h - 1),
            other => other,
        };
    }
    fn len(&self) -> usize {
        self.q.len()
    }
    fn insert_cold(&mut self, key: u64) {
        // Where the hand looks next (the oldest line when it starts from there); the hand
        // stays on that position, now the new line.
        self.q.insert(self.hand.unwrap_or(0), (key, false));
    }
}

/// ARC with four deques (front = most recent), written from the paper and libCacheSim's
/// description of its cases.
pub struct ArcModel {
    t1: VecDeque<u64>,
    t2: VecDeque<u64>,
    b1: VecDeque<u64>,
    b2: VecDeque<u64>,
    p: f64,
    c: usize,
    pending: Option<(u64, Option<u8>)>,
}

impl ArcModel {
    pub fn new(c: usize) -> Self {
        ArcModel {
            t1: VecDeque::new(),
            t2: VecDeque::new(),
            b1: VecDeque::new(),
            b2: VecDeque::new(),
            p: 0.0,
            c,
            pending: None,
        }
    }

    fn ghost_hit(&mut self, key: u64) -> Option<u8> {
        let c = self.c as f64;
        if let Some(i) = position(&self.b1, &key) {
            let delta = (self.b2.len() as f64 / self.b1.len() as f64).max(1.0);
            self.p = (self.p + delta).min(c);
            self.b1.remove(i);
            Some(1)
        } else if let Some(i) = position(&self.b2, &key) {
            let delta = (self.b1.len() as f64 / self.b2.len() as f64).max(1.0);
            self.p = (self.p - delta).max(0.0);
            self.b2.remove(i);
            Some(2)
        } else {
            None
        }
    }

    /// REPLACE's choice: true for T1.
    fn replace_from_t1(&self, hit_in_b2: bool) -> bool {
        let t1 = self.t1.len() as f64;
        (!self.t1.is_empty() && (t1 > self.p || (t1 == self.p && hit_in_b2))) || self.t2.is_empty()
    }

    /// Least recent unpinned key of the preferred list, else of the other; removes it.
    /// Returns (key, came from T1).
    fn take(&mut self, from_t1: bool, pinned: &dyn Fn(u64) -> bool) -> Option<(u64, bool)> {
        for t1 in [from_t1, !from_t1] {
            let q = if t1 { &mut self.t1 } else { &mut self.t2 };
            if let Some(i) = (0..q.len()).rev().find(|&i| !pinned(q[i])) {
                return Some((q.remove(i).unwrap(), t1));
            }
        }
        None
    }

    /// Drops the oldest ghost of the longer list (B1 on a tie).
    fn drop_oldest_ghost(&mut self) {
        if self.b2.len() > self.b1.len() {
            self.b2.pop_back();
        } else {
            self.b1.pop_back();
        }
    }

    fn remember(&mut self, key: u64, from_t1: bool) {
        // The ghosts hold at most c keys together.
        if self.c == 0 {
            return;
        }
        if self.b1.len() + self.b2.len() >= self.c {
            self.drop_oldest_ghost();
        }
        if from_t1 {
            self.b1.push_front(key);
        } else {
            self.b2.push_front(key);
        }
    }
}

impl Model for ArcModel {
    fn hit(&mut self, key: u64) {
        if let Some(i) = position(&self.t1, &key) {
            self.t1.remove(i);
        } else {
            let i = position(&self.t2, &key).unwrap();
            self.t2.remove(i);
        }
        self.t2.push_front(key);
    }
    fn insert(&mut self, key: u64) {
        let hit = match self.pending.take() {
            Some((k, g)) if k == key => g,
            _ => self.ghost_hit(key),
        };
        if hit.is_some() {
            self.t2.push_front(key);
        } else {
            self.t1.push_front(key);
        }
    }
    fn evict(&mut self, incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        let g = if incoming == NO_KEY {
            None
        } else {
            let g = match self.pending {
                Some((k, g)) if k == incoming => g,
                _ => self.ghost_hit(incoming),
            };
            self.pending = Some((incoming, g));
            g
        };
        if let Some(which) = g {
            let (k, t1) = self.take(self.replace_from_t1(which == 2), pinned)?;
            self.remember(k, t1);
            return Some(k);
        }
        let (t1, b1, t2, b2) = (self.t1.len(), self.b1.len(), self.t2.len(), self.b2.len());
        if t1 + b1 >= self.c {
            if b1 > 0 {
                let (k, from_t1) = self.take(self.replace_from_t1(false), pinned)?;
                self.b1.pop_back();
                self.remember(k, from_t1);
                Some(k)
            } else {
                let (k, from_t1) = self.take(true, pinned)?;
                if !from_t1 {
                    self.remember(k, false);
                }
                Some(k)
            }
        } else {
            let (k, from_t1) = self.take(self.replace_from_t1(false), pinned)?;
            if t1 + b1 + t2 + b2 >= 2 * self.c {
                self.b2.pop_back();
            }
            self.remember(k, from_t1);
            Some(k)
        }
    }
    fn remove(&mut self, key: u64) {
        self.t1.retain(|&k| k != key);
        self.t2.retain(|&k| k != key);
    }
    fn len(&self) -> usize {
        self.t1.len() + self.t2.len()
    }
    fn set_capacity(&mut self, capacity: usize) {
        self.c = capacity;
        self.p = self.p.min(capacity as f64);
        while self.b1.len() + self.b2.len() > capacity {
            self.drop_oldest_ghost();
        }
    }
}

/// S3-FIFO with deques for small, main and ghost.
pub struct S3FifoModel {
    small: VecDeque<(u64, u8)>,
    main: VecDeque<(u64, u8)>,
    ghost: VecDeque<u64>,
    small_cap: usize,
    main_cap: usize,
    ghost_cap: usize,
    fill_main_first: bool,
    has_evicted: bool,
    pending: Option<(u64, bool)>,
}

impl S3FifoModel {
    pub fn new(c: usize, fill_main_first: bool) -> Self {
        let mut m = S3FifoModel {
            small: VecDeque::new(),
            main: VecDeque::new(),
            ghost: VecDeque::new(),
            small_cap: 0,
            main_cap: 0,
            ghost_cap: 0,
            fill_main_first,
            has_evicted: false,
            pending: None,
        };
        m.set_capacity(c);
        m
    }

    fn ghost_take(&mut self, key: u64) -> bool {
        match position(&self.ghost, &key) {
            Some(i) => {
                self.ghost.remove(i);
                true
            }
            None => false,
        }
    }

    fn evict_small(&mut self, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        let mut passed = 0;
        while let Some((key, freq)) = self.small.pop_back() {
            if freq >= 2 {
                self.main.push_front((key, 0));
            } else if pinned(key) {
                if passed > self.small.len() {
                    self.small.push_back((key, freq));
                    return None;
                }
                passed += 1;
                self.small.push_front((key, freq));
            } else {
                if self.ghost_cap > 0 {
                    if self.ghost.len() >= self.ghost_cap {
                        self.ghost.pop_back();
                    }
                    self.ghost.push_front(key);
                }
                return Some(key);
            }
        }
        None
    }

    fn evict_main(&mut self, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        for _ in 0..4 * self.main.len() {
            let (key, freq) = self.main.pop_back()?;
            if freq > 0 {
                self.main.push_front((key, freq.min(3) - 1));
            } else if pinned(key) {
                self.main.push_front((key, freq));
            } else {
                return Some(key);
            }
        }
        None
    }
}

impl Model for S3FifoModel {
    fn hit(&mut self, key: u64) {
        let e = self
            .small
            .iter_mut()
            .chain(self.main.iter_mut())
            .find(|e| e.0 == key)
            .unwrap();
        e.1 = (e.1 + 1).min(3);
    }
    fn insert(&mut self, key: u64) {
        let ghost_hit = match self.pending.take() {
            Some((k, g)) if k == key => g,
            _ => self.ghost_take(key),
        };
        if ghost_hit
            || (self.fill_main_first && !self.has_evicted && self.small.len() >= self.small_cap)
        {
            self.main.push_front((key, 0));
        } else {
            self.small.push_front((key, 0));
        }
    }
    fn evict(&mut self, incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        if incoming != NO_KEY {
            let g = match self.pending {
                Some((k, g)) if k == incoming => g,
                _ => self.ghost_take(incoming),
            };
            self.pending = Some((incoming, g));
        }
        self.has_evicted = true;
        if self.main.len() > self.main_cap || self.small.is_empty() {
            self.evict_main(pinned)
                .or_else(|| self.evict_small(pinned))
                .or_else(|| self.evict_main(pinned))
        } else {
            self.evict_small(pinned).or_else(|| self.evict_main(pinned))
        }
    }
    fn remove(&mut self, key: u64) {
        self.small.retain(|e| e.0 != key);
        self.main.retain(|e| e.0 != key);
    }
    fn len(&self) -> usize {
        self.small.len() + self.main.len()
    }
    fn set_capacity(&mut self, c: usize) {
        self.small_cap = (c as f64 * 0.1) as usize;
        self.main_cap = c - self.small_cap;
        self.ghost_cap = (c as f64 * 0.9) as usize;
        self.ghost.truncate(self.ghost_cap);
    }
}
