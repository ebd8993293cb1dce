//! Belady's MIN in hit-ratio mode (`cache.eviction = "belady"`, docs/design.md §12): two passes
//! over the same requests. The first splits them into lines as the core does and builds the
//! next-use index (`tiercache_optimal::FutureIndex`, spilled to temporary files: memory grows
//! with the footprint, not the trace); the second replays them on a MIN cache of the
//! configured size and counts what the core's stats count.
//!
//! The cache modelled is write-back with write-allocate that caches every miss (demand paging):
//! a read miss is promoted, a write makes its line resident and dirty, a dirty victim is
//! written back; trims and flushes reference no line. Its line misses are the fewest any such
//! cache of that size can have, so they are the reference the online policies' misses are
//! compared to. On a read-only trace its metrics have the shape of the batched path's.

use super::RequestBatches;
use crate::config::RunLimits;
use crate::stats::{fill_policy_metrics, stats_diff};
use crate::SimError;
use tiercache_core::{LineGeometry, Op, Request};
use tiercache_metrics::RunMetrics;
use tiercache_optimal::{line_accesses, Belady, FutureIndex, LineAccess, OptimalError};
use tiercache_policy::{CacheConfig, CacheStats};

/// Which requests a run measures and where it stops: the same rules as the other hit-ratio
/// runners, applied alike in both passes (they depend on request order and times only).
struct Window<'a> {
    run: &'a RunLimits,
    seen: u64,
    measured: u64,
    start: Option<u64>,
}

impl<'a> Window<'a> {
    fn new(run: &'a RunLimits) -> Self {
        Self {
            run,
            seen: 0,
            measured: 0,
            start: None,
        }
    }

    /// For the next request: `None` to stop before it, else whether it is measured (and
    /// whether it is the first one measured).
    fn admit(&mut self, req: &Request) -> Option<(bool, bool)> {
        let index = self.seen;
        self.seen += 1;
        let warm = index >= self.run.warmup_requests && req.time_ns >= self.run.warmup_ns;
        let mut first = false;
        if warm && self.start.is_none() {
            self.start = Some(req.time_ns);
            first = true;
        }
        if warm {
            if self.run.requests.is_some_and(|l| self.measured >= l) {
                return None;
            }
            if let (Some(d), Some(t0)) = (self.run.duration_ns, self.start) {
                if req.time_ns > t0.saturating_add(d) {
                    return None;
                }
            }
            self.measured += 1;
        }
        Some((warm, first))
    }
}

fn optimal_error(e: OptimalError) -> SimError {
    SimError::Config {
        field: "cache.eviction".into(),
        reason: format!("belady: {e}"),
    }
}

fn request_error(index: u64, req: Request, e: OptimalError) -> SimError {
    match e {
        OptimalError::Geometry { source, .. } => SimError::Request {
            index,
            request: req,
            source: source.into(),
        },
        e => optimal_error(e),
    }
}

/// Runs Belady's MIN over the requests of `first` (the pass that learns the future) and then of
/// `second`, which must yield the same requests again (the same trace reopened), for a cache
/// shaped as `cfg` (its capacity and line size; the other policy fields do not apply).
pub fn hit_ratio_belady(
    cfg: &CacheConfig,
    first: &mut dyn RequestBatches,
    second: &mut dyn RequestBatches,
    run: &RunLimits,
) -> Result<RunMetrics, SimError> {
    hit_ratio_belady_with_index(cfg, first, second, run).map(|(m, _)| m)
}

/// [`hit_ratio_belady`], also giving the next-use index of the run's line accesses (warm-up
/// included), for the other optima of docs/design.md §12 (the write-back bound) on the same
/// accesses.
pub fn hit_ratio_belady_with_index(
    cfg: &CacheConfig,
    first: &mut dyn RequestBatches,
    second: &mut dyn RequestBatches,
    run: &RunLimits,
) -> Result<(RunMetrics, FutureIndex), SimError> {
    let geo = LineGeometry::new(cfg.line_size).map_err(|e| SimError::Config {
        field: "cache.line_size".into(),
        reason: e.to_string(),
    })?;
    let lines = cfg.capacity / cfg.line_size;
    if lines == 0 {
        return Err(SimError::Config {
            field: "cache.capacity".into(),
            reason: format!("{} bytes hold no {}-byte line", cfg.capacity, cfg.line_size),
        });
    }
    let mut batch: Vec<Request> = Vec::with_capacity(super::lines::BATCH);
    let mut split: Vec<LineAccess> = Vec::new();

    // Pass 1: the future of every line access the run will make.
    let mut builder = FutureIndex::builder().map_err(optimal_error)?;
    let mut window = Window::new(run);
    'first: loop {
        first.next_batch(&mut batch);
        if batch.is_empty() {
            break;
        }
        for req in &batch {
            let index = window.seen;
            if window.admit(req).is_none() {
                break 'first;
            }
            split.clear();
            line_accesses(req, &geo, index, &mut split)
                .map_err(|e| request_error(index, *req, e))?;
            for a in &split {
                builder.push(*a).map_err(optimal_error)?;
            }
        }
    }
    let future = builder.finish().map_err(optimal_error)?;

    // Pass 2: MIN on the same accesses, counted as the core counts.
    let mut min = Belady::new(lines, future.distinct());
    let mut dirty = vec![false; future.distinct() as usize];
    let mut reader = future.reader().map_err(optimal_error)?;
    let mut s = CacheStats::default();
    let mut start: Option<CacheStats> = None;
    let (mut reads, mut writes, mut bytes) = (0u64, 0u64, 0u64);
    let line_size = geo.line_size();
    let changed = || SimError::Config {
        field: "workload.trace".into(),
        reason: "the trace changed between belady's two passes".into(),
    };
    let mut window = Window::new(run);
    'second: loop {
        second.next_batch(&mut batch);
        if batch.is_empty() {
            break;
        }
        for req in &batch {
            let index = window.seen;
            let Some((warm, first_warm)) = window.admit(req) else {
                break 'second;
            };
            if first_warm {
                start = Some(s.clone());
            }
            split.clear();
            line_accesses(req, &geo, index, &mut split)
                .map_err(|e| request_error(index, *req, e))?;
            s.requests += 1;
            let write = req.op == Op::Write;
            match req.op {
                Op::Read => s.read_requests += 1,
                Op::Write => s.write_requests += 1,
                _ => {}
            }
            let mut all_hit = !split.is_empty();
            let end = req.offset + req.len;
            for a in &split {
                let f = reader
                    .next_future()
                    .map_err(optimal_error)?
                    .ok_or_else(changed)?;
                if f.write != a.write {
                    return Err(changed());
                }
                let line_start = geo.line_start(a.key.index());
                let covered = end.min(line_start + line_size) - req.offset.max(line_start);
                s.line_accesses += 1;
                if write {
                    s.write_line_accesses += 1;
                } else {
                    s.read_line_accesses += 1;
                }
                let victim = if min.contains(f.id) {
                    None
                } else {
                    min.furthest()
                };
                let evicted = min.evictions();
                if min.access(&f) {
                    s.line_hits += 1;
                    if write {
                        s.write_line_hits += 1;
                        s.cache_bytes_written += covered;
                    } else {
                        s.read_line_hits += 1;
                        s.cache_bytes_read += covered;
                    }
                } else {
                    all_hit = false;
                    s.line_misses += 1;
                    if min.evictions() > evicted {
                        s.evictions += 1;
                        let (v, _) = victim.expect("an eviction had a victim");
                        if std::mem::take(&mut dirty[v as usize]) {
                            s.dirty_evictions += 1;
                            s.written_back_bytes += line_size;
                            s.backend_bytes_written += line_size;
                        }
                    }
                    // As the core counts: a write allocation is a promotion too.
                    s.promotions += 1;
                    if write {
                        s.write_allocations += 1;
                        s.cache_bytes_written += covered;
                    } else {
                        s.backend_bytes_read += line_size;
                        s.cache_bytes_written += line_size;
                    }
                }
                if write {
                    s.dirtied_bytes += covered;
                    dirty[f.id as usize] = true;
                }
            }
            if all_hit {
                s.full_hit_requests += 1;
                if write {
                    s.write_hit_requests += 1;
                } else {
                    s.read_hit_requests += 1;
                }
            }
            if warm {
                match req.op {
                    Op::Read => reads += 1,
                    Op::Write => writes += 1,
                    _ => {}
                }
                if matches!(req.op, Op::Read | Op::Write) {
                    bytes += req.len;
                }
            }
        }
    }
    if reader.remaining() != 0 {
        return Err(changed());
    }
    let start = start.unwrap_or_else(|| s.clone());
    let mut m = RunMetrics {
        requests: window.measured,
        read_requests: reads,
        write_requests: writes,
        bytes,
        dirty_lines_end: dirty.iter().filter(|&&d| d).count() as u64,
        resident_lines_end: min.resident(),
        metadata_bytes: min.memory_bytes() as u64,
        ..Default::default()
    };
    fill_policy_metrics(&mut m, &stats_diff(&start, &s));
    drop(reader);
    Ok((m, future))
}
