//! Reference models of the policies researchers compare against (SLRU, 2Q, LFU), written the
//! plain way over keys with `VecDeque`s, linear searches and explicit counts.

use super::models::{Model, NO_KEY};
use std::collections::VecDeque;

fn drop_key(q: &mut VecDeque<u64>, key: u64) -> bool {
    match q.iter().position(|&k| k == key) {
        Some(i) => {
            q.remove(i);
            true
        }
        None => false,
    }
}

/// Oldest unpinned key of `q` (front = newest), removed.
fn take_oldest(q: &mut VecDeque<u64>, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
    let i = (0..q.len()).rev().find(|&i| !pinned(q[i]))?;
    q.remove(i)
}

/// SLRU: four LRU deques (front = most recent), each of `c / 4` lines.
pub struct SlruModel {
    segs: [VecDeque<u64>; 4],
    share: usize,
}

impl SlruModel {
    pub fn new(c: usize) -> Self {
        SlruModel {
            segs: Default::default(),
            share: c / 4,
        }
    }

    /// libCacheSim's `SLRU_cool`, stopping at segment 0 (which never evicts on a hit here).
    fn cool(&mut self, id: usize) {
        let k = self.segs[id].pop_back().unwrap();
        self.segs[id - 1].push_front(k);
        while id > 1 && self.segs[id - 1].len() > self.share {
            self.cool(id - 1);
        }
    }

    fn entry(&self) -> usize {
        (0..4)
            .find(|&i| self.segs[i].len() < self.share)
            .unwrap_or(0)
    }
}

impl Model for SlruModel {
    fn hit(&mut self, key: u64) {
        let seg = (0..4).find(|&i| self.segs[i].contains(&key)).unwrap();
        drop_key(&mut self.segs[seg], key);
        if seg == 3 {
            self.segs[3].push_front(key);
            return;
        }
        self.segs[seg + 1].push_front(key);
        while self.segs[seg + 1].len() > self.share {
            self.cool(seg + 1);
        }
    }
    fn insert(&mut self, key: u64) {
        let seg = self.entry();
        self.segs[seg].push_front(key);
    }
    fn insert_cold(&mut self, key: u64) {
        let seg = self.entry();
        self.segs[seg].push_back(key);
    }
    fn evict(&mut self, _incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        (0..4).find_map(|i| take_oldest(&mut self.segs[i], pinned))
    }
    fn remove(&mut self, key: u64) {
        for q in &mut self.segs {
            drop_key(q, key);
        }
    }
    fn len(&self) -> usize {
        self.segs.iter().map(VecDeque::len).sum()
    }
    fn set_capacity(&mut self, c: usize) {
        self.share = c / 4;
    }
}

/// 2Q: A1in FIFO, Am LRU, A1out FIFO of keys (front = newest).
pub struct TwoQModel {
    a1in: VecDeque<u64>,
    am: VecDeque<u64>,
    a1out: VecDeque<u64>,
    c: usize,
    /// Result of the last eviction's ghost lookup: (key, found).
    pending: Option<(u64, bool)>,
}

impl TwoQModel {
    pub fn new(c: usize) -> Self {
        TwoQModel {
            a1in: VecDeque::new(),
            am: VecDeque::new(),
            a1out: VecDeque::new(),
            c,
            pending: None,
        }
    }

    fn a1in_share(&self) -> usize {
        (self.c as f64 * 0.25) as usize
    }

    fn a1out_limit(&self) -> usize {
        (self.c as f64 * 0.5) as usize
    }

    fn lookup(&mut self, key: u64) -> bool {
        match self.pending {
            Some((k, found)) if k == key => found,
            _ => drop_key(&mut self.a1out, key),
        }
    }
}

impl Model for TwoQModel {
    fn hit(&mut self, key: u64) {
        if drop_key(&mut self.am, key) {
            self.am.push_front(key);
        }
    }
    fn insert(&mut self, key: u64) {
        let ghost = self.lookup(key);
        self.pending = None;
        if ghost {
            self.am.push_front(key);
        } else {
            self.a1in.push_front(key);
        }
    }
    fn evict(&mut self, incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        if incoming != NO_KEY {
            let found = self.lookup(incoming);
            self.pending = Some((incoming, found));
        }
        let from_a1in = self.a1in.len() > self.a1in_share();
        for a1in in [from_a1in, !from_a1in] {
            let q = if a1in { &mut self.a1in } else { &mut self.am };
            if let Some(k) = take_oldest(q, pinned) {
                if a1in && self.a1out_limit() > 0 {
                    if self.a1out.len() >= self.a1out_limit() {
                        self.a1out.pop_back();
                    }
                    self.a1out.push_front(k);
                }
                return Some(k);
            }
        }
        None
    }
    fn remove(&mut self, key: u64) {
        drop_key(&mut self.a1in, key);
        drop_key(&mut self.am, key);
    }
    fn len(&self) -> usize {
        self.a1in.len() + self.am.len()
    }
    fn set_capacity(&mut self, c: usize) {
        self.c = c;
        self.a1out.truncate(self.a1out_limit());
    }
}

/// LFU: every resident key with its count and the time it reached that count; the victim is
/// the smallest (count, time) among unpinned keys.
#[derive(Default)]
pub struct LfuModel {
    lines: Vec<(u64, u64, i64)>,
    clock: i64,
}

impl Model for LfuModel {
    fn hit(&mut self, key: u64) {
        self.clock += 1;
        let clock = self.clock;
        let e = self.lines.iter_mut().find(|e| e.0 == key).unwrap();
        e.1 += 1;
        e.2 = clock;
    }
    fn insert(&mut self, key: u64) {
        self.clock += 1;
        self.lines.push((key, 1, self.clock));
    }
    fn insert_cold(&mut self, key: u64) {
        // Before every other line of count 1.
        let first = self.lines.iter().map(|e| e.2).min().unwrap_or(0);
        self.lines.push((key, 1, first.min(0) - 1));
    }
    fn evict(&mut self, _incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        let i = (0..self.lines.len())
            .filter(|&i| !pinned(self.lines[i].0))
            .min_by_key(|&i| (self.lines[i].1, self.lines[i].2))?;
        Some(self.lines.remove(i).0)
    }
    fn remove(&mut self, key: u64) {
        self.lines.retain(|e| e.0 != key);
    }
    fn len(&self) -> usize {
        self.lines.len()
    }
}

/// LFUDA as published: (key, count, priority, time set) per resident key; the victim is the
/// smallest (priority, time) among unpinned keys and the age becomes its priority.
#[derive(Default)]
pub struct LfudaModel {
    lines: Vec<(u64, u64, u64, i64)>,
    age: u64,
    clock: i64,
}

impl Model for LfudaModel {
    fn hit(&mut self, key: u64) {
        self.clock += 1;
        let (age, clock) = (self.age, self.clock);
        let e = self.lines.iter_mut().find(|e| e.0 == key).unwrap();
        e.1 += 1;
        e.2 = age + e.1;
        e.3 = clock;
    }
    fn insert(&mut self, key: u64) {
        self.clock += 1;
        self.lines.push((key, 1, self.age + 1, self.clock));
    }
    fn insert_cold(&mut self, key: u64) {
        let first = self.lines.iter().map(|e| e.3).min().unwrap_or(0);
        self.lines.push((key, 1, self.age, first.min(0) - 1));
    }
    fn evict(&mut self, _incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        let i = (0..self.lines.len())
            .filter(|&i| !pinned(self.lines[i].0))
            .min_by_key(|&i| (self.lines[i].2, self.lines[i].3))?;
        let e = self.lines.remove(i);
        self.age = e.2;
        Some(e.0)
    }
    fn remove(&mut self, key: u64) {
        self.lines.retain(|e| e.0 != key);
    }
    fn len(&self) -> usize {
        self.lines.len()
    }
}

/// LRU-2 over each resident key's full access history (times of every access); the victim is
/// the first inserted among keys accessed once, else the key whose second most recent access
/// is oldest.
#[derive(Default)]
pub struct LruKModel {
    lines: Vec<(u64, Vec<i64>)>,
    clock: i64,
}

impl Model for LruKModel {
    fn hit(&mut self, key: u64) {
        self.clock += 1;
        let clock = self.clock;
        self.lines
            .iter_mut()
            .find(|e| e.0 == key)
            .unwrap()
            .1
            .push(clock);
    }
    fn insert(&mut self, key: u64) {
        self.clock += 1;
        self.lines.push((key, vec![self.clock]));
    }
    fn insert_cold(&mut self, key: u64) {
        // An access before every other key's.
        let first = self.lines.iter().map(|e| e.1[0]).min().unwrap_or(0);
        self.lines.push((key, vec![first.min(0) - 1]));
    }
    fn evict(&mut self, _incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        let rank = |h: &Vec<i64>| match h.len() {
            1 => (0, h[0]),
            n => (1, h[n - 2]),
        };
        let i = (0..self.lines.len())
            .filter(|&i| !pinned(self.lines[i].0))
            .min_by_key(|&i| rank(&self.lines[i].1))?;
        Some(self.lines.remove(i).0)
    }
    fn remove(&mut self, key: u64) {
        self.lines.retain(|e| e.0 != key);
    }
    fn len(&self) -> usize {
        self.lines.len()
    }
}

/// LIRS as published, over a `Vec` stack (index 0 = top) of (key, state) with states LIR,
/// resident HIR and non-resident HIR, a `VecDeque` queue (front = next victim) and a list of
/// non-resident keys in the order they became so.
#[derive(Default)]
pub struct LirsModel {
    stack: Vec<(u64, u8)>,
    queue: VecDeque<u64>,
    nonresident: VecDeque<u64>,
    lir: Vec<u64>,
    lir_share: usize,
    nh_limit: usize,
}

const M_LIR: u8 = 1;
const M_HIR: u8 = 2;
const M_NONRESIDENT: u8 = 3;

impl LirsModel {
    pub fn new(c: usize) -> Self {
        let mut m = LirsModel::default();
        m.set_capacity(c);
        m
    }

    fn pos(&self, key: u64) -> Option<usize> {
        self.stack.iter().position(|e| e.0 == key)
    }

    fn prune(&mut self) {
        while let Some(&(k, st)) = self.stack.last() {
            if st == M_LIR {
                return;
            }
            self.stack.pop();
            if st == M_NONRESIDENT {
                drop_key(&mut self.nonresident, k);
            }
        }
    }

    fn demote_excess(&mut self) {
        while self.lir.len() > self.lir_share {
            self.prune();
            let Some((k, _)) = self.stack.pop() else {
                return;
            };
            self.lir.retain(|&x| x != k);
            self.queue.push_back(k);
            self.prune();
        }
    }

    fn become_lir(&mut self, key: u64) {
        if let Some(i) = self.pos(key) {
            self.stack.remove(i);
        }
        self.stack.insert(0, (key, M_LIR));
        self.lir.push(key);
        // S's bottom is LIR: entries left below the first LIR line go.
        self.prune();
        self.demote_excess();
    }

    fn drop_nonresident(&mut self, key: u64) {
        let i = self.pos(key).unwrap();
        self.stack.remove(i);
        drop_key(&mut self.nonresident, key);
    }

    fn leave(&mut self, key: u64, victim: bool) {
        if self.lir.contains(&key) {
            self.lir.retain(|&x| x != key);
            let i = self.pos(key).unwrap();
            self.stack.remove(i);
            self.prune();
        } else {
            drop_key(&mut self.queue, key);
            if let Some(i) = self.pos(key) {
                if victim && self.nh_limit > 0 {
                    if self.nonresident.len() >= self.nh_limit {
                        let old = self.nonresident[0];
                        self.drop_nonresident(old);
                    }
                    let i = self.pos(key).unwrap();
                    self.stack[i].1 = M_NONRESIDENT;
                    self.nonresident.push_back(key);
                } else {
                    self.stack.remove(i);
                }
                self.prune();
            }
        }
    }
}

impl Model for LirsModel {
    fn hit(&mut self, key: u64) {
        if self.lir.contains(&key) {
            let i = self.pos(key).unwrap();
            self.stack.remove(i);
            self.stack.insert(0, (key, M_LIR));
            self.prune();
        } else if self.pos(key).is_some() {
            drop_key(&mut self.queue, key);
            self.become_lir(key);
        } else {
            self.stack.insert(0, (key, M_HIR));
            drop_key(&mut self.queue, key);
            self.queue.push_back(key);
        }
    }
    fn insert(&mut self, key: u64) {
        if self.nonresident.contains(&key) {
            self.drop_nonresident(key);
            self.become_lir(key);
        } else if self.lir.len() < self.lir_share {
            self.become_lir(key);
        } else {
            self.stack.insert(0, (key, M_HIR));
            self.queue.push_back(key);
        }
    }
    fn insert_cold(&mut self, key: u64) {
        if self.nonresident.contains(&key) {
            self.drop_nonresident(key);
        }
        self.queue.push_front(key);
    }
    fn evict(&mut self, _incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        let victim = match self.queue.iter().copied().find(|&k| !pinned(k)) {
            Some(k) => k,
            None => {
                self.stack
                    .iter()
                    .rev()
                    .find(|e| e.1 == M_LIR && !pinned(e.0))?
                    .0
            }
        };
        self.leave(victim, true);
        Some(victim)
    }
    fn remove(&mut self, key: u64) {
        self.leave(key, false);
    }
    fn len(&self) -> usize {
        self.lir.len() + self.queue.len()
    }
    fn set_capacity(&mut self, c: usize) {
        let hir = ((c as f64 * 0.01) as usize).max(1).min(c);
        self.lir_share = c - hir;
        self.nh_limit = c;
        while self.nonresident.len() > self.nh_limit {
            let old = self.nonresident[0];
            self.drop_nonresident(old);
        }
        self.prune();
        self.demote_excess();
    }
}
