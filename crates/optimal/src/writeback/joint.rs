//! Joint bounds: reads and dirty data competing for the same `c` slots (docs/design.md §12).
//!
//! Per line, the model's cost is: each read costs `read` unless the line is held over the whole
//! *gap* from its previous access (any access) to it; each write costs `write` unless the line
//! is held from it until its next write (its *span*; the last write's runs to the end of the
//! trace). A line's time splits into gaps between its consecutive accesses, and a tail gap from
//! its last access to the end; a schedule holds a set of gaps, at most `c` lines at any point
//! (a gap `[s, e)` of access positions takes a slot at the points s ..= e − 1, the trace's N
//! accesses being N points). Any choice of gaps within that capacity is a schedule of the
//! model (evict a line whose present gap is not held when room is needed), and any schedule
//! holds such a set, so the model's optimum is: total weight − the most reward any feasible
//! set of gaps earns.
//!
//! **The relaxation.** A write's reward `write` is split over the gaps of its span in
//! proportion to their lengths: a gap of length ℓ in a span of length L earns `write × ℓ / L`,
//! plus `read` if it ends in a read. Every gap is then an independent interval. A schedule that
//! holds a whole span earns its write's full reward, as in the model; one that holds part of it
//! earns a part where the model pays nothing: the relaxed reward of any schedule is at least its
//! true one, so the relaxed optimum's cost is at most the model's optimum. (Any split would do;
//! by length, holding part of a span earns no more per unit of line-time than holding all of
//! it, so a short gap cannot buy a write's reward cheaply.)
//!
//! - [`joint_bound`]: the relaxed optimum exactly, as weighted interval selection on `c`
//!   machines (min-cost flow, see `flow.rs`); memory O(accesses), hence [`FLOW_MAX_INTERVALS`]
//!   and [`FLOW_MAX_WORK`].
//! - [`aggregated_bound`]: the same relaxation with the capacity aggregated over time (PFOO-L,
//!   Berger et al. 2018): total held line-time ≤ c × N. A fractional knapsack, solved greedily by
//!   reward per unit of line-time; it relaxes the flow's problem further, so its cost is at most
//!   the flow's. Memory: two `u64` per distinct line and ≤ 2^16 histogram buckets; up to four
//!   passes over the spilled index (each fixes 16 more bits of the threshold density), so the
//!   greedy's fractional last item is exact.
//!
//! When `write` is 0 the relaxation is the model (every reward is a read's, on one gap), so
//! [`joint_bound`] is the optimum; when `read` is 0 the sum of minima's write term is.
//! [`best_bound`] reports the largest of the valid bounds and which one it is.

use super::flow::{self, Interval};
use super::{lower_bound, BackendOps, CostWeights};
use crate::{FutureIndex, OptimalError, NEVER};
use rustc_hash::FxHashMap;

/// Most gaps (of positive reward; at most accesses + distinct lines) [`joint_bound`] takes:
/// it holds about 250 bytes a gap (the gaps, the network's arcs and nodes).
pub const FLOW_MAX_INTERVALS: usize = 1 << 20;
/// Most work [`joint_bound`] takes, in rounds × gaps, the rounds counted at their most
/// (`min(c, max overlap)`): measured at about 3.5 million a second (one busy core, a zipf
/// trace), this is about a minute.
pub const FLOW_MAX_WORK: u128 = 1 << 28;

/// One gap of the relaxation: held over `[start, end)`, it earns `reward`.
struct Gap {
    start: u64,
    end: u64,
    reward: f64,
}

/// Calls `f` with every gap of positive reward, in trace order of their ends (tail gaps last,
/// by line), and returns the total weight of the trace (every read and write paid).
fn for_each_gap(
    index: &FutureIndex,
    w: CostWeights,
    mut f: impl FnMut(Gap),
) -> Result<f64, OptimalError> {
    let n = index.distinct() as usize;
    let end = index.len();
    // Per line: its previous access, and the length of its latest write's span (0: no write).
    let mut prev = vec![NEVER; n];
    let mut span = vec![0u64; n];
    let (mut reads, mut writes) = (0u64, 0u64);
    let mut r = index.reader()?;
    let mut t = 0u64;
    while let Some(a) = r.next_future()? {
        let x = a.id as usize;
        if a.write {
            writes += 1;
        } else {
            reads += 1;
        }
        if prev[x] != NEVER {
            let len = t - prev[x];
            let mut reward = if a.write { 0.0 } else { w.read };
            if span[x] != 0 {
                reward += w.write * len as f64 / span[x] as f64;
            }
            if reward > 0.0 {
                f(Gap {
                    start: prev[x],
                    end: t,
                    reward,
                });
            }
        }
        prev[x] = t;
        if a.write {
            span[x] = if a.next_write == NEVER {
                end
            } else {
                a.next_write
            } - t;
        }
        t += 1;
    }
    for x in 0..n {
        if span[x] != 0 && w.write > 0.0 {
            let len = end - prev[x];
            f(Gap {
                start: prev[x],
                end,
                reward: w.write * len as f64 / span[x] as f64,
            });
        }
    }
    Ok(BackendOps { reads, writes }.cost(w))
}

/// The relaxation's optimum cost for a cache of `lines` lines, exactly, by min-cost flow over
/// the gaps: a lower bound on every schedule's cost, tighter than [`aggregated_bound`].
/// Weights must be non-negative. Refuses ([`OptimalError::TooLarge`]) more gaps than
/// [`FLOW_MAX_INTERVALS`] or more work than [`FLOW_MAX_WORK`].
pub fn joint_bound(index: &FutureIndex, lines: u64, w: CostWeights) -> Result<f64, OptimalError> {
    let k = lines.min(index.distinct() as u64);
    // The limits are checked before any gap is held in memory.
    let (gaps, overlap) = gap_counts(index, w)?;
    if gaps > FLOW_MAX_INTERVALS as u64 {
        return Err(OptimalError::TooLarge {
            what: "gaps for the flow",
            limit: FLOW_MAX_INTERVALS,
            got: gaps.min(usize::MAX as u64) as usize,
        });
    }
    let work = if overlap <= k {
        0
    } else {
        k as u128 * gaps as u128
    };
    if work > FLOW_MAX_WORK {
        return Err(OptimalError::TooLarge {
            what: "rounds × gaps for the flow",
            limit: FLOW_MAX_WORK as usize,
            got: work.min(usize::MAX as u128) as usize,
        });
    }
    let mut intervals = Vec::with_capacity(gaps as usize);
    let total = for_each_gap(index, w, |g| {
        intervals.push(Interval {
            start: g.start,
            end: g.end,
            reward: g.reward,
        })
    })?;
    Ok((total - flow::max_reward(&intervals, k)).max(0.0))
}

/// How many gaps of positive reward there are, and the most of them covering one point, in
/// one pass keeping a flag per line (is its present gap one of them).
fn gap_counts(index: &FutureIndex, w: CostWeights) -> Result<(u64, u64), OptimalError> {
    let n = index.distinct() as usize;
    let mut counted = vec![false; n];
    let mut written = vec![false; n];
    let (mut gaps, mut now, mut most) = (0u64, 0u64, 0u64);
    let mut r = index.reader()?;
    while let Some(a) = r.next_future()? {
        let x = a.id as usize;
        if std::mem::take(&mut counted[x]) {
            now -= 1;
        }
        written[x] |= a.write;
        // The gap from here to the next access (or the end) earns a read's or a write's share.
        if (a.next_is_read() && w.read > 0.0) || (written[x] && w.write > 0.0) {
            counted[x] = true;
            gaps += 1;
            now += 1;
            most = most.max(now);
        }
    }
    Ok((gaps, most))
}

/// The relaxation with its capacity aggregated over time (total held line-time ≤ `lines` × N):
/// a lower bound on every schedule's cost, at most [`joint_bound`]'s, computed at any scale.
/// Weights must be non-negative.
pub fn aggregated_bound(
    index: &FutureIndex,
    lines: u64,
    w: CostWeights,
) -> Result<f64, OptimalError> {
    let mut budget = lines.min(index.distinct() as u64) as u128 * index.len() as u128;
    let mut earned = 0.0;
    // Densities (reward per line-time point; positive, so ordered as their bits) are bucketed
    // by 16 bits at a time: the buckets above the threshold's are taken whole, and the
    // threshold's is refined by the next pass, among the gaps with the bits fixed so far.
    let mut prefix = 0u64;
    let mut total = 0.0;
    for level in 0..4u32 {
        if budget == 0 && level > 0 {
            break;
        }
        let shift = 48 - 16 * level;
        let mut buckets: FxHashMap<u16, (u128, f64)> = FxHashMap::default();
        total = for_each_gap(index, w, |g| {
            let len = g.end - g.start;
            let bits = (g.reward / len as f64).to_bits();
            if level == 0 || bits >> (shift + 16) == prefix {
                let b = buckets.entry((bits >> shift) as u16).or_default();
                b.0 += len as u128;
                b.1 += g.reward;
            }
        })?;
        let mut keys: Vec<u16> = buckets.keys().copied().collect();
        keys.sort_unstable_by(|a, b| b.cmp(a));
        let mut threshold = None;
        for key in keys {
            let (len, reward) = buckets[&key];
            if len <= budget {
                budget -= len;
                earned += reward;
            } else {
                threshold = Some(key);
                break;
            }
        }
        let Some(key) = threshold else {
            // Every gap fits.
            break;
        };
        prefix = (prefix << 16) | key as u64;
        if shift == 0 {
            // All 64 bits fixed: one density, taken for what budget is left.
            earned += f64::from_bits(prefix) * budget as f64;
            break;
        }
    }
    Ok((total - earned).max(0.0))
}

/// Which bound [`best_bound`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundKind {
    /// [`lower_bound`]'s `read × min read misses + write × min write-backs`.
    SumOfMinima,
    /// [`joint_bound`]: the min-cost flow of the joint relaxation.
    JointFlow,
    /// [`aggregated_bound`]: the joint relaxation with time-aggregated capacity.
    JointAggregated,
}

impl BoundKind {
    /// Short name, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            BoundKind::SumOfMinima => "sum-of-minima",
            BoundKind::JointFlow => "joint-flow",
            BoundKind::JointAggregated => "joint-aggregated",
        }
    }
}

/// Every valid lower bound at one size, and the largest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WritebackBound {
    /// The largest of the bounds below: no schedule costs less.
    pub cost: f64,
    /// Which one it is (the first of sum of minima, flow, aggregated on a tie).
    pub binding: BoundKind,
    /// [`lower_bound`]'s two minima.
    pub sum_of_minima: BackendOps,
    /// [`joint_bound`], or `None` when the instance is above its limits.
    pub joint_flow: Option<f64>,
    /// [`aggregated_bound`].
    pub joint_aggregated: f64,
}

/// The sum of minima, the aggregated bound and, within its limits, the flow bound, at a cache
/// of `lines` lines and weights `w` (non-negative), with the largest named.
pub fn best_bound(
    index: &FutureIndex,
    lines: u64,
    w: CostWeights,
) -> Result<WritebackBound, OptimalError> {
    let sum_of_minima = lower_bound(index, lines)?;
    let joint_flow = match joint_bound(index, lines, w) {
        Ok(c) => Some(c),
        Err(OptimalError::TooLarge { .. }) => None,
        Err(e) => return Err(e),
    };
    let joint_aggregated = aggregated_bound(index, lines, w)?;
    let mut best = (sum_of_minima.cost(w), BoundKind::SumOfMinima);
    // Another bound binds only when above by more than rounding.
    let above = |c: f64, best: f64| c > best + 1e-9 * best.abs().max(1.0);
    if let Some(c) = joint_flow {
        if above(c, best.0) {
            best = (c, BoundKind::JointFlow);
        }
    }
    if above(joint_aggregated, best.0) {
        best = (joint_aggregated, BoundKind::JointAggregated);
    }
    Ok(WritebackBound {
        cost: best.0,
        binding: best.1,
        sum_of_minima,
        joint_flow,
        joint_aggregated,
    })
}
