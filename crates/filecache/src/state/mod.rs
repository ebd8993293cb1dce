//! The mounted cache's state and its data path: executing the core's [`DevOp`] plans on a
//! real block file (the cache) and real store files, with the journal that makes dirty data
//! survive a crash. The FUSE glue ([`crate::fs`]) only translates requests into these calls.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::core::{BlockKey, FileCache, FileId, Variant};
use crate::journal::Journal;
use crate::recovery::{pread_full, recover};

mod caps;
mod checkpoint;
#[cfg(test)]
mod checkpoint_tests;
mod cleaner;
mod degrade;
#[cfg(test)]
mod delete_tests;
mod direct;
mod exec;
mod group_commit;
mod hits;
mod image;
mod inline;
mod namespace;
mod nodes;
mod passthrough;
#[cfg(test)]
mod powerloss_tests;
mod slots;
mod space;
mod staged;
#[cfg(test)]
mod staged_tests;
mod stats;
#[cfg(test)]
mod tests;
mod watch;
use crate::store::{CacheDir, StoreIdentity, StoreLatency};
pub use degrade::{decayed_score, OnError};
pub use direct::StoreIo;
pub use group_commit::{SyncCounter, SyncMark};
pub use hits::{HitPlan, HitRead};
use space::{check_journal_room, reserve_blocks};
pub use staged::{read_unlocked, write_unlocked, Staged, StoreFill};
pub use stats::MountStats;
pub use watch::Invalidation;

/// Root's node id in FUSE.
pub const ROOT: u64 = 1;

/// Store files kept open beyond those with open handles.
const OPEN_FILES_KEPT: usize = 256;

/// What a mount runs: store, cache, geometry, variant.
#[derive(Debug, Clone)]
pub struct MountConfig {
    /// The slow store directory.
    pub store: PathBuf,
    /// The cache directory (on fast storage): block file, journal.
    pub cache_dir: PathBuf,
    /// Cache capacity in blocks (0: no cache, every operation goes to the store).
    pub capacity_blocks: u32,
    /// Cache block size in bytes.
    pub block_size: u32,
    /// Write policy and allocation.
    pub variant: Variant,
    /// Latency added to each store operation.
    pub latency: StoreLatency,
    /// Open files with FOPEN_DIRECT_IO: every read and write reaches the mount (no kernel page
    /// cache), so each request up to the FUSE maximum is atomic against the others.
    pub direct_io: bool,
    /// Let the kernel cache what it can (docs/design.md §4.9): pages kept across opens
    /// (FOPEN_KEEP_CACHE) and written back by the kernel in large requests (FUSE writeback
    /// caching), as the mount is the store's only writer. Writes then reach the mount at
    /// close, fsync, or the kernel's own write-back rather than at each `write`; fsync'd
    /// data is as durable as before. Ignored with `direct_io`.
    pub kernel_cache: bool,
    /// The background cleaner's policy (docs/design.md §4.6, §4.9): when dirty blocks are
    /// written back without waiting for eviction, fsync or unmount. `None`: never.
    pub cleaning: tiercache_policy::CleaningConfig,
    /// When cache-device errors switch the mount to pass-through (docs/design.md §11).
    pub on_error: OnError,
}

impl MountConfig {
    /// A mount of `store` cached in `cache_dir` (`capacity_blocks` blocks of `block_size`
    /// bytes, `variant`) with no added store latency, the kernel's caches on, no direct
    /// I/O, no background cleaner (dirty blocks stay until eviction, fsync or flush: what
    /// tests of the data path want; `tiercache mount` runs the lazy cleaner) and the default
    /// error policy. Anything else by struct update:
    /// `MountConfig { direct_io: true, ..MountConfig::new(..) }`.
    pub fn new(
        store: PathBuf,
        cache_dir: PathBuf,
        capacity_blocks: u32,
        block_size: u32,
        variant: Variant,
    ) -> Self {
        Self {
            store,
            cache_dir,
            capacity_blocks,
            block_size,
            variant,
            latency: StoreLatency::default(),
            direct_io: false,
            kernel_cache: true,
            cleaning: tiercache_policy::CleaningConfig::None,
            on_error: OnError::default(),
        }
    }
}

/// A node the mount knows: its store path (relative) and, for files, the authoritative size.
#[derive(Debug)]
pub struct Node {
    /// Path relative to the store root ("" for the root).
    pub path: PathBuf,
    /// Whether it is a regular file (the only kind with cached data).
    pub regular: bool,
    /// File size (regular files): the store's size plus data not yet written back.
    pub size: u64,
    /// Unlinked while open: served from its open store file, uncached.
    pub unlinked: bool,
    /// Open handles.
    pub handles: u32,
    /// The store file, while open.
    pub file: Option<Arc<File>>,
    /// Attributes last read from the store (size aside), served to getattr without a store
    /// round trip: the mount is the store's only writer, and its own changes update them.
    pub attr: Option<fuser::FileAttr>,
    /// Orders a truncate against this file's uncached reads and writes in flight, which run
    /// without the mount's lock ([`StoreIo`]).
    pub io: Arc<std::sync::RwLock<()>>,
    /// The file's content generation: a value of the mount's one growing counter, taken anew
    /// at every change of the file's content (write, truncate) and at the node's creation, so
    /// store data read for the file outside the lock is used only if no change came between
    /// (docs/design.md §14, "The data path off the lock").
    pub data_gen: u64,
}

/// Everything a mount holds, behind one lock.
pub struct State {
    cfg: MountConfig,
    core: FileCache,
    /// Known nodes by FUSE id (= store inode number, the root excepted).
    pub nodes: HashMap<u64, Node>,
    /// The store root's inode number (mapped to [`ROOT`]).
    pub root_ino: u64,
    /// The store root's device: a node is known by its inode number, unique only within one
    /// file system, so nothing on another device is served.
    pub root_dev: u64,
    /// Names in each directory listed so far (the mount is the store's only writer, and its
    /// own namespace operations keep these current): lookups of missing names and of known
    /// files need no store round trip.
    pub dirs: HashMap<u64, HashMap<std::ffi::OsString, Option<u64>>>,
    /// The block file (shared with reads of cached blocks made off the lock, `hits.rs`).
    blocks: Option<Arc<File>>,
    /// Physical slots being read off the lock: a write to one waits until it is let go.
    pins: Arc<hits::Pins>,
    journal: Option<Journal>,
    /// Valid bytes of each (core) slot.
    valid: Vec<u32>,
    /// Where each of the core's slots lies in the block file, which has spare slots more: a
    /// journaled dirty block's new version is written to a spare, and their places swapped.
    slots: slots::Slots,
    /// Per (core) slot, whether the journal's last record for it maps a dirty block (its
    /// content is then the recoverable version and must not be overwritten in place), and if
    /// so the sequence number of the first record of the block since it was last clean: once
    /// an fsync made that record durable, the block's data is promised, so giving it up in
    /// favour of the store (a `Clean` after a write-back) needs the store's copy durable
    /// first.
    journaled: Vec<Option<u64>>,
    /// Journal records numbered below this were synced by an fsync: the versions they name
    /// are promised to survive a power loss (records a sync of the mount's own made durable
    /// promise nothing).
    promised: u64,
    /// Full syncs begun (numbered from 1), and the number of the last that completed
    /// (group commit, `group_commit.rs`).
    syncs_begun: Arc<std::sync::atomic::AtomicU64>,
    last_full_sync: u64,
    /// `FUSE_FLUSH` requests received, counted without the lock (`MountStats::flushes`).
    flushes: Arc<std::sync::atomic::AtomicU64>,
    stats: MountStats,
    unsynced_store: HashSet<FileId>,
    /// Files with a `Clean` record not yet synced: a power loss may drop it and keep an older
    /// `Map` of the file, so deleting one of them needs its `Deleted` record durable.
    cleaned_unsynced: HashSet<FileId>,
    open_files: usize,
    /// When the mount opened: the cleaner's clock starts there.
    opened: std::time::Instant,
    /// Uncached store data operations in flight now, and the most seen at once.
    in_flight: Arc<(std::sync::atomic::AtomicU64, std::sync::atomic::AtomicU64)>,
    /// When the last data request (read, write, truncate, fsync) arrived, on that clock.
    last_request_ns: u64,
    /// Faults injected into the block file (and the journal's own copy), for tests.
    faults: Option<Arc<crate::faults::CacheFaults>>,
    /// Cache-device errors and the degraded state.
    health: degrade::Health,
    /// Dirty blocks the core no longer tracks, set aside where they lie.
    stranded: HashMap<BlockKey, degrade::Stranded>,
    /// The ops of the plan being executed whose `Clean` is recorded (write-backs done).
    exec_cleaned: HashSet<usize>,
    /// The op of the plan being executed that runs (or failed).
    exec_failed_at: usize,
    /// Validators of the store files whose blocks the checkpoint restored, until the mount
    /// meets each file (docs/design.md §15).
    warm: HashMap<FileId, checkpoint::Validator>,
    /// This mount wrote a checkpoint that still describes the blocks file.
    checkpoint_on_disk: bool,
    /// The last content generation given ([`Node::data_gen`]).
    last_gen: u64,
    /// Store data of blocks read outside the lock for the request being executed
    /// (`staged.rs`): a `Fill` of one of them copies it instead of reading the store.
    prefetched: HashMap<BlockKey, Vec<u8>>,
    /// Tests: store reads ahead of one file wait for this.
    #[cfg(test)]
    hold: Option<Arc<staged::Hold>>,
    /// Changes to the store behind the mount (`--watch-store`, docs/design.md §14).
    watch: watch::Watch,
    /// Tests: the next checkpoint crashes after writing this many bytes.
    #[cfg(test)]
    checkpoint_crash_after: Option<usize>,
    _lock: File,
}

/// A block the cache cannot key (past its blocks per file or files, design.md §4.9): the file
/// is too big for the cache, EFBIG.
/// Checked for a request's last block before any block goes to the core, so a refusal (of the
/// first block only: a file is mapped whole) leaves no decision unexecuted.
fn too_big(_: crate::core::FileCacheError) -> io::Error {
    io::Error::from_raw_os_error(libc::EFBIG)
}

/// A write or truncate changed the file: its modification and change times are now.
pub(super) fn touch(node: &mut Node) {
    if let Some(attr) = node.attr.as_mut() {
        let now = std::time::SystemTime::now();
        attr.mtime = now;
        attr.ctime = now;
    }
}

impl State {
    /// Opens the cache (recovering dirty blocks a crash left) over the store.
    pub fn open(cfg: MountConfig) -> io::Result<State> {
        let md = std::fs::metadata(&cfg.store)?;
        if !md.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("store {} is not a directory", cfg.store.display()),
            ));
        }
        if cfg.block_size < 512 || !cfg.block_size.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "block size {} must be a power of two of at least 512",
                    cfg.block_size
                ),
            ));
        }
        let cache = CacheDir::new(&cfg.cache_dir);
        let lock = cache.lock()?;
        // A cache directory with nothing journaled may serve another store (its blocks are
        // stale either way); one with dirty blocks only the store they belong to.
        let recovered = if crate::journal::replay(&cache.journal())?.is_empty() {
            0
        } else {
            recover(&cfg.store, &cache)?
        };
        // The journal is empty now: the cache directory belongs to this store from here on.
        let identity = StoreIdentity::of(&cfg.store)?;
        if cache.read_store_identity()?.as_ref() != Some(&identity) {
            cache.write_store_identity(&identity)?;
        }
        let (blocks, journal) = if cfg.capacity_blocks > 0 {
            cache.write_block_size(cfg.block_size)?;
            let blocks = OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(cache.blocks())?;
            let total = cfg.capacity_blocks + slots::spare_slots(cfg.capacity_blocks);
            let len = total as u64 * cfg.block_size as u64;
            // The block file's blocks still to take count against the journal's room.
            let to_take = len.saturating_sub(blocks.metadata()?.blocks() * 512);
            check_journal_room(
                &cache.journal(),
                &cfg.cache_dir,
                cfg.capacity_blocks,
                to_take,
            )?;
            reserve_blocks(&blocks, &cache.blocks(), &cfg.cache_dir, len)?;
            blocks.set_len(len)?;
            (
                Some(Arc::new(blocks)),
                Some(Journal::create(&cache.journal())?),
            )
        } else {
            (None, None)
        };
        let mut nodes = HashMap::new();
        nodes.insert(
            ROOT,
            Node {
                path: PathBuf::new(),
                regular: false,
                size: 0,
                unlinked: false,
                handles: 0,
                file: None,
                attr: None,
                io: Arc::default(),
                data_gen: 0,
            },
        );
        let stats = MountStats {
            recovered_blocks: recovered,
            ..MountStats::default()
        };
        // Only a write-back cache has anything to clean.
        let cleaning = if cfg.variant.is_write_back() {
            cfg.cleaning.clone()
        } else {
            tiercache_policy::CleaningConfig::None
        };
        let core = FileCache::with_cleaning(
            cfg.capacity_blocks,
            cfg.variant,
            cfg.block_size as u64,
            cleaning,
        )
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let mut st = State {
            core,
            valid: vec![0; cfg.capacity_blocks as usize],
            slots: slots::Slots::new(cfg.capacity_blocks),
            journaled: vec![None; cfg.capacity_blocks as usize],
            promised: 0,
            syncs_begun: Arc::default(),
            last_full_sync: 0,
            flushes: Arc::default(),
            root_ino: md.ino(),
            root_dev: md.dev(),
            dirs: HashMap::new(),
            cfg,
            nodes,
            blocks,
            journal,
            stats,
            unsynced_store: HashSet::new(),
            cleaned_unsynced: HashSet::new(),
            open_files: 0,
            opened: std::time::Instant::now(),
            in_flight: Arc::default(),
            last_request_ns: 0,
            faults: None,
            health: degrade::Health::default(),
            stranded: HashMap::new(),
            exec_cleaned: HashSet::new(),
            exec_failed_at: 0,
            warm: HashMap::new(),
            checkpoint_on_disk: false,
            last_gen: 0,
            pins: Arc::default(),
            prefetched: HashMap::new(),
            #[cfg(test)]
            hold: None,
            watch: watch::Watch::default(),
            #[cfg(test)]
            checkpoint_crash_after: None,
            _lock: lock,
        };
        st.restore_checkpoint()?;
        Ok(st)
    }

    /// The configuration.
    pub fn config(&self) -> &MountConfig {
        &self.cfg
    }

    /// Counters now.
    pub fn stats(&self) -> MountStats {
        let mut s = self.stats.clone();
        s.core = self.core.stats();
        s.dirty_blocks = self.core.dirty_blocks();
        s.store_ops_in_flight_peak = self.in_flight.1.load(std::sync::atomic::Ordering::Relaxed);
        s.cached_blocks = self.core.len() as u64;
        s.cached_files = self.core.cached_files() as u64;
        s.flushes = self.flushes.load(std::sync::atomic::Ordering::Relaxed);
        s.stranded_blocks = self.stranded.len() as u64;
        s.dirty_blocks += s.stranded_blocks;
        s.degraded = self.health.degraded;
        s.degraded_reason = self.health.reason.clone();
        s.first_error_to_degraded_ns = self.health.first_error_to_degraded_ns;
        s.cache_errors = self.health.counts.clone();
        s.served_past_cache = self.health.served_past_cache;
        s.returned_to_service = self.health.returned_to_service;
        s
    }

    /// The count of `FUSE_FLUSH` requests (closes), kept by the FUSE layer without the
    /// mount's lock and reported in `MountStats::flushes`.
    pub fn flush_counter(&self) -> Arc<std::sync::atomic::AtomicU64> {
        self.flushes.clone()
    }

    /// Injects `faults` into the block file's and the journal's I/O from now on (`None`:
    /// none): the mount's fault injection (docs/design.md §11).
    pub fn set_cache_faults(&mut self, faults: Option<Arc<crate::faults::CacheFaults>>) {
        if let Some(j) = self.journal.as_mut() {
            j.set_faults(faults.clone());
        }
        self.faults = faults;
    }

    /// Counts one namespace/attribute operation on the store and pays its latency.
    pub fn meta_op(&mut self) {
        // A mount busy creating or deleting files is not idle: a lazy cleaner would write
        // back blocks about to be deleted, holding up the deletes.
        self.note_request();
        self.stats.store_meta_ops += 1;
        self.cfg.latency.meta_op();
    }

    /// Counts a created file.
    pub fn note_created(&mut self) {
        self.stats.files_created += 1;
    }

    fn cached(&self, id: u64) -> bool {
        self.core.capacity() > 0 && self.nodes.get(&id).is_some_and(|n| !n.unlinked)
    }

    fn bs(&self) -> u64 {
        self.cfg.block_size as u64
    }

    /// Reads up to `size` bytes at `offset` of file `id`.
    pub fn read(&mut self, id: u64, offset: u64, size: u32) -> io::Result<Vec<u8>> {
        let file_size = self
            .nodes
            .get(&id)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?
            .size;
        self.stats.reads += 1;
        self.note_request();
        if offset >= file_size || size == 0 {
            return Ok(Vec::new());
        }
        let end = (offset + size as u64).min(file_size);
        let mut out = vec![0u8; (end - offset) as usize];
        if !self.cached(id) {
            let f = self.store_file(id)?;
            self.cfg.latency.data_op();
            let n = pread_full(&f, &mut out, offset)?;
            self.stats.store_reads += 1;
            self.stats.store_bytes_read += n as u64;
            // Past the store's end but inside the file: zeros (not yet written back).
            self.stats.bytes_read += out.len() as u64;
            return Ok(out);
        }
        let bs = self.bs();
        if end.div_ceil(bs) > crate::core::MAX_BLOCKS_PER_FILE {
            return Err(io::Error::from_raw_os_error(libc::EFBIG));
        }
        let blocks = offset / bs..end.div_ceil(bs);
        if self.past_cache(id, blocks.clone()) || self.refused_by_files_cap(id) {
            self.read_past_cache(id, offset, &mut out)?;
            self.stats.bytes_read += out.len() as u64;
            return Ok(out);
        }
        let pre = self.dirty_before(id, blocks.clone());
        let mut ops = Vec::new();
        for block in blocks.clone() {
            self.core
                .read(BlockKey::new(id, block), &mut ops)
                .map_err(too_big)?;
        }
        if let Err(e) = self.execute(&ops, offset, &mut out, None) {
            self.served_past_error(e, &ops, &pre, id, blocks)?;
            self.read_past_cache(id, offset, &mut out)?;
        }
        self.stats.bytes_read += out.len() as u64;
        Ok(out)
    }

    /// Writes `data` at `offset` of file `id`.
    pub fn write(&mut self, id: u64, offset: u64, data: &[u8]) -> io::Result<()> {
        let old_size = self
            .nodes
            .get(&id)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?
            .size;
        // Whatever path the write takes (docs/design.md §14: a kept image is stale from here,
        // and so is store data read for the file outside the lock).
        self.core.content_changed(id);
        self.content_changed(id);
        self.stats.writes += 1;
        self.note_request();
        self.stats.bytes_written += data.len() as u64;
        if data.is_empty() {
            return Ok(());
        }
        let end = offset + data.len() as u64;
        if !self.cached(id) {
            self.store_write(id, data, offset)?;
        } else {
            let bs = self.bs();
            if end.div_ceil(bs) > crate::core::MAX_BLOCKS_PER_FILE {
                return Err(io::Error::from_raw_os_error(libc::EFBIG));
            }
            let blocks = offset / bs..end.div_ceil(bs);
            let pre = if self.past_cache(id, blocks.clone()) || self.refused_by_files_cap(id) {
                None
            } else {
                Some(self.dirty_before(id, blocks.clone()))
            };
            let mut ops = Vec::new();
            // Served past the cache, the core plans nothing.
            let planned = if pre.is_some() { blocks.clone() } else { 0..0 };
            for block in planned {
                let start = block * bs;
                let lo = offset.max(start);
                let hi = end.min(start + bs);
                // Old bytes of this block the write leaves in place must come from the store.
                let old_end = old_size.min(start + bs);
                let needs_fill = start < old_size && (lo > start || hi < old_end);
                self.core
                    .write(BlockKey::new(id, block), needs_fill, &mut ops)
                    .map_err(too_big)?;
            }
            match pre {
                None => self.write_past_cache(id, offset, data)?,
                Some(pre) => {
                    let mut scratch = data.to_vec();
                    if let Err(e) = self.execute(&ops, offset, &mut scratch, Some(data)) {
                        self.served_past_error(e, &ops, &pre, id, blocks)?;
                        self.write_past_cache(id, offset, data)?;
                    }
                }
            }
        }
        let node = self.nodes.get_mut(&id).expect("checked");
        node.size = node.size.max(end);
        touch(node);
        if self.health.degraded {
            return Ok(());
        }
        if let Err(e) = self.maybe_compact() {
            if !crate::faults::is_device_error(&e) {
                return Err(e);
            }
            // The write is in the cache (or the store) already: a journal that cannot be
            // compacted is retired (degraded mode), the write stands.
            self.degrade_on(&e);
        }
        Ok(())
    }

    /// The request's blocks (of file `id`) that are dirty now, and where.
    fn dirty_before(
        &self,
        id: u64,
        blocks: std::ops::Range<u64>,
    ) -> HashMap<BlockKey, tiercache_eviction::Slot> {
        blocks
            .filter_map(|b| {
                let key = BlockKey::new(id, b);
                match self.core.lookup(key) {
                    Some((slot, true)) => Some((key, slot)),
                    _ => None,
                }
            })
            .collect()
    }

    /// A request's plan `ops` failed with `e`: a store error is the client's; a cache-device
    /// error is counted, the plan's leftovers repaired, and the mount degraded if the errors
    /// call for it; the caller then serves the request past the cache.
    fn served_past_error(
        &mut self,
        e: io::Error,
        ops: &[crate::core::DevOp],
        pre: &HashMap<BlockKey, tiercache_eviction::Slot>,
        id: u64,
        blocks: std::ops::Range<u64>,
    ) -> io::Result<()> {
        if !crate::faults::is_device_error(&e) {
            return Err(e);
        }
        self.count_error(&e);
        let failed_at = self.exec_failed_at;
        self.repair(ops, failed_at, pre, Some((id, blocks)))?;
        self.maybe_degrade();
        Ok(())
    }

    /// Syncs the store files written (written back or written around) since the last sync.
    fn sync_written_back(&mut self) -> io::Result<()> {
        let files: Vec<FileId> = self.unsynced_store.iter().copied().collect();
        for file in files {
            // A file gone from the mount (unlinked, last handle released) needs no sync.
            if self.store_file(file).is_ok() {
                self.sync_store(file)?;
            }
            self.unsynced_store.remove(&file);
        }
        Ok(())
    }

    /// fsync of file `id`: its acknowledged writes survive a crash of the mount (write-back:
    /// the cache's block file and journal are synced, and the store files written around the
    /// cache or written back to; otherwise the store file).
    pub fn fsync(&mut self, id: u64) -> io::Result<()> {
        self.stats.fsyncs += 1;
        self.note_request();
        if self.cached(id) && self.cfg.variant.is_write_back() && !self.health.degraded {
            match self.sync_journal_raw() {
                Ok(()) => {
                    self.promised = self.journal.as_ref().map_or(0, |j| j.synced_seq());
                    return Ok(());
                }
                Err(e) if crate::faults::is_device_error(&e) => self.degrade_on(&e),
                Err(e) => return Err(e),
            }
        }
        if !self.health.degraded {
            return self.sync_store(id);
        }
        self.fsync_degraded(id)
    }

    /// fsync of a degraded mount: the file's dirty blocks the cache can read are written back,
    /// and the store files written are synced. Dirty data of the file the cache cannot read
    /// makes it fail (EIO): that data is not durable anywhere.
    fn fsync_degraded(&mut self, id: u64) -> io::Result<()> {
        let (_, left) = self.drain(Some(id))?;
        self.sync_written_back()?;
        if self.store_file(id).is_ok() {
            self.sync_store(id)?;
        }
        if let Some(j) = self.journal.as_mut() {
            if let Err(e) = j.sync() {
                self.degrade_on(&e);
            }
        }
        if left > 0 {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        Ok(())
    }

    /// Writes every dirty block back and syncs the store: afterwards the store alone is
    /// complete.
    pub fn flush_all(&mut self) -> io::Result<u64> {
        let dirty = |st: &Self| st.core.dirty_blocks() + st.stranded.len() as u64;
        let before = dirty(self);
        if !self.health.degraded {
            let mut ops = Vec::new();
            self.core.flush(None, &mut ops);
            let done = self
                .execute(&ops, 0, &mut [], None)
                .and_then(|()| self.sync_journal_raw());
            match done {
                Ok(()) if self.stranded.is_empty() => return Ok(before),
                Ok(()) => {}
                Err(e) if crate::faults::is_device_error(&e) => {
                    let failed_at = self.exec_failed_at;
                    self.repair(&ops, failed_at, &HashMap::new(), None)?;
                    self.degrade_on(&e);
                }
                Err(e) => return Err(e),
            }
        }
        let (_, left) = self.drain(None)?;
        self.sync_written_back()?;
        if left > 0 {
            eprintln!(
                "tiercache mount: {left} dirty blocks could not be read from the cache; the \
                 journal keeps them for a restart"
            );
        }
        Ok(before - dirty(self))
    }

    /// Makes the journal durable (clean unmount): a later mount or `flush` writes back; then
    /// writes the checkpoint of the clean blocks, so the next mount starts warm
    /// (docs/design.md §15). A cache-device error degrades the mount (its dirty blocks are
    /// written back) rather than failing.
    pub fn sync_journal(&mut self) -> io::Result<()> {
        match self.sync_journal_raw() {
            Err(e) if crate::faults::is_device_error(&e) => {
                self.degrade_on(&e);
                self.sync_written_back()
            }
            Err(e) => Err(e),
            Ok(()) => {
                // A checkpoint that cannot be written costs the next mount its warm start,
                // nothing else.
                if let Err(e) = self.write_checkpoint() {
                    eprintln!("tiercache mount: writing the checkpoint failed: {e}");
                }
                Ok(())
            }
        }
    }

    /// Makes the journal durable (fsync): the blocks file and the store files written to are
    /// synced first, the records name their data.
    pub(super) fn sync_journal_raw(&mut self) -> io::Result<()> {
        let n = self.sync_begins();
        self.sync_blocks()?;
        self.sync_written_back()?;
        if let Some(j) = self.journal.as_mut() {
            j.sync()?;
            self.stats.journal_syncs += 1;
            self.slots.synced();
            self.cleaned_unsynced.clear();
        }
        // Everything applied before sync `n` began is durable (group commit).
        self.last_full_sync = n;
        Ok(())
    }
}
