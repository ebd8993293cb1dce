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

/// The counters a read-only line cache needs; every other [`CacheStats`] field it reports
/// follows from them ([`LineSim::stats`]). Fewer counters to add per request than the core's
/// (docs/design.md §4.4).
#[derive(Clone, Copy, Default)]
pub(super) struct Counts {
    requests: u64,
    full_hits: u64,
    line_accesses: u64,
    line_hits: u64,
    cache_bytes_read: u64,
    evictions: u64,
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
    counts: Counts,
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
            counts: Counts::default(),
        }
    }

    /// The core's statistics for what was simulated: every request a read, every line miss a
    /// promotion of a whole line.
    pub(super) fn stats(&self) -> CacheStats {
        let c = &self.counts;
        let misses = c.line_accesses - c.line_hits;
        CacheStats {
            requests: c.requests,
            read_requests: c.requests,
            full_hit_requests: c.full_hits,
            read_hit_requests: c.full_hits,
            line_accesses: c.line_accesses,
            read_line_accesses: c.line_accesses,
            line_hits: c.line_hits,
            read_line_hits: c.line_hits,
            line_misses: misses,
            cache_bytes_read: c.cache_bytes_read,
            evictions: c.evictions,
            promotions: misses,
            backend_bytes_read: misses * self.line_size,
            cache_bytes_written: misses * self.line_size,
            ..CacheStats::default()
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

    /// Simulates one request, as the core's `access(req, None)` would; returns the index of its
    /// last line.
    #[inline(always)]
    pub(super) fn access(&mut self, req: &Request) -> Result<u64, Stop> {
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
        self.counts.requests += 1;
        if first == last {
            // One line, the commonest request: a hit reads all of it.
            self.counts.line_accesses += 1;
            // `check_request` bounded the volume and the line index: the key packs them as
            // `LineKey::new` would, without its checks.
            let key = LineKey::new_for_hint(req.volume, first);
            if let Some(slot) = self.index.get(key) {
                self.evict.hit(slot);
                let c = &mut self.counts;
                c.line_hits += 1;
                c.cache_bytes_read += req.len;
                c.full_hits += 1;
            } else {
                self.promote(key)?;
            }
            return Ok(last);
        }
        let mut all_hit = true;
        for index in first..=last {
            let key = LineKey::new(req.volume, index);
            self.counts.line_accesses += 1;
            if let Some(slot) = self.index.get(key) {
                self.evict.hit(slot);
                let line_start = self.geo.line_start(index);
                let lo = req.offset.max(line_start);
                let hi = end.min(line_start + self.line_size);
                let c = &mut self.counts;
                c.line_hits += 1;
                c.cache_bytes_read += hi - lo;
            } else {
                all_hit = false;
                self.promote(key)?;
            }
        }
        if all_hit {
            self.counts.full_hits += 1;
        }
        Ok(last)
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
            self.counts.evictions += 1;
            victim
        };
        self.index.insert(key, slot);
        self.evict.insert(slot, key);
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
    let mut placed = Placed::default();
    let mut batch: Vec<Request> = Vec::with_capacity(BATCH);
    let mut measured = 0u64;
    let mut window: Option<(CacheStats, u64)> = None;
    let mut bytes = 0u64;
    let mut seen = 0u64;
    // Without limits every request is measured and none ends the run: the loop checks none
    // of them per request (docs/design.md §4.4).
    let unlimited = run.warmup_requests == 0
        && run.warmup_ns == 0
        && run.requests.is_none()
        && run.duration_ns.is_none();
    'run: loop {
        source.next_batch(&mut batch);
        if batch.is_empty() {
            break;
        }
        let n = batch.len();
        for r in batch.iter().take(BUCKET_AHEAD) {
            sim.hint_bucket(r);
        }
        if unlimited {
            if window.is_none() {
                window = Some((sim.stats(), batch[0].time_ns));
            }
            for i in 0..n {
                let req = sim.step(&batch, i);
                if let Err(e) = sim.access_placed(req, &mut placed) {
                    return e.outcome(seen + i as u64, *req);
                }
                bytes += req.len;
            }
            seen += n as u64;
            measured += n as u64;
            continue;
        }
        for i in 0..n {
            let req = *sim.step(&batch, i);
            let index = seen;
            seen += 1;
            let warm = index >= run.warmup_requests && req.time_ns >= run.warmup_ns;
            if warm && window.is_none() {
                window = Some((sim.stats(), req.time_ns));
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
            if let Err(e) = sim.access_placed(&req, &mut placed) {
                return e.outcome(index, req);
            }
            if warm {
                // Every request here is a read.
                measured += 1;
                bytes += req.len;
            }
        }
    }
    let end = sim.stats();
    let start = window.map(|w| w.0).unwrap_or_else(|| end.clone());
    let mut m = RunMetrics {
        requests: measured,
        read_requests: measured,
        write_requests: 0,
        bytes,
        dirty_lines_end: 0,
        dirty_lines_max: 0,
        resident_lines_end: sim.resident(),
        metadata_bytes: metadata_bytes(LineKey(placed.volume << 48 | placed.index)),
        ..Default::default()
    };
    fill_policy_metrics(&mut m, &stats_diff(&start, &end));
    Ok(BatchedOutcome::Done(Box::new(m)))
}

/// The largest volume and line index of the requests simulated.
#[derive(Default)]
struct Placed {
    volume: u64,
    index: u64,
}

impl Stop {
    /// What `run_batched` returns when request `index`, `req`, stopped it.
    fn outcome(self, index: u64, req: Request) -> Result<BatchedOutcome, SimError> {
        match self {
            Stop::Unsupported(reason) => Ok(BatchedOutcome::Unsupported { index, reason }),
            Stop::Geometry(e) => Err(SimError::Request {
                index,
                request: req,
                source: e.into(),
            }),
        }
    }
}

impl<E: Eviction> LineSim<E> {
    /// The hints made before request `i` of `batch` (the requests ahead of it, the coming
    /// victim), and the request.
    #[inline(always)]
    fn step<'b>(&mut self, batch: &'b [Request], i: usize) -> &'b Request {
        if let Some(r) = batch.get(i + BUCKET_AHEAD) {
            self.hint_bucket(r);
        }
        if let Some(r) = batch.get(i + ENTRY_AHEAD) {
            self.hint_entry(r);
        }
        self.hint_victim();
        &batch[i]
    }

    /// [`LineSim::access`], noting the volume and last line `req` placed.
    #[inline(always)]
    fn access_placed(&mut self, req: &Request, placed: &mut Placed) -> Result<(), Stop> {
        let last = self.access(req)?;
        placed.volume = placed.volume.max(u64::from(req.volume.0));
        placed.index = placed.index.max(last);
        Ok(())
    }
}
