//! Every sweep design against the optimum (docs/design.md §12, §9): the OPT miss ratio of the
//! design's trace at its capacity and line size, the design's gap to it, and for write-back
//! designs the cost against the write-back lower bound (the largest of the sum of minima, the
//! joint relaxation's min-cost flow where within its limits, and its time-aggregated form,
//! with the one that binds named), stored in the point's record under
//! `metrics.opt` (so the tidy table, the Parquet file, the report and the Python package see
//! `metrics.opt.*` as any other metric).
//!
//! Only a hit-ratio run of a trace has an optimum to compare with (MIN needs the trace's
//! future; a timed run's latencies have no offline optimum here): [`gap_to_opt`] says why not
//! otherwise. OPT depends on the trace, its run limits, the line size and the capacity alone,
//! so points sharing them (designs differing in policy) share one computation.

use crate::experiment::{Experiment, RunMode, Workload};
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};
use tiercache_metrics::RunMetrics;
use tiercache_optimal::writeback::{
    belady_cost, best_bound, policy_cost, CostWeights, WritebackBound,
};
use tiercache_optimal::FutureIndex;
use tiercache_policy::{AdmissionConfig, EvictionKind, PromotionConfig, WritePolicy};

/// Cost weights of the write-back comparison: a backend read and a backend write of a line
/// cost one each (the same for every design, recorded with it).
pub const WRITEBACK_WEIGHTS: CostWeights = CostWeights {
    read: 1.0,
    write: 1.0,
};

/// A design against the optimum (`metrics.opt` of its record).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OptGap {
    /// Belady's line miss ratio on the same requests, capacity and line size (every miss
    /// cached; docs/design.md §12).
    pub miss_ratio: f64,
    /// The design's line miss ratio minus OPT's (≥ 0).
    pub gap_miss_ratio: f64,
    /// The design's misses over OPT's, minus one: 0.25 is 25 % more misses than optimal
    /// (absent when OPT misses nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excess_misses: Option<f64>,
    /// For a write-back design, its backend cost against the write-back lower bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writeback: Option<WritebackGap>,
    /// Why `writeback` is absent for a write-back design, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writeback_note: Option<String>,
}

/// A write-back design's backend cost against the bound, in the model of docs/design.md §12
/// (a read of a line not held costs `read_cost`, a write sent to the backend or a dirty
/// eviction `write_cost`, dirty lines left at the end nothing).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WritebackGap {
    /// Weight of a backend line read.
    pub read_cost: f64,
    /// Weight of a backend line write.
    pub write_cost: f64,
    /// The lower bound: no schedule of the cache pays less. The largest of the three below
    /// (docs/design.md §12).
    pub bound: f64,
    /// Which bound that is: `sum-of-minima`, `joint-flow` or `joint-aggregated`.
    pub binds: &'static str,
    /// The fewest read misses plus the fewest write-backs, each weighted (each minimum alone).
    pub sum_of_minima: f64,
    /// The joint relaxation's exact optimum by min-cost flow, absent above the flow's limits
    /// (`FLOW_MAX_INTERVALS` gaps, `FLOW_MAX_WORK` rounds × gaps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub joint_flow: Option<f64>,
    /// The joint relaxation with its capacity aggregated over time (any scale).
    pub joint_aggregated: f64,
    /// The design's eviction policy run as that write-back, write-allocate cache.
    pub cost: f64,
    /// `cost − bound`.
    pub gap: f64,
    /// `cost / bound − 1` (absent when the bound is zero).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excess: Option<f64>,
}

/// The optimum of one trace window at one capacity and line size.
struct OptReference {
    miss_ratio: f64,
    index: FutureIndex,
    /// The write-back bound at [`WRITEBACK_WEIGHTS`], computed once the first write-back
    /// design asks (the flow may take seconds; designs differing in policy share it).
    bound: Mutex<Option<WritebackBound>>,
}

/// Recently computed optima by their key (a few: each holds its spilled index on disk).
type Memo = Mutex<VecDeque<(String, Arc<OptReference>)>>;
const MEMO_ENTRIES: usize = 4;

fn memo() -> &'static Memo {
    static MEMO: OnceLock<Memo> = OnceLock::new();
    MEMO.get_or_init(Default::default)
}

/// Why a run has no optimum to compare with, or `None` when it has.
pub fn opt_not_applicable(e: &Experiment) -> Option<&'static str> {
    if e.mode != RunMode::HitRatio {
        Some(
            "a timed run: the gap to OPT is computed for hit-ratio runs (run.mode = \"hit-ratio\")",
        )
    } else if !matches!(e.workload, Workload::Trace(_)) {
        Some("not a trace replay: OPT needs the requests' future (workload.trace)")
    } else {
        None
    }
}

/// The design's gap to OPT (`design` its measured metrics), or why there is none.
pub fn gap_to_opt(e: &Experiment, design: &RunMetrics) -> Result<Result<OptGap, &'static str>> {
    if let Some(why) = opt_not_applicable(e) {
        return Ok(Err(why));
    }
    let Workload::Trace(t) = &e.workload else {
        unreachable!("checked above")
    };
    let key = format!(
        "{t:?}|{}|{}|{:?}",
        e.cache.capacity, e.cache.line_size, e.sim.run
    );
    let found = memo()
        .lock()
        .expect("memo")
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, r)| r.clone());
    let reference = match found {
        Some(r) => r,
        None => {
            let r = Arc::new(compute(e)?);
            let mut m = memo().lock().expect("memo");
            if m.len() >= MEMO_ENTRIES {
                m.pop_front();
            }
            m.push_back((key, r.clone()));
            r
        }
    };
    let design_miss = 1.0 - design.hit_ratio;
    let opt = reference.miss_ratio;
    let mut gap = OptGap {
        miss_ratio: opt,
        gap_miss_ratio: design_miss - opt,
        excess_misses: (opt > 0.0).then(|| design_miss / opt - 1.0),
        writeback: None,
        writeback_note: None,
    };
    if e.cache.write_policy == WritePolicy::WriteBack {
        match writeback_not_modelled(e) {
            Some(why) => gap.writeback_note = Some(why.to_string()),
            None => gap.writeback = Some(writeback_gap(e, &reference)?),
        }
    }
    Ok(Ok(gap))
}

/// Why a write-back design's cost is not the model's, or `None` when it is: the model caches
/// every miss in one cache of the capacity and counts from the first request.
fn writeback_not_modelled(e: &Experiment) -> Option<&'static str> {
    let c = &e.cache;
    if c.promotion != PromotionConfig::Always || c.admission != AdmissionConfig::All {
        Some("the bound's model caches every miss: only designs with promotion \"always\" and admission \"all\" are its schedules")
    } else if c.shards > 1 || !c.partitions.is_empty() || c.tenancy.partitions() {
        Some("the bound's model is one cache: not computed for shards or partitions")
    } else if e.sim.run.warmup_requests > 0 || e.sim.run.warmup_ns > 0 {
        Some("the bound counts from the first request: not computed with a warm-up")
    } else {
        None
    }
}

fn writeback_gap(e: &Experiment, reference: &OptReference) -> Result<WritebackGap> {
    let index = &reference.index;
    let lines = e.cache.capacity / e.cache.line_size;
    let w = WRITEBACK_WEIGHTS;
    let b = {
        let mut held = reference.bound.lock().expect("bound");
        match *held {
            Some(b) => b,
            None => *held.insert(best_bound(index, lines, w)?),
        }
    };
    let bound = b.cost;
    let cost = if e.cache.eviction == EvictionKind::Belady {
        belady_cost(index, lines)?
    } else {
        let n = lines.min(u64::from(index.distinct())).max(1) as usize;
        let mut p = tiercache_eviction::build(e.cache.eviction, n, n);
        policy_cost(index, lines, p.as_mut())?
    }
    .cost(w);
    Ok(WritebackGap {
        read_cost: w.read,
        write_cost: w.write,
        bound,
        binds: b.binding.name(),
        sum_of_minima: b.sum_of_minima.cost(w),
        joint_flow: b.joint_flow,
        joint_aggregated: b.joint_aggregated,
        cost,
        gap: cost - bound,
        excess: (bound > 0.0).then(|| cost / bound - 1.0),
    })
}

/// Belady over the run's requests (its warm-up and limits as the design's), and the index.
fn compute(e: &Experiment) -> Result<OptReference> {
    let (Some(mut first), Some(mut second)) = (e.trace_batches()?, e.trace_batches()?) else {
        anyhow::bail!("OPT of run `{}`: the trace cannot be read twice", e.name);
    };
    let mut cfg = e.cache.clone();
    cfg.eviction = EvictionKind::Belady;
    let (m, index) =
        tiercache_sim::hit_ratio_belady_with_index(&cfg, &mut first, &mut second, &e.sim.run)
            .with_context(|| format!("OPT of run `{}`", e.name))?;
    for batches in [&mut first, &mut second] {
        if let Some(err) = batches.take_error() {
            return Err(anyhow::anyhow!(err)).with_context(|| format!("OPT of run `{}`", e.name));
        }
    }
    Ok(OptReference {
        miss_ratio: 1.0 - m.hit_ratio,
        index,
        bound: Mutex::new(None),
    })
}
