//! Reference models of CAR, CLOCK-Pro, W-TinyLFU and LeCaR: each written from its policy
//! file's description with deques and linear searches (front = newest), no slot arrays.

use super::models::{Model, NO_KEY};
use std::collections::{HashMap, VecDeque};
use tiercache_eviction::FrequencySketch;

fn find<T>(q: &VecDeque<T>, f: impl Fn(&T) -> bool) -> Option<usize> {
    q.iter().position(f)
}

/// Index of the oldest entry (from the back) whose key is not pinned.
fn oldest_unpinned<T>(
    q: &VecDeque<T>,
    key: impl Fn(&T) -> u64,
    pinned: &dyn Fn(u64) -> bool,
) -> Option<usize> {
    (0..q.len()).rev().find(|&i| !pinned(key(&q[i])))
}

/// Ghost lists sharing a bound: full, the longer one (the first on a tie) drops its oldest.
fn bounded_push(lists: &mut [VecDeque<u64>], list: usize, key: u64, bound: usize) {
    if bound == 0 {
        return;
    }
    if lists.iter().map(VecDeque::len).sum::<usize>() >= bound {
        let longest = (1..lists.len()).fold(0, |b, l| {
            if lists[l].len() > lists[b].len() {
                l
            } else {
                b
            }
        });
        lists[longest].pop_back();
    }
    lists[list].push_front(key);
}

fn trim(lists: &mut [VecDeque<u64>], bound: usize) {
    while lists.iter().map(VecDeque::len).sum::<usize>() > bound {
        let longest = (1..lists.len()).fold(0, |b, l| {
            if lists[l].len() > lists[b].len() {
                l
            } else {
                b
            }
        });
        lists[longest].pop_back();
    }
}

/// CAR: T1, T2 of (key, referenced), ghosts B1, B2.
pub struct CarModel {
    t: [VecDeque<(u64, bool)>; 2],
    b: [VecDeque<u64>; 2],
    p: usize,
    c: usize,
    pending: Option<(u64, Option<usize>)>,
}

impl CarModel {
    pub fn new(c: usize) -> Self {
        CarModel {
            t: Default::default(),
            b: Default::default(),
            p: 0,
            c,
            pending: None,
        }
    }

    fn ghost_remove(&mut self, key: u64) -> Option<usize> {
        for l in 0..2 {
            if let Some(i) = find(&self.b[l], |&k| k == key) {
                self.b[l].remove(i);
                return Some(l);
            }
        }
        None
    }

    fn replace(&mut self, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        let mut rotated = [0usize; 2];
        loop {
            let open = |l: usize| !self.t[l].is_empty() && rotated[l] < self.t[l].len();
            let (o1, o2) = (open(0), open(1));
            if !o1 && !o2 {
                return None;
            }
            let l = if self.t[0].len() >= self.p.max(1) {
                if o1 {
                    0
                } else {
                    1
                }
            } else if o2 {
                1
            } else {
                0
            };
            let (key, referenced) = self.t[l].pop_back().unwrap();
            if referenced {
                self.t[1].push_front((key, false));
                rotated = [0, 0];
            } else if pinned(key) {
                self.t[l].push_front((key, false));
                rotated[l] += 1;
            } else {
                bounded_push(&mut self.b, l, key, self.c);
                return Some(key);
            }
        }
    }
}

impl Model for CarModel {
    fn hit(&mut self, key: u64) {
        for l in 0..2 {
            if let Some(i) = find(&self.t[l], |e| e.0 == key) {
                self.t[l][i].1 = true;
            }
        }
    }
    fn insert(&mut self, key: u64) {
        let ghost = match self.pending.take() {
            Some((k, g)) if k == key => g,
            _ => self.ghost_remove(key),
        };
        match ghost {
            Some(l) => {
                let b1 = self.b[0].len() + (l == 0) as usize;
                let b2 = self.b[1].len() + (l == 1) as usize;
                if l == 0 {
                    self.p = (self.p + (b2 / b1).max(1)).min(self.c);
                } else {
                    self.p = self.p.saturating_sub((b1 / b2).max(1));
                }
                self.t[1].push_front((key, false));
            }
            None => self.t[0].push_front((key, false)),
        }
    }
    fn insert_cold(&mut self, key: u64) {
        if !matches!(self.pending.take(), Some((k, _)) if k == key) {
            self.ghost_remove(key);
        }
        self.t[0].push_back((key, false));
    }
    fn evict(&mut self, incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        if incoming == NO_KEY {
            return self.replace(pinned);
        }
        let (ghost, first) = match self.pending {
            Some((k, g)) if k == incoming => (g, false),
            _ => (self.ghost_remove(incoming), true),
        };
        self.pending = Some((incoming, ghost));
        let v = self.replace(pinned)?;
        if first && ghost.is_none() {
            let (t1, t2, b1, b2) = (
                self.t[0].len(),
                self.t[1].len(),
                self.b[0].len(),
                self.b[1].len(),
            );
            if t1 + b1 >= self.c {
                self.b[0].pop_back();
            } else if t1 + t2 + b1 + b2 >= 2 * self.c {
                self.b[1].pop_back();
            }
        }
        Some(v)
    }
    fn remove(&mut self, key: u64) {
        for l in 0..2 {
            self.t[l].retain(|e| e.0 != key);
        }
    }
    fn len(&self) -> usize {
        self.t[0].len() + self.t[1].len()
    }
    fn set_capacity(&mut self, c: usize) {
        self.c = c;
        self.p = self.p.min(c);
        trim(&mut self.b, c);
    }
}

/// CLOCK-Pro: hot clock of (key, referenced), cold clock of (key, referenced, in test),
/// non-resident test keys.
pub struct ClockProModel {
    hot: VecDeque<(u64, bool)>,
    cold: VecDeque<(u64, bool, bool)>,
    tests: VecDeque<u64>,
    m_c: usize,
    c: usize,
    pending: Option<(u64, bool)>,
}

impl ClockProModel {
    pub fn new(c: usize) -> Self {
        ClockProModel {
            hot: VecDeque::new(),
            cold: VecDeque::new(),
            tests: VecDeque::new(),
            m_c: c,
            c,
            pending: None,
        }
    }

    fn look_up(&mut self, key: u64) -> bool {
        if let Some(i) = find(&self.tests, |&k| k == key) {
            self.tests.remove(i);
            self.m_c = (self.m_c + 1).min(self.c);
            true
        } else {
            false
        }
    }

    fn balance_hot(&mut self) {
        let limit = self.c - self.m_c.min(self.c);
        let mut steps = 2 * self.hot.len();
        while self.hot.len() > limit && steps > 0 {
            steps -= 1;
            let (key, referenced) = self.hot.pop_back().unwrap();
            if referenced {
                self.hot.push_front((key, false));
            } else {
                self.cold.push_front((key, false, false));
            }
        }
    }

    fn keep_test_key(&mut self, key: u64) {
        if self.c == 0 {
            return;
        }
        if self.tests.len() >= self.c {
            self.tests.pop_back();
            self.m_c = self.m_c.saturating_sub(1).max(1);
        }
        self.tests.push_front(key);
    }
}

impl Model for ClockProModel {
    fn hit(&mut self, key: u64) {
        if let Some(i) = find(&self.hot, |e| e.0 == key) {
            self.hot[i].1 = true;
        } else {
            let i = find(&self.cold, |e| e.0 == key).unwrap();
            self.cold[i].1 = true;
        }
    }
    fn insert(&mut self, key: u64) {
        let was_test = match self.pending.take() {
            Some((k, f)) if k == key => f,
            _ => self.look_up(key),
        };
        if was_test {
            self.hot.push_front((key, false));
            self.balance_hot();
        } else {
            self.cold.push_front((key, false, true));
        }
    }
    fn insert_cold(&mut self, key: u64) {
        if !matches!(self.pending.take(), Some((k, _)) if k == key) {
            self.look_up(key);
        }
        self.cold.push_back((key, false, false));
    }
    fn evict(&mut self, incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        if incoming != NO_KEY {
            let f = match self.pending {
                Some((k, f)) if k == incoming => f,
                _ => self.look_up(incoming),
            };
            self.pending = Some((incoming, f));
        }
        let mut passed = 0;
        while let Some((key, referenced, test)) = self.cold.pop_back() {
            if referenced {
                if test {
                    self.hot.push_front((key, false));
                    self.m_c = (self.m_c + 1).min(self.c);
                    self.balance_hot();
                } else {
                    self.cold.push_front((key, false, true));
                }
                passed = 0;
            } else if pinned(key) {
                // `passed` counts pinned lines passed over; the popped one is not in `cold`.
                if passed > self.cold.len() {
                    self.cold.push_back((key, referenced, test));
                    break;
                }
                passed += 1;
                self.cold.push_front((key, referenced, test));
            } else {
                if test {
                    self.keep_test_key(key);
                }
                return Some(key);
            }
        }
        for _ in 0..2 * self.hot.len() {
            let (key, referenced) = self.hot.pop_back()?;
            if !referenced && !pinned(key) {
                return Some(key);
            }
            self.hot.push_front((key, false));
        }
        None
    }
    fn remove(&mut self, key: u64) {
        self.hot.retain(|e| e.0 != key);
        self.cold.retain(|e| e.0 != key);
    }
    fn len(&self) -> usize {
        self.hot.len() + self.cold.len()
    }
    fn set_capacity(&mut self, c: usize) {
        self.c = c;
        self.m_c = self.m_c.min(c);
        while self.tests.len() > c {
            self.tests.pop_back();
        }
        self.balance_hot();
    }
}

/// W-TinyLFU: window, probation, protected deques and the crate's sketch (tested on its own).
pub struct WTinyLfuModel {
    q: [VecDeque<u64>; 3],
    sketch: FrequencySketch,
    c: usize,
    window: usize,
    protected: usize,
}

impl WTinyLfuModel {
    pub fn new(c: usize) -> Self {
        let mut m = WTinyLfuModel {
            q: Default::default(),
            sketch: FrequencySketch::new(c),
            c: 0,
            window: 0,
            protected: 0,
        };
        m.set_capacity(c);
        m
    }

    fn main_victim(&self, pinned: &dyn Fn(u64) -> bool) -> Option<(usize, usize)> {
        for l in [1, 2] {
            if let Some(i) = oldest_unpinned(&self.q[l], |&k| k, pinned) {
                return Some((l, i));
            }
        }
        None
    }
}

impl Model for WTinyLfuModel {
    fn hit(&mut self, key: u64) {
        self.sketch.increment(key);
        let l = (0..3).find(|&l| self.q[l].contains(&key)).unwrap();
        let i = find(&self.q[l], |&k| k == key).unwrap();
        self.q[l].remove(i);
        match l {
            0 => self.q[0].push_front(key),
            _ => {
                self.q[2].push_front(key);
                if l == 1 && self.q[2].len() > self.protected {
                    let old = self.q[2].pop_back().unwrap();
                    self.q[1].push_front(old);
                }
            }
        }
    }
    fn insert(&mut self, key: u64) {
        self.sketch.increment(key);
        self.q[0].push_front(key);
    }
    fn insert_cold(&mut self, key: u64) {
        self.sketch.increment(key);
        self.q[0].push_back(key);
    }
    fn evict(&mut self, _incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        let main_cap = self.c - self.window;
        let w = self.window.max(1);
        while self.q[0].len() >= w && self.q[1].len() + self.q[2].len() < main_cap {
            let Some(i) = oldest_unpinned(&self.q[0], |&k| k, pinned) else {
                break;
            };
            let k = self.q[0].remove(i).unwrap();
            self.q[1].push_front(k);
        }
        let cand = if self.q[0].len() >= w {
            oldest_unpinned(&self.q[0], |&k| k, pinned)
        } else {
            None
        };
        match (cand, self.main_victim(pinned)) {
            (Some(ci), Some((l, vi))) => {
                let (ck, vk) = (self.q[0][ci], self.q[l][vi]);
                if self.sketch.estimate(ck) > self.sketch.estimate(vk) {
                    self.q[0].remove(ci);
                    self.q[1].push_front(ck);
                    // Probation's indices moved by one when the candidate went to its front.
                    let vi = find(&self.q[l], |&k| k == vk).unwrap();
                    self.q[l].remove(vi)
                } else {
                    self.q[0].remove(ci)
                }
            }
            (Some(ci), None) => self.q[0].remove(ci),
            (None, Some((l, vi))) => self.q[l].remove(vi),
            (None, None) => {
                let i = oldest_unpinned(&self.q[0], |&k| k, pinned)?;
                self.q[0].remove(i)
            }
        }
    }
    fn remove(&mut self, key: u64) {
        for q in &mut self.q {
            q.retain(|&k| k != key);
        }
    }
    fn len(&self) -> usize {
        self.q.iter().map(VecDeque::len).sum()
    }
    fn set_capacity(&mut self, c: usize) {
        self.c = c;
        self.window = c - (c as f64 * 0.99) as usize;
        self.protected = ((c - self.window) as f64 * 0.8) as usize;
    }
}

/// LeCaR: a recency deque, (frequency, arrival) per key, two histories of (key, time).
pub struct LeCaRModel {
    recency: VecDeque<u64>,
    freq: HashMap<u64, (u32, i64)>,
    seq: i64,
    cold_seq: i64,
    history: [VecDeque<(u64, u64)>; 2],
    w_lru: f64,
    c: usize,
    now: u64,
    rng: u64,
    looked_up: Option<u64>,
}

impl LeCaRModel {
    pub fn new(c: usize) -> Self {
        LeCaRModel {
            recency: VecDeque::new(),
            freq: HashMap::new(),
            seq: 0,
            cold_seq: 0,
            history: Default::default(),
            w_lru: 0.5,
            c,
            now: 0,
            rng: 0x2545_F491_4F6C_DD1D,
            looked_up: None,
        }
    }

    fn look_up(&mut self, key: u64) {
        for l in 0..2 {
            if let Some(i) = find(&self.history[l], |e| e.0 == key) {
                let (_, at) = self.history[l].remove(i).unwrap();
                let t = (self.now + 1).saturating_sub(at);
                let d = 0.005f64.powf(1.0 / self.c.max(1) as f64);
                let r = d.powf(t as f64);
                let (mut up, mut other) = if l == 0 {
                    (self.w_lru, 1.0 - self.w_lru)
                } else {
                    (1.0 - self.w_lru, self.w_lru)
                };
                up = up * (-0.45 * r).exp() + 1e-10;
                let s = up + other + 2e-10;
                up /= s;
                other = (other + 1e-10) / s;
                self.w_lru = if l == 0 { up } else { other };
                return;
            }
        }
    }

    fn enter(&mut self, key: u64, cold: bool) {
        if self.looked_up.take() != Some(key) {
            self.look_up(key);
        }
        self.now += 1;
        if cold {
            self.recency.push_back(key);
            self.cold_seq -= 1;
            self.freq.insert(key, (1, self.cold_seq));
        } else {
            self.recency.push_front(key);
            self.seq += 1;
            self.freq.insert(key, (1, self.seq));
        }
    }
}

impl Model for LeCaRModel {
    fn hit(&mut self, key: u64) {
        self.now += 1;
        let i = find(&self.recency, |&k| k == key).unwrap();
        self.recency.remove(i);
        self.recency.push_front(key);
        self.seq += 1;
        let e = self.freq.get_mut(&key).unwrap();
        *e = (e.0.saturating_add(1), self.seq);
    }
    fn insert(&mut self, key: u64) {
        self.enter(key, false);
    }
    fn insert_cold(&mut self, key: u64) {
        self.enter(key, true);
    }
    fn evict(&mut self, incoming: u64, pinned: &dyn Fn(u64) -> bool) -> Option<u64> {
        if incoming != NO_KEY && self.looked_up != Some(incoming) {
            self.look_up(incoming);
            self.looked_up = Some(incoming);
        }
        let by_lru = self.recency[oldest_unpinned(&self.recency, |&k| k, pinned)?];
        let by_lfu = *self
            .freq
            .iter()
            .filter(|(k, _)| !pinned(**k))
            .min_by_key(|(_, v)| **v)?
            .0;
        let (victim, list) = if by_lru == by_lfu {
            (by_lru, None)
        } else {
            let mut x = self.rng;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.rng = x;
            let r = (x.wrapping_mul(0x2545_F491_4F6C_DD1D) % 100) as f64 / 100.0;
            if r < self.w_lru {
                (by_lru, Some(0))
            } else {
                (by_lfu, Some(1))
            }
        };
        self.recency.retain(|&k| k != victim);
        self.freq.remove(&victim);
        let limit = self.c / 2;
        if let (Some(l), true) = (list, limit > 0) {
            while self.history[l].len() >= limit {
                self.history[l].pop_back();
            }
            self.history[l].push_front((victim, self.now + 1));
        }
        Some(victim)
    }
    fn remove(&mut self, key: u64) {
        self.recency.retain(|&k| k != key);
        self.freq.remove(&key);
    }
    fn len(&self) -> usize {
        self.recency.len()
    }
    fn set_capacity(&mut self, c: usize) {
        self.c = c;
        for h in &mut self.history {
            while h.len() > c / 2 {
                h.pop_back();
            }
        }
    }
}
