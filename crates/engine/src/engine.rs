//! The engine: the policy core executed with real I/O.

use crate::config::{EngineConfig, IoEngine, Lookup, DEFAULT_BACKEND_SIZE};
use crate::device::{Device, Emulated, FileDevice, NbdBackend};
use crate::exec::{Client, Scratch};
use crate::ordering::{backend_line, cache_slot, Location, OrderingTable, Ticket};
use crate::slot_table::{Layout, RecoveryReport, SlotRecord, SlotTable, SlotTableError};
use crate::stats::{Counters, EngineStats, Latencies, LatencySummary};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tiercache_core::{
    DevOp, Device as Dev, IoKind, LineGeometry, LineKey, Op, OpCause, Plan, Request, VolumeId,
};
use tiercache_policy::{
    Cache, CacheConfig, DirtyFullPolicy, ExecutorState, FlushJob, MetaUpdate, PolicyError,
};

/// Why the engine cannot start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A policy setting is invalid.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// A device model is invalid.
    #[error("engine device model: {0}")]
    Model(#[from] tiercache_sim::SimError),
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

struct Core {
    cache: Cache,
    order: OrderingTable,
    updates: Vec<MetaUpdate>,
}

/// One lock's share of the cache: a policy core over slots `base..base + capacity`, owning
/// the lines whose 64 KiB chunk hashes to it (HT+FG); one shard holds everything otherwise.
struct Shard {
    core: Mutex<Core>,
    base: u32,
}

struct Inner {
    shards: Vec<Shard>,
    /// Lines per sharding chunk (64 KiB of lines, at least one).
    chunk_lines: u64,
    /// Held across whole requests under [`Lookup::Lt`].
    serial: Mutex<()>,
    lookup: Lookup,
    answer_reads_early: bool,
    cache_dev: Arc<dyn Device>,
    /// The cache device is an emulated (slow) one: hits are not cheap.
    cache_is_slow: bool,
    backend: Arc<dyn Device>,
    table: SlotTable,
    layout: Layout,
    geo: LineGeometry,
    size: u64,
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
    /// Backend operations in flight now (the backend's queue depth).
    backend_in_flight: AtomicU64,
    last_foreground_ns: AtomicU64,
    /// When a write last woke the flusher (ns since `epoch`).
    last_write_kick_ns: AtomicU64,
    stop: AtomicBool,
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

/// Writes wake the flusher at most this often (1 ms): cleaning starts that much after the
/// dirty data calls for it, at worst.
const WRITE_KICK_INTERVAL_NS: u64 = 1_000_000;

/// Counts an operation in flight for as long as it lives.
struct InFlight<'a>(&'a AtomicU64);

impl<'a> InFlight<'a> {
    fn enter(c: &'a AtomicU64) -> Self {
        c.fetch_add(1, Relaxed);
        Self(c)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn io_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl Engine {
    /// Opens the devices named by `cfg` (creating files as needed, wrapping them in device
    /// models when configured) and starts the engine.
    pub fn open(cache_cfg: &CacheConfig, cfg: &EngineConfig) -> Result<Self, EngineError> {
        let geo = LineGeometry::new(cache_cfg.line_size).map_err(PolicyError::from)?;
        let slots = (cache_cfg.capacity / geo.line_size()) as u32;
        let layout = Layout::new(slots, geo.line_size());
        let open = |what: &'static str, path: &std::path::Path, min: u64, direct: bool| {
            let dev = if direct {
                FileDevice::open_direct(path, min)
            } else {
                FileDevice::open(path, min)
            };
            dev.map(|d| d.with_io_uring(cfg.io == IoEngine::IoUring))
                .map_err(|source| EngineError::Open {
                    what,
                    path: path.display().to_string(),
                    source,
                })
        };
        let cache_lock =
            crate::device::file::lock_exclusive(&cfg.cache_path).map_err(|source| {
                EngineError::Open {
                    what: "cache device",
                    path: cfg.cache_path.display().to_string(),
                    source,
                }
            })?;
        let cache_file = open(
            "cache device",
            &cfg.cache_path,
            layout.device_len(),
            cfg.cache_direct,
        )?;
        let cache_file = if cfg.cache_mapped_reads && !cfg.cache_direct {
            cache_file
                .with_mapped_reads()
                .map_err(|source| EngineError::Open {
                    what: "cache device (mapping)",
                    path: cfg.cache_path.display().to_string(),
                    source,
                })?
        } else {
            cache_file
        };
        let cache_dev: Arc<dyn Device> = match &cfg.cache_device {
            Some(m) => Arc::new(Emulated::new(cache_file, "engine.cache_device", m)?),
            None => Arc::new(cache_file),
        };
        let mut notes = Vec::new();
        let mut overrides = Vec::new();
        let remote_uri = cfg
            .backend_path
            .to_str()
            .filter(|s| tiercache_nbd::NbdUri::is_uri(s));
        let (backend, cache_cfg) = if let Some(uri) = remote_uri {
            if cfg.backend_size.is_some() {
                return Err(EngineError::Setting {
                    field: "engine.backend_size",
                    reason: "a remote backend has the export's size; remove backend_size".into(),
                });
            }
            let parsed: tiercache_nbd::NbdUri =
                uri.parse()
                    .map_err(|e: tiercache_nbd::client::UriError| EngineError::Setting {
                        field: "engine.backend_path",
                        reason: e.to_string(),
                    })?;
            let remote =
                tiercache_nbd::Remote::connect(parsed, cfg.remote.client()).map_err(|source| {
                    EngineError::Remote {
                        uri: uri.to_string(),
                        source,
                    }
                })?;
            if remote.info().read_only() {
                return Err(EngineError::Setting {
                    field: "engine.backend_path",
                    reason: format!("{uri} is a read-only export"),
                });
            }
            let dev = NbdBackend(remote);
            let backend: Arc<dyn Device> = match &cfg.backend_device {
                Some(m) => Arc::new(Emulated::new(dev, "engine.backend_device", m)?),
                None => Arc::new(dev),
            };
            let mut c = cache_cfg.clone();
            if c.dirty_full == DirtyFullPolicy::EvictThenWrite {
                // A request that evicts a dirty line writes it back inline; if the remote
                // fails then, the request fails with the line already out of the core's
                // tables. Only flush jobs (which can be put back) write dirty data remotely.
                c.dirty_full = DirtyFullPolicy::Bypass;
                overrides.push(("cache.dirty_full", "bypass".to_string()));
                notes.push(
                    "remote backend: cache.dirty_full = bypass (dirty lines are written back \
                     only by the flusher, which keeps them dirty while the remote fails)"
                        .to_string(),
                );
            }
            (backend, c)
        } else {
            let backend_min = if cfg.backend_path.exists() {
                cfg.backend_size.unwrap_or(0)
            } else {
                cfg.backend_size.unwrap_or(DEFAULT_BACKEND_SIZE)
            };
            let backend_file = open(
                "backend",
                &cfg.backend_path,
                backend_min,
                cfg.backend_direct,
            )?;
            let backend: Arc<dyn Device> = match &cfg.backend_device {
                Some(m) => Arc::new(Emulated::new(backend_file, "engine.backend_device", m)?),
                None => Arc::new(backend_file),
            };
            (backend, cache_cfg.clone())
        };
        if cache_cfg.capacity > backend.len() {
            return Err(EngineError::Setting {
                field: "cache.capacity",
                reason: format!(
                    "{} bytes is larger than the backend {} ({} bytes): a cache larger than what it caches",
                    cache_cfg.capacity,
                    cfg.backend_path.display(),
                    backend.len()
                ),
            });
        }
        let mut engine =
            Self::with_devices(&cache_cfg, cfg, cache_dev, backend).map_err(|e| match e {
                EngineError::Metadata(source) => EngineError::CacheMetadata {
                    path: cfg.cache_path.display().to_string(),
                    source,
                },
                e => e,
            })?;
        engine.notes = notes;
        engine.overrides = overrides;
        engine.cache_lock = Some(cache_lock);
        Ok(engine)
    }

    /// Settings the engine chose differently from the configuration, and why.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The same settings as `(config key, value the engine runs with)`, so that a result
    /// record can describe the run that was made (see [`Engine::notes`] for why).
    pub fn overrides(&self) -> &[(&'static str, String)] {
        &self.overrides
    }

    /// Starts the engine on given devices (tests use in-memory ones). The backend's size is
    /// the exported volume's size.
    pub fn with_devices(
        cache_cfg: &CacheConfig,
        cfg: &EngineConfig,
        cache_dev: Arc<dyn Device>,
        backend: Arc<dyn Device>,
    ) -> Result<Self, EngineError> {
        let geo = LineGeometry::new(cache_cfg.line_size).map_err(PolicyError::from)?;
        let total = (cache_cfg.capacity / geo.line_size()).min(u32::MAX as u64);
        let wanted = match cfg.lookup {
            Lookup::HtFg if cache_cfg.partitions.is_empty() => cfg.shards.max(1) as u64,
            _ => 1,
        };
        let n = wanted.min(total.max(1));
        let mut caches = Vec::new();
        let mut bases = Vec::new();
        let mut base = 0u64;
        for k in 0..n {
            let lines = total / n + u64::from(k < total % n);
            let mut c = Cache::new(&CacheConfig {
                capacity: lines * geo.line_size(),
                ..cache_cfg.clone()
            })?;
            c.set_journal(true);
            bases.push(base as u32);
            base += c.capacity_lines();
            caches.push(c);
        }
        let layout = Layout::new(base as u32, geo.line_size());
        let chunk_lines = (65536 / geo.line_size()).max(1);
        if cfg.format && !cfg.force_format {
            // Formatting must not silently drop dirty data: look first.
            if let Ok((_, _, rep)) = SlotTable::open(&*cache_dev, layout, false) {
                if rep.dirty_lines > 0 {
                    return Err(EngineError::Recovery(format!(
                        "engine.format: the cache device holds {} dirty lines; run `tiercache flush` first or set engine.force_format",
                        rep.dirty_lines
                    )));
                }
            }
        }
        let (table, found, recovery) = SlotTable::open(&*cache_dev, layout, cfg.format)?;
        for (slot, rec) in &found {
            let (vol, index) = rec.line.expect("recovered slots hold lines");
            // A record can pass its checksum and still name a line this backend cannot hold
            // (another backend's cache device, or a corrupt record): say so before anything
            // uses it, rather than panic or write back past the backend's end.
            let end = index
                .checked_add(1)
                .and_then(|n| n.checked_mul(geo.line_size()));
            if vol != 0 || end.is_none_or(|e| e > backend.len()) {
                return Err(EngineError::Recovery(format!(
                    "slot {slot}: its record names line {index} of volume {vol}, outside the \
                     backend ({} bytes, volume 0): the cache device belongs to another backend \
                     or its metadata is corrupt; nothing was changed",
                    backend.len()
                )));
            }
            let k = bases.partition_point(|&b| b <= *slot) - 1;
            let owner = shard_of(index, chunk_lines, n as usize);
            if owner != k {
                return Err(EngineError::Recovery(format!(
                    "slot {slot} holds line {index}, which {n} lock shards place in shard {owner}, \
                     not {k}: engine.lookup or engine.shards changed since the cache was written; \
                     start with the old setting (or engine.lookup = \"ht-cg\", which reads any \
                     layout) and run `tiercache flush` before changing it"
                )));
            }
            caches[k]
                .restore_line(*slot - bases[k], VolumeId(vol), index, rec.valid, rec.dirty)
                .map_err(|e| EngineError::Recovery(e.to_string()))?;
        }
        // Restoring touched every slot: nothing of it needs writing again.
        let mut discard = Vec::new();
        for c in &mut caches {
            c.drain_meta_updates(&mut discard);
        }
        let shards = caches
            .into_iter()
            .zip(bases)
            .map(|(cache, base)| Shard {
                core: Mutex::new(Core {
                    cache,
                    order: OrderingTable::default(),
                    updates: Vec::new(),
                }),
                base,
            })
            .collect();
        let (deferred_tx, deferred_rx) = mpsc::channel::<Box<Deferred>>();
        let inner = Arc::new(Inner {
            shards,
            chunk_lines,
            serial: Mutex::new(()),
            lookup: cfg.lookup,
            answer_reads_early: cfg.answer_reads_early,
            size: backend.len(),
            cache_is_slow: cfg.cache_device.is_some(),
            cache_dev,
            backend,
            table,
            layout,
            geo,
            counters: Counters::default(),
            latency: Latencies::new(),
            recovery,
            epoch: Instant::now(),
            in_flight: AtomicU64::new(0),
            backend_in_flight: AtomicU64::new(0),
            deferred_tx: Mutex::new(Some(deferred_tx)),
            deferred_pending: AtomicU64::new(0),
            last_foreground_ns: AtomicU64::new(0),
            last_write_kick_ns: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            wake: (Mutex::new(false), Condvar::new()),
            poll: Duration::from_nanos(cfg.flusher_poll_ns.max(1_000_000)),
            backend_unsynced: AtomicU64::new(u64::MAX),
            halted: OnceLock::new(),
        });
        let worker = inner.clone();
        let flusher = std::thread::Builder::new()
            .name("tiercache-flusher".into())
            .spawn(move || worker.flusher_loop())?;
        let rx = Arc::new(Mutex::new(deferred_rx));
        let mut finishers = Vec::new();
        for _ in 0..2 {
            let (inner, rx) = (inner.clone(), rx.clone());
            finishers.push(
                std::thread::Builder::new()
                    .name("tiercache-finisher".into())
                    .spawn(move || loop {
                        let task = lock(&rx).recv();
                        match task {
                            Ok(t) => {
                                let _ = inner.finish_deferred(t);
                            }
                            Err(_) => return,
                        }
                    })?,
            );
        }
        Ok(Self {
            inner,
            flusher: Mutex::new(Some(flusher)),
            finishers: Mutex::new(finishers),
            notes: Vec::new(),
            overrides: Vec::new(),
            cache_lock: None,
        })
    }

    /// Size of the exported volume in bytes.
    pub fn size(&self) -> u64 {
        self.inner.size
    }

    /// Reads `buf.len()` bytes at `offset`.
    pub fn read(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let len = buf.len() as u64;
        let client = Client::Read {
            volume: 0,
            offset,
            buf,
        };
        self.inner.request(Op::Read, offset, len, client, false)
    }

    /// Writes `data` at `offset`; with `fua` it is durable when this returns.
    pub fn write(&self, data: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        let client = Client::Write {
            volume: 0,
            offset,
            data,
        };
        self.inner
            .request(Op::Write, offset, data.len() as u64, client, fua)
    }

    /// Discards a range: later reads of it return unspecified data until it is written.
    pub fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner
            .request(Op::Trim, offset, len, Client::None, false)
    }

    /// Writes zeroes over a range (durable on return with `fua`).
    pub fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        const CHUNK: u64 = 1 << 20;
        let zeros = vec![0u8; CHUNK.min(len) as usize];
        let mut at = 0;
        while at < len {
            let n = CHUNK.min(len - at);
            self.write(&zeros[..n as usize], offset + at, fua && at + n == len)?;
            at += n;
        }
        Ok(())
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
            core.cache.access(&req, None).map_err(io::Error::other)?;
        }
        self.inner.sync_all()
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

    /// Checks the policy core's invariants (tests).
    pub fn audit(&self) {
        for sh in &self.inner.shards {
            lock(&sh.core).cache.audit();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

impl tiercache_nbd::BlockDevice for Engine {
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
    fn read_fast(&self, buf: &mut [u8], off: u64) -> Option<io::Result<()>> {
        // Hits on a fast cache device are cheap; on an emulated slow one they are not.
        if self.inner.cache_is_slow {
            return None;
        }
        let len = buf.len() as u64;
        let client = Client::Read {
            volume: 0,
            offset: off,
            buf,
        };
        self.inner
            .request_on_cache_alone(Op::Read, off, len, client)
    }
    fn write_fast(&self, data: &[u8], off: u64) -> Option<io::Result<()>> {
        if self.inner.cache_is_slow {
            return None;
        }
        let client = Client::Write {
            volume: 0,
            offset: off,
            data,
        };
        self.inner
            .request_on_cache_alone(Op::Write, off, data.len() as u64, client)
    }
    fn multi_conn(&self) -> bool {
        // Every connection shares this engine, and FLUSH syncs both devices whole.
        true
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
    (reads, writes)
}

/// The shard owning line `index`: chunks of `chunk_lines` lines spread by a multiplicative
/// hash, so a sequential run stays in one shard for a chunk.
fn shard_of(index: u64, chunk_lines: u64, shards: usize) -> usize {
    if shards == 1 {
        return 0;
    }
    let h = (index / chunk_lines).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((h >> 32) % shards as u64) as usize
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
    }
}

fn record_of(u: &MetaUpdate) -> SlotRecord {
    SlotRecord {
        line: u.line.map(|(v, i)| (v.0, i)),
        valid: u.valid,
        dirty: u.dirty,
    }
}

impl Inner {
    /// Whether every shard `op` of `len` bytes at `offset` touches would run it on the cache
    /// alone ([`Cache::would_hit`] for reads, [`Cache::would_absorb`] for writes).
    fn runs_on_cache_alone(&self, op: Op, offset: u64, len: u64) -> bool {
        if self.lookup == Lookup::Lt || offset.checked_add(len).is_none_or(|e| e > self.size) {
            return false;
        }
        self.pieces(offset, len).all(|(k, off, n)| {
            let req = Request {
                time_ns: 0,
                volume: VolumeId(0),
                op,
                offset: off,
                len: n,
            };
            let core = self.core(&self.shards[k]);
            match op {
                Op::Read => core.cache.would_hit(&req),
                _ => core.cache.would_absorb(&req),
            }
        })
    }

    /// `len` bytes at `offset` cut where the owning shard changes: (shard, offset, len).
    fn pieces(&self, offset: u64, len: u64) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
        let n = self.shards.len();
        let chunk = self.chunk_lines * self.geo.line_size();
        let end = offset + len;
        let mut at = offset;
        std::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let k = shard_of(at / self.geo.line_size(), self.chunk_lines, n);
            let start = at;
            if n == 1 {
                at = end;
            } else {
                while at < end && shard_of(at / self.geo.line_size(), self.chunk_lines, n) == k {
                    at = ((at / chunk) + 1) * chunk;
                }
                at = at.min(end);
            }
            Some((k, start, at - start))
        })
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Wakes the flusher after a write (new dirty data may cross a cleaning threshold), at
    /// most once per [`WRITE_KICK_INTERVAL_NS`]: a wake per write would have the flusher poll
    /// every shard tens of thousands of times a second, stealing the cores from the requests.
    fn kick_after_write(&self) {
        let now = self.now_ns();
        let last = self.last_write_kick_ns.load(Relaxed);
        if now.saturating_sub(last) >= WRITE_KICK_INTERVAL_NS
            && self
                .last_write_kick_ns
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
        {
            self.kick();
        }
    }

    fn kick(&self) {
        *lock(&self.wake.0) = true;
        self.wake.1.notify_one();
    }

    fn request(
        &self,
        op: Op,
        offset: u64,
        len: u64,
        client: Client<'_>,
        fua: bool,
    ) -> io::Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > self.size) {
            Counters::add(&self.counters.errors, 1);
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{offset}+{len} beyond the volume's {} bytes", self.size),
            ));
        }
        if len == 0 {
            return Ok(());
        }
        let started = Instant::now();
        let _serial = (self.lookup == Lookup::Lt).then(|| lock(&self.serial));
        self.in_flight.fetch_add(1, Relaxed);
        let mut client = client;
        let mut out = Ok(());
        for (k, off, n) in self.pieces(offset, len) {
            let req = Request {
                time_ns: self.now_ns(),
                volume: VolumeId(0),
                op,
                offset: off,
                len: n,
            };
            out = self
                .run_request(k, &req, sub_client(&mut client, off, n), false)
                .expect("unconditional requests always run");
            if out.is_err() {
                break;
            }
        }
        if out.is_ok() && fua {
            out = self.sync_all();
        }
        self.account(op, len, fua, started, &out);
        out
    }

    /// Runs a read or write only if the cache alone serves it (a hit, or a write-back write
    /// hit): checked and planned under one lock. `None`: not such a request; nothing was done.
    fn request_on_cache_alone(
        &self,
        op: Op,
        offset: u64,
        len: u64,
        client: Client<'_>,
    ) -> Option<io::Result<()>> {
        if self.lookup == Lookup::Lt
            || len == 0
            || offset.checked_add(len).is_none_or(|e| e > self.size)
        {
            return None;
        }
        let mut pieces = self.pieces(offset, len);
        let (k, _, _) = pieces.next()?;
        if pieces.next().is_some() {
            // Across shards: look first, then run it as any request.
            return self
                .runs_on_cache_alone(op, offset, len)
                .then(|| self.request(op, offset, len, client, false));
        }
        let started = Instant::now();
        self.in_flight.fetch_add(1, Relaxed);
        let req = Request {
            time_ns: self.now_ns(),
            volume: VolumeId(0),
            op,
            offset,
            len,
        };
        let out = self.run_request(k, &req, client, true);
        match &out {
            Some(o) => self.account(op, len, false, started, o),
            None => {
                self.in_flight.fetch_sub(1, Relaxed);
            }
        }
        out
    }

    /// Counts a finished request and its latency.
    fn account(&self, op: Op, len: u64, fua: bool, started: Instant, out: &io::Result<()>) {
        self.in_flight.fetch_sub(1, Relaxed);
        self.last_foreground_ns.store(self.now_ns(), Relaxed);
        let us = started.elapsed().as_micros() as u64;
        let c = &self.counters;
        match op {
            Op::Read => {
                Counters::add(&c.reads, 1);
                Counters::add(&c.read_bytes, len);
                Latencies::record(&self.latency.read, us);
            }
            Op::Write => {
                Counters::add(&c.writes, 1);
                Counters::add(&c.write_bytes, len);
                Counters::add(&c.fua_writes, fua as u64);
                Latencies::record(&self.latency.write, us);
                self.kick_after_write();
            }
            _ => Counters::add(&c.trims, 1),
        }
        if out.is_err() {
            Counters::add(&c.errors, 1);
        }
    }

    /// Plans `req` on shard `k` and executes it; with `only_on_cache`, only if the cache alone
    /// serves it (else `None`, nothing done).
    fn run_request(
        &self,
        k: usize,
        req: &Request,
        client: Client<'_>,
        only_on_cache: bool,
    ) -> Option<io::Result<()>> {
        if let Err(e) = self.check_halted() {
            return Some(Err(e));
        }
        let shard = &self.shards[k];
        let (plan, updates, mut ticket) = {
            let mut core = self.core(shard);
            if let Err(e) = self.check_halted() {
                // The lock was poisoned: nothing is decided from this core any more.
                return Some(Err(e));
            }
            if only_on_cache {
                let alone = match req.op {
                    Op::Read => core.cache.would_hit(req),
                    _ => core.cache.would_absorb(req),
                };
                if !alone {
                    return None;
                }
                // Run inline only what starts at once: a plan in flight on these lines' slots
                // (a flush job reading them, a fill) may take long, and the caller (a
                // connection's reader) would hold up every request behind it meanwhile.
                let line = self.geo.line_size();
                let writing = req.op != Op::Read;
                let busy = !core.order.is_empty()
                    && (req.offset / line..=(req.offset + req.len - 1) / line).any(|i| {
                        core.cache
                            .line_state(req.volume, i)
                            .is_some_and(|l| core.order.would_wait(cache_slot(l.slot), writing))
                    });
                if busy {
                    return None;
                }
            }
            let mut plan = Plan::new();
            if let Err(e) = core.cache.access(req, Some(&mut plan)) {
                return Some(Err(io_err(e)));
            }
            let mut updates = std::mem::take(&mut core.updates);
            updates.clear();
            core.cache.drain_meta_updates(&mut updates);
            let (r, w) = locations(&self.geo, &plan, &updates);
            let ticket = core.order.register(r, w);
            (plan, updates, ticket)
        };
        if ticket.wait_turn() > 0 {
            Counters::add(&self.counters.ordering_waits, 1);
        }
        // A read is answered once its critical ops are done; the rest (filling the cache with
        // what was read) finishes in the background, still holding the plan's ordering ticket.
        let may_defer = req.op == Op::Read && self.lookup != Lookup::Lt && self.answer_reads_early;
        let executed = if ticket.predecessor_failed() {
            // Decided on what that plan was to leave (a fill, say) that is not there.
            Err(io::Error::other(
                "an earlier request on the same cache lines failed",
            ))
        } else {
            self.execute(shard, &plan, &updates, client, may_defer)
        };
        let result = match executed {
            Ok(Executed::Deferred(progress)) => {
                let task = Box::new(Deferred {
                    shard: k,
                    req: *req,
                    plan,
                    updates,
                    ticket,
                    progress,
                });
                self.deferred_pending.fetch_add(1, Relaxed);
                match lock(&self.deferred_tx).as_ref().map(|tx| tx.send(task)) {
                    Some(Ok(())) => {
                        Counters::add(&self.counters.deferred_plans, 1);
                        return Some(Ok(()));
                    }
                    // Shutting down: finish it here.
                    Some(Err(mpsc::SendError(task))) => return Some(self.finish_deferred(task)),
                    None => unreachable!("the sender lives until shutdown"),
                }
            }
            Ok(Executed::Done) => Ok(()),
            Err(e) => {
                // The request's error is the one to report; forgetting is best effort.
                let _ = self.forget_failed(shard, req, &plan, &e);
                Err(e)
            }
        };
        let mut core = self.core(shard);
        core.order.end(ticket, result.is_ok());
        core.updates = updates;
        drop(core);
        Some(result)
    }

    /// Runs the rest of a plan whose request was already answered.
    fn finish_deferred(&self, task: Box<Deferred>) -> io::Result<()> {
        let Deferred {
            shard: k,
            req,
            plan,
            updates,
            ticket,
            progress,
        } = *task;
        let shard = &self.shards[k];
        let result = self
            .resume(shard, &plan, &updates, progress, false)
            .map(|_| ());
        if let Err(e) = &result {
            Counters::add(&self.counters.errors, 1);
            // The plan's error is the one to report; forgetting is best effort.
            let _ = self.forget_failed(shard, &req, &plan, e);
        }
        self.core(shard).order.end(ticket, result.is_ok());
        self.deferred_pending.fetch_sub(1, Relaxed);
        result
    }

    /// After a failed plan: the lines it filled may hold garbage; keep only dirty data. A
    /// plan that evicted a dirty line halts the engine instead (see [`Inner::halted`]).
    fn forget_failed(
        &self,
        shard: &Shard,
        req: &Request,
        plan: &Plan,
        failure: &io::Error,
    ) -> io::Result<()> {
        self.halt_if_evicting(plan, failure);
        if self.halted.get().is_some() {
            // Records written now could replace the one naming an evicted dirty line.
            return Ok(());
        }
        let line = self.geo.line_size();
        let mut core = self.core(shard);
        for op in plan
            .ops
            .iter()
            .filter(|o| o.device == Dev::Backend && o.len > 0)
        {
            for i in op.offset / line..=(op.offset + op.len - 1) / line {
                core.cache.drop_clean(op.volume, i);
            }
        }
        for i in req.offset / line..=(req.offset + req.len.max(1) - 1) / line {
            core.cache.drop_clean(req.volume, i);
        }
        let mut ups = Vec::new();
        core.cache.drain_meta_updates(&mut ups);
        for u in &ups {
            self.table
                .write(&*self.cache_dev, shard.base + u.slot, &record_of(u))?;
        }
        Ok(())
    }

    /// Where `op` of a plan of the shard starting at slot `base` lands on its device.
    fn device_addr(&self, base: u32, op: &DevOp) -> u64 {
        match op.device {
            Dev::Cache => self.layout.data_offset + base as u64 * self.geo.line_size() + op.offset,
            Dev::Backend => op.offset,
        }
    }

    /// Runs `plan`'s ops stage by stage and persists its metadata updates.
    fn execute(
        &self,
        shard: &Shard,
        plan: &Plan,
        updates: &[MetaUpdate],
        client: Client<'_>,
        may_defer: bool,
    ) -> io::Result<Executed> {
        let base = shard.base;
        // Slots whose durable record names another line than they will hold: that record must
        // be durably replaced before new data lands in the slot, or a crash would pair the old
        // line's name with the new line's bytes.
        let reassigned: Vec<u32> = updates
            .iter()
            .filter(|u| {
                let old = self.table.persisted_line(base + u.slot);
                old.is_some() && old != u.line.map(|(v, i)| (v.0, i))
            })
            .map(|u| u.slot)
            .collect();
        let progress = Progress {
            next: 0,
            scratch: Scratch::new(client),
            reassigned,
            wrote_back: false,
            backend_epoch: self.backend.epoch(),
        };
        self.resume(shard, plan, updates, progress, may_defer)
    }

    /// Runs `plan` from where `p` stands to the end, or (with `may_defer`) until only ops the
    /// client need not wait for are left.
    fn resume(
        &self,
        shard: &Shard,
        plan: &Plan,
        updates: &[MetaUpdate],
        p: Progress<'_>,
        may_defer: bool,
    ) -> io::Result<Executed> {
        let line = self.geo.line_size();
        let base = shard.base;
        let Progress {
            next: mut i,
            mut scratch,
            mut reassigned,
            mut wrote_back,
            backend_epoch,
        } = p;
        let ops = &plan.ops;
        while i < ops.len() {
            if may_defer && ops[i..].iter().all(|o| !o.critical) {
                return Ok(Executed::Deferred(Progress {
                    next: i,
                    scratch: scratch.detach(),
                    reassigned,
                    wrote_back,
                    backend_epoch,
                }));
            }
            // Plans under way when the engine halts stop at their next stage.
            self.check_halted()?;
            let stage = ops[i].stage;
            let end = i + ops[i..].iter().take_while(|o| o.stage == stage).count();
            if !reassigned.is_empty() {
                let mut due = Vec::new();
                for o in &ops[i..end] {
                    if o.device == Dev::Cache && o.kind == IoKind::Write {
                        let (a, b) = (o.offset / line, (o.offset + o.len - 1) / line);
                        reassigned.retain(|&s| {
                            let hit = (a..=b).contains(&(s as u64));
                            if hit {
                                due.push(s);
                            }
                            !hit
                        });
                    }
                }
                if !due.is_empty() {
                    if wrote_back {
                        // The evicted line's data must be safe on the backend first.
                        self.backend.sync_since(backend_epoch)?;
                    }
                    for &s in &due {
                        self.table
                            .write(&*self.cache_dev, base + s, &SlotRecord::EMPTY)?;
                    }
                    self.cache_dev.sync()?;
                    Counters::add(&self.counters.slot_invalidations, due.len() as u64);
                }
            }
            for o in &ops[i..end] {
                let dev: &dyn Device = match o.device {
                    Dev::Cache => {
                        Counters::add(&self.counters.cache_ops, 1);
                        &*self.cache_dev
                    }
                    Dev::Backend => {
                        Counters::add(&self.counters.backend_ops, 1);
                        &*self.backend
                    }
                };
                let addr = self.device_addr(base, o);
                let _busy =
                    (o.device == Dev::Backend).then(|| InFlight::enter(&self.backend_in_flight));
                match o.kind {
                    IoKind::Read => scratch.read(dev, o, addr)?,
                    IoKind::Write => {
                        dev.write_at(&scratch.data_for(o), addr)?;
                        if o.device == Dev::Backend {
                            wrote_back |= o.cause == OpCause::EvictFlush;
                            self.backend_unsynced.fetch_min(backend_epoch, Relaxed);
                        }
                    }
                    IoKind::Trim => dev.discard(addr, o.len)?,
                    IoKind::Flush => dev.sync()?,
                }
            }
            i = end;
        }
        scratch.finish();
        self.check_halted()?;
        for u in updates {
            self.table
                .write(&*self.cache_dev, base + u.slot, &record_of(u))?;
        }
        Counters::add(&self.counters.records_written, updates.len() as u64);
        Ok(Executed::Done)
    }

    /// Makes every completed request durable: the cache device, and the backend if
    /// requests wrote to it since its last sync.
    fn sync_all(&self) -> io::Result<()> {
        self.cache_dev.sync()?;
        let since = self.backend_unsynced.swap(u64::MAX, Relaxed);
        if since != u64::MAX {
            if let Err(e) = self.backend.sync_since(since) {
                // Writes that may have been lost with a connection are reported once, to
                // this flush (no later flush can cover them); other failures are retried.
                if self.backend.epoch() == since {
                    self.backend_unsynced.fetch_min(since, Relaxed);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// An error if the engine has halted.
    /// A shard's policy core. A thread that panicked holding it may have left it half updated
    /// (a line in the index but not the lists, a dirty bit without its record …): serving from
    /// it could return wrong data, so the engine halts (fail-stop) as it does when a dirty
    /// line's write-back fails, and every request from now on gets EIO. A restart recovers
    /// from the cache device's durable records, which the core never wrote half.
    fn core<'a>(&self, shard: &'a Shard) -> MutexGuard<'a, Core> {
        shard.core.lock().unwrap_or_else(|poisoned| {
            let _ = self.halted.set(
                "a thread panicked while holding a policy core's lock, whose state may be \
                 broken; restart to recover from the cache device's records"
                    .into(),
            );
            poisoned.into_inner()
        })
    }

    fn check_halted(&self) -> io::Result<()> {
        match self.halted.get() {
            Some(why) => Err(io::Error::other(format!("cache engine halted: {why}"))),
            None => Ok(()),
        }
    }

    /// Halts the engine if the failed `plan` evicted a dirty line: the core has forgotten the
    /// line, whose data may not have reached the backend (see [`Inner::halted`]).
    fn halt_if_evicting(&self, plan: &Plan, e: &io::Error) {
        if plan.ops.iter().any(|o| o.cause == OpCause::EvictFlush) {
            let why = format!(
                "writing back an evicted dirty line failed ({e}); its data is kept on the \
                 cache device and a restart recovers it"
            );
            if self.halted.set(why).is_ok() {
                self.kick();
            }
        }
    }

    fn executor_state(&self) -> ExecutorState {
        let now = self.now_ns();
        let busy = self.in_flight.load(Relaxed);
        ExecutorState {
            now,
            cache_idle_ns: if busy > 0 {
                0
            } else {
                now.saturating_sub(self.last_foreground_ns.load(Relaxed))
            },
            cache_queue_depth: busy as u32,
            backend_queue_depth: self.backend_in_flight.load(Relaxed) as u32,
        }
    }

    /// Registers flush jobs with their share of the metadata updates.
    fn register_jobs(&self, k: usize, core: &mut Core, jobs: Vec<FlushJob>) -> Vec<Job> {
        let mut ups = Vec::new();
        core.cache.drain_meta_updates(&mut ups);
        jobs.into_iter()
            .map(|job| {
                let mine: Vec<MetaUpdate> = ups
                    .iter()
                    .filter(|u| job.slots().contains(&u.slot))
                    .copied()
                    .collect();
                let (r, w) = locations(&self.geo, &job.plan, &mine);
                let t = core.order.register(r, w);
                Job {
                    shard: k,
                    job,
                    updates: mine,
                    ticket: t,
                }
            })
            .collect()
    }

    /// Runs one flush job: cache reads, backend writes, backend sync, then the lines' clean
    /// records, then `flush_done`.
    fn run_job(&self, work: Job) -> io::Result<()> {
        let Job {
            shard,
            job,
            updates,
            mut ticket,
        } = work;
        let shard = &self.shards[shard];
        let base = shard.base;
        // A job runs even after a failed predecessor: it writes back dirty sub-blocks, which
        // no fill writes, and a failed job puts its lines back dirty as they were, so it
        // completes its ticket without passing a failure on.
        ticket.wait_turn();
        let lines = job.lines() as u64;
        let epoch = self.backend.epoch();
        let mut result = (|| {
            let mut scratch = Scratch::new(Client::None);
            for o in &job.plan.ops {
                let addr = self.device_addr(base, o);
                match (o.device, o.kind) {
                    (Dev::Cache, IoKind::Read) => scratch.read(&*self.cache_dev, o, addr)?,
                    (Dev::Backend, IoKind::Write) => {
                        let _busy = InFlight::enter(&self.backend_in_flight);
                        self.backend.write_at(&scratch.data_for(o), addr)?
                    }
                    // A flush job reads the cache and writes the backend. Any other op would be
                    // a policy this executor does not know how to run: fail the job (its lines
                    // stay dirty) rather than skip the op and call the lines clean.
                    (device, kind) => {
                        debug_assert!(false, "flush job op {kind:?} on {device:?}");
                        return Err(io::Error::other(format!(
                            "flush job {} has a {kind:?} op on the {device:?} device, which the \
                             engine does not run in flush jobs",
                            job.id
                        )));
                    }
                }
            }
            // Clean only once the backend acknowledged a flush covering these writes.
            self.backend.sync_since(epoch)?;
            for u in &updates {
                self.table
                    .write(&*self.cache_dev, base + u.slot, &record_of(u))?;
            }
            io::Result::Ok(())
        })();
        let mut core = self.core(shard);
        if result.is_err() {
            // The lines' data is still only in the cache: dirty again (their records on disk
            // still say dirty unless the clean records were written, and then rewritten below).
            Counters::add(&self.counters.flush_job_failures, 1);
            core.cache.flush_failed(job);
        } else {
            core.cache.flush_done(job);
        }
        let mut ups = Vec::new();
        core.cache.drain_meta_updates(&mut ups);
        for u in &ups {
            if let Err(e) = self
                .table
                .write(&*self.cache_dev, base + u.slot, &record_of(u))
            {
                result = result.and(Err(e));
            }
        }
        core.order.complete(ticket);
        Counters::add(&self.counters.flush_jobs, 1);
        Counters::add(&self.counters.flushed_lines, lines);
        result
    }

    fn flusher_loop(&self) {
        // After a failed job (the backend is away), wait longer each time before trying again.
        let mut backoff = Duration::ZERO;
        while !self.stop.load(Relaxed) && self.halted.get().is_none() {
            let mut work = Vec::new();
            let mut next: Option<u64> = None;
            for (k, sh) in self.shards.iter().enumerate() {
                let mut core = self.core(sh);
                if self.halted.get().is_some() {
                    break;
                }
                let state = self.executor_state();
                let mut jobs = Vec::new();
                core.cache.clean(&state, &mut jobs);
                if let Some(t) = core.cache.next_clean_poll(&state) {
                    next = Some(next.map_or(t, |n| n.min(t)));
                }
                work.extend(self.register_jobs(k, &mut core, jobs));
            }
            let busy = !work.is_empty();
            let mut failed = false;
            for w in work {
                failed |= self.run_job(w).is_err();
            }
            if failed {
                backoff = (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
            } else if busy {
                backoff = Duration::ZERO;
                continue;
            }
            let wait = if failed {
                backoff
            } else {
                next.map(|t| Duration::from_nanos(t.saturating_sub(self.now_ns())))
                    .unwrap_or(self.poll)
                    .clamp(Duration::from_micros(200), self.poll)
            };
            let mut woken = lock(&self.wake.0);
            if !*woken {
                woken = self
                    .wake
                    .1
                    .wait_timeout(woken, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            *woken = false;
        }
    }

    fn flush_everything(&self) -> io::Result<()> {
        loop {
            self.check_halted()?;
            let mut work = Vec::new();
            // Lines in the flusher's jobs count as clean but are not on the backend yet, nor are
            // dirty lines evicted by reads whose plans finish in the background.
            let mut dirty = self.deferred_pending.load(Relaxed);
            for (k, sh) in self.shards.iter().enumerate() {
                let mut core = self.core(sh);
                self.check_halted()?;
                dirty += core.cache.dirty_lines() + u64::from(core.cache.jobs_in_flight());
                let mut jobs = Vec::new();
                core.cache.flush_all(&mut jobs);
                work.extend(self.register_jobs(k, &mut core, jobs));
            }
            if dirty == 0 {
                break;
            }
            if work.is_empty() {
                // Every dirty line is in a job of the flusher's: let it finish (or fail back to
                // dirty, to be taken up here).
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            // Every registered job must run (or fail back to dirty): a job dropped unrun would
            // leave its lines pinned, marked clean, and its ordering ticket open.
            let mut result = Ok(());
            for w in work {
                result = result.and(self.run_job(w));
            }
            result?;
        }
        self.sync_all()
    }

    fn stats(&self) -> EngineStats {
        let mut cache = tiercache_policy::CacheStats::default();
        let (mut capacity_lines, mut resident_lines, mut dirty_lines) = (0, 0, 0);
        for sh in &self.shards {
            let core = lock(&sh.core);
            cache.merge(core.cache.stats());
            capacity_lines += core.cache.capacity_lines();
            resident_lines += core.cache.resident_lines();
            dirty_lines += core.cache.dirty_lines();
        }
        let c = &self.counters;
        let g = |a: &AtomicU64| a.load(Relaxed);
        EngineStats {
            cache,
            capacity_lines,
            resident_lines,
            dirty_lines,
            reads: g(&c.reads),
            writes: g(&c.writes),
            read_bytes: g(&c.read_bytes),
            write_bytes: g(&c.write_bytes),
            fua_writes: g(&c.fua_writes),
            flushes: g(&c.flushes),
            trims: g(&c.trims),
            errors: g(&c.errors),
            ordering_waits: g(&c.ordering_waits),
            records_written: g(&c.records_written),
            slot_invalidations: g(&c.slot_invalidations),
            flush_jobs: g(&c.flush_jobs),
            flush_job_failures: g(&c.flush_job_failures),
            deferred_plans: g(&c.deferred_plans),
            flushed_lines: g(&c.flushed_lines),
            cache_ops: g(&c.cache_ops),
            backend_ops: g(&c.backend_ops),
            in_flight: self.in_flight.load(Relaxed),
            backend_in_flight: self.backend_in_flight.load(Relaxed),
            recovery: self.recovery.clone(),
            halted: self.halted.get().cloned(),
            backend_link: self.backend.link_stats(),
            read_latency: LatencySummary::of(&self.latency.read),
            write_latency: LatencySummary::of(&self.latency.write),
        }
    }
}
