//! FUSE glue: [`CacheFs`] presents the store through the cache. Namespace and attribute
//! operations (create, mkdir, unlink, rmdir, rename, setattr, symlink) go to the store before
//! the reply, so the store's namespace never depends on the cache; file data goes through
//! [`State`]'s data path. One thread reads the kernel's requests and hands them to a pool of
//! request threads ([`dispatch`], docs/design.md §14 "Dispatch"): requests of different files
//! proceed in parallel, and a request that depends on whether a file is open waits for the
//! releases read before it. The mount's lock serialises namespace operations and the
//! cache's data path (POSIX-consistent for concurrent readers and writers of one file); reads
//! and writes of uncached files do their store I/O outside it, ordered against truncates by
//! a per-file lock. Files the cache holds whole are opened in FUSE passthrough mode where the
//! kernel has it ([`passthrough`], docs/design.md §14): their reads and writes never reach
//! the mount.

mod attr;
mod dispatch;
#[cfg(test)]
mod dispatch_tests;
mod inline;
#[cfg(test)]
mod inline_tests;
mod ops;
mod options;
mod passthrough;
#[cfg(test)]
mod unlocked_tests;
mod watch;

use std::ffi::OsStr;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
#[cfg(test)]
use std::time::Duration;
use std::time::SystemTime;

use fuser::{
    FileAttr, FileHandle, FileType, Filesystem, INodeNo, KernelConfig, LockOwner, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::state::State;
use dispatch::{Order, Pool};
pub use options::{FuseOptions, DEFAULT_CACHE_TIMEOUT, DEFAULT_PASSTHROUGH_MIN_SIZE};
pub use watch::Watcher;

/// One entry of an open directory's listing: id, kind, name.
type DirListEntry = (u64, FileType, std::ffi::OsString);

/// The FUSE file system; share its state with [`CacheFs::state`] (stats, flush).
pub struct CacheFs {
    inner: Arc<Inner>,
    pool: Pool,
    /// Test hooks: a delay before each release runs, and whether requests keep their order
    /// against releases (off, the hazard the order prevents can be shown).
    #[cfg(test)]
    hooks: (Duration, bool),
    /// Test hook: a gate every read handed to a request thread waits at until it opens
    /// (a store read held; reads served inline do not pass it).
    #[cfg(test)]
    read_gate: Option<Arc<Gate>>,
}

/// A gate test threads wait at until it is opened.
#[cfg(test)]
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: std::sync::Condvar,
    /// Threads that reached the gate (waiting or passed).
    arrived: std::sync::atomic::AtomicUsize,
}

#[cfg(test)]
impl Gate {
    fn wait(&self) {
        self.arrived
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }

    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

/// What the request threads share: the state and the mount's own tables.
struct Inner {
    state: Arc<Mutex<State>>,
    /// The background cleaner, stopped when the file system is dropped (at unmount).
    _cleaner: Option<crate::cleaner::Cleaner>,
    dirs: Mutex<std::collections::HashMap<u64, Vec<DirListEntry>>>,
    next_dir: std::sync::atomic::AtomicU64,
    options: FuseOptions,
    images: passthrough::Images,
    /// The count of the state's syncs begun, read by an fsync before it takes the lock.
    sync_counter: crate::state::SyncCounter,
    /// The state's count of flushes, kept without its lock.
    flushes: Arc<std::sync::atomic::AtomicU64>,
    /// The store's watch (`--watch-store`), and the flag that stops its thread at unmount.
    watch: Option<Arc<crate::inotify::Inotify>>,
    watch_stop: Arc<std::sync::atomic::AtomicBool>,
}

impl CacheFs {
    /// A file system over `state`.
    /// Starts the background cleaner too (docs/design.md §4.9); if its thread cannot start,
    /// the mount serves without it (dirty blocks then wait for eviction, fsync or unmount) and
    /// says so.
    pub fn new(state: Arc<Mutex<State>>) -> Self {
        Self::with_options(state, FuseOptions::default())
    }

    /// A file system over `state` using the kernel's features as `options` say, serving
    /// requests on `options.request_threads` threads.
    pub fn with_options(state: Arc<Mutex<State>>, options: FuseOptions) -> Self {
        let request_threads = options.request_threads;
        let (images, sync_counter, flushes, watch) = {
            let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
            let watch = options
                .watch_store
                .then(|| match crate::inotify::Inotify::new() {
                    Ok(inotify) => {
                        let inotify = Arc::new(inotify);
                        st.watch_store(inotify.clone());
                        Some(inotify)
                    }
                    Err(e) => {
                        eprintln!(
                            "tiercache mount: the store cannot be watched ({e}); changes made \
                         behind the mount are not seen"
                        );
                        None
                    }
                });
            let cfg = st.config();
            let images = passthrough::Images::new(
                &cfg.cache_dir,
                cfg.capacity_blocks as u64 * cfg.block_size as u64,
                options.passthrough_min_size,
            );
            (
                images,
                st.sync_counter(),
                st.flush_counter(),
                watch.flatten(),
            )
        };
        let cleaner = match crate::cleaner::Cleaner::spawn(&state) {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("tiercache mount: the background cleaner did not start ({e})");
                None
            }
        };
        CacheFs {
            inner: Arc::new(Inner {
                state,
                _cleaner: cleaner,
                dirs: Mutex::new(std::collections::HashMap::new()),
                next_dir: std::sync::atomic::AtomicU64::new(1),
                options,
                images,
                sync_counter,
                flushes,
                watch,
                watch_stop: Arc::default(),
            }),
            pool: Pool::new(request_threads),
            #[cfg(test)]
            hooks: (Duration::ZERO, true),
            #[cfg(test)]
            read_gate: None,
        }
    }

    /// The shared state.
    pub fn state(&self) -> Arc<Mutex<State>> {
        self.inner.state.clone()
    }

    /// The store's watcher, to start once the session's notifier exists (`None` unless
    /// [`FuseOptions::watch_store`] and the watch could be made).
    pub fn watcher(&self) -> Option<Watcher> {
        Watcher::new(&self.inner)
    }

    /// Test hooks: each release waits `delay` before it runs; `ordered` off, no request
    /// waits for earlier releases.
    #[cfg(test)]
    fn with_hooks(mut self, delay: Duration, ordered: bool) -> Self {
        self.hooks = (delay, ordered);
        self
    }

    /// Test hook: reads handed to a request thread wait at `gate` before they run.
    #[cfg(test)]
    fn with_read_gate(mut self, gate: Arc<Gate>) -> Self {
        self.read_gate = Some(gate);
        self
    }

    /// Hands `job` to a request thread, in `order` against releases.
    fn run(&self, order: Order, job: impl FnOnce(&Inner) + Send + 'static) {
        #[cfg(test)]
        let order = if self.hooks.1 { order } else { Order::Free };
        let inner = self.inner.clone();
        self.pool.submit(order, move || job(&inner));
    }
}

impl Inner {
    /// `attr` with the size an open passthrough image gives the file (the kernel's writes
    /// land there).
    fn sized(&self, mut attr: FileAttr) -> FileAttr {
        if let Some(size) = self.images.size(attr.ino.0) {
            attr.size = size;
            attr.blocks = size.div_ceil(512);
        }
        attr
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic in one request must not wedge every later one; the state stays usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Every request is handed to a request thread with its arguments owned (docs/design.md
/// §14 "Dispatch" says which pairs the kernel may have in flight at once), but reads and
/// writes the cache serves alone, which the reading thread serves itself when the lock is
/// free ([`inline`], §14 "Served inline"). Those that act on
/// whether a file is open — its handle count, its passthrough image — wait for the releases
/// read before them (`Order::AfterReleases`): open, create, unlink, rename and setattr (a
/// truncate cuts an open image).
impl Filesystem for CacheFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        self.inner.init(config)
    }

    fn destroy(&mut self) {
        // The watcher stops at its next wake (it holds no reference that keeps the mount).
        self.inner
            .watch_stop
            .store(true, std::sync::atomic::Ordering::Relaxed);
        // Every request handed out finishes before the images close and the journal syncs.
        if let Err(e) = self.pool.shutdown() {
            eprintln!("tiercache mount: {e}");
        }
        self.inner.destroy();
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let name = name.to_owned();
        self.run(Order::Free, move |fs| fs.lookup(parent, &name, reply));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        self.run(Order::Free, move |fs| fs.getattr(ino, fh, reply));
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        crtime: Option<SystemTime>,
        chgtime: Option<SystemTime>,
        bkuptime: Option<SystemTime>,
        flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        self.run(Order::AfterReleases, move |fs| {
            fs.setattr(
                ino, mode, uid, gid, size, atime, mtime, ctime, fh, crtime, chgtime, bkuptime,
                flags, reply,
            )
        });
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        self.run(Order::Free, move |fs| fs.readlink(ino, reply));
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let name = name.to_owned();
        self.run(Order::Free, move |fs| {
            fs.mkdir(parent, &name, mode, umask, reply)
        });
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let (name, target) = (link_name.to_owned(), target.to_owned());
        self.run(Order::Free, move |fs| {
            fs.symlink(parent, &name, &target, reply)
        });
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_owned();
        self.run(Order::AfterReleases, move |fs| {
            fs.unlink(parent, &name, reply)
        });
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_owned();
        self.run(Order::Free, move |fs| fs.rmdir(parent, &name, reply));
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (name, newname) = (name.to_owned(), newname.to_owned());
        self.run(Order::AfterReleases, move |fs| {
            fs.rename(parent, &name, newparent, &newname, flags, reply)
        });
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.run(Order::AfterReleases, move |fs| fs.open(ino, flags, reply));
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let name = name.to_owned();
        self.run(Order::AfterReleases, move |fs| {
            fs.create(parent, &name, mode, umask, flags, reply)
        });
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        // Cached blocks are served here, without a hand-off (§14 "Served inline").
        let Some(reply) = self.inner.read_inline(ino, offset, size, reply) else {
            return;
        };
        #[cfg(test)]
        let gate = self.read_gate.clone();
        self.run(Order::Free, move |fs| {
            #[cfg(test)]
            if let Some(gate) = gate {
                gate.wait();
            }
            fs.read(ino, fh, offset, size, flags, lock_owner, reply)
        });
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Some(reply) = self.inner.write_inline(ino, offset, data, reply) else {
            return;
        };
        // The request's buffer is the reading thread's: the data is copied out.
        let data = data.to_vec();
        self.run(Order::Free, move |fs| {
            fs.write(
                ino,
                fh,
                offset,
                &data,
                write_flags,
                flags,
                lock_owner,
                reply,
            )
        });
    }

    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.run(Order::Free, move |fs| fs.flush(ino, fh, lock_owner, reply));
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        flush: bool,
        reply: ReplyEmpty,
    ) {
        #[cfg(test)]
        let delay = self.hooks.0;
        self.run(Order::Release, move |fs| {
            #[cfg(test)]
            std::thread::sleep(delay);
            fs.release(ino, fh, flags, lock_owner, flush, reply)
        });
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.run(Order::Free, move |fs| fs.fsync(ino, fh, datasync, reply));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.run(Order::Free, move |fs| fs.opendir(ino, flags, reply));
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.run(Order::Free, move |fs| fs.readdir(ino, fh, offset, reply));
    }

    fn releasedir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.run(Order::Free, move |fs| fs.releasedir(ino, fh, flags, reply));
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.run(Order::Free, move |fs| fs.fsyncdir(ino, fh, datasync, reply));
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        self.run(Order::Free, move |fs| fs.statfs(ino, reply));
    }
}
