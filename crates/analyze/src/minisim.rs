//! Miss-ratio curves of any replacement policy by miniature simulation (Waldspurger et al.,
//! ATC'17): lines are sampled spatially at rate `R` (the hash SHARDS uses), and for each cache
//! size `S` the real policy ([`tiercache_eviction`]) runs on the sampled lines alone in a
//! cache scaled by `R`; the miss ratio at `S` is its misses over the sampled accesses.
//!
//! As in [`crate::shards`], the hottest lines are simulated exactly beside the sample, since
//! whether the hash happens to pick one of them otherwise swings the whole curve (on Zipf(0.9)
//! a 10% plain mini-simulation is off by 0.03 to 0.15 on average, depending on the hash).
//! A hot line stands for itself: it weighs 1 and fills one line of the cache; a sampled line
//! stands for `1/R` lines: it weighs `1/R` and fills `1/R` lines. So the simulated cache of
//! size `S` holds lines while `hot + sampled / R ≤ S`, evicting the policy's victims until the
//! incoming line fits. A sampled line larger than the whole cache (`S < 1/R`) flushes it and
//! does not stay: it stands for more lines than the cache holds, inserted since about the
//! previous sampled access. With no hot line this is the classic mini-simulation of `S × R`
//! slots; at `R = 1` it is the full simulation.
//! Misses and accesses are counted with their lines' weights (the ratio estimator). Hot lines
//! are found by the same frequency table as SHARDS'; a line promoted while sampled keeps its
//! place (and now weighs 1), one promoted without having been sampled enters on that access,
//! which is left out of the counts (its history is unknown).
//!
//! A simulation is only started when the lines seen first outweigh its size: until then it
//! would have held every line (only first accesses miss), so it is built at that moment by
//! replaying a log of the simulated accesses (4 bytes each). Sizes never outweighed miss only
//! on first accesses. The policies' own size parameters (ARC's and S3-FIFO's queues and
//! ghosts) are given the number of lines the scaled cache would hold with its hot lines in.

use crate::shards::{mix, sample_threshold, sampled, Heat, HotFinder};
use rustc_hash::FxHashMap;
use serde::Serialize;
use tiercache_core::LineKey;
use tiercache_eviction::{build, Eviction, EvictionKind, Slot};

/// Hot lines simulated exactly.
pub const HOT_LINES: usize = 1024;
/// Frequency-table entries for finding them.
const TABLE_ENTRIES: usize = 1 << 13;

/// Longest log kept for starting simulations late (4 bytes an entry); past it, no further
/// size starts, and sizes beyond the last started are interpolated toward the first-access
/// miss ratio.
const LOG_LIMIT: usize = 1 << 25;

/// Log entries (the accesses simulated) and resident-line tags:
/// - `HOT_BIT | index`: hot line `index` (ids of hot lines are their indices);
/// - `PROMOTE | id`: sampled line `id` becomes the next hot line, on this access of it;
/// - `PROMOTE | UNCOUNTED`: a line never sampled becomes the next hot line, on this access,
///   which is left out of the counts;
/// - `id`: sampled line `id`.
const HOT_BIT: u32 = 1 << 31;
const PROMOTE: u32 = 1 << 30;
const UNCOUNTED: u32 = 1 << 29;
const ID_MASK: u32 = UNCOUNTED - 1;
/// No slot.
const NONE: Slot = Slot::MAX;

/// One simulated cache of `size` lines.
struct Sim {
    policy: Box<dyn Eviction>,
    size: f64,
    /// Lines a sampled line stands for: `1/R`.
    scale: f64,
    /// Resident sampled line id → slot.
    slots: FxHashMap<u32, Slot>,
    /// Hot line index → slot, or [`NONE`].
    hot_slots: Vec<Slot>,
    /// Slot → resident line: `HOT_BIT | index` or a sampled line's id.
    lines: Vec<u32>,
    free: Vec<Slot>,
    /// Resident `[hot, sampled]` lines.
    resident: [u64; 2],
    /// Weighted misses.
    misses: f64,
}

impl Sim {
    fn new(kind: EvictionKind, size: f64, scale: f64) -> Self {
        let hot = size.min(HOT_LINES as f64);
        let sampled = (size / scale).floor();
        let slot_limit = (hot + sampled) as usize + 1;
        // The policy's size parameter: the lines the cache holds with its hot lines in.
        let capacity = ((sampled + hot * (1.0 - 1.0 / scale)).round() as usize).max(1);
        Self {
            policy: build(kind, capacity, slot_limit),
            size,
            scale,
            slots: FxHashMap::default(),
            hot_slots: Vec::new(),
            lines: vec![0; slot_limit],
            free: (0..slot_limit as Slot).rev().collect(),
            resident: [0; 2],
            misses: 0.0,
        }
    }

    fn weight(&self, hot: bool) -> f64 {
        if hot {
            1.0
        } else {
            self.scale
        }
    }

    /// Lines filled with one more `[hot, sampled]` line.
    fn filled_with(&self, hot: bool) -> f64 {
        (self.resident[0] + hot as u64) as f64
            + (self.resident[1] + !hot as u64) as f64 * self.scale
    }

    /// Simulates log entry `entry`; `hot_keys`: the policy key of each hot line.
    #[inline]
    fn access(&mut self, entry: u32, hot_keys: &[u32]) {
        let (tag, slot) = if entry & HOT_BIT != 0 {
            (entry, self.hot_slots[(entry & ID_MASK) as usize])
        } else if entry & PROMOTE != 0 {
            let idx = self.hot_slots.len() as u32;
            let tag = HOT_BIT | idx;
            // A sampled line promoted while resident keeps its place and now stands for itself.
            let slot = match entry & UNCOUNTED {
                0 => self.slots.remove(&(entry & ID_MASK)).unwrap_or(NONE),
                _ => NONE,
            };
            if slot != NONE {
                self.lines[slot as usize] = tag;
                self.resident[1] -= 1;
                self.resident[0] += 1;
            }
            self.hot_slots.push(slot);
            (tag, slot)
        } else {
            let slot = self.slots.get(&entry).copied().unwrap_or(NONE);
            (entry, slot)
        };
        if slot != NONE {
            self.policy.hit(slot);
            return;
        }
        let hot = tag & HOT_BIT != 0;
        let w = self.weight(hot);
        if entry & UNCOUNTED == 0 {
            self.misses += w;
        }
        // Policies see one key per line whether it is hot or not (ARC's and S3-FIFO's ghosts).
        let key = LineKey(match hot {
            true => hot_keys[(tag & ID_MASK) as usize],
            false => tag,
        } as u64);
        if w > self.size {
            // It stands for more lines than the cache holds, all inserted since the previous
            // sampled access or so: they flush the cache, and it does not stay.
            while self.resident != [0, 0] {
                self.evict(key);
            }
            return;
        }
        while self.filled_with(hot) > self.size {
            self.evict(key);
        }
        let slot = self.free.pop().expect("slots for every line that fits");
        self.lines[slot as usize] = tag;
        self.resident[!hot as usize] += 1;
        if hot {
            self.hot_slots[(tag & ID_MASK) as usize] = slot;
        } else {
            self.slots.insert(tag, slot);
        }
        self.policy.insert(slot, key);
    }

    /// Evicts the policy's victim to make room for `incoming`.
    fn evict(&mut self, incoming: LineKey) {
        let victim = self
            .policy
            .evict(incoming, &|_| false)
            .expect("a cache holding lines, none pinned, has a victim");
        let line = self.lines[victim as usize];
        if line & HOT_BIT != 0 {
            self.hot_slots[(line & ID_MASK) as usize] = NONE;
            self.resident[0] -= 1;
        } else {
            self.slots.remove(&line);
            self.resident[1] -= 1;
        }
        self.free.push(victim);
    }

    fn memory_bytes(&self) -> usize {
        self.policy.memory_bytes()
            + self.slots.capacity() * 9
            + (self.hot_slots.capacity() + self.lines.capacity() + self.free.capacity()) * 4
    }
}

/// The simulations of one policy, by size (ascending).
struct PolicySims {
    kind: EvictionKind,
    sims: Vec<Sim>,
}

/// Miniature simulations of several policies at once.
pub struct MiniSim {
    threshold: u64,
    rate: f64,
    scale: f64,
    finder: HotFinder,
    /// Cache sizes (lines) asked for; empty: powers of two without end.
    sizes: Vec<u64>,
    /// Sizes still to start, descending (popped smallest first).
    pending: Vec<u64>,
    /// Next power of two to consider when `sizes` is empty.
    next_power: u32,
    /// Sampled line → id.
    ids: FxHashMap<u64, u32>,
    /// Ids given (to sampled lines, and to hot lines never sampled).
    next_id: u32,
    /// Hot line index → its id (the policies' key for it).
    hot_keys: Vec<u32>,
    /// Lines the simulated lines seen so far stand for (hot 1, sampled `1/R`).
    represented: f64,
    log: Vec<u32>,
    /// Whether simulations may still start (and the log is kept).
    logging: bool,
    policies: Vec<PolicySims>,
    /// Weighted accesses and first accesses counted.
    accesses: f64,
    cold: f64,
    simulated: u64,
}

/// A policy's approximate miss-ratio curve.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PolicyCurve {
    /// Policy, as written in configs.
    pub policy: String,
    /// `(cache size in lines, miss ratio)`.
    pub points: Vec<(u64, f64)>,
}

impl MiniSim {
    /// Simulations of `policies` on lines sampled at `rate` (0 < rate ≤ 1), for the cache
    /// `sizes` in lines (empty: every power of two).
    pub fn new(policies: &[EvictionKind], rate: f64, sizes: &[u64]) -> Self {
        let threshold = sample_threshold(rate);
        let rate = threshold as f64 / sample_threshold(1.0) as f64;
        let mut kinds: Vec<EvictionKind> = Vec::new();
        for &k in policies {
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        }
        let mut pending = sizes.to_vec();
        pending.sort_unstable_by(|a, b| b.cmp(a));
        pending.dedup();
        Self {
            threshold,
            rate,
            scale: 1.0 / rate,
            finder: HotFinder::new(TABLE_ENTRIES, HOT_LINES),
            sizes: sizes.to_vec(),
            pending,
            next_power: 0,
            ids: FxHashMap::default(),
            next_id: 0,
            hot_keys: Vec::new(),
            represented: 0.0,
            log: Vec::new(),
            logging: true,
            policies: kinds
                .into_iter()
                .map(|kind| PolicySims {
                    kind,
                    sims: Vec::new(),
                })
                .collect(),
            accesses: 0.0,
            cold: 0.0,
            simulated: 0,
        }
    }

    /// Sampling rate.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The next size to start, if any (refilling the power-of-two supply).
    fn next_size(&mut self) -> Option<u64> {
        if self.sizes.is_empty() && self.pending.is_empty() && self.next_power < 63 {
            self.pending.push(1 << self.next_power);
            self.next_power += 1;
        }
        self.pending.last().copied()
    }

    /// Hint that `key` is offered soon: starts loading what [`MiniSim::access`] reads first.
    /// Changes nothing.
    #[inline]
    pub fn prefetch(&self, key: u64) {
        self.finder.prefetch(mix(key));
    }

    /// Offers one line access.
    #[inline]
    pub fn access(&mut self, key: u64) {
        if self.policies.is_empty() {
            return;
        }
        let h = mix(key);
        let (entry, new_weight) = match self.finder.offer(key, h) {
            Heat::Hot(idx) => (HOT_BIT | idx, None),
            Heat::Promoted(idx) => {
                debug_assert_eq!(idx as usize, self.hot_keys.len());
                match self.ids.get(&key) {
                    Some(&id) => {
                        // A sampled line seen before: it keeps its place and now weighs 1.
                        self.represented -= self.scale - 1.0;
                        self.hot_keys.push(id);
                        (PROMOTE | id, None)
                    }
                    None => {
                        self.hot_keys.push(self.next_id);
                        self.next_id += 1;
                        (PROMOTE | UNCOUNTED, Some(1.0))
                    }
                }
            }
            Heat::Cold if sampled(h, self.threshold) => {
                let next = self.next_id;
                let id = *self.ids.entry(key).or_insert(next);
                if id == next {
                    self.next_id += 1;
                }
                (id, (id == next).then_some(self.scale))
            }
            Heat::Cold => return,
        };
        assert!(self.next_id <= ID_MASK, "too many simulated lines");
        let counted = entry & UNCOUNTED == 0;
        let w = if entry & (HOT_BIT | PROMOTE) != 0 {
            1.0
        } else {
            self.scale
        };
        if counted {
            self.accesses += w;
        }
        if let Some(nw) = new_weight {
            if counted {
                self.cold += w;
            }
            // A line never seen: start the simulations it overflows.
            self.represented += nw;
            while self.logging {
                match self.next_size() {
                    Some(s) if (s as f64) + 1e-9 < self.represented => {
                        self.pending.pop();
                        self.start(s);
                    }
                    _ => break,
                }
            }
        }
        if self.logging {
            self.log.push(entry);
        }
        self.simulated += 1;
        for p in &mut self.policies {
            for sim in &mut p.sims {
                sim.access(entry, &self.hot_keys);
            }
        }
        if self.logging
            && (!self.sizes.is_empty() && self.pending.is_empty() || self.log.len() >= LOG_LIMIT)
        {
            // Every simulation runs (or the log is full): no more late starts.
            self.logging = false;
            self.log = Vec::new();
        }
    }

    /// Starts the simulations of size `size` from the log so far.
    fn start(&mut self, size: u64) {
        for p in &mut self.policies {
            let mut sim = Sim::new(p.kind, size as f64, self.scale);
            for &entry in &self.log {
                sim.access(entry, &self.hot_keys);
            }
            p.sims.push(sim);
        }
    }

    /// Accesses simulated (sampled or hot).
    pub fn simulated_accesses(&self) -> u64 {
        self.simulated
    }

    /// Hot lines simulated exactly.
    pub fn hot_lines(&self) -> usize {
        self.hot_keys.len()
    }

    /// Miss ratio of `policy` at `lines` lines (`None` for a policy not simulated).
    pub fn miss_ratio(&self, policy: EvictionKind, lines: u64) -> Option<f64> {
        let p = self.policies.iter().find(|p| p.kind == policy)?;
        if self.accesses <= 0.0 {
            return Some(0.0);
        }
        let cold = self.cold / self.accesses;
        let s = lines as f64;
        let ratio = |sim: &Sim| sim.misses / self.accesses;
        if let Some(sim) = p.sims.iter().find(|sim| sim.size == s) {
            return Some(ratio(sim));
        }
        if s + 1e-9 >= self.represented {
            return Some(cold);
        }
        // Sizes not simulated (not asked for): interpolate in log size.
        let interpolate = |(s0, m0): (f64, f64), (s1, m1): (f64, f64)| {
            m0 + (m1 - m0) * (s.ln() - s0.ln()) / (s1.ln() - s0.ln())
        };
        Some(match p.sims.iter().position(|sim| sim.size > s) {
            Some(0) => ratio(&p.sims[0]),
            Some(i) => interpolate(
                (p.sims[i - 1].size, ratio(&p.sims[i - 1])),
                (p.sims[i].size, ratio(&p.sims[i])),
            ),
            None => match p.sims.last() {
                Some(last) => interpolate((last.size, ratio(last)), (self.represented, cold)),
                None => cold,
            },
        })
    }

    /// Each policy's curve at `sizes` (lines).
    pub fn curves(&self, sizes: &[u64]) -> Vec<PolicyCurve> {
        self.policies
            .iter()
            .map(|p| PolicyCurve {
                policy: p.kind.as_str().to_string(),
                points: sizes
                    .iter()
                    .map(|&l| (l, self.miss_ratio(p.kind, l).unwrap_or(0.0)))
                    .collect(),
            })
            .collect()
    }

    /// Heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.finder.memory_bytes()
            + self.ids.capacity() * 13
            + self.hot_keys.capacity() * 4
            + self.log.capacity() * 4
            + self
                .policies
                .iter()
                .flat_map(|p| &p.sims)
                .map(Sim::memory_bytes)
                .sum::<usize>()
    }
}

impl std::fmt::Debug for MiniSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniSim")
            .field("rate", &self.rate)
            .field(
                "policies",
                &self.policies.iter().map(|p| p.kind).collect::<Vec<_>>(),
            )
            .field("simulated_accesses", &self.simulated)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(n: usize, seed: u64) -> Vec<u64> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let y = x >> 8;
                if x % 3 < 1 {
                    y % 20
                } else {
                    y % 700
                }
            })
            .collect()
    }

    /// Simulations started late, from the log, end where simulations run from the start do,
    /// for every policy (their state before the first eviction depends on the capacity for
    /// ARC and S3-FIFO, so the replay matters).
    #[test]
    fn late_started_simulations_equal_full_runs() {
        let keys = trace(20_000, 9);
        let sizes = [1u64, 2, 5, 16, 64, 100, 333, 699];
        let mut m = MiniSim::new(&EvictionKind::ALL, 1.0, &sizes);
        keys.iter().for_each(|&k| m.access(k));
        assert_eq!(m.simulated_accesses(), keys.len() as u64);
        assert!(m.hot_lines() > 0);
        assert!(
            !m.logging && m.log.is_empty(),
            "the log is dropped once every size runs"
        );
        let ids: FxHashMap<u64, u32> = m.ids.clone();
        for kind in EvictionKind::ALL {
            for &s in &sizes {
                let mut sim = Sim::new(kind, s as f64, 1.0);
                keys.iter().for_each(|k| sim.access(ids[k], &[]));
                let want = sim.misses / keys.len() as f64;
                assert_eq!(m.miss_ratio(kind, s), Some(want), "{kind} at {s} lines");
            }
        }
        assert_eq!(
            m.miss_ratio(EvictionKind::Lru, 10_000),
            Some(700.0 / 20_000.0)
        );
    }

    /// Sampled at 10%: a size below `1/R` admits hot lines only, and sizes start as the lines
    /// seen outweigh them.
    #[test]
    fn scaled_caches_hold_hot_lines_and_start_as_needed() {
        let keys = trace(50_000, 4);
        let mut m = MiniSim::new(&[EvictionKind::Fifo, EvictionKind::Sieve], 0.1, &[]);
        keys.iter().for_each(|&k| m.access(k));
        let sizes: Vec<f64> = m.policies[0].sims.iter().map(|s| s.size).collect();
        assert_eq!(sizes[0], 1.0);
        assert!(sizes.windows(2).all(|w| w[1] == 2.0 * w[0]), "{sizes:?}");
        assert!(*sizes.last().unwrap() < m.represented);
        assert!(m.hot_lines() >= 20, "the 20 hot keys: {}", m.hot_lines());
        for sim in &m.policies[0].sims {
            assert!(sim.filled_with(true) - 1.0 <= sim.size + 1e-9);
            if sim.size < 10.0 {
                assert_eq!(
                    sim.resident[1], 0,
                    "no sampled line stays in {} lines",
                    sim.size
                );
            }
        }
        assert_eq!(m.miss_ratio(EvictionKind::Clock, 4), None);
        let fifo: Vec<f64> = (0..16)
            .map(|k| m.miss_ratio(EvictionKind::Fifo, 1 << k).unwrap())
            .collect();
        assert!(fifo.windows(2).all(|w| w[1] <= w[0] + 1e-9), "{fifo:?}");
    }
}
