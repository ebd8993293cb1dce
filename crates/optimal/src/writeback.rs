//! What a write-back cache must pay at least (docs/design.md §12).
//!
//! The model, at line granularity: a cache of `c` lines in front of a backend. A read of a line
//! the cache does not hold costs one backend read (`read` weight); the line may then be cached
//! (clean) or not. A write may be absorbed by the cache (the line becomes resident and dirty,
//! replacing any older dirty data of it at no cost) or sent to the backend (one `write` weight;
//! a resident copy stays, clean). Evicting a dirty line costs a write-back (`write` weight);
//! evicting a clean one is free. Dirty lines left at the end cost nothing (as in the
//! simulator's hit-ratio runs, where no final flush is counted). Every write-back policy with
//! write-allocate in the simulator is one schedule of this model, and so is any other mix of
//! bypassing, write-through and eviction choices: the optimum of the model is a lower bound on
//! them all.
//!
//! - [`exact_optimum`]: the model's optimum by exhaustive search over every schedule (small
//!   traces, for tests).
//! - [`lower_bound`]: at scale, `read × min_read_misses + write × min_write_backs`, two minima
//!   each computed exactly by a greedy interval scheduling. Each term is minimised on its own,
//!   with the whole cache, and the minimum of a sum is at least the sum of the minima, so the
//!   bound is at most the optimum (the tests check it against [`exact_optimum`], and that each
//!   term alone is exact when the other weight is zero).
//! - [`best_bound`]: the largest of that sum of minima and two *joint* bounds, where reads and
//!   dirty data compete for the same slots (module `joint`): [`joint_bound`], a relaxation
//!   solved exactly by min-cost flow on moderate traces, and [`aggregated_bound`], the same
//!   relaxation with its capacity aggregated over time, at any scale.
//! - [`policy_cost`]: what an online replacement policy pays in the same model (write-back,
//!   write-allocate, every read miss cached), and [`belady_cost`] Belady's.

mod flow;
mod joint;

pub use joint::{
    aggregated_bound, best_bound, joint_bound, BoundKind, WritebackBound, FLOW_MAX_INTERVALS,
    FLOW_MAX_WORK,
};

use crate::{Belady, FutureIndex, LineAccess, OptimalError, NEVER};
use rustc_hash::FxHashMap;
use std::collections::BinaryHeap;
use tiercache_core::LineKey;
use tiercache_eviction::{Eviction, Slot};

/// Weights of the two backend operations (any unit: latency, energy, money).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostWeights {
    /// Cost of reading one line from the backend (a read miss).
    pub read: f64,
    /// Cost of writing one line to the backend (a dirty eviction, a write sent through).
    pub write: f64,
}

/// Backend reads and writes of a schedule, and their cost under some weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BackendOps {
    /// Lines read from the backend.
    pub reads: u64,
    /// Lines written to the backend.
    pub writes: u64,
}

impl BackendOps {
    /// `reads × read + writes × write`.
    pub fn cost(&self, w: CostWeights) -> f64 {
        self.reads as f64 * w.read + self.writes as f64 * w.write
    }
}

const NONE: u32 = u32::MAX;

/// Lines held towards a future use, each with the position of that use; when more are wanted
/// than fit, the one whose use is furthest goes (which maximises the uses reached: interval
/// scheduling on `c` machines, Carlisle & Lloyd 1995).
struct Holder {
    capacity: usize,
    /// Per line: the use its holding is for, or `NONE`-like [`NEVER`] when not held.
    until: Vec<u64>,
    heap: BinaryHeap<(u64, u32)>,
    held: usize,
}

impl Holder {
    fn new(capacity: u64, distinct: u32) -> Self {
        Self {
            capacity: capacity.min(distinct as u64) as usize,
            until: vec![NEVER; distinct as usize],
            heap: BinaryHeap::new(),
            held: 0,
        }
    }

    /// Whether `id` was held until now (its holding ends here either way).
    fn release(&mut self, id: u32) -> bool {
        let held = self.until[id as usize] != NEVER;
        if held {
            self.until[id as usize] = NEVER;
            self.held -= 1;
        }
        held
    }

    /// Tries to hold `id` until `use_at`; returns how many holdings were given up (0 or 1:
    /// the new one refused, or an older one dropped).
    fn hold(&mut self, id: u32, use_at: u64) -> u64 {
        if self.capacity == 0 {
            return 1;
        }
        if self.held == self.capacity {
            // The furthest live holding (stale heap entries are skipped).
            let (far, far_id) = loop {
                let &(u, i) = self.heap.peek().expect("held lines are in the heap");
                if self.until[i as usize] == u {
                    break (u, i);
                }
                self.heap.pop();
            };
            if far <= use_at {
                return 1;
            }
            self.heap.pop();
            self.until[far_id as usize] = NEVER;
            self.held -= 1;
            self.push(id, use_at);
            return 1;
        }
        self.push(id, use_at);
        0
    }

    fn push(&mut self, id: u32, use_at: u64) {
        self.until[id as usize] = use_at;
        self.held += 1;
        self.heap.push((use_at, id));
        // Stale entries are bounded: rebuild when they outnumber the live ones.
        if self.heap.len() > 2 * self.capacity + 64 {
            let until = &self.until;
            self.heap.retain(|&(u, i)| until[i as usize] == u);
        }
    }
}

/// The lower bound's two terms, for a cache of `lines` lines over every access of `index`.
///
/// `reads`: the fewest read misses any schedule of the model can have (a line is worth holding
/// from an access until its next access if that is a read). `writes`: the fewest backend writes
/// (a write's data is absorbed for free only if its line is held until the next write to it, or
/// until the end). The cost of any schedule is at least `bound.cost(w)`.
pub fn lower_bound(index: &FutureIndex, lines: u64) -> Result<BackendOps, OptimalError> {
    let n = index.distinct();
    let mut for_reads = Holder::new(lines, n);
    let mut for_writes = Holder::new(lines, n);
    let end = index.len();
    let mut ops = BackendOps::default();
    let mut r = index.reader()?;
    while let Some(a) = r.next_future()? {
        let held = for_reads.release(a.id);
        if !a.write && !held {
            ops.reads += 1;
        }
        if a.next_is_read() {
            for_reads.hold(a.id, a.next);
        }
        if a.write {
            // The previous write's data, if still held, is overwritten here for free.
            for_writes.release(a.id);
            let until = if a.next_write == NEVER {
                end
            } else {
                a.next_write
            };
            ops.writes += for_writes.hold(a.id, until);
        }
    }
    Ok(ops)
}

/// What a write-back, write-allocate cache of `lines` lines under `policy` pays over `index`:
/// every read miss is read and cached, every write makes its line resident and dirty, every
/// dirty victim is written back. `policy` must be new, built for `lines` (capacity and slots).
pub fn policy_cost(
    index: &FutureIndex,
    lines: u64,
    policy: &mut dyn Eviction,
) -> Result<BackendOps, OptimalError> {
    let lines = lines.min(index.distinct() as u64) as usize;
    let mut slot_of = vec![NONE; index.distinct() as usize];
    let mut id_of: Vec<u32> = Vec::with_capacity(lines);
    let mut dirty: Vec<bool> = Vec::with_capacity(lines);
    let mut ops = BackendOps::default();
    let mut r = index.reader()?;
    while let Some(a) = r.next_future()? {
        let slot = slot_of[a.id as usize];
        if slot != NONE {
            policy.hit(slot);
            dirty[slot as usize] |= a.write;
            continue;
        }
        if !a.write {
            ops.reads += 1;
        }
        if lines == 0 {
            ops.writes += a.write as u64;
            continue;
        }
        let key = LineKey(a.id as u64);
        let slot = if id_of.len() < lines {
            id_of.push(a.id);
            dirty.push(false);
            (id_of.len() - 1) as Slot
        } else {
            let v = policy
                .evict(key, &|_| false)
                .expect("a full cache with nothing pinned has a victim");
            slot_of[id_of[v as usize] as usize] = NONE;
            ops.writes += dirty[v as usize] as u64;
            v
        };
        id_of[slot as usize] = a.id;
        dirty[slot as usize] = a.write;
        slot_of[a.id as usize] = slot;
        policy.insert(slot, key);
    }
    Ok(ops)
}

/// What Belady's MIN (evict the line used furthest ahead, cache every miss, write-back) pays in
/// the same model: its misses are the fewest of any demand-paging schedule, its write-backs
/// whatever they are.
pub fn belady_cost(index: &FutureIndex, lines: u64) -> Result<BackendOps, OptimalError> {
    let mut b = Belady::new(lines, index.distinct());
    let mut dirty = vec![false; index.distinct() as usize];
    let mut ops = BackendOps::default();
    let mut r = index.reader()?;
    while let Some(a) = r.next_future()? {
        let victim = if b.contains(a.id) { None } else { b.furthest() };
        let evictions = b.evictions();
        let hit = b.access(&a);
        if !hit {
            if !a.write {
                ops.reads += 1;
            }
            if b.evictions() > evictions {
                let (v, _) = victim.expect("an eviction had a victim");
                ops.writes += std::mem::take(&mut dirty[v as usize]) as u64;
            }
            if !b.contains(a.id) {
                // A cache of no lines: the write goes straight to the backend.
                ops.writes += a.write as u64;
                continue;
            }
            dirty[a.id as usize] = false;
        }
        dirty[a.id as usize] |= a.write;
    }
    Ok(ops)
}

/// Largest inputs [`exact_optimum`] takes.
pub const EXACT_MAX_ACCESSES: usize = 64;
/// Most distinct lines [`exact_optimum`] takes.
pub const EXACT_MAX_LINES: usize = 10;

/// The model's optimum for `accesses` with a cache of `lines` lines, by exhaustive search over
/// every schedule (states: which lines are resident and which of those dirty; at each access
/// every choice of the model). Only for small inputs ([`EXACT_MAX_ACCESSES`],
/// [`EXACT_MAX_LINES`]).
pub fn exact_optimum(
    accesses: &[LineAccess],
    lines: usize,
    w: CostWeights,
) -> Result<f64, OptimalError> {
    if accesses.len() > EXACT_MAX_ACCESSES {
        return Err(OptimalError::TooLarge {
            what: "accesses",
            limit: EXACT_MAX_ACCESSES,
            got: accesses.len(),
        });
    }
    let mut ids: FxHashMap<LineKey, u32> = FxHashMap::default();
    for a in accesses {
        let n = ids.len() as u32;
        ids.entry(a.key).or_insert(n);
    }
    if ids.len() > EXACT_MAX_LINES {
        return Err(OptimalError::TooLarge {
            what: "distinct lines",
            limit: EXACT_MAX_LINES,
            got: ids.len(),
        });
    }
    // State: (resident mask, dirty mask ⊆ resident) → least cost to get there.
    let mut states: FxHashMap<(u16, u16), f64> = FxHashMap::default();
    states.insert((0, 0), 0.0);
    for a in accesses {
        let x = 1u16 << ids[&a.key];
        let mut next: FxHashMap<(u16, u16), f64> = FxHashMap::default();
        let mut offer = |s: (u16, u16), c: f64| {
            let e = next.entry(s).or_insert(f64::INFINITY);
            if c < *e {
                *e = c;
            }
        };
        for (&(res, dirty), &cost) in &states {
            // Every way to make room for x: free space, or evict one resident line.
            let room = |offer: &mut dyn FnMut((u16, u16), f64), res: u16, dirty: u16, c: f64| {
                if (res.count_ones() as usize) < lines {
                    offer((res, dirty), c);
                }
                if lines > 0 && res.count_ones() as usize == lines {
                    for y in (0..16).map(|b| 1u16 << b).filter(|y| res & y != 0) {
                        let wb = if dirty & y != 0 { w.write } else { 0.0 };
                        offer((res & !y, dirty & !y), c + wb);
                    }
                }
            };
            if !a.write {
                if res & x != 0 {
                    offer((res, dirty), cost);
                    continue;
                }
                // Miss: read it, then cache it or not.
                let c = cost + w.read;
                offer((res, dirty), c);
                room(&mut |(r, d), c| offer((r | x, d), c), res, dirty, c);
            } else {
                // Sent to the backend; a resident copy stays, clean.
                offer((res, dirty & !x), cost + w.write);
                if res & x != 0 {
                    // Absorbed: the older dirty data (if any) is overwritten.
                    offer((res, dirty | x), cost);
                } else {
                    room(&mut |(r, d), c| offer((r | x, d | x), c), res, dirty, cost);
                }
            }
        }
        states = next;
    }
    Ok(states.values().copied().fold(f64::INFINITY, f64::min))
}
