//! The engine: the policy core executed with real I/O.
//!
//! This file holds the types and the public API (requests, flush, stats, shutdown, the NBD
//! block-device face); the rest is split by concern: [`open`] (devices and recovery),
//! [`request`] (the request path), [`flusher`] (background cleaning and detach) and
//! [`failure`] (the fail-stop halt).

use crate::config::{EngineConfig, Lookup, DEFAULT_BACKEND_SIZE};
use crate::device::{Emulated, NbdBackend};
use crate::exec::{Client, Scratch};
use crate::load::LoadMeter;
use crate::ordering::{backend_line, cache_slot, Location, OrderingTable, Ticket};
use crate::slot_table::{Layout, RecoveryReport, SlotRecord, SlotTable, SlotTableError};
use crate::stats::{Counters, EngineStats, Latencies, LatencySummary};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tiercache_blockdev::{BlockDevice, FileDevice, ReapWait};
use tiercache_core::{
    DevOp, Device as Dev, IoKind, LineGeometry, LineKey, Op, OpCause, Plan, Request, VolumeId,
};
use tiercache_policy::{
    AccessOutcome, Background, Cache, CacheConfig, CacheStats, DirtyFullPolicy, EngineCore,
    ExecutorState, FlushJob, MetaUpdate, PolicyError, Report, RequestPieces, ShardLayout,
};

mod batch;
mod degraded;
mod demote;
mod device_ops;
mod early;
mod failure;
mod flusher;
mod journaled;
mod live;
mod open;
mod request;
mod restore;
mod started;
mod status;
mod volume;
mod zeroes;

pub use early::{EarlyStats, OpeningEngine};
use volume::VolumeState;
pub use volume::{VolumeHandle, VolumeStats};

impl Engine {
    /// Heap bytes of the engine's metadata by structure: the policy cores, the slot table's
    /// shadow, the ordering tables (what the memory benchmark prints per line).
    pub fn metadata_memory(&self) -> EngineMemory {
        let mut m = EngineMemory {
            slot_table: self.inner.table.memory_bytes(),
            ..EngineMemory::default()
        };
        for s in &self.inner.shards {
            let core = lock(&s.core);
            m.core = m.core.plus(&core.cache.metadata_memory());
            m.ordering += core.order.memory_bytes() + core.unrecorded.capacity();
        }
        m
    }
}

/// Why the engine cannot start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A policy setting is invalid.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// A device model is invalid.
    #[error("engine device model: {0}")]
    Model(#[from] tiercache_devices::DeviceError),
    /// The cache device's metadata is unusable.
    #[error(transparent)]
    Metadata(#[from] SlotTableError),
    /// The metadata of the cache device at `path` is unusable.
    #[error("cache device {path}: {source}")]
    CacheMetadata {
        /// The cache device's path.
        path: String,
        /// Cause.
        source: SlotTableError,
    },
    /// A device could not be opened.
    #[error("{what} {path}: {source}")]
    Open {
        /// Which device.
        what: &'static str,
        /// Path.
        path: String,
        /// Cause.
        source: io::Error,
    },
    /// Recovery found lines the configuration cannot hold.
    #[error("recovering the cache device: {0}")]
    Recovery(String),
    /// I/O failed during start-up.
    #[error("engine start-up I/O: {0}")]
    Io(#[from] io::Error),
    /// The remote backend could not be reached or refused the export.
    #[error("engine.backend_path {uri}: {source}")]
    Remote {
        /// The URI.
        uri: String,
        /// Cause.
        source: tiercache_nbd::ClientError,
    },
    /// A setting is invalid in this combination.
    #[error("{field}: {reason}")]
    Setting {
        /// The setting (`section.key`).
        field: &'static str,
        /// Why.
        reason: String,
    },
}

/// Where a plan's execution stands: the next op, the bytes read so far, the slots whose old
/// records are still to be invalidated.
struct Progress<'a> {
    next: usize,
    scratch: Scratch<'a>,
    reassigned: Vec<u32>,
    wrote_back: bool,
    backend_epoch: u64,
}

/// How far `execute` went.
enum Executed {
    Done,
    /// The request's part is done; the rest of the plan is left to a background thread.
    Deferred(Progress<'static>),
}

/// The rest of an answered request's plan, for the background threads.
struct Deferred {
    shard: usize,
    req: Request,
    plan: Plan,
    updates: Vec<MetaUpdate>,
    ticket: Ticket,
    progress: Progress<'static>,
}

/// A registered flush job of one shard, ready to run.
struct Job {
    shard: usize,
    job: FlushJob,
    updates: Vec<MetaUpdate>,
    ticket: Ticket,
}

/// One shard's policy core and what the engine keeps beside it. `C` is the core's type
/// (always [`Cache`]; a parameter so that the engine drives it through the executor traits
/// only, docs/design.md §3).
struct Core<C = Cache> {
    cache: C,
    order: OrderingTable,
    updates: Vec<MetaUpdate>,
    /// Slots (of the shard) that took a demoted line whose record was not written (see
    /// `demote::unrecorded`): a clean shutdown writes their records.
    unrecorded: Vec<bool>,
    /// Slots (of the shard) a dirty victim was put back in after its eviction failed (see
    /// `Inner::keep_evicted`), with the [`Ticket::seq`](crate::ordering::Ticket::seq) of the
    /// next plan decided then: the forgetting of a failed plan decided before that must leave
    /// the slot's line alone. One entry a slot at most.
    reinstated: std::collections::HashMap<u32, u64>,
    /// Records of slots a flush job's completion freed while plans were in flight on them
    /// (a partition settling over its capacity drops a clean line), under their ticket:
    /// written by [`Inner::write_frees`] once the work that ran the job is done.
    frees: Vec<volume::ResizeRecords>,
}

/// One lock's share of the cache: a policy core over slots `base..base + capacity`, owning
/// the lines whose 64 KiB chunk hashes to it (HT+FG); one shard holds everything otherwise.
struct Shard<C = Cache> {
    core: Mutex<Core<C>>,
    base: u32,
}

struct Inner<C = Cache> {
    shards: Vec<Shard<C>>,
    /// How lines map to shards (`cache.shards`, as the simulator runs them).
    shard_layout: ShardLayout,
    /// The whole cache's static partitions and fixed sizes as configured (each shard's config
    /// holds its split of the partitions and none of the fixed sizes, docs/design.md §4.10).
    whole_sizes: (
        Vec<tiercache_policy::PartitionConfig>,
        Vec<tiercache_policy::tenancy::FixedVolume>,
    ),
    /// Held while a core decides under [`Lookup::HtCg`]: one lock over every shard.
    decide: Mutex<()>,
    /// Held across whole requests under [`Lookup::Lt`].
    serial: Mutex<()>,
    lookup: Lookup,
    answer_reads_early: bool,
    cache_dev: Arc<dyn BlockDevice>,
    /// The cache device is an emulated (slow) one: hits are not cheap.
    cache_is_slow: bool,
    /// The cache device is opened O_DIRECT: hits wait for it (a server runs them on its
    /// workers, a few batched at a time, rather than on a connection's reader).
    cache_hits_wait: bool,
    backend: Arc<dyn BlockDevice>,
    /// The served volumes: where each one's backend sits on `backend`, its counters.
    volumes: Vec<VolumeState>,
    /// The journal of partition layouts on the cache device, and the layout last journaled.
    partition_log: Mutex<(
        crate::partition_log::PartitionLog,
        crate::partition_log::Journaled,
    )>,
    /// The volumes' own write policies to journal instead of those in force, while a detach
    /// runs the cache write-through for the rest of the run only
    /// ([`Engine::write_through_until_restart`]).
    journal_policies_held: Mutex<Option<Vec<(u32, tiercache_policy::WritePolicy)>>>,
    /// Held while partitions are resized (one resize at a time).
    resizing: Mutex<()>,
    table: SlotTable,
    layout: Layout,
    geo: LineGeometry,
    counters: Counters,
    latency: Latencies,
    recovery: RecoveryReport,
    epoch: Instant,
    /// Foreground requests in flight, and when the last one ended (ns since `epoch`).
    in_flight: AtomicU64,
    /// Answered reads whose plans are not finished yet (a detach waits for them: they may
    /// write an evicted dirty line back).
    deferred_pending: AtomicU64,
    /// Where answered reads leave the rest of their plans (`None` once shutting down).
    deferred_tx: Mutex<Option<mpsc::Sender<Box<Deferred>>>>,
    /// Ops in flight on the cache device and the backend, by origin, with service times.
    cache_load: LoadMeter,
    backend_load: LoadMeter,
    /// Request-level counters (`requests`, `read_hit_requests`, …): a request may be cut
    /// into pieces on several shards, whose cores count lines only.
    request_tally: Mutex<CacheStats>,
    last_foreground_ns: AtomicU64,
    /// When a write last woke the flusher (ns since `epoch`).
    last_write_kick_ns: AtomicU64,
    stop: AtomicBool,
    /// Whether the pass-through mark is durable on the cache device (see
    /// [`crate::pass_through_mark`]): made so before the first request goes past the cache.
    pass_through_marked: Mutex<bool>,
    wake: (Mutex<bool>, Condvar),
    poll: Duration,
    /// The backend epoch before the earliest backend write a client was told is done that no
    /// backend sync has covered yet (`u64::MAX`: none). A client FLUSH syncs the backend only
    /// then, and only succeeds if no write since that epoch may have been lost.
    backend_unsynced: AtomicU64,
    /// Set (once) when a plan that evicts a dirty line fails: the line is out of the core's
    /// tables while its data is only on the cache device, under its durable record. From then
    /// on nothing is served (a miss would read the backend's stale copy) and nothing more is
    /// written to the cache device (reusing the slot would lose the data); a restart recovers
    /// the line from its record. Fail-stop, as the simplest state that loses nothing.
    halted: OnceLock<String>,
    /// Device errors and the degraded state (docs/design.md §11).
    health: Arc<crate::health::Health>,
    /// Set by the cache device's watcher when its errors pass `engine.on_error.threshold`:
    /// the engine degrades at its next look (after the failed op).
    degrade_due: Arc<AtomicBool>,
}

impl<C: EngineCore> Inner<C> {
    /// Whether cache hits cost a memory copy (the cache device is neither emulated slow nor
    /// opened O_DIRECT): what may run on a caller's own thread.
    fn cache_at_memory_speed(&self) -> bool {
        !self.cache_is_slow && !self.cache_hits_wait
    }
}

/// A running cache: serve requests with [`read`](Self::read), [`write`](Self::write),
/// [`flush`](Self::flush), [`trim`](Self::trim); a background thread writes dirty lines back.
pub struct Engine {
    inner: Arc<Inner>,
    flusher: Mutex<Option<JoinHandle<()>>>,
    /// Threads finishing the plans of reads already answered.
    finishers: Mutex<Vec<JoinHandle<()>>>,
    notes: Vec<String>,
    /// Config keys the engine runs with another value than configured, with that value.
    overrides: Vec<(&'static str, String)>,
    /// The exclusive lock on the cache device's file, held while the engine lives (None for
    /// devices given directly).
    cache_lock: Option<std::fs::File>,
}

/// Heap bytes of an engine's metadata by structure (docs/design.md §13).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct EngineMemory {
    /// The policy cores of every shard, by structure.
    pub core: tiercache_policy::metadata::MetadataMemory,
    /// The slot table's in-memory shadow of the on-device records (the journal shadow).
    pub slot_table: usize,
    /// The ordering tables of plans in flight and the unrecorded-demote marks.
    pub ordering: usize,
}

impl EngineMemory {
    /// Every structure's bytes.
    pub fn total(&self) -> usize {
        self.core.total() + self.slot_table + self.ordering
    }
}

/// Writes wake the flusher at most this often (1 ms): cleaning starts that much after the
/// dirty data calls for it, at worst.
const WRITE_KICK_INTERVAL_NS: u64 = 1_000_000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn io_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl Engine {
    /// Size of the exported volume in bytes (the first volume of a multi-volume engine).
    pub fn size(&self) -> u64 {
        self.inner.volumes[0].size
    }

    /// The volume [`read`](Self::read), [`write`](Self::write) and the engine's own NBD face
    /// address: volume 0 of a single-backend engine, the first volume of several.
    fn primary(&self) -> u32 {
        self.inner.volumes[0].id
    }

    /// Reads `buf.len()` bytes at `offset`.
    pub fn read(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read_volume(self.primary(), buf, offset)
    }

    /// Whether a read of `len` bytes at `offset` would be served by the cache alone, from a
    /// device that answers at memory speed (neither emulated slow nor O_DIRECT): what a level
    /// above may run on its own thread rather than hand to another. Only a hint: the lines
    /// may leave before the read runs (it then simply goes to the backend).
    pub fn serves_from_memory(&self, offset: u64, len: u64) -> bool {
        self.inner.cache_at_memory_speed()
            && self
                .inner
                .runs_on_cache_alone(self.primary(), Op::Read, offset, len)
    }

    /// Reads each `(offset, buffer)` of `reads` that the cache alone serves at once (hits),
    /// their cache reads handed to the cache device together (one io_uring submission with
    /// `engine.io = "io-uring"`); one answer per read, `None` for a read not served (nothing
    /// done: run it with [`read`](Self::read)).
    pub fn read_hits(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<Option<io::Result<()>>> {
        self.inner.read_hits(reads)
    }

    /// Writes `data` at `offset`; with `fua` it is durable when this returns.
    pub fn write(&self, data: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        self.write_volume(self.primary(), data, offset, fua)
    }

    /// Discards a range: later reads of it return unspecified data until it is written.
    pub fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner
            .request(self.primary(), Op::Trim, offset, len, Client::None, false)
    }

    /// Writes zeroes over a range (durable on return with `fua`): without writing them where
    /// the backend zeroes fast (see `zeroes.rs`).
    pub fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        self.zero_volume(self.primary(), offset, len, fua)
    }

    /// Makes every completed write durable (NBD FLUSH).
    pub fn flush(&self) -> io::Result<()> {
        self.inner.check_halted()?;
        Counters::add(&self.inner.counters.flushes, 1);
        // The policy core counts the flush as the simulator's does (a request that syncs both
        // devices); the devices are synced here, whatever the plan (it names no line).
        {
            let mut core = self.inner.core(&self.inner.shards[0]);
            let req = Request {
                time_ns: self.inner.now_ns(),
                volume: VolumeId(0),
                op: Op::Flush,
                offset: 0,
                len: 0,
            };
            let mut pieces = RequestPieces::new();
            pieces
                .access(&mut core.cache, &req, None)
                .map_err(io::Error::other)?;
            drop(core);
            self.inner.tally(&req, pieces);
        }
        self.inner.sync_for_client()
    }

    /// Writes every dirty line back and syncs the backend: afterwards the backend alone holds
    /// the volume (detach).
    pub fn flush_all(&self) -> io::Result<()> {
        self.inner.flush_everything()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> EngineStats {
        self.inner.stats()
    }

    /// Stops the flusher and makes everything durable (dirty lines stay in the cache,
    /// recorded; pass through [`flush_all`](Self::flush_all) first to detach).
    pub fn shutdown(&self) -> io::Result<()> {
        // Deferred work first: it may hold tickets the flusher's jobs wait for.
        lock(&self.inner.deferred_tx).take();
        for h in lock(&self.finishers).drain(..) {
            let _ = h.join();
        }
        self.inner.stop.store(true, Relaxed);
        self.inner.kick();
        if let Some(h) = lock(&self.flusher).take() {
            let _ = h.join();
        }
        self.inner.record_demoted()?;
        self.inner.sync_all()
    }

    /// Why the engine stopped serving, if it halted (see [`EngineStats::halted`]).
    pub fn halted(&self) -> Option<&str> {
        self.inner.halted.get().map(String::as_str)
    }

    /// Poisons shard `k`'s policy-core lock, as a thread panicking while it held the lock
    /// would (fault injection for tests of the fail-stop halt).
    #[doc(hidden)]
    pub fn poison_core_for_test(&self, k: usize) {
        let inner = self.inner.clone();
        let _ = std::thread::spawn(move || {
            let _held = inner.shards[k].core.lock();
            panic!("poisoning shard {k}'s core lock (fault injection)");
        })
        .join();
    }

    /// Replaces the cache's load balancer (the configured one is built with the cores). A
    /// cache of several shards has one balancer, shard 0's, whose answer every shard follows.
    pub fn set_balancer(&self, b: Box<dyn tiercache_policy::Balancer>) {
        Background::set_balancer(&mut self.inner.core(&self.inner.shards[0]).cache, b);
        self.inner.kick();
    }

    /// Checks the policy core's invariants (tests).
    pub fn audit(&self) {
        for sh in &self.inner.shards {
            Report::audit(&lock(&sh.core).cache);
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

impl BlockDevice for Engine {
    fn size(&self) -> u64 {
        Engine::size(self)
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.read(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        self.write(data, off, fua)
    }
    fn flush(&self) -> io::Result<()> {
        Engine::flush(self)
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        Engine::trim(self, off, len)
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> io::Result<()> {
        Engine::write_zeroes(self, off, len, fua)
    }
    fn fast_zeroes(&self) -> bool {
        self.zeroes_fast()
    }
    fn read_fast(&self, buf: &mut [u8], off: u64) -> Option<io::Result<()>> {
        // Hits on a fast cache device are cheap; on an emulated slow one they are not.
        if self.inner.cache_is_slow {
            return None;
        }
        let len = buf.len() as u64;
        let volume = self.primary();
        let client = Client::Read {
            volume,
            offset: off,
            buf,
        };
        self.inner
            .request_on_cache_alone(volume, Op::Read, off, len, client)
    }
    fn read_fast_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<Option<io::Result<()>>> {
        if self.inner.cache_is_slow {
            return reads.iter().map(|_| None).collect();
        }
        self.inner.read_hits(reads)
    }
    fn hits_wait_for_device(&self) -> bool {
        self.inner.cache_hits_wait
    }
    fn start_reads(&self, reads: &[(u64, u64, u32)]) -> Vec<Option<io::Result<()>>> {
        self.inner.start_reads(reads)
    }
    fn reap_started(&self, wait: ReapWait, f: &mut dyn FnMut(u64, io::Result<&[u8]>)) -> usize {
        self.inner.reap_started(wait, f)
    }
    fn write_fast(&self, data: &[u8], off: u64) -> Option<io::Result<()>> {
        if !self.inner.cache_at_memory_speed() {
            return None;
        }
        let volume = self.primary();
        let client = Client::Write {
            volume,
            offset: off,
            data,
        };
        self.inner
            .request_on_cache_alone(volume, Op::Write, off, data.len() as u64, client)
    }
    fn multi_conn(&self) -> bool {
        // Every connection shares this engine, and FLUSH syncs both devices whole.
        true
    }
    fn takes_demotes(&self) -> bool {
        // A cache level: it takes a demote if a free slot or a clean victim makes room.
        true
    }
    fn demote_at(
        &self,
        data: &[u8],
        off: u64,
        still_valid: &dyn Fn() -> bool,
    ) -> io::Result<tiercache_blockdev::DemoteReply> {
        Engine::demote(self, off, data, still_valid)
    }
    fn allocation(&self, off: u64, len: u64) -> io::Result<Vec<tiercache_blockdev::Extent>> {
        self.inner.allocation(self.primary(), off, len)
    }
    fn cache_state(
        &self,
        off: u64,
        len: u64,
    ) -> Option<io::Result<Vec<tiercache_blockdev::Extent>>> {
        Some(self.inner.cache_state(self.primary(), off, len))
    }
}

/// The locations a plan touches, as (reads, writes).
fn locations(
    geo: &LineGeometry,
    plan: &Plan,
    updates: &[MetaUpdate],
) -> (Vec<Location>, Vec<Location>) {
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    let line = geo.line_size();
    for op in &plan.ops {
        if op.len == 0 {
            continue;
        }
        let target = if op.kind == IoKind::Read {
            &mut reads
        } else {
            &mut writes
        };
        let (first, last) = (op.offset / line, (op.offset + op.len - 1) / line);
        for i in first..=last {
            target.push(match op.device {
                Dev::Cache => cache_slot(i as u32),
                Dev::Backend => backend_line(LineKey::new(op.volume, i)),
            });
        }
    }
    writes.extend(updates.iter().map(|u| cache_slot(u.slot)));
    // A plan that changes a line's state anywhere (installs it in a slot, dirties it) is
    // ordered after every plan in flight on that line's backend range, such as a dirty
    // eviction writing it back from another slot: should that one fail, the line goes back
    // to its old slot (`Inner::keep_evicted`), and this plan, decided on its absence, must
    // fail with it rather than land beside it.
    writes.extend(
        updates
            .iter()
            .filter_map(|u| u.line)
            .map(|(v, i)| backend_line(LineKey::new(v, i))),
    );
    (reads, writes)
}

impl<C: EngineCore> Inner<C> {
    /// Registers in `order` (the ordering table of the shard whose slots start at `base`) a
    /// plan and the records it writes: [`locations`], and for each record that takes a slot
    /// from a line (frees it, or gives it another line) that line's backend range, written.
    /// A later plan putting the line in another slot is then ordered after this one, so its
    /// record naming the line lands after the record taking it from this slot: a crash never
    /// finds the line in two slots (docs/design.md §11, "A line in one slot"). The line a slot
    /// held is what its newest record written names, or what the record of a plan still in
    /// flight on the slot will (the slot's tag); both when they differ.
    fn register_plan(
        &self,
        base: u32,
        order: &mut OrderingTable,
        plan: &Plan,
        updates: &[MetaUpdate],
    ) -> Ticket {
        let (reads, mut writes) = locations(&self.geo, plan, updates);
        let line_of = |(v, i): (VolumeId, u64)| backend_line(LineKey::new(v, i));
        let mut tags = Vec::new();
        for u in updates {
            let slot = cache_slot(u.slot);
            let now = u.line.map(line_of);
            let written = self
                .table
                .persisted_line(base + u.slot)
                .map(|(v, i)| line_of((VolumeId(v), i)));
            for before in [written, order.tag(slot)].into_iter().flatten() {
                if Some(before) != now {
                    writes.push(before);
                }
            }
            if let Some(now) = now {
                tags.push((slot, now));
            }
        }
        order.register_tagged(reads, writes, &tags)
    }
}

/// The part of `client`'s data for `len` bytes at `off` (inside the client's range).
fn sub_client<'b>(client: &'b mut Client<'_>, off: u64, len: u64) -> Client<'b> {
    match client {
        Client::Read {
            volume,
            offset,
            buf,
        } => {
            let at = (off - *offset) as usize;
            Client::Read {
                volume: *volume,
                offset: off,
                buf: &mut buf[at..at + len as usize],
            }
        }
        Client::Write {
            volume,
            offset,
            data,
        } => {
            let at = (off - *offset) as usize;
            Client::Write {
                volume: *volume,
                offset: off,
                data: &data[at..at + len as usize],
            }
        }
        Client::None => Client::None,
        Client::Zeroes => Client::Zeroes,
    }
}

fn record_of(u: &MetaUpdate) -> SlotRecord {
    SlotRecord {
        line: u.line.map(|(v, i)| (v.0, i)),
        valid: u.valid,
        dirty: u.dirty,
    }
}
