//! The hit-ratio-only runners: the policy core alone, no devices, no time
//! ([`hit_ratio_only`]), and the batched path for read-only line caches
//! ([`hit_ratio_batched`]), which simulates the replacement policy directly on batches of
//! requests and gives the same metrics.

use std::collections::VecDeque;
use std::sync::mpsc;
use tiercache_core::{Arrival, Op, Request, RequestSource};
use tiercache_eviction::{ArcPolicy, Clock, EvictionKind, Fifo, Lru, Mru, S3Fifo, Sieve};
use tiercache_eviction::{Car, ClockPro, LeCaR, WTinyLfu};
// Policies researchers compare against (issue 35).
use tiercache_eviction::{Lfu, Lfuda, Lhd, Lirs, LruK, Slru, TwoQ};
use tiercache_metrics::RunMetrics;
use tiercache_policy::{Cache, CacheConfig, PolicyCore, PromotionConfig};

mod belady;
mod index;
mod lines;

pub use belady::{hit_ratio_belady, hit_ratio_belady_with_index};
#[cfg(test)]
mod tests;

use lines::{run_batched, LineSim};

use crate::config::RunLimits;
use crate::stats::{fill_policy_metrics, stats_diff};
use crate::SimError;

/// Drives `cache.access(req, None)` over every request of `source` (closed-loop jobs are taken
/// round-robin, one request each in turn) as fast as possible. Honours `warmup_requests`,
/// `warmup_ns` (by request time), `requests` and `duration_ns` (by request time after the
/// warm-up); timing metrics stay zero. No cleaning runs: dirty lines leave only by eviction.
pub fn hit_ratio_only<C: PolicyCore + ?Sized>(
    cache: &mut C,
    source: &mut (dyn RequestSource + Send),
    run: &RunLimits,
) -> Result<RunMetrics, SimError> {
    let jobs = match source.arrival() {
        Arrival::Closed { jobs, .. } => jobs.max(1),
        Arrival::Open => 1,
    };
    // Producing requests (decoding a trace, generating a workload) and simulating them are
    // independent: a second thread produces batches while this one simulates.
    std::thread::scope(|scope| {
        let (full_tx, full_rx) = mpsc::sync_channel::<Vec<Request>>(BATCHES_IN_FLIGHT);
        let (empty_tx, empty_rx) = mpsc::channel::<Vec<Request>>();
        scope.spawn(move || {
            let mut done = vec![false; jobs as usize];
            let mut live = jobs;
            let mut job = 0u32;
            while live > 0 {
                let mut batch = empty_rx
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(BATCH));
                batch.clear();
                while live > 0 && batch.len() < BATCH {
                    // Closed-loop jobs are taken round-robin, one request each in turn.
                    let j = job;
                    job = if job + 1 == jobs { 0 } else { job + 1 };
                    if done[j as usize] {
                        continue;
                    }
                    match source.next_request(j) {
                        Some(r) => batch.push(r),
                        None => {
                            done[j as usize] = true;
                            live -= 1;
                        }
                    }
                }
                // The receiver is gone when the run stopped early (a limit, an error).
                if batch.is_empty() || full_tx.send(batch).is_err() {
                    break;
                }
            }
        });
        let requests = Batches {
            full: full_rx,
            empty: empty_tx,
            current: Vec::new(),
            at: 0,
        };
        hit_ratio_only_iter(cache, requests, run)
    })
}

/// Requests a batch carries from the producing thread.
const BATCH: usize = 4096;
/// Batches produced ahead of the simulation.
const BATCHES_IN_FLIGHT: usize = 4;

/// The simulating side of the producer thread: requests in order, batch buffers sent back.
struct Batches {
    full: mpsc::Receiver<Vec<Request>>,
    empty: mpsc::Sender<Vec<Request>>,
    current: Vec<Request>,
    at: usize,
}

impl Iterator for Batches {
    type Item = Request;

    #[inline]
    fn next(&mut self) -> Option<Request> {
        if self.at == self.current.len() {
            let next = self.full.recv().ok()?;
            let used = std::mem::replace(&mut self.current, next);
            let _ = self.empty.send(used);
            self.at = 0;
        }
        self.at += 1;
        Some(self.current[self.at - 1])
    }
}

/// Requests read ahead of the one being simulated.
const LOOKAHEAD: usize = 12;
/// Position in the read-ahead queue of the request whose line entry is hinted.
const LINE_HINT_AT: usize = 5;
/// Position of the request before which the coming victim is hinted.
const VICTIM_HINT_AT: usize = 1;

/// As [`hit_ratio_only`] over any request iterator.
pub fn hit_ratio_only_iter<C: PolicyCore + ?Sized>(
    cache: &mut C,
    requests: impl IntoIterator<Item = Request>,
    run: &RunLimits,
) -> Result<RunMetrics, SimError> {
    let mut measured = 0u64;
    let mut window: Option<(tiercache_policy::CacheStats, u64)> = None;
    let (mut reads, mut writes, mut bytes, mut dirty_max) = (0u64, 0u64, 0u64, 0u64);
    // Read ahead and hint the core about coming requests (bucket, then line entry and list
    // links, then the coming victim) so their memory loads overlap with the current request's.
    let mut source = requests.into_iter();
    let mut ahead: VecDeque<Request> = VecDeque::with_capacity(LOOKAHEAD + 1);
    ahead.extend(source.by_ref().take(LOOKAHEAD));
    for r in &ahead {
        cache.prefetch(r, 1);
    }
    let mut seen = 0u64;
    // Tenancy intervals run on request times (no executor clock here); shrinks' write-backs
    // complete at once.
    let mut tenancy = crate::tenancy::TenancyRecorder::default();
    let mut next_repartition = ahead
        .front()
        .and_then(|r| repartition(cache, &mut tenancy, r.time_ns));
    let mut window_times = (0u64, 0u64);
    while let Some(req) = ahead.pop_front() {
        if next_repartition.is_some_and(|t| req.time_ns >= t) {
            next_repartition = repartition(cache, &mut tenancy, req.time_ns);
        }
        if let Some(next) = source.next() {
            cache.prefetch(&next, 1);
            ahead.push_back(next);
        }
        if let Some(r) = ahead.get(LINE_HINT_AT) {
            cache.prefetch(r, 2);
        }
        if let Some(r) = ahead.get(VICTIM_HINT_AT) {
            cache.prefetch(r, 3);
        }
        seen += 1;
        let seen = seen - 1;
        let warm = seen >= run.warmup_requests && req.time_ns >= run.warmup_ns;
        if warm && window.is_none() {
            window = Some((cache.stats_snapshot(), req.time_ns));
            tenancy.window_start(cache);
            window_times.0 = req.time_ns;
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
            window_times.1 = req.time_ns;
        }
    }
    tenancy.window_end(cache);
    let start = window
        .map(|w| w.0)
        .unwrap_or_else(|| cache.stats_snapshot());
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
    fill_policy_metrics(&mut m, &stats_diff(&start, &cache.stats_snapshot()));
    // Only with a partitioning mode: a shared cache's hit-ratio run stays bit-identical to
    // the batched path's (which has no per-volume counters).
    m.tenancy = tenancy
        .has_decisions()
        .then(|| {
            tenancy.metrics(
                cache,
                &crate::tenancy::WindowFacts {
                    start: window_times.0,
                    end: window_times.1,
                    timed: false,
                    iops: 0.0,
                    cache_bytes_written: m.cache_bytes_written,
                    cache_device: None,
                },
            )
        })
        .flatten();
    Ok(m)
}

/// Polls the tenancy mode at request time `now`, completes the write-backs of the partitions
/// it shrank at once, and returns the next poll time.
fn repartition<C: PolicyCore + ?Sized>(
    cache: &mut C,
    tenancy: &mut crate::tenancy::TenancyRecorder,
    now: u64,
) -> Option<u64> {
    let state = tiercache_policy::ExecutorState {
        now,
        ..Default::default()
    };
    let next = cache.repartition(&state);
    let mut jobs = Vec::new();
    cache.take_resize_jobs(&mut jobs);
    for j in jobs {
        cache.flush_done(j);
    }
    tenancy.after_poll(cache);
    next
}

/// A source of requests handed over in batches (the batched hit-ratio path).
pub trait RequestBatches {
    /// Clears `out` and fills it with the next requests in order (as many as is cheap, up to
    /// its capacity); leaves it empty at the end of the input. A source that fails ends early
    /// and keeps its error for the caller.
    fn next_batch(&mut self, out: &mut Vec<Request>);
}

/// Batches drawn from any request iterator (tests, generated inputs).
pub struct IterBatches<I>(pub I);

impl<I: Iterator<Item = Request>> RequestBatches for IterBatches<I> {
    fn next_batch(&mut self, out: &mut Vec<Request>) {
        out.clear();
        let room = out.capacity().max(1);
        out.extend(self.0.by_ref().take(room));
    }
}

/// How a batched run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchedOutcome {
    /// The whole run: the metrics [`hit_ratio_only`] gives for the same cache and requests.
    Done(Box<RunMetrics>),
    /// Request `index` (0-based) is one this path does not model (a write, a trim, …): run the
    /// general [`hit_ratio_only`] instead, from the start.
    Unsupported {
        /// Index of the request in input order.
        index: u64,
        /// What the request was.
        reason: &'static str,
    },
}

/// Whether [`hit_ratio_batched`] can run a cache built from `cfg`, or why not: it models
/// caches of one partition that promote every read miss (`promotion = always`) under a write
/// policy whose reads go through the cache (write-back, write-through, write-around,
/// read-only), with any replacement policy.
pub fn batched_supports(cfg: &CacheConfig) -> Result<(), &'static str> {
    if cfg.eviction == EvictionKind::Belady {
        return Err("belady, which runs offline (hit_ratio_belady)");
    }
    if !cfg.partitions.is_empty() {
        return Err("static partitions");
    }
    if cfg.shards != 1 {
        return Err("policy shards");
    }
    if cfg.tenancy.partitions() {
        return Err("a tenancy mode that partitions the cache");
    }
    if cfg.promotion != PromotionConfig::Always {
        return Err("a promotion policy other than `always`");
    }
    if cfg.admission != tiercache_policy::AdmissionConfig::All {
        return Err("an admission policy other than `all`");
    }
    let rules = cfg.write_policy.rules();
    if rules.reads_bypass_cache || rules.read_miss != tiercache_policy::engine::ReadMiss::Promote {
        return Err("a write policy whose read misses are not promoted");
    }
    Ok(())
}

/// The hit-ratio-only run of [`hit_ratio_only`] for a cache shaped as `cache` (which stays
/// untouched: it must be new, and gives the configuration, geometry and metadata size), over
/// requests in batches, with no dynamic call per request. Same metrics, bit for bit, as
/// `hit_ratio_only(cache, …)` on the same requests; it stops with
/// [`BatchedOutcome::Unsupported`] at the first request other than a non-empty read, and needs
/// [`batched_supports`] (checked here: an unsupported cache is reported at index 0).
pub fn hit_ratio_batched(
    cache: &Cache,
    source: &mut dyn RequestBatches,
    run: &RunLimits,
) -> Result<BatchedOutcome, SimError> {
    let cfg = cache.config();
    if let Err(reason) = batched_supports(cfg) {
        return Ok(BatchedOutcome::Unsupported { index: 0, reason });
    }
    if cache.resident_lines() != 0 || cache.stats().requests != 0 {
        return Ok(BatchedOutcome::Unsupported {
            index: 0,
            reason: "a cache that has already run",
        });
    }
    let lines = cache.capacity_lines() as usize;
    let cap = lines as u32;
    let geo = cache.geometry();
    let meta = &|k: tiercache_core::LineKey| cache.metadata_bytes_holding(k) as u64;
    // The policy is built as the core builds it for its one partition (capacity and slot
    // limit both the cache's line count), then monomorphised into the loop.
    match cfg.eviction {
        EvictionKind::Lru => {
            run_batched(LineSim::new(Lru::new(lines), cap, geo), source, run, meta)
        }
        EvictionKind::Mru => {
            run_batched(LineSim::new(Mru::new(lines), cap, geo), source, run, meta)
        }
        EvictionKind::Fifo => {
            run_batched(LineSim::new(Fifo::new(lines), cap, geo), source, run, meta)
        }
        EvictionKind::Clock => {
            run_batched(LineSim::new(Clock::new(lines), cap, geo), source, run, meta)
        }
        EvictionKind::Sieve => {
            run_batched(LineSim::new(Sieve::new(lines), cap, geo), source, run, meta)
        }
        EvictionKind::Arc => run_batched(
            LineSim::new(ArcPolicy::new(lines, lines), cap, geo),
            source,
            run,
            meta,
        ),
        EvictionKind::S3Fifo => run_batched(
            LineSim::new(S3Fifo::new(lines, lines), cap, geo),
            source,
            run,
            meta,
        ),
        EvictionKind::Car => run_batched(
            LineSim::new(Car::new(lines, lines), cap, geo),
            source,
            run,
            meta,
        ),
        EvictionKind::ClockPro => run_batched(
            LineSim::new(ClockPro::new(lines, lines), cap, geo),
            source,
            run,
            meta,
        ),
        EvictionKind::WTinyLfu => run_batched(
            LineSim::new(WTinyLfu::new(lines, lines), cap, geo),
            source,
            run,
            meta,
        ),
        EvictionKind::LeCaR => run_batched(
            LineSim::new(LeCaR::new(lines, lines), cap, geo),
            source,
            run,
            meta,
        ),
        // Policies researchers compare against (issue 35).
        EvictionKind::Slru => run_batched(
            LineSim::new(Slru::new(lines, lines), cap, geo),
            source,
            run,
            meta,
        ),
        EvictionKind::TwoQ => run_batched(
            LineSim::new(TwoQ::new(lines, lines), cap, geo),
            source,
            run,
            meta,
        ),
        EvictionKind::Lfu => {
            run_batched(LineSim::new(Lfu::new(lines), cap, geo), source, run, meta)
        }
        EvictionKind::Lfuda => {
            run_batched(LineSim::new(Lfuda::new(lines), cap, geo), source, run, meta)
        }
        EvictionKind::LruK => {
            run_batched(LineSim::new(LruK::new(lines), cap, geo), source, run, meta)
        }
        EvictionKind::Lirs => run_batched(
            LineSim::new(Lirs::new(lines, lines), cap, geo),
            source,
            run,
            meta,
        ),
        EvictionKind::Lhd => run_batched(
            LineSim::new(Lhd::new(lines, lines), cap, geo),
            source,
            run,
            meta,
        ),
        // Refused by `batched_supports` above.
        EvictionKind::Belady => Ok(BatchedOutcome::Unsupported {
            index: 0,
            reason: "belady",
        }),
    }
}
