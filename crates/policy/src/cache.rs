//! The policy core: one request in, metadata updated and a plan of device operations out.

use crate::cleaning::{CleaningPolicy, DirtyState};
use crate::config::{CacheConfig, CleaningConfig, DirtyFullPolicy, PromotionConfig, WritePolicy};
use crate::engine::{ReadMiss, WriteHit, WriteMiss};
use crate::metadata::LineTable;
use crate::promotion::{self, Promotion};
use crate::stats::{BypassReason, CacheStats};
use tiercache_core::geometry::LineSlice;
use tiercache_core::{
    DevOp, Device, GeometryError, IoKind, LineGeometry, LineKey, Nanos, Op, OpCause, Plan, Request,
    VolumeId,
};
use tiercache_eviction::{Eviction, Slot};

/// The executor's view of the devices: the one narrow interface through which run-time state
/// reaches the policies (SPEC §3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecutorState {
    /// Current time (virtual or real) in ns.
    pub now: Nanos,
    /// Time since the cache device last had foreground I/O in flight; 0 while it has some.
    pub cache_idle_ns: Nanos,
    /// Ops queued or in service at the cache device.
    pub cache_queue_depth: u32,
    /// Ops queued or in service at the backend.
    pub backend_queue_depth: u32,
}

/// A batch of dirty lines to write back. Stage 0 of `plan` reads them from the cache, stage 1
/// writes them to the backend. Its lines stay pinned until [`Cache::flush_done`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlushJob {
    /// Job number, unique within a cache.
    pub id: u64,
    /// Device operations of the job.
    pub plan: Plan,
    slots: Vec<Slot>,
}

impl FlushJob {
    /// Lines written back by this job.
    pub fn lines(&self) -> usize {
        self.slots.len()
    }

    /// Slots written back by this job.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }
}

/// The state of one slot after a change, for a persistent journal (see
/// [`Cache::set_journal`]). Recovery replays the last update of each slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaUpdate {
    /// The slot that changed.
    pub slot: Slot,
    /// Line now held (volume, line index), or `None` when the slot became free.
    pub line: Option<(VolumeId, u64)>,
    /// Valid sub-blocks.
    pub valid: u64,
    /// Dirty sub-blocks.
    pub dirty: u64,
}

/// Public view of one resident line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineState {
    /// Slot (cache-device address = slot × line size).
    pub slot: Slot,
    /// Valid sub-blocks.
    pub valid: u64,
    /// Dirty sub-blocks.
    pub dirty: u64,
    /// Under write-back.
    pub pinned: bool,
}

/// What one request found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccessOutcome {
    /// Lines found with all needed data.
    pub line_hits: u32,
    /// Lines found with part of the needed data.
    pub line_partial_hits: u32,
    /// Lines not found.
    pub line_misses: u32,
    /// Lines served around the cache (not promoted or not allocated).
    pub line_bypasses: u32,
    /// Every line was a full hit (reads: served by the cache alone).
    pub full_hit: bool,
}

/// Errors of the policy core.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// A configuration value is invalid.
    #[error("cache.{field}: {reason}")]
    Config {
        /// Field name, relative to the cache section.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A request cannot be addressed.
    #[error("request: {0}")]
    Request(#[from] GeometryError),
}

fn config_error(field: &'static str, reason: impl Into<String>) -> PolicyError {
    PolicyError::Config {
        field,
        reason: reason.into(),
    }
}

/// One replacement domain: a static partition, or the shared rest of the cache.
struct Partition {
    evict: Box<dyn Eviction>,
    capacity: u32,
    used: u32,
    dirty: u32,
    pinned: u32,
}

/// Contiguous runs of set bits of a mask, as (first, one past last) bit numbers.
fn runs(mut mask: u64) -> impl Iterator<Item = (u32, u32)> {
    std::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let lo = mask.trailing_zeros();
        let shifted = mask >> lo;
        let len = if shifted == u64::MAX {
            64
        } else {
            (!shifted).trailing_zeros()
        };
        let hi = lo + len;
        mask &= if hi >= 64 { 0 } else { u64::MAX << hi };
        Some((lo, hi))
    })
}

/// The deterministic policy core of one cache.
pub struct Cache {
    cfg: CacheConfig,
    geo: LineGeometry,
    table: LineTable,
    parts: Vec<Partition>,
    /// Partition of each volume with a static partition; others use the last partition.
    part_of_volume: Vec<u16>,
    promotion: Box<dyn Promotion>,
    promotion_learns: bool,
    cleaner: Box<dyn CleaningPolicy>,
    default_mode: WritePolicy,
    volume_modes: Vec<Option<WritePolicy>>,
    stats: CacheStats,
    jobs_in_flight: u32,
    next_job_id: u64,
    /// Clean sub-blocks to drop from lines that were under write-back when a failed plan
    /// asked for them to be dropped: the job's own sub-blocks (marked clean when it was made)
    /// are the only copy of their data until it completes, so the drop waits for it.
    deferred_drops: std::collections::HashMap<Slot, u64>,
    /// Ops of the request being planned, before stage ordering.
    scratch: Vec<DevOp>,
    /// Victim write-backs of the plan being built: (volume, start, end, stage).
    plan_write_backs: Vec<(VolumeId, u64, u64, u8)>,
    build_plan: bool,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("config", &self.cfg)
            .field("resident", &self.table.resident_count())
            .field("dirty", &self.table.dirty_count())
            .finish_non_exhaustive()
    }
}

const DEFAULT_PARTITION: u16 = u16::MAX;

impl Cache {
    /// Builds a cache; every invalid field is named in the error.
    pub fn new(cfg: &CacheConfig) -> Result<Self, PolicyError> {
        let geo = LineGeometry::new(cfg.line_size)
            .map_err(|e| config_error("line_size", e.to_string()))?;
        let lines = cfg.capacity / cfg.line_size;
        if lines == 0 {
            return Err(config_error(
                "capacity",
                format!("{} bytes hold no {}-byte line", cfg.capacity, cfg.line_size),
            ));
        }
        if lines >= u32::MAX as u64 / 2 {
            return Err(config_error(
                "capacity",
                format!("{lines} lines exceed the limit of {}", u32::MAX / 2),
            ));
        }
        match cfg.promotion {
            PromotionConfig::Nhit {
                n,
                table_ratio,
                occupancy_threshold,
            } => {
                if n == 0 {
                    return Err(config_error("promotion.n", "must be at least 1"));
                }
                if !(table_ratio > 0.0 && table_ratio <= 64.0) {
                    return Err(config_error("promotion.table_ratio", "must be in (0, 64]"));
                }
                if !(0.0..=1.0).contains(&occupancy_threshold) {
                    return Err(config_error(
                        "promotion.occupancy_threshold",
                        "must be in [0, 1]",
                    ));
                }
            }
            PromotionConfig::Smq { hotspot_lines: 0 } => {
                return Err(config_error(
                    "promotion.hotspot_lines",
                    "must be at least 1",
                ));
            }
            _ => {}
        }
        match cfg.cleaning {
            CleaningConfig::Aggressive { period_ns, batch } => {
                if period_ns == 0 {
                    return Err(config_error("cleaning.period_ns", "must be positive"));
                }
                if batch == 0 {
                    return Err(config_error("cleaning.batch", "must be positive"));
                }
            }
            CleaningConfig::Lazy { batch: 0, .. } => {
                return Err(config_error("cleaning.batch", "must be positive"));
            }
            CleaningConfig::Threshold { high, low, batch } => {
                if !(0.0..=1.0).contains(&high) || !(0.0..=1.0).contains(&low) || low > high {
                    return Err(config_error(
                        "cleaning",
                        format!("watermarks need 0 <= low <= high <= 1, got low {low} high {high}"),
                    ));
                }
                if batch == 0 {
                    return Err(config_error("cleaning.batch", "must be positive"));
                }
            }
            _ => {}
        }
        let mut part_of_volume = Vec::new();
        let mut parts = Vec::new();
        let mut reserved = 0u64;
        for (i, p) in cfg.partitions.iter().enumerate() {
            let plines = p.bytes / cfg.line_size;
            if plines == 0 {
                return Err(config_error(
                    "partitions",
                    format!("partition {i} (volume {}) holds no line", p.volume),
                ));
            }
            let v = p.volume as usize;
            if part_of_volume.len() <= v {
                part_of_volume.resize(v + 1, DEFAULT_PARTITION);
            }
            if part_of_volume[v] != DEFAULT_PARTITION {
                return Err(config_error(
                    "partitions",
                    format!("volume {} has two partitions", p.volume),
                ));
            }
            part_of_volume[v] = i as u16;
            reserved += plines;
            parts.push(plines as u32);
        }
        if reserved > lines {
            return Err(config_error(
                "partitions",
                format!("partitions need {reserved} lines, the cache has {lines}"),
            ));
        }
        parts.push((lines - reserved) as u32);
        let parts = parts
            .into_iter()
            .map(|capacity| Partition {
                evict: tiercache_eviction::build(cfg.eviction, capacity as usize, lines as usize),
                capacity,
                used: 0,
                dirty: 0,
                pinned: 0,
            })
            .collect();
        let promotion = promotion::build(&cfg.promotion, lines);
        Ok(Self {
            cfg: cfg.clone(),
            geo,
            table: LineTable::new(lines as u32),
            parts,
            part_of_volume,
            // Asked once through the trait and kept, so the hit path skips the call for
            // policies that ignore hits.
            promotion_learns: promotion.learns_from_hits(),
            promotion,
            cleaner: crate::cleaning::build(&cfg.cleaning),
            default_mode: cfg.write_policy,
            volume_modes: Vec::new(),
            stats: CacheStats::default(),
            jobs_in_flight: 0,
            next_job_id: 0,
            deferred_drops: std::collections::HashMap::new(),
            scratch: Vec::with_capacity(64),
            plan_write_backs: Vec::new(),
            build_plan: false,
        })
    }

    /// The configuration this cache was built from.
    pub fn config(&self) -> &CacheConfig {
        &self.cfg
    }

    /// Line geometry.
    pub fn geometry(&self) -> LineGeometry {
        self.geo
    }

    /// Counters so far.
    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }

    /// Lines the cache can hold.
    pub fn capacity_lines(&self) -> u64 {
        self.table.slots() as u64
    }

    /// Lines resident now.
    pub fn resident_lines(&self) -> u64 {
        self.table.resident_count()
    }

    /// Dirty lines now.
    pub fn dirty_lines(&self) -> u64 {
        self.table.dirty_count()
    }

    /// Flush jobs issued and not yet reported done.
    pub fn jobs_in_flight(&self) -> u32 {
        self.jobs_in_flight
    }

    /// Bytes of metadata: line table, index, dirty list, replacement and promotion structures.
    pub fn metadata_bytes(&self) -> usize {
        self.table.memory_bytes()
            + self
                .parts
                .iter()
                .map(|p| p.evict.memory_bytes())
                .sum::<usize>()
            + self.promotion.memory_bytes()
    }

    /// Bytes of metadata excluding the promotion table (the per-line budget of 64 bytes).
    pub fn line_metadata_bytes(&self) -> usize {
        self.table.memory_bytes()
            + self
                .parts
                .iter()
                .map(|p| p.evict.memory_bytes())
                .sum::<usize>()
    }

    /// State of the line `index` of `volume`, if resident.
    pub fn line_state(&self, volume: VolumeId, index: u64) -> Option<LineState> {
        let slot = self.table.lookup(LineKey::new(volume, index))?;
        let m = self.table.meta(slot);
        Some(LineState {
            slot,
            valid: m.valid,
            dirty: m.dirty,
            pinned: m.pinned,
        })
    }

    /// Hint that `req` is processed soon, for loops that read ahead (hit-ratio-only runs):
    /// stage 1 about a dozen requests ahead (index bucket), stage 2 about six (line entry and
    /// replacement-list links), stage 3 the next (the coming victim). Changes nothing.
    #[inline]
    pub fn prefetch(&self, req: &Request, stage: u8) {
        let [part] = &self.parts[..] else {
            // With static partitions, finding a line's domain would read the entry being
            // prefetched: no hints.
            return;
        };
        if stage >= 3 {
            if part.used == part.capacity {
                if let Some((victim, then)) = part.evict.victim_hint() {
                    self.table.prefetch_victim(victim, then);
                    if let Some(t) = then {
                        part.evict.prefetch(t);
                    }
                }
            }
            return;
        }
        let index = self.geo.line_of(req.offset);
        if req.volume.0 >= tiercache_core::MAX_VOLUMES || index >> 48 != 0 {
            return;
        }
        let key = LineKey::new(req.volume, index);
        if let Some(slot) = self.table.prefetch(key, stage) {
            part.evict.prefetch(slot);
        }
    }

    /// Turns recording of line-state changes on or off (off by default: the simulator has
    /// nothing to persist). When on, [`drain_meta_updates`](Self::drain_meta_updates) returns
    /// every slot changed by `access`, `clean`, `flush_done` or `flush_all`.
    pub fn set_journal(&mut self, on: bool) {
        self.table.set_journal(on);
    }

    /// Appends the state of every slot changed since the last call (each slot once, in slot
    /// order) to `out`. An executor persists them once the data they describe is durable: a
    /// request's updates when its plan completes, a flush job's when its backend writes are
    /// durable.
    pub fn drain_meta_updates(&mut self, out: &mut Vec<MetaUpdate>) {
        let mut slots = Vec::new();
        self.table.take_touched(&mut slots);
        out.extend(slots.into_iter().map(|slot| {
            let m = self.table.meta(slot);
            // A resident line with nothing valid (trimmed while pinned) holds no data.
            let holds = m.resident && m.valid != 0;
            MetaUpdate {
                slot,
                line: holds.then(|| (m.key.volume(), m.key.index())),
                valid: if holds { m.valid } else { 0 },
                dirty: if holds { m.dirty } else { 0 },
            }
        }));
    }

    /// Recovery: puts a line recovered from a journal back into `slot`, before any request.
    /// Dirty sub-blocks must be valid; the slot must be free; the line's partition must have
    /// room. Restore in ascending slot order (O(1) a line).
    pub fn restore_line(
        &mut self,
        slot: Slot,
        volume: VolumeId,
        index: u64,
        valid: u64,
        dirty: u64,
    ) -> Result<(), PolicyError> {
        let bad = |reason: String| Err(config_error("restore", reason));
        if self.stats.requests != 0 {
            return bad("lines can only be restored before the first request".into());
        }
        if slot >= self.table.slots() {
            return bad(format!("slot {slot} beyond {} slots", self.table.slots()));
        }
        if volume.0 >= tiercache_core::MAX_VOLUMES || index >= LineKey::MAX_INDEX {
            return bad(format!(
                "slot {slot}: line {index} of volume {} is out of range",
                volume.0
            ));
        }
        if valid == 0 || dirty & !valid != 0 || (valid & !self.geo.full_mask()) != 0 {
            return bad(format!(
                "slot {slot}: masks valid {valid:#x} dirty {dirty:#x}"
            ));
        }
        let key = LineKey::new(volume, index);
        if self.table.meta(slot).resident || self.table.lookup(key).is_some() {
            return bad(format!("slot {slot}: slot or line restored twice"));
        }
        let p = self.partition(volume);
        if self.parts[p].used >= self.parts[p].capacity {
            return bad(format!("slot {slot}: partition {p} is full"));
        }
        self.table.restore(slot, key, p as u16, valid, dirty);
        self.parts[p].used += 1;
        if dirty != 0 {
            self.parts[p].dirty += 1;
        }
        self.parts[p].evict.insert(slot, key);
        Ok(())
    }

    /// After a failed execution of a plan touching `index`: forgets the line's clean
    /// sub-blocks (a failed fill may have left them unwritten) and keeps its dirty ones, the
    /// only copy of acknowledged data. Returns whether anything was dropped.
    pub fn drop_clean(&mut self, volume: VolumeId, index: u64) -> bool {
        if volume.0 >= tiercache_core::MAX_VOLUMES || index >> 48 != 0 {
            return false;
        }
        let Some(slot) = self.table.lookup(LineKey::new(volume, index)) else {
            return false;
        };
        let m = *self.table.meta(slot);
        let clean = m.valid & !m.dirty;
        if clean == 0 {
            return false;
        }
        if m.pinned {
            *self.deferred_drops.entry(slot).or_default() |= clean;
            return true;
        }
        self.invalidate(slot, clean);
        true
    }

    /// Whether reading `req` now would be served by the cache alone (every line resident
    /// with the needed sub-blocks valid, in a mode that reads from the cache). Changes
    /// nothing: executors use it to run cheap requests inline.
    pub fn would_hit(&self, req: &Request) -> bool {
        req.op == Op::Read
            && !self.write_policy(req.volume).rules().reads_bypass_cache
            && self.all_valid(req)
    }

    /// Whether writing `req` now would touch the cache device alone: a write hit on resident
    /// lines whose touched sub-blocks are valid (no fill) in a mode that keeps write hits in
    /// the cache (dirty). Changes nothing: executors use it to run cheap writes inline.
    pub fn would_absorb(&self, req: &Request) -> bool {
        req.op == Op::Write
            && self.write_policy(req.volume).rules().write_hit
                == crate::engine::WriteHit::CacheDirty
            && self.all_valid(req)
    }

    /// Every line `req` touches is resident with the touched sub-blocks valid.
    fn all_valid(&self, req: &Request) -> bool {
        req.len != 0
            && self
                .geo
                .check_request(req.volume, req.offset, req.len)
                .is_ok()
            && self.geo.split(req.offset, req.len).all(|s| {
                let need = self.geo.touched_mask(s.start, s.end);
                self.table
                    .lookup(LineKey::new(req.volume, s.index))
                    .is_some_and(|slot| self.table.meta(slot).valid & need == need)
            })
    }

    /// Changes the write policy of one volume, or of all volumes (clearing per-volume ones).
    pub fn set_write_policy(&mut self, volume: Option<VolumeId>, policy: WritePolicy) {
        match volume {
            None => {
                self.default_mode = policy;
                self.volume_modes.clear();
            }
            Some(v) => {
                let v = v.0 as usize;
                if self.volume_modes.len() <= v {
                    self.volume_modes.resize(v + 1, None);
                }
                self.volume_modes[v] = Some(policy);
            }
        }
    }

    /// Write policy in force for a volume.
    pub fn write_policy(&self, volume: VolumeId) -> WritePolicy {
        self.volume_modes
            .get(volume.0 as usize)
            .copied()
            .flatten()
            .unwrap_or(self.default_mode)
    }

    fn partition(&self, volume: VolumeId) -> usize {
        match self.part_of_volume.get(volume.0 as usize) {
            Some(&p) if p != DEFAULT_PARTITION => p as usize,
            _ => self.parts.len() - 1,
        }
    }

    /// Processes one request. Metadata changes at once; unless `plan` is `None` (hit-ratio-only
    /// mode) the plan is cleared and filled with the device operations the request needs.
    pub fn access(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<AccessOutcome, PolicyError> {
        self.geo.check_request(req.volume, req.offset, req.len)?;
        if plan.is_none() {
            if let Some(out) = self.untimed_read_hit(req) {
                return Ok(out);
            }
        }
        self.build_plan = plan.is_some();
        self.scratch.clear();
        self.plan_write_backs.clear();
        let mut out = AccessOutcome::default();
        self.stats.requests += 1;
        let mode = self.write_policy(req.volume);
        match req.op {
            Op::Read => {
                self.stats.read_requests += 1;
                let mut lines = 0;
                for s in self.geo.split(req.offset, req.len) {
                    self.read_line(req.volume, s, mode, &mut out);
                    lines += 1;
                }
                if out.line_hits == lines {
                    self.stats.read_hit_requests += 1;
                }
            }
            Op::Write => {
                self.stats.write_requests += 1;
                for s in self.geo.split(req.offset, req.len) {
                    self.write_line(req.volume, s, mode, &mut out);
                }
                if out.line_misses == 0 && out.line_partial_hits == 0 {
                    self.stats.write_hit_requests += 1;
                }
            }
            Op::Trim => {
                for s in self.geo.split(req.offset, req.len) {
                    self.trim_line(req.volume, s);
                }
                if req.len > 0 {
                    self.emit(op(
                        Device::Backend,
                        IoKind::Trim,
                        req.volume,
                        req.offset,
                        req.len,
                        0,
                        true,
                        OpCause::Trim,
                    ));
                }
            }
            Op::Flush => {
                self.emit(op(
                    Device::Cache,
                    IoKind::Flush,
                    req.volume,
                    0,
                    0,
                    0,
                    true,
                    OpCause::Flush,
                ));
                self.emit(op(
                    Device::Backend,
                    IoKind::Flush,
                    req.volume,
                    0,
                    0,
                    0,
                    true,
                    OpCause::Flush,
                ));
            }
        }
        out.full_hit = out.line_partial_hits == 0 && out.line_misses == 0 && out.line_bypasses == 0;
        if out.full_hit && matches!(req.op, Op::Read | Op::Write) {
            self.stats.full_hit_requests += 1;
        }
        if let Some(plan) = plan {
            plan.clear();
            // Lines were planned one after another; order all ops by stage (stable, so ops of
            // one stage keep address order and contiguous ones merge).
            self.scratch.sort_by_key(|o| o.stage);
            for o in self.scratch.drain(..) {
                plan.push(o);
            }
        }
        Ok(out)
    }

    /// Hit-ratio-only fast path for the commonest request: a read inside one line that finds
    /// all its data. Same state changes and counters as the general path (the simulator's
    /// tests compare hit-ratio-only counters with a timed run's); `None` means take the
    /// general path.
    #[inline]
    fn untimed_read_hit(&mut self, req: &Request) -> Option<AccessOutcome> {
        if req.op != Op::Read || req.len == 0 {
            return None;
        }
        let index = self.geo.line_of(req.offset);
        if self.geo.line_of(req.end() - 1) != index
            || self.write_policy(req.volume).rules().reads_bypass_cache
        {
            return None;
        }
        let key = LineKey::new(req.volume, index);
        let slot = self.table.lookup(key)?;
        let start = req.offset - self.geo.line_start(index);
        let need = self.geo.touched_mask(start, start + req.len);
        let m = self.table.meta(slot);
        if m.valid & need != need {
            return None;
        }
        let p = m.partition as usize;
        self.parts[p].evict.hit(slot);
        if self.promotion_learns {
            self.promotion.on_hit(key);
        }
        let s = &mut self.stats;
        s.requests += 1;
        s.read_requests += 1;
        s.read_hit_requests += 1;
        s.full_hit_requests += 1;
        s.line_accesses += 1;
        s.read_line_accesses += 1;
        s.line_hits += 1;
        s.read_line_hits += 1;
        s.cache_bytes_read += req.len;
        Some(AccessOutcome {
            line_hits: 1,
            full_hit: true,
            ..AccessOutcome::default()
        })
    }

    /// Counts an op's bytes and, when planning, records it.
    #[inline]
    /// Records an op of the plan being built and returns the stage it got: a backend read of
    /// bytes that a victim write-back of this same plan writes is moved after that write (a
    /// request can evict a dirty line it reads further on).
    fn emit(&mut self, mut o: DevOp) -> u8 {
        if self.build_plan && o.device == Device::Backend {
            let (lo, hi) = (o.offset, o.offset + o.len);
            match (o.kind, o.cause) {
                (IoKind::Write, OpCause::EvictFlush) => {
                    self.plan_write_backs.push((o.volume, lo, hi, o.stage))
                }
                (IoKind::Read, _) => {
                    for &(v, a, b, st) in &self.plan_write_backs {
                        if v == o.volume && a < hi && lo < b {
                            o.stage = o.stage.max(st + 1);
                        }
                    }
                }
                _ => {}
            }
        }
        match (o.device, o.kind) {
            (Device::Cache, IoKind::Read) => self.stats.cache_bytes_read += o.len,
            (Device::Cache, IoKind::Write) => self.stats.cache_bytes_written += o.len,
            (Device::Backend, IoKind::Read) => self.stats.backend_bytes_read += o.len,
            (Device::Backend, IoKind::Write) => {
                self.stats.backend_bytes_written += o.len;
                if matches!(o.cause, OpCause::Clean | OpCause::EvictFlush) {
                    self.stats.written_back_bytes += o.len;
                }
            }
            _ => {}
        }
        if self.build_plan {
            self.scratch.push(o);
        }
        o.stage
    }

    fn cache_addr(&self, slot: Slot, within: u64) -> u64 {
        slot as u64 * self.geo.line_size() + within
    }

    fn occupancy(&self, p: usize) -> f64 {
        let part = &self.parts[p];
        if part.capacity == 0 {
            1.0
        } else {
            part.used as f64 / part.capacity as f64
        }
    }

    fn read_line(
        &mut self,
        vol: VolumeId,
        s: LineSlice,
        mode: WritePolicy,
        out: &mut AccessOutcome,
    ) {
        let key = LineKey::new(vol, s.index);
        let need = self.geo.touched_mask(s.start, s.end);
        let line_base = self.geo.line_start(s.index);
        let rules = mode.rules();
        let sub = self.geo.sub_size();
        self.stats.line_accesses += 1;
        self.stats.read_line_accesses += 1;
        let Some(slot) = self.table.lookup(key) else {
            self.stats.line_misses += 1;
            out.line_misses += 1;
            let reason = if rules.read_miss == ReadMiss::BackendOnly {
                Some(BypassReason::Mode)
            } else {
                let p = self.partition(vol);
                let occ = self.occupancy(p);
                if self.promotion.should_promote(key, occ) {
                    match self.allocate(p, key, false) {
                        Ok((slot, stage)) => {
                            // Promotion fetches the whole line (SPEC §4.2): the request waits for the
                            // backend read; the cache write follows in the background.
                            let l = self.geo.line_size();
                            let fetched = self.emit(op(
                                Device::Backend,
                                IoKind::Read,
                                vol,
                                line_base,
                                l,
                                0,
                                true,
                                OpCause::ReadMiss,
                            ));
                            let a = self.cache_addr(slot, 0);
                            self.emit(cache_op(
                                IoKind::Write,
                                vol,
                                a,
                                line_base,
                                l,
                                stage.max(fetched + 1),
                                false,
                                OpCause::Promotion,
                            ));
                            self.table.add_valid(slot, self.geo.full_mask());
                            self.stats.promotions += 1;
                            return;
                        }
                        Err(r) => Some(r),
                    }
                } else {
                    Some(BypassReason::NotHotYet)
                }
            };
            if let Some(r) = reason {
                self.stats.bypass(r);
                out.line_bypasses += 1;
            }
            self.read_slice_from_backend(vol, line_base, s);
            return;
        };
        let m = *self.table.meta(slot);
        if rules.reads_bypass_cache && m.dirty & need == 0 {
            // Pass-through: the backend has current data for every needed sub-block.
            self.stats.line_misses += 1;
            self.stats.bypass(BypassReason::Mode);
            out.line_misses += 1;
            out.line_bypasses += 1;
            self.read_slice_from_backend(vol, line_base, s);
            return;
        }
        let p = m.partition as usize;
        self.parts[p].evict.hit(slot);
        if self.promotion_learns {
            self.promotion.on_hit(key);
        }
        if m.valid & need == need {
            self.stats.line_hits += 1;
            self.stats.read_line_hits += 1;
            out.line_hits += 1;
            let a = self.cache_addr(slot, s.start);
            self.emit(cache_op(
                IoKind::Read,
                vol,
                a,
                line_base + s.start,
                s.end - s.start,
                0,
                true,
                OpCause::ReadHit,
            ));
            return;
        }
        // Partial hit: valid sub-blocks from the cache, the rest from the backend, then filled in.
        self.stats.line_partial_hits += 1;
        out.line_partial_hits += 1;
        for (lo, hi) in runs(need & m.valid) {
            let (a, b) = ((lo as u64 * sub).max(s.start), (hi as u64 * sub).min(s.end));
            let addr = self.cache_addr(slot, a);
            self.emit(cache_op(
                IoKind::Read,
                vol,
                addr,
                line_base + a,
                b - a,
                0,
                true,
                OpCause::ReadHit,
            ));
        }
        let missing = need & !m.valid;
        for (lo, hi) in runs(missing) {
            let (a, b) = (lo as u64 * sub, hi as u64 * sub);
            let fetched = self.emit(op(
                Device::Backend,
                IoKind::Read,
                vol,
                line_base + a,
                b - a,
                0,
                true,
                OpCause::ReadMiss,
            ));
            let addr = self.cache_addr(slot, a);
            self.emit(cache_op(
                IoKind::Write,
                vol,
                addr,
                line_base + a,
                b - a,
                fetched + 1,
                false,
                OpCause::Promotion,
            ));
        }
        self.table.add_valid(slot, missing);
    }

    /// Serves a read's slice of one line from the backend (a miss or a bypass).
    fn read_slice_from_backend(&mut self, vol: VolumeId, line_base: u64, s: LineSlice) {
        let (offset, len) = (line_base + s.start, s.end - s.start);
        self.emit(op(
            Device::Backend,
            IoKind::Read,
            vol,
            offset,
            len,
            0,
            true,
            OpCause::ReadMiss,
        ));
    }

    fn write_line(
        &mut self,
        vol: VolumeId,
        s: LineSlice,
        mode: WritePolicy,
        out: &mut AccessOutcome,
    ) {
        let key = LineKey::new(vol, s.index);
        let touched = self.geo.touched_mask(s.start, s.end);
        let covered = self.geo.covered_mask(s.start, s.end);
        let line_base = self.geo.line_start(s.index);
        let len = s.end - s.start;
        let rules = mode.rules();
        self.stats.line_accesses += 1;
        self.stats.write_line_accesses += 1;
        let backend_write = |stage| {
            op(
                Device::Backend,
                IoKind::Write,
                vol,
                line_base + s.start,
                len,
                stage,
                true,
                OpCause::Write,
            )
        };
        if let Some(slot) = self.table.lookup(key) {
            let m = *self.table.meta(slot);
            self.stats.line_hits += 1;
            self.stats.write_line_hits += 1;
            out.line_hits += 1;
            let p = m.partition as usize;
            self.parts[p].evict.hit(slot);
            if self.promotion_learns {
                self.promotion.on_hit(key);
            }
            let mut action = rules.write_hit;
            if action == WriteHit::InvalidateToBackend && m.dirty & touched & !covered != 0 {
                // The write lands inside dirty sub-blocks without covering them: only the cache
                // holds the rest of those sub-blocks, so merge there instead of invalidating.
                action = WriteHit::CacheDirty;
            }
            match action {
                WriteHit::CacheDirty => {
                    self.write_dirty(vol, slot, line_base, s, touched & !covered & !m.valid, 0);
                }
                WriteHit::CacheAndBackend => {
                    let a = self.cache_addr(slot, s.start);
                    self.emit(cache_op(
                        IoKind::Write,
                        vol,
                        a,
                        line_base + s.start,
                        len,
                        0,
                        true,
                        OpCause::Write,
                    ));
                    self.emit(backend_write(0));
                    self.table.add_valid(slot, covered);
                }
                WriteHit::InvalidateToBackend => {
                    self.emit(backend_write(0));
                    self.invalidate(slot, touched);
                }
            }
            return;
        }
        self.stats.line_misses += 1;
        out.line_misses += 1;
        let alloc = match rules.write_miss {
            WriteMiss::BackendOnly => Err(BypassReason::Mode),
            WriteMiss::AllocateDirty | WriteMiss::AllocateThrough => {
                let p = self.partition(vol);
                self.allocate(p, key, true)
            }
        };
        let (slot, stage) = match alloc {
            Ok(x) => x,
            Err(r) => {
                self.stats.bypass(r);
                out.line_bypasses += 1;
                self.emit(backend_write(0));
                return;
            }
        };
        self.stats.promotions += 1;
        self.stats.write_allocations += 1;
        let a = self.cache_addr(slot, s.start);
        if rules.write_miss == WriteMiss::AllocateDirty {
            self.write_dirty(vol, slot, line_base, s, touched & !covered, stage);
        } else {
            self.emit(cache_op(
                IoKind::Write,
                vol,
                a,
                line_base + s.start,
                len,
                stage,
                true,
                OpCause::Write,
            ));
            self.emit(backend_write(stage));
            self.table.add_valid(slot, covered);
        }
    }

    /// Writes a request's slice into a line as dirty data: completes the partly covered,
    /// not yet valid sub-blocks `edges` from the backend first (see [`Self::fill_edges`]), then
    /// writes the data at or after `stage` and marks the touched sub-blocks dirty.
    fn write_dirty(
        &mut self,
        vol: VolumeId,
        slot: Slot,
        line_base: u64,
        s: LineSlice,
        edges: u64,
        stage: u8,
    ) {
        let stage = self.fill_edges(vol, slot, line_base, edges, s.start, s.end, stage);
        let (a, len) = (self.cache_addr(slot, s.start), s.end - s.start);
        self.emit(cache_op(
            IoKind::Write,
            vol,
            a,
            line_base + s.start,
            len,
            stage,
            true,
            OpCause::Write,
        ));
        self.mark_dirty(slot, self.geo.touched_mask(s.start, s.end));
        self.stats.dirtied_bytes += len;
    }

    /// Reads the parts of the sub-blocks a dirty write only partly covers (`edges`) that the
    /// write leaves untouched from the backend into the line, so each whole sub-block is valid
    /// before it becomes dirty. The fill writes and the application write `[start, end)` do not
    /// overlap, so they share a stage. Returns the stage the application write may use.
    #[allow(clippy::too_many_arguments)]
    fn fill_edges(
        &mut self,
        vol: VolumeId,
        slot: Slot,
        line_base: u64,
        edges: u64,
        start: u64,
        end: u64,
        stage: u8,
    ) -> u8 {
        if edges == 0 {
            return stage;
        }
        let sub = self.geo.sub_size();
        let mut after = stage + 1;
        for (lo, hi) in runs(edges) {
            let (a, b) = (lo as u64 * sub, hi as u64 * sub);
            for (x, y) in [(a, b.min(start)), (a.max(end), b)] {
                if x < y {
                    let fetched = self.emit(op(
                        Device::Backend,
                        IoKind::Read,
                        vol,
                        line_base + x,
                        y - x,
                        stage,
                        true,
                        OpCause::Fill,
                    ));
                    let addr = self.cache_addr(slot, x);
                    self.emit(cache_op(
                        IoKind::Write,
                        vol,
                        addr,
                        line_base + x,
                        y - x,
                        fetched + 1,
                        true,
                        OpCause::Fill,
                    ));
                    after = after.max(fetched + 1);
                }
            }
        }
        self.table.add_valid(slot, edges);
        after
    }

    fn trim_line(&mut self, vol: VolumeId, s: LineSlice) {
        let key = LineKey::new(vol, s.index);
        let Some(slot) = self.table.lookup(key) else {
            return;
        };
        let covered = self.geo.covered_mask(s.start, s.end);
        if covered & self.table.meta(slot).valid == 0 {
            return;
        }
        let dropped = self.invalidate(slot, covered);
        self.stats.trimmed_dirty_bytes += dropped.count_ones() as u64 * self.geo.sub_size();
    }

    /// Invalidates sub-blocks of a line and drops the line once nothing in it is valid.
    /// Returns the dirty sub-blocks discarded.
    fn invalidate(&mut self, slot: Slot, mask: u64) -> u64 {
        let m = *self.table.meta(slot);
        let p = m.partition as usize;
        let dropped = self.table.invalidate(slot, mask);
        if m.dirty != 0 && self.table.meta(slot).dirty == 0 {
            self.parts[p].dirty -= 1;
        }
        if self.table.meta(slot).valid == 0 && !m.pinned {
            self.stats.invalidations += 1;
            self.parts[p].evict.remove(slot);
            self.table.remove(slot);
            self.table.release(slot);
            self.parts[p].used -= 1;
        }
        dropped
    }

    fn mark_dirty(&mut self, slot: Slot, mask: u64) {
        let m = self.table.meta(slot);
        if m.dirty == 0 {
            self.parts[m.partition as usize].dirty += 1;
        }
        self.table.make_dirty(slot, mask);
    }

    fn mark_clean(&mut self, slot: Slot) -> u64 {
        let p = self.table.meta(slot).partition as usize;
        let was = self.table.make_clean(slot);
        if was != 0 {
            self.parts[p].dirty -= 1;
        }
        was
    }

    /// Finds a slot for `key` in partition `p`, evicting (and, if dirty, writing back) a victim
    /// when the partition is full. Returns the slot and the first stage at which it may be
    /// written. Victim write-back ops are critical for writes (the write waits for them).
    fn allocate(
        &mut self,
        p: usize,
        key: LineKey,
        for_write: bool,
    ) -> Result<(Slot, u8), BypassReason> {
        let part = &self.parts[p];
        if part.capacity == 0 {
            return Err(BypassReason::NoSpace);
        }
        let mut stage = 0;
        let slot = if part.used < part.capacity {
            let slot = self
                .table
                .take_free()
                .expect("partition capacities sum to the slot count");
            self.parts[p].used += 1;
            slot
        } else {
            let table = &self.table;
            let victim = match self.cfg.dirty_full {
                DirtyFullPolicy::Bypass => {
                    // The cache is "full of dirty data" when no clean, unpinned line is left:
                    // then the request goes around the cache instead of waiting for a flush.
                    if part.dirty + part.pinned >= part.used {
                        return Err(BypassReason::DirtyFull);
                    }
                    let v = self.parts[p].evict.evict(key, &|s| {
                        let m = table.meta(s);
                        m.pinned || m.dirty != 0
                    });
                    v.ok_or(BypassReason::DirtyFull)?
                }
                DirtyFullPolicy::EvictThenWrite => {
                    let v = self.parts[p].evict.evict(key, &|s| table.meta(s).pinned);
                    v.ok_or(BypassReason::AllPinned)?
                }
            };
            let m = *self.table.meta(victim);
            debug_assert!(m.resident && !m.pinned && m.partition as usize == p);
            // A request may evict a line it touched itself (a long request over a small cache):
            // its ops on the victim's slot must finish before the slot is written back or reused.
            let (lo, hi) = (self.cache_addr(victim, 0), self.cache_addr(victim + 1, 0));
            stage = self
                .scratch
                .iter()
                .filter(|o| o.device == Device::Cache && o.offset < hi && o.offset + o.len > lo)
                .map(|o| o.stage + 1)
                .max()
                .unwrap_or(0);
            if m.dirty != 0 {
                let dirty = self.mark_clean(victim);
                self.write_back_ops(victim, m.key, dirty, stage, for_write, OpCause::EvictFlush);
                self.stats.dirty_evictions += 1;
                stage += 2;
            }
            self.stats.evictions += 1;
            self.table.remove(victim);
            victim
        };
        self.table.install(slot, key, p as u16);
        self.parts[p].evict.insert(slot, key);
        Ok((slot, stage))
    }

    /// Emits the ops that write a line's dirty sub-blocks back: cache reads at `stage`, backend
    /// writes at `stage + 1`.
    fn write_back_ops(
        &mut self,
        slot: Slot,
        key: LineKey,
        dirty: u64,
        stage: u8,
        critical: bool,
        cause: OpCause,
    ) {
        let sub = self.geo.sub_size();
        let base = self.geo.line_start(key.index());
        for (lo, hi) in runs(dirty) {
            let (a, b) = (lo as u64 * sub, hi as u64 * sub);
            let addr = self.cache_addr(slot, a);
            self.emit(cache_op(
                IoKind::Read,
                key.volume(),
                addr,
                base + a,
                b - a,
                stage,
                critical,
                cause,
            ));
        }
        for (lo, hi) in runs(dirty) {
            let (a, b) = (lo as u64 * sub, hi as u64 * sub);
            self.emit(op(
                Device::Backend,
                IoKind::Write,
                key.volume(),
                base + a,
                b - a,
                stage + 1,
                critical,
                cause,
            ));
        }
    }

    /// Asks the cleaner for work given the executor's state; appends flush jobs to `jobs`.
    pub fn clean(&mut self, state: &ExecutorState, jobs: &mut Vec<FlushJob>) {
        let d = self.dirty_state();
        let n = self.cleaner.poll(state, d);
        if n > 0 {
            if let Some(job) = self.make_job(n as usize) {
                jobs.push(job);
            }
        }
    }

    /// When the cleaner wants to be polled again if nothing else happens.
    pub fn next_clean_poll(&self, state: &ExecutorState) -> Option<Nanos> {
        self.cleaner.next_poll(state, self.dirty_state())
    }

    fn dirty_state(&self) -> DirtyState {
        DirtyState {
            dirty_lines: self.table.dirty_count(),
            capacity_lines: self.capacity_lines(),
            jobs_in_flight: self.jobs_in_flight,
        }
    }

    /// Builds a flush job of up to `n` dirty, unpinned lines, least recently written first.
    fn make_job(&mut self, n: usize) -> Option<FlushJob> {
        let slots: Vec<Slot> = self
            .table
            .dirty_iter()
            .filter(|&s| !self.table.meta(s).pinned)
            .take(n)
            .collect();
        if slots.is_empty() {
            return None;
        }
        self.build_plan = true;
        self.scratch.clear();
        self.plan_write_backs.clear();
        for &slot in &slots {
            let key = self.table.meta(slot).key;
            let dirty = self.mark_clean(slot);
            self.write_back_ops(slot, key, dirty, 0, true, OpCause::Clean);
            self.table.set_pinned(slot, true);
            self.parts[self.table.meta(slot).partition as usize].pinned += 1;
        }
        let mut plan = Plan::new();
        self.scratch.sort_by_key(|o| o.stage);
        for o in self.scratch.drain(..) {
            plan.push(o);
        }
        self.stats.cleaned_lines += slots.len() as u64;
        self.stats.clean_jobs += 1;
        self.jobs_in_flight += 1;
        self.next_job_id += 1;
        Some(FlushJob {
            id: self.next_job_id,
            plan,
            slots,
        })
    }

    /// The executor completed every op of `job`: its lines may be evicted again.
    pub fn flush_done(&mut self, job: FlushJob) {
        assert!(
            self.jobs_in_flight > 0,
            "flush_done without a job in flight"
        );
        self.jobs_in_flight -= 1;
        for slot in job.slots {
            let m = *self.table.meta(slot);
            debug_assert!(m.pinned && m.resident);
            self.table.set_pinned(slot, false);
            let p = m.partition as usize;
            self.parts[p].pinned -= 1;
            if m.valid == 0 {
                // Trimmed while under write-back: drop it now.
                self.invalidate(slot, 0);
            } else if let Some(mask) = self.deferred_drops.remove(&slot) {
                // Sub-blocks made dirty again (a failed job, a newer write) stay.
                let drop = mask & m.valid & !self.table.meta(slot).dirty;
                if drop != 0 {
                    self.invalidate(slot, drop);
                }
            }
        }
    }

    /// The executor could not complete `job` (a device error): its lines, marked clean when
    /// the job was made, are dirty again (their data is still only in the cache) and unpinned.
    pub fn flush_failed(&mut self, job: FlushJob) {
        let line = self.geo.line_size();
        for o in job
            .plan
            .ops
            .iter()
            .filter(|o| o.device == Device::Backend && o.len > 0)
        {
            for index in o.offset / line..=(o.offset + o.len - 1) / line {
                let Some(slot) = self.table.lookup(LineKey::new(o.volume, index)) else {
                    continue;
                };
                let base = index * line;
                let (a, b) = (
                    o.offset.max(base) - base,
                    (o.offset + o.len).min(base + line) - base,
                );
                let mask = self.geo.touched_mask(a, b) & self.table.meta(slot).valid;
                if mask != 0 {
                    self.mark_dirty(slot, mask);
                }
            }
        }
        self.flush_done(job);
    }

    /// Final flush: jobs covering every dirty, unpinned line (128 lines a job).
    pub fn flush_all(&mut self, jobs: &mut Vec<FlushJob>) {
        while let Some(job) = self.make_job(128) {
            jobs.push(job);
        }
    }

    /// Checks every invariant of the metadata; panics with a description on violation.
    /// Meant for tests and debug runs (O(lines)).
    pub fn audit(&self) {
        self.table.audit();
        let mut used = vec![0u32; self.parts.len()];
        let mut dirty = vec![0u32; self.parts.len()];
        let mut pinned = vec![0u32; self.parts.len()];
        for s in self.table.resident_slots() {
            let m = self.table.meta(s);
            let p = m.partition as usize;
            used[p] += 1;
            dirty[p] += (m.dirty != 0) as u32;
            pinned[p] += m.pinned as u32;
        }
        for (i, part) in self.parts.iter().enumerate() {
            assert_eq!(part.used, used[i], "partition {i}: used");
            assert_eq!(part.dirty, dirty[i], "partition {i}: dirty");
            assert_eq!(part.pinned, pinned[i], "partition {i}: pinned");
            assert!(part.used <= part.capacity, "partition {i}: over capacity");
            assert_eq!(
                part.evict.len(),
                part.used as usize,
                "partition {i}: eviction policy size"
            );
        }
        let s = &self.stats;
        assert_eq!(
            s.line_hits + s.line_partial_hits + s.line_misses,
            s.line_accesses,
            "hits + misses = accesses"
        );
    }
}

#[allow(clippy::too_many_arguments)]
#[inline]
fn op(
    device: Device,
    kind: IoKind,
    volume: VolumeId,
    offset: u64,
    len: u64,
    stage: u8,
    critical: bool,
    cause: OpCause,
) -> DevOp {
    DevOp {
        device,
        kind,
        volume,
        offset,
        vaddr: offset,
        len,
        stage,
        critical,
        cause,
    }
}

/// A cache-device op at cache address `addr` carrying the volume bytes at `vaddr`.
#[allow(clippy::too_many_arguments)]
#[inline]
fn cache_op(
    kind: IoKind,
    volume: VolumeId,
    addr: u64,
    vaddr: u64,
    len: u64,
    stage: u8,
    critical: bool,
    cause: OpCause,
) -> DevOp {
    DevOp {
        vaddr,
        ..op(
            Device::Cache,
            kind,
            volume,
            addr,
            len,
            stage,
            critical,
            cause,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn runs_of_bits() {
        assert_eq!(runs(0).collect::<Vec<_>>(), vec![]);
        assert_eq!(
            runs(0b1011_0110).collect::<Vec<_>>(),
            vec![(1, 3), (4, 6), (7, 8)]
        );
        assert_eq!(runs(u64::MAX).collect::<Vec<_>>(), vec![(0, 64)]);
        assert_eq!(runs(1 << 63).collect::<Vec<_>>(), vec![(63, 64)]);
    }
}
