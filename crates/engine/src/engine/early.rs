//! Serving reads before the scan ends (docs/design.md §13, "Serving before the scan ends"):
//! [`OpeningEngine`] runs the engine's open on a thread of its own and answers reads of lines
//! whose shards are already restored while the other shards are still scanned.
//!
//! The unit of readiness is the shard: a line can sit in any slot of its shard, so only a
//! core holding every line its shard's slots name can say where (or whether) a line is
//! cached, and in write-back mode an unscanned slot may hold the only copy of acknowledged
//! data. Before the open completes a read touching only ready shards is served from the
//! published cores (read-only: a hit reads the cache device, a miss reads the backend and
//! fills nothing); a read touching a shard not yet ready waits for it, and that shard is
//! scanned next. Writes, trims, flushes and zero-writes wait for the whole open, so nothing
//! is written to the cache device by a request until every shard is checked.

use super::*;
use crate::config::VolumeConfig;
use std::collections::VecDeque;

/// An engine being opened: reads are answered as soon as their shards are restored, anything
/// else once the whole open is done (docs/design.md §13, "Serving before the scan ends").
/// A recovery that fails after reads were served halts it: every request after that gets the
/// open's error ([`halted`](Self::halted)).
pub struct OpeningEngine {
    shared: Arc<Opening>,
    opener: Mutex<Option<JoinHandle<()>>>,
}

/// How far an [`OpeningEngine`]'s open is, and what it served before it ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EarlyStats {
    /// Shards of the cache (0 until the open chose to serve early: a journaled partition
    /// layout, a tenancy mode, a blank device or `engine.format` never does).
    pub shards: usize,
    /// Shards restored and served from (all of them once the cores moved to the engine).
    pub shards_ready: usize,
    /// Whether the whole open has ended (opened or failed).
    pub open_ended: bool,
    /// Reads answered before the open ended.
    pub early_reads: u64,
    /// Of those, lines read (in part or whole) from the cache device.
    pub early_hit_lines: u64,
    /// Reads that waited for a shard not yet ready.
    pub reads_waited: u64,
    /// Reads waiting now for a shard.
    pub reads_waiting: u64,
    /// Requests (writes, trims, flushes, zero-writes) waiting now for the whole open.
    pub others_waiting: u64,
}

/// What the opening thread and the requests share.
pub(super) struct Opening {
    /// Set when the open chose to serve early (the per-shard path, docs/design.md §13).
    view: OnceLock<View>,
    /// The open's end: the engine (shared, so a server can hold it beside this device), or
    /// why it failed (the engine then halts with it).
    done: OnceLock<Result<Arc<Engine>, EngineError>>,
    queue: Mutex<Queue>,
    /// Signalled (under `queue`'s lock) when a shard becomes ready, the view is set or the
    /// open ends: one condition variable for all, as waiters are few and shards 16 or so.
    changed: Condvar,
    early_reads: AtomicU64,
    early_hit_lines: AtomicU64,
    reads_waited: AtomicU64,
}

/// The scan's order: the shards taken, the next in order, those requests wait for.
#[derive(Default)]
struct Queue {
    taken: Vec<bool>,
    next: usize,
    wanted: VecDeque<usize>,
    reads_waiting: u64,
    others_waiting: u64,
}

/// What an early read needs: the devices, the volumes, where the data area starts, the
/// shards' layout, and each shard's restored core once ready.
struct View {
    cache_dev: Arc<dyn BlockDevice>,
    backend: Arc<dyn BlockDevice>,
    extents: Vec<(u32, u64, u64)>,
    data_offset: u64,
    geo: LineGeometry,
    shards: ShardLayout,
    /// Shard `k` is ready: its core holds every line its slots name (checked). One atomic
    /// load per line's shard on the early path.
    ready: Vec<AtomicBool>,
    /// The restored cores, until the open takes them into the engine (`None` again then).
    /// A mutex, not a read-write lock: a core is not `Sync` (its policies are boxed traits);
    /// early reads of one shard take turns, as the engine's own do.
    cores: Vec<Mutex<Option<Cache>>>,
}

/// What the open needs to serve early, handed down to the per-shard restore.
pub(super) struct EarlyDevices<'a> {
    pub opening: &'a Opening,
    pub cache_dev: Arc<dyn BlockDevice>,
    pub backend: Arc<dyn BlockDevice>,
}

impl<'a> EarlyDevices<'a> {
    /// Starts serving early on the per-shard path (restore.rs): the superblock, the partition
    /// log and the pass-through mark are read, no slot yet. The data area's offset is the
    /// on-device layout's (an older device keeps its wider records); a superblock that does
    /// not match `layout` serves nothing early (the scan's prelude then refuses it).
    pub(super) fn begin(
        self,
        dev: &dyn BlockDevice,
        layout: Layout,
        backends: super::restore::Backends<'_>,
        shards: &ShardLayout,
    ) -> Option<&'a Opening> {
        let on_disk = SlotTable::on_disk_layout(dev).ok()?;
        if on_disk.slots != layout.slots || on_disk.line_size != layout.line_size {
            return None;
        }
        let geo = LineGeometry::new(backends.line_size).ok()?;
        let view = View {
            cache_dev: self.cache_dev,
            backend: self.backend,
            extents: backends.extents.to_vec(),
            data_offset: on_disk.data_offset,
            geo,
            shards: shards.clone(),
            ready: (0..shards.shards())
                .map(|_| AtomicBool::new(false))
                .collect(),
            cores: (0..shards.shards()).map(|_| Mutex::new(None)).collect(),
        };
        self.opening.begin(view);
        Some(self.opening)
    }
}

/// How an early read went.
enum Served {
    Done,
    /// These shards are not ready yet.
    NotReady(Vec<usize>),
    /// A core moved to the engine meanwhile: the open is about to end.
    Taken,
}

/// The error every request gets once the open failed.
fn halted_error(e: &EngineError) -> io::Error {
    io::Error::other(format!(
        "the engine halted: its open failed after serving began: {e}"
    ))
}

impl Opening {
    fn new() -> Self {
        Self {
            view: OnceLock::new(),
            done: OnceLock::new(),
            queue: Mutex::new(Queue::default()),
            changed: Condvar::new(),
            early_reads: AtomicU64::new(0),
            early_hit_lines: AtomicU64::new(0),
            reads_waited: AtomicU64::new(0),
        }
    }

    /// Starts serving early from `view` (see [`EarlyDevices::begin`]).
    fn begin(&self, view: View) {
        let mut q = lock(&self.queue);
        q.taken = vec![false; view.ready.len()];
        let _ = self.view.set(view);
        self.changed.notify_all();
    }

    /// The next shard to scan: one a request waits for, else the next in order.
    pub(super) fn take_run(&self) -> Option<usize> {
        let mut q = lock(&self.queue);
        while let Some(k) = q.wanted.pop_front() {
            if !q.taken[k] {
                q.taken[k] = true;
                return Some(k);
            }
        }
        while q.next < q.taken.len() && q.taken[q.next] {
            q.next += 1;
        }
        let k = q.next;
        if k < q.taken.len() {
            q.taken[k] = true;
            return Some(k);
        }
        None
    }

    /// Shard `k`'s core holds every line its slots name, checked: reads may use it.
    pub(super) fn publish(&self, k: usize, core: Cache) {
        let view = self.view.get().expect("publish follows begin");
        *lock(&view.cores[k]) = Some(core);
        let _q = lock(&self.queue);
        view.ready[k].store(true, std::sync::atomic::Ordering::Release);
        self.changed.notify_all();
    }

    /// Shard `k`'s published core, for the engine (reads in flight on it finish first).
    pub(super) fn take_core(&self, k: usize) -> Option<Cache> {
        lock(&self.view.get()?.cores[k]).take()
    }

    fn finish(&self, r: Result<Engine, EngineError>) {
        let _q = lock(&self.queue);
        let _ = self.done.set(r.map(Arc::new));
        self.changed.notify_all();
    }

    /// Waits (counted in `count`) until `ready` holds, or the open ended.
    fn wait_until(&self, count: fn(&mut Queue) -> &mut u64, ready: impl Fn(&Self) -> bool) {
        let mut q = lock(&self.queue);
        *count(&mut q) += 1;
        while self.done.get().is_none() && !ready(self) {
            q = self.changed.wait(q).unwrap_or_else(|e| e.into_inner());
        }
        *count(&mut q) -= 1;
    }

    /// The engine once the whole open ended, waiting for it.
    fn whole(&self) -> io::Result<&Engine> {
        if self.done.get().is_none() {
            self.wait_until(|q| &mut q.others_waiting, |_| false);
        }
        match self.done.get().expect("the open ended") {
            Ok(e) => Ok(&**e),
            Err(e) => Err(halted_error(e)),
        }
    }

    /// The engine if the open ended with one (no wait): the fast paths forward to it.
    fn opened(&self) -> Option<&Engine> {
        match self.done.get() {
            Some(Ok(e)) => Some(&**e),
            _ => None,
        }
    }

    fn read(&self, volume: u32, buf: &mut [u8], offset: u64) -> io::Result<()> {
        loop {
            if let Some(done) = self.done.get() {
                return match done {
                    Ok(e) => e.read_volume(volume, buf, offset),
                    Err(e) => Err(halted_error(e)),
                };
            }
            let Some(view) = self.view.get() else {
                self.wait_until(|q| &mut q.others_waiting, |o| o.view.get().is_some());
                continue;
            };
            match view.serve(self, volume, buf, offset)? {
                Served::Done => {
                    self.early_reads.fetch_add(1, Relaxed);
                    return Ok(());
                }
                Served::NotReady(shards) => {
                    {
                        // Scanned next (docs/design.md §13): the recovery threads take
                        // wanted shards before the next in order.
                        let mut q = lock(&self.queue);
                        for &k in &shards {
                            if !q.taken[k] && !q.wanted.contains(&k) {
                                q.wanted.push_back(k);
                            }
                        }
                    }
                    self.reads_waited.fetch_add(1, Relaxed);
                    self.wait_until(
                        |q| &mut q.reads_waiting,
                        |_| shards.iter().all(|&k| view.is_ready(k)),
                    );
                }
                Served::Taken => self.wait_until(|q| &mut q.others_waiting, |_| false),
            }
        }
    }
}

impl View {
    fn is_ready(&self, k: usize) -> bool {
        self.ready[k].load(std::sync::atomic::Ordering::Acquire)
    }

    /// Serves a read of `volume` from ready shards' cores: each line's valid sub-blocks from
    /// the cache device, the rest from the backend (a clean or absent sub-block's backend copy
    /// is current: every dirty line of a ready shard is in its core). Fills nothing.
    fn serve(
        &self,
        opening: &Opening,
        volume: u32,
        buf: &mut [u8],
        offset: u64,
    ) -> io::Result<Served> {
        let len = buf.len() as u64;
        let Some(&(_, vbase, vsize)) = self.extents.iter().find(|e| e.0 == volume) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("volume {volume} is not served"),
            ));
        };
        if offset.checked_add(len).is_none_or(|end| end > vsize) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("read of {len} bytes at {offset} past volume {volume}'s end ({vsize})"),
            ));
        }
        if len == 0 {
            return Ok(Served::Done);
        }
        let line = self.geo.line_size();
        let (first, last) = (offset / line, (offset + len - 1) / line);
        let shard = |i: u64| self.shards.shard_of(VolumeId(volume), i);
        let mut waiting: Vec<usize> = (first..=last)
            .map(shard)
            .filter(|&k| !self.is_ready(k))
            .collect();
        if !waiting.is_empty() {
            waiting.sort_unstable();
            waiting.dedup();
            return Ok(Served::NotReady(waiting));
        }
        let sub = self.geo.sub_size();
        for i in first..=last {
            let k = shard(i);
            // Held across the device reads: the engine takes the core (and may then reuse
            // the slot) only after this read is done.
            let core = lock(&self.cores[k]);
            let Some(cache) = core.as_ref() else {
                return Ok(Served::Taken);
            };
            let state = cache.line_state(VolumeId(volume), i);
            let (lo, hi) = (offset.max(i * line), (offset + len).min((i + 1) * line));
            let mut at = lo;
            let mut hit = false;
            while at < hi {
                // A run of sub-blocks from one source.
                let valid = |a: u64| state.is_some_and(|s| s.valid >> ((a % line) / sub) & 1 == 1);
                let from_cache = valid(at);
                let mut end = (at / sub + 1) * sub;
                while end < hi && valid(end) == from_cache {
                    end += sub;
                }
                let end = end.min(hi);
                let piece = &mut buf[(at - offset) as usize..(end - offset) as usize];
                match state.filter(|_| from_cache) {
                    Some(s) => {
                        let slot = u64::from(self.shards.base(k)) + u64::from(s.slot);
                        self.cache_dev
                            .read_at(piece, self.data_offset + slot * line + at % line)?;
                        hit = true;
                    }
                    None => self.backend.read_at(piece, vbase + at)?,
                }
                at = end;
            }
            if hit {
                opening.early_hit_lines.fetch_add(1, Relaxed);
            }
        }
        Ok(Served::Done)
    }
}

impl Engine {
    /// Opens the engine as [`open_volumes`](Self::open_volumes) does, on a thread of its own,
    /// and returns at once: reads are answered as soon as their shards are restored, other
    /// requests once the whole open is done (docs/design.md §13, "Serving before the scan
    /// ends"). An open that fails makes every request fail with its error.
    pub fn open_early(
        cache_cfg: &CacheConfig,
        cfg: &EngineConfig,
        volumes: &[VolumeConfig],
    ) -> OpeningEngine {
        let (cache_cfg, cfg, volumes) = (cache_cfg.clone(), cfg.clone(), volumes.to_vec());
        OpeningEngine::start(move |o| Self::open_volumes_with(&cache_cfg, &cfg, &volumes, Some(o)))
    }

    /// As [`open_early`](Self::open_early) on given devices (as
    /// [`with_devices`](Self::with_devices)).
    pub fn with_devices_early(
        cache_cfg: &CacheConfig,
        cfg: &EngineConfig,
        cache_dev: Arc<dyn BlockDevice>,
        backend: Arc<dyn BlockDevice>,
    ) -> OpeningEngine {
        let (cache_cfg, cfg) = (cache_cfg.clone(), cfg.clone());
        OpeningEngine::start(move |o| {
            let extents = vec![(0, 0, backend.size())];
            Self::open_devices(&cache_cfg, &cfg, cache_dev, backend, extents, true, Some(o))
        })
    }
}

impl OpeningEngine {
    fn start(open: impl FnOnce(&Opening) -> Result<Engine, EngineError> + Send + 'static) -> Self {
        let shared = Arc::new(Opening::new());
        let o = shared.clone();
        let opener = std::thread::Builder::new()
            .name("tiercache-open".into())
            .spawn(move || {
                // A panic must still end the open, or requests would wait for ever.
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| open(&o)))
                    .unwrap_or_else(|p| {
                        let why = p
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        Err(EngineError::Recovery(format!("the open panicked: {why}")))
                    });
                o.finish(r);
            })
            .map(Some)
            .unwrap_or_else(|e| {
                shared.finish(Err(EngineError::Io(e)));
                None
            });
        Self {
            shared,
            opener: Mutex::new(opener),
        }
    }

    /// Reads `buf.len()` bytes at `offset` of the first volume (see [`Engine::read`]).
    pub fn read(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        // Once open, one atomic load (the `OnceLock`'s) before the engine's own path.
        if let Some(Ok(e)) = self.shared.done.get() {
            return e.read(buf, offset);
        }
        let volume = self.primary()?;
        self.shared.read(volume, buf, offset)
    }

    /// Reads from `volume` (see [`Engine::read_volume`]).
    pub fn read_volume(&self, volume: u32, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.shared.read(volume, buf, offset)
    }

    /// The first volume (waits until the open has opened the devices).
    fn primary(&self) -> io::Result<u32> {
        if let Some(v) = self.shared.view.get() {
            return Ok(v.extents[0].0);
        }
        let o = &self.shared;
        o.wait_until(|q| &mut q.others_waiting, |o| o.view.get().is_some());
        match (o.view.get(), o.done.get()) {
            (Some(v), _) => Ok(v.extents[0].0),
            (None, Some(Ok(e))) => Ok(e.primary()),
            (None, Some(Err(e))) => Err(halted_error(e)),
            (None, None) => unreachable!("waited for one or the other"),
        }
    }

    /// The engine once the whole open is done (waits for it), or the open's error.
    pub fn wait(&self) -> Result<&Engine, &EngineError> {
        if self.shared.done.get().is_none() {
            self.shared.wait_until(|q| &mut q.others_waiting, |_| false);
        }
        match self.shared.done.get().expect("the open ended") {
            Ok(e) => Ok(e),
            Err(e) => Err(e),
        }
    }

    /// Waits until the open serves early (its devices opened, the scan begun) or has ended;
    /// the open's error if it failed. A server calls it before it listens, so a bad device
    /// or config fails the start as an ordinary open does.
    pub fn wait_begun(&self) -> Result<(), &EngineError> {
        let o = &self.shared;
        if o.view.get().is_none() && o.done.get().is_none() {
            o.wait_until(|q| &mut q.others_waiting, |o| o.view.get().is_some());
        }
        match o.done.get() {
            Some(Err(e)) => Err(e),
            _ => Ok(()),
        }
    }

    /// The engine, shared, if the whole open has ended with one (no wait): for what needs
    /// the engine beside this device (a server's control socket and stats).
    pub fn engine(&self) -> Option<Arc<Engine>> {
        match self.shared.done.get()? {
            Ok(e) => Some(e.clone()),
            Err(_) => None,
        }
    }

    /// The engine, once the whole open is done (waits for it). Fails if a clone taken with
    /// [`engine`](Self::engine) still shares it.
    pub fn into_engine(self) -> Result<Engine, EngineError> {
        if let Some(h) = lock(&self.opener).take() {
            let _ = h.join();
        }
        let shared = self.shared.clone();
        drop(self);
        let done = match Arc::try_unwrap(shared) {
            Ok(o) => o.done.into_inner().expect("the open ended"),
            Err(_) => unreachable!("only the opener shared it, and it ended"),
        };
        Arc::try_unwrap(done?).map_err(|_| {
            EngineError::Recovery("the engine is still shared (OpeningEngine::engine)".into())
        })
    }

    /// The open's error once it failed late: every request gets it (the halt, as
    /// [`Engine::halted`] after a failed eviction). The engine's own halt once open.
    pub fn halted(&self) -> Option<String> {
        match self.shared.done.get()? {
            Ok(e) => e.halted().map(str::to_string),
            Err(e) => Some(e.to_string()),
        }
    }

    /// How far the open is (see [`EarlyStats`]).
    pub fn early_stats(&self) -> EarlyStats {
        let o = &self.shared;
        let q = lock(&o.queue);
        let (shards, ready) = o.view.get().map_or((0, 0), |v| {
            let ready = (0..v.ready.len()).filter(|&k| v.is_ready(k)).count();
            (v.ready.len(), ready)
        });
        EarlyStats {
            shards,
            shards_ready: ready,
            open_ended: o.done.get().is_some(),
            early_reads: o.early_reads.load(Relaxed),
            early_hit_lines: o.early_hit_lines.load(Relaxed),
            reads_waited: o.reads_waited.load(Relaxed),
            reads_waiting: q.reads_waiting,
            others_waiting: q.others_waiting,
        }
    }

    /// Whether shard `k` is ready (its lines restored and checked), or the open has ended.
    pub fn shard_ready(&self, k: usize) -> bool {
        self.shared.done.get().is_some() || self.shared.view.get().is_some_and(|v| v.is_ready(k))
    }

    /// Writes `data` at `offset` (waits for the whole open; see [`Engine::write`]).
    pub fn write(&self, data: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        self.shared.whole()?.write(data, offset, fua)
    }
}

impl Drop for OpeningEngine {
    fn drop(&mut self) {
        // The open runs to its end (its engine then shuts down with the last reference).
        if let Some(h) = lock(&self.opener).take() {
            let _ = h.join();
        }
    }
}

impl BlockDevice for OpeningEngine {
    fn size(&self) -> u64 {
        let o = &self.shared;
        if o.view.get().is_none() && o.done.get().is_none() {
            o.wait_until(|q| &mut q.others_waiting, |o| o.view.get().is_some());
        }
        match (o.view.get(), o.done.get()) {
            (Some(v), _) => v.extents[0].2,
            (None, Some(Ok(e))) => e.size(),
            _ => 0,
        }
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.read(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        self.write(data, off, fua)
    }
    fn flush(&self) -> io::Result<()> {
        self.shared.whole()?.flush()
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        self.shared.whole()?.trim(off, len)
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> io::Result<()> {
        self.shared.whole()?.write_zeroes(off, len, fua)
    }
    fn multi_conn(&self) -> bool {
        true
    }
    // Once the open ended, every path is the engine's own (its hits served on the
    // connection's thread, io_uring reads); before, a read goes through `read_at` (the early
    // path, on a worker) and anything else waits for the whole open (docs/design.md §13).
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<io::Result<()>> {
        match self.shared.opened() {
            Some(e) => e.read_many(reads),
            None => reads.iter_mut().map(|(o, b)| self.read(b, *o)).collect(),
        }
    }
    fn write_many(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        self.shared.whole()?.write_many(writes)
    }
    fn read_fast(&self, buf: &mut [u8], off: u64) -> Option<io::Result<()>> {
        self.shared.opened()?.read_fast(buf, off)
    }
    fn read_fast_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<Option<io::Result<()>>> {
        match self.shared.opened() {
            Some(e) => e.read_fast_many(reads),
            None => reads.iter().map(|_| None).collect(),
        }
    }
    fn write_fast(&self, data: &[u8], off: u64) -> Option<io::Result<()>> {
        self.shared.opened()?.write_fast(data, off)
    }
    fn hits_wait_for_device(&self) -> bool {
        self.shared
            .opened()
            .is_some_and(|e| e.hits_wait_for_device())
    }
    fn start_reads(&self, reads: &[(u64, u64, u32)]) -> Vec<Option<io::Result<()>>> {
        match self.shared.opened() {
            Some(e) => e.start_reads(reads),
            None => reads.iter().map(|_| None).collect(),
        }
    }
    fn reap_started(
        &self,
        wait: tiercache_blockdev::ReapWait,
        f: &mut dyn FnMut(u64, io::Result<&[u8]>),
    ) -> usize {
        // Reads are started only once the open ended, so none is in flight before.
        self.shared.opened().map_or(0, |e| e.reap_started(wait, f))
    }
    fn epoch(&self) -> u64 {
        // Read before a write, which waits for the open anyway: the engine's own counter.
        self.shared.whole().map_or(0, |e| e.epoch())
    }
    fn flush_since(&self, epoch: u64) -> io::Result<()> {
        self.shared.whole()?.flush_since(epoch)
    }
    fn allocation(&self, off: u64, len: u64) -> io::Result<Vec<tiercache_blockdev::Extent>> {
        self.shared.whole()?.allocation(off, len)
    }
    fn cache_state(
        &self,
        off: u64,
        len: u64,
    ) -> Option<io::Result<Vec<tiercache_blockdev::Extent>>> {
        match self.shared.whole() {
            Ok(e) => e.cache_state(off, len),
            Err(e) => Some(Err(e)),
        }
    }
    fn takes_demotes(&self) -> bool {
        // The engine is a cache level (it always takes demotes); a demote, as a write,
        // waits for the whole open.
        true
    }
    fn demote_at(
        &self,
        data: &[u8],
        off: u64,
        still_valid: &dyn Fn() -> bool,
    ) -> io::Result<tiercache_blockdev::DemoteReply> {
        self.shared.whole()?.demote_at(data, off, still_valid)
    }
    fn fast_zeroes(&self) -> bool {
        // Asked for a fast zero-write only, which waits for the open anyway.
        self.shared.whole().is_ok_and(|e| e.fast_zeroes())
    }
}
