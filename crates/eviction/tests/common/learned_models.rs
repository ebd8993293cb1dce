//! Reference model of LHD, written as libCacheSim's `LHD` is: residents in a vector whose
//! hole on removal takes the last entry, found by key through a map; no slot arrays.
//!
//! It covers LHD before its first reconfiguration (2^20 accesses, far beyond the property
//! tests): hit densities are the starting ones, `(class + 17) / (age + 1)`, ages coarsened by
//! `>> 10`. The reconfiguration's arithmetic is unit-tested in `src/lhd.rs`.

use super::models::Model;
use std::collections::HashMap;

const MAX_AGE: u64 = 20_000;

#[derive(Clone, Copy)]
struct Tag {
    key: u64,
    timestamp: u64,
    last_hit_age: u64,
    last_last_hit_age: u64,
    explorer: bool,
}

pub struct LhdModel {
    tags: Vec<Tag>,
    index: HashMap<u64, usize>,
    timestamp: u64,
    recent: [Option<u64>; 8],
    recent_head: usize,
    ewma: f32,
    budget: i64,
    c: usize,
    rng: u64,
}

impl LhdModel {
    pub fn new(c: usize) -> Self {
        LhdModel {
            tags: Vec::new(),
            index: HashMap::new(),
            timestamp: 0,
            recent: [None; 8],
            recent_head: 0,
            ewma: 0.0,
            budget: (c as f32 * 0.01) as i64,
            c,
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    fn rand(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn age(&self, t: &Tag) -> u64 {
        ((self.timestamp - t.timestamp) >> 10).min(MAX_AGE - 1)
    }

    fn density(&self, t: &Tag) -> f32 {
        let age = self.age(t);
        if age == MAX_AGE - 1 {
            return f32::MIN;
        }
        let mut sum = t.last_hit_age + t.last_last_hit_age;
        let class = if sum == 0 {
            15
        } else {
            let mut log = 0;
            while sum < MAX_AGE && log < 15 {
                sum <<= 1;
                log += 1;
            }
            log
        };
        let d = ((16 + class + 1) as f64 / (age + 1) as f64) as f32;
        if t.explorer {
            d + 1.0
        } else {
            d
        }
    }

    fn update(&mut self, key: u64, inserted: bool) {
        let i = self.index[&key];
        self.tags[i].timestamp = self.timestamp;
        let explore = self.rand().is_multiple_of(32);
        if explore && self.budget > 0 {
            self.tags[i].explorer = true;
            self.budget -= 1;
        } else {
            self.tags[i].explorer = false;
        }
        if inserted && !explore && self.density(&self.tags[i]) < self.ewma {
            self.recent[self.recent_head % 8] = Some(key);
            self.recent_head += 1;
        }
        self.timestamp += 1;
    }

    fn take_out(&mut self, key: u64) -> Tag {
        let i = self.index.remove(&key).unwrap();
        let t = self.tags.swap_remove(i);
        if i < self.tags.len() {
            self.index.insert(self.tags[i].key, i);
        }
        t
    }
}

impl Model for LhdModel {
    fn hit(&mut self, key: u64) {
        let i = self.index[&key];
        let age = self.age(&self.tags[i]);
        if self.tags[i].explorer {
            self.budget += 1;
        }
        let t = &mut self.tags[i];
        t.last_last_hit_age = t.last_hit_age;
        t.last_hit_age = age;
        self.update(key, false);
    }
    fn insert(&mut self, key: u64) {
        self.index.insert(key, self.tags.len());
        self.tags.push(Tag {
            key,
            timestamp: 0,
            last_hit_age: 0,
            last_last_hit_age: MAX_AGE,
            explorer: false,
        });
        self.update(key, true);
    }
    fn evict(&mut self, _incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        if self.tags.is_empty() {
            return None;
        }
        let mut best: Option<(u64, f32)> = None;
        let consider = |m: &Self, i: usize, best: &mut Option<(u64, f32)>| {
            let t = &m.tags[i];
            if pinned(t.key) {
                return;
            }
            let d = m.density(t);
            if best.is_none_or(|(_, b)| d < b) {
                *best = Some((t.key, d));
            }
        };
        for _ in 0..8 {
            let i = (self.rand() % self.tags.len() as u64) as usize;
            consider(self, i, &mut best);
        }
        for r in self.recent {
            if let Some(&i) = r.and_then(|k| self.index.get(&k)) {
                consider(self, i, &mut best);
            }
        }
        if best.is_none() {
            for i in 0..self.tags.len() {
                consider(self, i, &mut best);
            }
        }
        let (victim, d) = best?;
        self.ewma = 0.9 * self.ewma + (1.0 - 0.9) * d;
        if self.take_out(victim).explorer {
            self.budget += 1;
        }
        Some(victim)
    }
    fn remove(&mut self, key: u64) {
        if self.take_out(key).explorer {
            self.budget += 1;
        }
    }
    fn len(&self) -> usize {
        self.tags.len()
    }
    fn set_capacity(&mut self, c: usize) {
        self.budget += (c as f32 * 0.01) as i64 - (self.c as f32 * 0.01) as i64;
        self.c = c;
    }
}
