//! The optimum beside the curves (docs/design.md §12): Belady's OPT miss ratio at every size
//! of the curve, one MIN cache per size side by side in one pass over the spilled accesses, and, with cost weights, the write-back cost
//! bound beside what LRU, Belady and the chosen policies pay in the same model. The bound is the
//! largest of the valid ones (`tiercache_optimal::writeback::best_bound`: the sum of minima, the
//! joint flow bound within its limits, the time-aggregated joint bound), named.
//!
//! The line accesses are spilled as they come (`tiercache_optimal::FutureIndex`: the trace's
//! length on disk, the footprint in memory) and worked on when the analysis finishes. They are
//! the reads' and writes' lines, split as the core splits them; trims are not applied (OPT and
//! the bound are defined over line references).

use serde::Serialize;
use tiercache_core::{LineGeometry, Op, Request};
use tiercache_eviction::EvictionKind;
use tiercache_optimal::writeback::{
    belady_cost, best_bound, policy_cost, BackendOps, CostWeights, WritebackBound,
};
use tiercache_optimal::{line_accesses, opt_misses_at, FutureIndex, LineAccess};

/// One point of the OPT curve.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OptPoint {
    /// Cache size in lines.
    pub lines: u64,
    /// Belady's miss ratio over all line accesses (reads and writes, every miss cached).
    pub miss_ratio: f64,
}

/// Backend operations of one schedule and their cost.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Costed {
    /// Lines read from the backend.
    pub reads: u64,
    /// Lines written to the backend.
    pub writes: u64,
    /// reads × read weight + writes × write weight.
    pub cost: f64,
}

impl Costed {
    fn of(ops: BackendOps, w: CostWeights) -> Self {
        Self {
            reads: ops.reads,
            writes: ops.writes,
            cost: ops.cost(w),
        }
    }
}

/// The write-back lower bounds at one cache size: no schedule of the model pays less than any.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BoundReport {
    /// The largest of the bounds below.
    pub cost: f64,
    /// Which one it is: `sum-of-minima`, `joint-flow` or `joint-aggregated`.
    pub binds: &'static str,
    /// `read × min read misses + write × min write-backs`, each minimised alone.
    pub sum_of_minima: Costed,
    /// The joint relaxation solved exactly by min-cost flow; absent above its size limits.
    pub joint_flow: Option<f64>,
    /// The joint relaxation with its capacity aggregated over time.
    pub joint_aggregated: f64,
}

impl BoundReport {
    fn of(b: WritebackBound, w: CostWeights) -> Self {
        Self {
            cost: b.cost,
            binds: b.binding.name(),
            sum_of_minima: Costed::of(b.sum_of_minima, w),
            joint_flow: b.joint_flow,
            joint_aggregated: b.joint_aggregated,
        }
    }
}

/// The write-back costs at one cache size.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WritebackPoint {
    /// Cache size in lines.
    pub lines: u64,
    /// The lower bounds: no schedule pays less (`tiercache_optimal::writeback::best_bound`).
    pub bound: BoundReport,
    /// Belady's MIN run as a write-back cache.
    pub belady: Costed,
    /// Each online policy run as a write-back, write-allocate cache, by name.
    pub policies: Vec<(String, Costed)>,
}

/// The write-back cost analysis.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WritebackAnalysis {
    /// Cost of a backend read of one line.
    pub read_cost: f64,
    /// Cost of a backend write of one line.
    pub write_cost: f64,
    /// One point per size of the curve.
    pub points: Vec<WritebackPoint>,
}

/// The optimum's part of an analysis.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OptAnalysis {
    /// Line accesses (reads and writes).
    pub line_accesses: u64,
    /// Distinct lines they touch.
    pub footprint_lines: u64,
    /// OPT at the sizes of the curve.
    pub curve: Vec<OptPoint>,
    /// With cost weights, the write-back costs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writeback: Option<WritebackAnalysis>,
}

/// Collects the line accesses while the analysis reads the trace.
pub(crate) struct OptTracker {
    geo: LineGeometry,
    builder: Option<tiercache_optimal::FutureIndexBuilder>,
    error: Option<String>,
    split: Vec<LineAccess>,
}

impl OptTracker {
    pub(crate) fn new(geo: LineGeometry) -> Self {
        let (builder, error) = match FutureIndex::builder() {
            Ok(b) => (Some(b), None),
            Err(e) => (None, Some(e.to_string())),
        };
        Self {
            geo,
            builder,
            error,
            split: Vec::new(),
        }
    }

    /// Records the lines of `r` (already checked against the geometry).
    pub(crate) fn add(&mut self, r: &Request, index: u64) {
        if !matches!(r.op, Op::Read | Op::Write) {
            return;
        }
        let Some(b) = &mut self.builder else { return };
        self.split.clear();
        let pushed = line_accesses(r, &self.geo, index, &mut self.split)
            .and_then(|()| self.split.iter().try_for_each(|a| b.push(*a)));
        if let Err(e) = pushed {
            // The analysis goes on without the optimum, and says why.
            self.error = Some(e.to_string());
            self.builder = None;
        }
    }

    /// The OPT curve at `sizes` and, with weights, the write-back costs of LRU, Belady and
    /// `policies` against the bound; or why they could not be computed.
    pub(crate) fn finish(
        self,
        sizes: &[u64],
        policies: &[EvictionKind],
        weights: Option<CostWeights>,
    ) -> Result<OptAnalysis, String> {
        let Some(b) = self.builder else {
            return Err(self.error.unwrap_or_default());
        };
        let run = || -> Result<OptAnalysis, tiercache_optimal::OptimalError> {
            let index = b.finish()?;
            let misses = opt_misses_at(&index, sizes)?;
            let accesses = index.len();
            let points = sizes
                .iter()
                .zip(&misses)
                .map(|(&lines, &m)| OptPoint {
                    lines,
                    miss_ratio: if accesses == 0 {
                        0.0
                    } else {
                        m as f64 / accesses as f64
                    },
                })
                .collect();
            let writeback = match weights {
                None => None,
                Some(w) => {
                    let mut kinds = vec![EvictionKind::Lru];
                    kinds.extend(
                        policies
                            .iter()
                            .filter(|k| **k != EvictionKind::Lru && EvictionKind::ALL.contains(k)),
                    );
                    let mut out = Vec::new();
                    for &lines in sizes {
                        let mut costs = Vec::new();
                        for &k in &kinds {
                            let n = lines.min(index.distinct() as u64) as usize;
                            let mut p = tiercache_eviction::build(k, n, n);
                            costs.push((
                                k.to_string(),
                                Costed::of(policy_cost(&index, lines, p.as_mut())?, w),
                            ));
                        }
                        out.push(WritebackPoint {
                            lines,
                            bound: BoundReport::of(best_bound(&index, lines, w)?, w),
                            belady: Costed::of(belady_cost(&index, lines)?, w),
                            policies: costs,
                        });
                    }
                    Some(WritebackAnalysis {
                        read_cost: w.read,
                        write_cost: w.write,
                        points: out,
                    })
                }
            };
            Ok(OptAnalysis {
                line_accesses: accesses,
                footprint_lines: index.distinct() as u64,
                curve: points,
                writeback,
            })
        };
        run().map_err(|e| e.to_string())
    }
}

/// The write-back table of `tiercache analyze`.
pub(crate) fn fmt_writeback(
    f: &mut std::fmt::Formatter<'_>,
    wb: &WritebackAnalysis,
) -> std::fmt::Result {
    writeln!(
        f,
        "write-back cost (a backend read costs {}, a write {}; write-allocate, no final flush):",
        wb.read_cost, wb.write_cost
    )?;
    let Some(first) = wb.points.first() else {
        return Ok(());
    };
    write!(
        f,
        "  {:>12} {:>14} {:>16} {:>14} {:>14} {:>14} {:>14}",
        "lines", "bound", "binds", "sum-of-minima", "joint-flow", "joint-aggr", "belady"
    )?;
    for (name, _) in &first.policies {
        write!(f, " {:>14}", name)?;
    }
    writeln!(f, " {:>10}", "gap")?;
    for p in &wb.points {
        let b = &p.bound;
        // The flow bound is absent above its limits.
        let flow = b.joint_flow.map_or("-".to_string(), |c| format!("{c:.1}"));
        write!(
            f,
            "  {:>12} {:>14.1} {:>16} {:>14.1} {:>14} {:>14.1} {:>14.1}",
            p.lines, b.cost, b.binds, b.sum_of_minima.cost, flow, b.joint_aggregated, p.belady.cost
        )?;
        for (_, c) in &p.policies {
            write!(f, " {:>14.1}", c.cost)?;
        }
        // The first policy (LRU) against the bound.
        let gap = p
            .policies
            .first()
            .filter(|_| p.bound.cost > 0.0)
            .map_or("-".to_string(), |(_, c)| {
                format!("{:.1}%", (c.cost / p.bound.cost - 1.0) * 100.0)
            });
        writeln!(f, " {gap:>10}")?;
    }
    Ok(())
}
