//! The batched hit-ratio path: whole-line reads simulated on a replacement policy directly.
//!
//! For the caches whose reads this path supports (see [`super::batched_supports`]), a read
//! request under the general core does exactly this per line: a resident line is a full hit
//! (lines enter only by promotion, which fetches the whole line, so every resident line is
//! entirely valid) and tells the policy; a missing line is promoted, evicting the policy's
//! victim when the cache is full (nothing is ever dirty or pinned). [`LineSim`] does the same on
//! the same policy type, monomorphised (no dynamic call per request) over its own line index,
//! and counts the same [`CacheStats`]. The tests compare it with the core request by request.

use super::index::LineIndex;
use super::{BatchedOutcome, RequestBatches};
use crate::config::RunLimits;
use crate::stats::{fill_policy_metrics, stats_diff};
use crate::SimError;
use tiercache_core::{GeometryError, LineGeometry, LineKey, Op, Request};
use tiercache_eviction::Eviction;
use tiercache_metrics::RunMetrics;
use tiercache_policy::CacheStats;

/// Requests ahead of the current one whose index bucket is hinted.
const BUCKET_AHEAD: usize = 14;
/// Requests ahead of the current one whose policy entry is hinted (their bucket is loaded by
/// then).
const ENTRY_AHEAD: usize = 6;
/// Requests a batch holds.
pub(super) const BATCH: usize = 8192;

/// Why one request could not be simulated here.
pub(super) enum Stop {
    /// A request this path does not model; the caller reruns on the general core.
    Unsupported(&'static str),
    /// The request cannot be addressed (the core rejects it the same way).
    Geometry(GeometryError),
}

/// A cache of whole lines under one replacement policy, counting as the core does.
pub(super) struct LineSim<E> {
    pub(super) evict: E,
    index: LineIndex,
    /// Key held by each used slot (to take a victim out of the index).
    keys: Vec<LineKey>,
    /// The victim-after-next slot of the previous victim hint ([`u32::MAX`]: none), whose key
    /// that hint started loading.
    hinted_then: u32,
    capacity: u32,
    geo: LineGeometry,
    line_size: u64,
    pub(super) stats: CacheStats,
}

impl<E: Eviction> LineSim<E> {
    /// An empty cache of `capacity` lines under `evict` (built for that many slots).
    pub(super) fn new(evict: E, capacity: u32, geo: LineGeometry) -> Self {
        Self {
            evict,
            index: LineIndex::new(capacity as usize),
            keys: Vec::with_capacity(capacity as usize),
            hinted_then: u32::MAX,
            capacity,
            geo,
            line_size: geo.line_size(),
            stats: CacheStats::default(),
        }
    }

    /// Lines resident.
    pub(super) fn resident(&self) -> u64 {
        self.keys.len() as u64
    }

    /// The line key of the first line of `req`, unchecked (for hints: any value is harmless).
    #[inline(always)]
    fn hint_key(&self, req: &Request) -> LineKey {
        LineKey(((req.volume.0 as u64) << 48) | (self.geo.line_of(req.offset) & ((1 << 48) - 1)))
    }

    /// Hints for a request `BUCKET_AHEAD` ahead: its index bucket.
    #[inline(always)]
    pub(super) fn hint_bucket(&self, req: &Request) {
        self.index.prefetch(self.hint_key(req));
    }

    /// Hints for a request `ENTRY_AHEAD` ahead: its policy entry when resident, else where
    /// the policy looks up an incoming key (a ghost).
    #[inline(always)]
    pub(super) fn hint_entry(&self, req: &Request) {
        let key = self.hint_key(req);
        match self.index.get(key) {
            Some(slot) => self.evict.prefetch(slot),
            None => self.evict.prefetch_incoming(key),
        }
    }

    /// Hints for the coming evictions, when full: the victim's index bucket, and the victim
    /// after next's key, then (once an earlier hint has loaded that key) its bucket too, so
    /// the bucket is loaded two evictions ahead without waiting on the key here.
    #[inline(always)]
    pub(super) fn hint_victim(&mut self) {
        if self.keys.len() as u32 == self.capacity {
            if let Some((victim, then)) = self.evict.victim_hint() {
                self.index.prefetch(self.keys[victim as usize]);
                if let Some(t) = then {
                    if t == self.hinted_then {
                        self.index.prefetch(self.keys[t as usize]);
                    } else {
                        tiercache_core::hint::prefetch(self.keys.as_ptr().wrapping_add(t as usize));
                        self.hinted_then = t;
                    }
                }
            }
        }
    }

    /// Simulates one request, as the core's `access(req, None)` would.
    #[inline(always)]
    pub(super) fn access(&mut self, req: &Request) -> Result<(), Stop> {
        self.geo
            .check_request(req.volume, req.offset, req.len)
            .map_err(Stop::Geometry)?;
        if req.op != Op::Read {
            return Err(Stop::Unsupported("a request other than a read"));
        }
        if req.len == 0 {
            return Err(Stop::Unsupported("an empty read"));
        }
        let end = req.offset + req.len;
        let first = self.geo.line_of(req.offset);
        let last = self.geo.line_of(end - 1);
        let s = &mut self.stats;
        s.requests += 1;
        s.read_requests += 1;
        let mut all_hit = true;
        for index in first..=last {
            let key = LineKey::new(req.volume, index);
            let s = &mut self.stats;
            s.line_accesses += 1;
            s.read_line_accesses += 1;
            if let Some(slot) = self.index.get(key) {
                self.evict.hit(slot);
                let line_start = self.geo.line_start(index);
                let lo = req.offset.max(line_start);
                let hi = end.min(line_start + self.line_size);
                let s = &mut self.stats;
                s.line_hits += 1;
                s.read_line_hits += 1;
                s.cache_bytes_read += hi - lo;
            } else {
                all_hit = false;
                self.stats.line_misses += 1;
                self.promote(key)?;
            }
        }
        if all_hit {
            self.stats.read_hit_requests += 1;
            self.stats.full_hit_requests += 1;
        }
        Ok(())
    }

    /// Brings `key` in: a free slot, or the policy's victim's when full.
    #[inline(always)]
    fn promote(&mut self, key: LineKey) -> Result<(), Stop> {
        let slot = if (self.keys.len() as u32) < self.capacity {
            self.keys.push(key);
            (self.keys.len() - 1) as u32
        } else {
            // Nothing is dirty or pinned here, so the policy always has a victim.
            let victim = self
                .evict
                .evict(key, &|_| false)
                .ok_or(Stop::Unsupported("a full cache with no victim"))?;
            self.index.remove(self.keys[victim as usize]);
            self.keys[victim as usize] = key;
            self.stats.evictions += 1;
            victim
        };
        self.index.insert(key, slot);
        self.evict.insert(slot, key);
        let s = &mut self.stats;
        s.promotions += 1;
        s.backend_bytes_read += self.line_size;
        s.cache_bytes_written += self.line_size;
        Ok(())
    }
}

/// Runs `sim` over `source` under `run`'s limits (the same rules as the general runner).
pub(super) fn run_batched<E: Eviction>(
    mut sim: LineSim<E>,
    source: &mut dyn RequestBatches,
    run: &RunLimits,
    metadata_bytes: &dyn Fn(LineKey) -> u64,
) -> Result<BatchedOutcome, SimError> {
    // The largest volume and line index placed: the core's line entries are as wide as the
    // keys they hold (docs/design.md §13), and its metadata bytes with them.
    let (mut max_volume, mut max_index) = (0u64, 0u64);
    let mut batch: Vec<Request> = Vec::with_capacity(BATCH);
    let mut measured = 0u64;
    let mut window: Option<(CacheStats, u64)> = None;
    let (mut reads, mut bytes) = (0u64, 0u64);
    let mut seen = 0u64;
    'run: loop {
        source.next_batch(&mut batch);
        if batch.is_empty() {
            break;
        }
        let n = batch.len();
        for r in batch.iter().take(BUCKET_AHEAD) {
            sim.hint_bucket(r);
        }
        for i in 0..n {
            if let Some(r) = batch.get(i + BUCKET_AHEAD) {
                sim.hint_bucket(r);
            }
            if let Some(r) = batch.get(i + ENTRY_AHEAD) {
                sim.hint_entry(r);
            }
            sim.hint_victim();
            let req = batch[i];
            let index = seen;
            seen += 1;
            let warm = index >= run.warmup_requests && req.time_ns >= run.warmup_ns;
            if warm && window.is_none() {
                window = Some((sim.stats.clone(), req.time_ns));
            }
            if warm {
                if run.requests.is_some_and(|l| measured >= l) {
                    break 'run;
                }
                if let (Some(d), Some((_, t0))) = (run.duration_ns, &window) {
                    if req.time_ns > t0.saturating_add(d) {
                        break 'run;
                    }
                }
            }
            match sim.access(&req) {
                Ok(()) => {
                    max_volume = max_volume.max(u64::from(req.volume.0));
                    let last = sim.geo.line_of(req.offset + req.len.max(1) - 1);
                    max_index = max_index.max(last);
                }
                Err(Stop::Unsupported(reason)) => {
                    return Ok(BatchedOutcome::Unsupported { index, reason })
                }
                Err(Stop::Geometry(e)) => {
                    return Err(SimError::Request {
                        index,
                        request: req,
                        source: e.into(),
                    })
                }
            }
            if warm {
                // Every request here is a read.
                measured += 1;
                reads += 1;
                bytes += req.len;
            }
        }
    }
    let start = window.map(|w| w.0).unwrap_or_else(|| sim.stats.clone());
    let mut m = RunMetrics {
        requests: measured,
        read_requests: reads,
        write_requests: 0,
        bytes,
        dirty_lines_end: 0,
        dirty_lines_max: 0,
        resident_lines_end: sim.resident(),
        metadata_bytes: metadata_bytes(LineKey(max_volume << 48 | max_index)),
        ..Default::default()
    };
    fill_policy_metrics(&mut m, &stats_diff(&start, &sim.stats));
    Ok(BatchedOutcome::Done(Box::new(m)))
}
