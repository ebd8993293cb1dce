//! The hit-ratio-only runner: the policy core alone, no devices, no time.

use tiercache_core::{Arrival, Op, Request, RequestSource};
use tiercache_metrics::RunMetrics;
use tiercache_policy::Cache;

use crate::config::RunLimits;
use crate::stats::{fill_policy_metrics, stats_diff};
use crate::SimError;

/// Drives `cache.access(req, None)` over every request of `source` (closed-loop jobs are taken
/// round-robin, one request each in turn) as fast as possible. Honours `warmup_requests`,
/// `warmup_ns` (by request time), `requests` and `duration_ns` (by request time after the
/// warm-up); timing metrics stay zero. No cleaning runs: dirty lines leave only by eviction.
pub fn hit_ratio_only(
    cache: &mut Cache,
    source: &mut dyn RequestSource,
    run: &RunLimits,
) -> Result<RunMetrics, SimError> {
    let jobs = match source.arrival() {
        Arrival::Closed { jobs, .. } => jobs.max(1),
        Arrival::Open => 1,
    };
    let mut done = vec![false; jobs as usize];
    let mut live = jobs;
    let mut job = 0u32;
    let iter = std::iter::from_fn(|| {
        while live > 0 {
            let j = job;
            job = (job + 1) % jobs;
            if done[j as usize] {
                continue;
            }
            match source.next_request(j) {
                Some(r) => return Some(r),
                None => {
                    done[j as usize] = true;
                    live -= 1;
                }
            }
        }
        None
    });
    hit_ratio_only_iter(cache, iter, run)
}

/// As [`hit_ratio_only`] over any request iterator.
pub fn hit_ratio_only_iter(
    cache: &mut Cache,
    requests: impl IntoIterator<Item = Request>,
    run: &RunLimits,
) -> Result<RunMetrics, SimError> {
    let mut measured = 0u64;
    let mut window: Option<(tiercache_policy::CacheStats, u64)> = None;
    let (mut reads, mut writes, mut bytes, mut dirty_max) = (0u64, 0u64, 0u64, 0u64);
    for (seen, req) in requests.into_iter().enumerate() {
        let seen = seen as u64;
        let warm = seen >= run.warmup_requests && req.time_ns >= run.warmup_ns;
        if warm && window.is_none() {
            window = Some((cache.stats().clone(), req.time_ns));
        }
        if warm {
            if run.requests.is_some_and(|l| measured >= l) {
                break;
            }
            if let (Some(d), Some((_, t0))) = (run.duration_ns, &window) {
                if req.time_ns > t0.saturating_add(d) {
                    break;
                }
            }
        }
        if let Err(source) = cache.access(&req, None) {
            return Err(SimError::Request {
                index: seen,
                request: req,
                source,
            });
        }
        if warm {
            measured += 1;
            match req.op {
                Op::Read => reads += 1,
                Op::Write => writes += 1,
                _ => {}
            }
            if matches!(req.op, Op::Read | Op::Write) {
                bytes += req.len;
            }
            dirty_max = dirty_max.max(cache.dirty_lines());
        }
    }
    let start = window.map(|w| w.0).unwrap_or_else(|| cache.stats().clone());
    let mut m = RunMetrics {
        requests: measured,
        read_requests: reads,
        write_requests: writes,
        bytes,
        dirty_lines_end: cache.dirty_lines(),
        dirty_lines_max: dirty_max,
        resident_lines_end: cache.resident_lines(),
        metadata_bytes: cache.metadata_bytes() as u64,
        ..Default::default()
    };
    fill_policy_metrics(&mut m, &stats_diff(&start, cache.stats()));
    Ok(m)
}
