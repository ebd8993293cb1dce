//! FUSE passthrough of files the cache holds whole (docs/design.md §14): the kernel reads and
//! writes such a file's image on the fast device itself, without a request to the mount.
//!
//! The kernel passes an inode's I/O through only if every open file of it is passed through
//! to the same backing file (an open that is not fails while one that is stays open), so the
//! mode is chosen per inode at its first open (no other handle open) and kept until its last
//! release: while handles of the inode are open in that mode, all of them are passthrough
//! handles of one image. Images live in `passthrough/` of the cache directory, one per file,
//! and are made only for files of at least [`Images`]' `min_size` bytes.
//!
//! What the kernel writes lands in the image only: it comes back into the cache's data path
//! ([`State::ingest_image`], which journals it as any write) at close (the kernel's flush),
//! fsync and the last release, so an fsync acknowledges only what the journal holds, exactly
//! as on the block path, and a crash loses at most what was written and never fsync'd.
//!
//! After the last release the image is kept, *idle*, with the file's content version
//! ([`State::content_version`]) taken once the image equals the cache; the next open takes it
//! without a copy if the version is the same. Every change to the file's cached content by
//! another path (a write or truncate on the block path, a block of it evicted or dropped, a
//! delete or rename over it, a store change found by validation) gives the file a version
//! never given before, and a restart removes every image: an idle image whose version still
//! matches is byte for byte what the cache holds, by construction. Idle images are removed
//! oldest first when room is needed (the budget below, or the file system's free space), past
//! [`MAX_IDLE`] of them, and at once where the mount sees the change (truncate, unlink,
//! rename over); a stale one left meanwhile is never served, and goes at its file's next open.
//! Open and idle images together stay within the budget (the cache's capacity).

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use fuser::{BackingId, FileHandle};

use crate::state::State;

/// Handle bit: the handle is passed through.
const PASSED: u64 = 2;
/// Handle bit: the handle may write.
const WRITABLE: u64 = 1;

/// Free space the cache directory must keep besides a new image (for its growth by the
/// kernel's writes, and the journal's).
const HEADROOM: u64 = 64 << 20;

/// Most idle images kept (their bytes are bounded by the budget with the open ones).
const MAX_IDLE: usize = 1024;

/// Most idle images kept open and registered with the kernel as backing files, the most
/// recently released: their next open costs no `open(2)` and no backing-file ioctls. The
/// others are kept by path alone (a descriptor each would press on the process's limit).
const MAX_HELD: usize = 64;

/// The images of the files open in passthrough mode, and those kept idle.
pub(super) struct Images {
    dir: PathBuf,
    /// Passthrough is offered: asked for, negotiated at init, and not refused since.
    enabled: AtomicBool,
    /// Most bytes of images, open and idle, at once (open ones counted at their creation).
    budget: u64,
    /// Files smaller than this stay on the block path.
    min_size: u64,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    open: HashMap<u64, Image>,
    /// Images kept after their file's last release, by file.
    idle: HashMap<u64, Idle>,
    /// Bytes of open and idle images.
    bytes: u64,
    /// Stamps of idle images, for least recently released first.
    tick: u64,
    /// Files written in passthrough mode whose kernel pages (of the FUSE inode, from an earlier
    /// open on the block path) may predate those writes: their next open on the block path
    /// drops the pages rather than keeping them (no FOPEN_KEEP_CACHE).
    stale_pages: HashSet<u64>,
}

struct Image {
    file: File,
    path: PathBuf,
    backing: BackingId,
    handles: u32,
    writers: u32,
    /// The image may differ from the cache (written since it was last ingested).
    written: bool,
    bytes: u64,
    /// The store changed behind the mount while open (docs/design.md §14 "Changes to the
    /// store"): not kept at the last release.
    stale: bool,
}

/// An image kept after its file's last release: equal to the cache's content of the file
/// while the file's content version is `version`.
struct Idle {
    path: PathBuf,
    /// The image still open and registered as a backing file (the [`MAX_HELD`] most recent).
    held: Option<(File, BackingId)>,
    bytes: u64,
    version: u64,
    /// When it was released ([`Inner::tick`]).
    released: u64,
}

/// Whether handle `fh` was opened in passthrough mode.
pub(super) fn is_passed(fh: FileHandle) -> bool {
    fh.0 & PASSED != 0
}

impl Images {
    /// Images in `cache_dir/passthrough`, at most `budget` bytes of them, for files of at
    /// least `min_size` bytes. What an earlier mount left there is removed (writes never
    /// fsync'd, not promised; versions of another mount's life): never trusted.
    pub(super) fn new(cache_dir: &Path, budget: u64, min_size: u64) -> Images {
        let dir = cache_dir.join("passthrough");
        if dir.exists() {
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                eprintln!(
                    "tiercache mount: cannot clear {} ({e}); files are served without \
                     passthrough",
                    dir.display()
                );
            }
        }
        Images {
            dir,
            enabled: AtomicBool::new(false),
            budget,
            min_size,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The kernel agreed to passthrough at init: offer it from now on.
    pub(super) fn enable(&self) {
        if std::fs::create_dir_all(&self.dir).is_ok() {
            self.enabled.store(true, Ordering::Relaxed);
        }
    }

    /// Opens file `id` (one handle of it already counted by [`State::open_handle`]) in
    /// passthrough mode if it is in that mode already or can enter it: replies with `send`
    /// and returns `Ok`; otherwise gives `reply` back for the block path. `register` makes
    /// the image a backing file of the connection.
    pub(super) fn try_open<R>(
        &self,
        st: &mut State,
        id: u64,
        writable: bool,
        reply: R,
        register: impl FnOnce(&R, &File) -> io::Result<BackingId>,
        send: impl FnOnce(R, FileHandle, &BackingId),
    ) -> Result<(), R> {
        if !self.enabled.load(Ordering::Relaxed) {
            return Err(reply);
        }
        let fh = FileHandle(PASSED | if writable { WRITABLE } else { 0 });
        let mut inner = self.inner();
        if let Some(img) = inner.open.get_mut(&id) {
            img.handles += 1;
            if writable {
                img.writers += 1;
                img.written = true;
            }
            st.note_passthrough_open();
            send(reply, fh, &img.backing);
            return Ok(());
        }
        let only_handle = st.nodes.get(&id).is_some_and(|n| n.handles == 1);
        if !only_handle || !st.holds_whole(id) {
            return Err(reply);
        }
        let Ok(size) = st.file_size(id) else {
            return Err(reply);
        };
        if size < self.min_size {
            st.note_below_min_size();
            return Err(reply);
        }
        let path = self.dir.join(id.to_string());
        let (file, backing, reused) = match inner.take_idle(st, id, size) {
            Some((file, held)) => (file, held, true),
            None => {
                if !self.make_room(&mut inner, size) {
                    return Err(reply);
                }
                let built = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&path)
                    .and_then(|file| st.copy_to_image(id, &file).map(|_| file));
                match built {
                    Ok(f) => {
                        inner.bytes += size;
                        (f, None, false)
                    }
                    Err(e) => {
                        let _ = std::fs::remove_file(&path);
                        eprintln!(
                            "tiercache mount: no passthrough image for {} ({e}); served \
                             through the mount",
                            path.display()
                        );
                        return Err(reply);
                    }
                }
            }
        };
        let registered = match backing {
            Some(b) => Ok(b),
            None => register(&reply, &file),
        };
        let backing = match registered {
            Ok(b) => b,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                inner.bytes -= size;
                // The kernel refuses backing files (no privilege, or passthrough off): said
                // once, and the block path serves every file from now on.
                if self.enabled.swap(false, Ordering::Relaxed) {
                    eprintln!(
                        "tiercache mount: the kernel refused a passthrough backing file ({e}); \
                         every file is served through the mount"
                    );
                }
                return Err(reply);
            }
        };
        st.note_passthrough_open();
        st.note_image(reused);
        send(reply, fh, &backing);
        inner.stale_pages.insert(id);
        inner.open.insert(
            id,
            Image {
                file,
                path,
                backing,
                handles: 1,
                writers: writable as u32,
                written: writable,
                bytes: size,
                stale: false,
            },
        );
        Ok(())
    }

    /// Removes idle images, least recently released first, until a new image of `size`
    /// bytes fits the budget and the file system's free space; whether it does.
    fn make_room(&self, inner: &mut Inner, size: u64) -> bool {
        loop {
            if inner.bytes.saturating_add(size) <= self.budget && self.room_for(size) {
                return true;
            }
            if !inner.drop_oldest_idle() {
                return false;
            }
        }
    }

    /// Whether the cache directory's file system has room for an image of `size` bytes and
    /// [`HEADROOM`] more: a write to an image is the kernel's, and ENOSPC there would reach
    /// the writer, where the block path would degrade and serve it from the store.
    fn room_for(&self, size: u64) -> bool {
        tiercache_blockdev::space::free_bytes(&self.dir)
            .is_ok_and(|free| free >= size.saturating_add(HEADROOM))
    }

    /// Whether an open of `id` on the block path may keep the kernel's pages of it (no
    /// passthrough write since they were cached).
    pub(super) fn may_keep_pages(&self, id: u64) -> bool {
        !self.inner().stale_pages.remove(&id)
    }

    /// The size of `id` while its image is open (the kernel's writes grow it there).
    pub(super) fn size(&self, id: u64) -> Option<u64> {
        let inner = self.inner();
        let img = inner.open.get(&id)?;
        img.file.metadata().ok().map(|m| m.len())
    }

    /// A truncate of `id` (already done on the data path) reaches its image too.
    pub(super) fn truncated(&self, id: u64, size: u64) -> io::Result<()> {
        let mut inner = self.inner();
        match inner.open.get(&id) {
            Some(img) => img.file.set_len(size),
            None => {
                inner.drop_idle(id);
                Ok(())
            }
        }
    }

    /// File `id` lost its last name (unlink, rename over it): its idle image goes (its
    /// version is gone with its blocks already; this frees the room at once).
    pub(super) fn forget(&self, id: u64) {
        self.inner().drop_idle(id);
    }

    /// File `id` changed in the store behind the mount: an idle image goes; an open one is
    /// not kept after its last release. Its handles go on with the image (the kernel reads
    /// and writes it, not the store); one written (a writable handle) is a conflict: what it
    /// holds is ingested at close as the mount's writes, over the store's change. Returns
    /// whether it was.
    pub(super) fn store_changed(&self, id: u64) -> bool {
        let mut inner = self.inner();
        inner.drop_idle(id);
        match inner.open.get_mut(&id) {
            Some(img) => {
                img.stale = true;
                img.written
            }
            None => false,
        }
    }

    /// Brings what the kernel wrote to `id`'s image into the cache (close, fsync): after it,
    /// the data path holds every byte written through handle `fh`.
    pub(super) fn ingest(&self, st: &mut State, id: u64, fh: FileHandle) -> io::Result<()> {
        if !is_passed(fh) {
            return Ok(());
        }
        let mut inner = self.inner();
        let Some(img) = inner.open.get_mut(&id) else {
            return Ok(());
        };
        ingest(st, id, img)
    }

    /// A release of handle `fh` of `id`, before [`State::release_handle`]: the last one
    /// ingests what is left and keeps the image idle (or removes it if it cannot be kept).
    pub(super) fn release(&self, st: &mut State, id: u64, fh: FileHandle) {
        if !is_passed(fh) {
            return;
        }
        let mut inner = self.inner();
        let Some(img) = inner.open.get_mut(&id) else {
            return;
        };
        img.handles = img.handles.saturating_sub(1);
        if fh.0 & WRITABLE != 0 {
            img.writers = img.writers.saturating_sub(1);
        }
        if img.handles > 0 {
            return;
        }
        let mut img = inner.open.remove(&id).expect("present");
        inner.bytes -= img.bytes;
        let ingested = ingest(st, id, &mut img);
        if let Err(e) = &ingested {
            // Not acknowledged by an fsync (which ingests first): the close already failed
            // with this error if it came from the close's flush.
            eprintln!(
                "tiercache mount: writes of a passthrough file (node {id}) could not reach \
                 the cache: {e}"
            );
        }
        // Kept only if it now equals the cache: ingested whole, of a file still named and
        // held whole, whose version is taken after the ingest (which gave it a new one).
        let keepable = ingested.is_ok()
            && !img.stale
            && self.enabled.load(Ordering::Relaxed)
            && st.holds_whole(id);
        let keep = keepable
            .then(|| st.content_version(id))
            .flatten()
            .zip(img.file.metadata().ok())
            .filter(|(_, md)| st.file_size(id).is_ok_and(|size| size == md.len()));
        match keep {
            Some((version, md)) => {
                inner.tick += 1;
                inner.release_held();
                let idle = Idle {
                    path: img.path,
                    held: Some((img.file, img.backing)),
                    bytes: md.len(),
                    version,
                    released: inner.tick,
                };
                inner.bytes += idle.bytes;
                inner.idle.insert(id, idle);
                while inner.idle.len() > MAX_IDLE || inner.bytes > self.budget {
                    if !inner.drop_oldest_idle() {
                        break;
                    }
                }
            }
            None => {
                drop(img.backing);
                let _ = std::fs::remove_file(&img.path);
            }
        }
    }

    /// Unmount: every image still open is ingested and removed.
    pub(super) fn close_all(&self, st: &mut State) {
        let mut inner = self.inner();
        let ids: Vec<u64> = inner.open.keys().copied().collect();
        for id in ids {
            let mut img = inner.open.remove(&id).expect("listed");
            if let Err(e) = ingest(st, id, &mut img) {
                eprintln!("tiercache mount: writes of passthrough file {id} lost at unmount: {e}");
            }
            let _ = std::fs::remove_file(&img.path);
        }
        let idle: Vec<u64> = inner.idle.keys().copied().collect();
        for id in idle {
            inner.drop_idle(id);
        }
        inner.bytes = 0;
    }
}

/// Ingests `img` if it may differ from the cache; a file unlinked meanwhile needs nothing
/// (its handles keep the image, its data goes with it).
fn ingest(st: &mut State, id: u64, img: &mut Image) -> io::Result<()> {
    if !img.written || st.nodes.get(&id).is_none_or(|n| n.unlinked) {
        return Ok(());
    }
    let n = st.ingest_image(id, &img.file)?;
    st.note_passthrough_ingested(n);
    img.written = img.writers > 0;
    Ok(())
}

impl Inner {
    /// Takes file `id`'s idle image for an open if it still equals the cache (its version
    /// unchanged, its size the file's): the file (kept open, or reopened) and its backing
    /// registration if it was kept. A stale one is removed.
    fn take_idle(&mut self, st: &State, id: u64, size: u64) -> Option<(File, Option<BackingId>)> {
        let mut idle = self.idle.remove(&id)?;
        let fresh = st.content_version(id) == Some(idle.version) && idle.bytes == size;
        let taken = match idle.held.take() {
            Some((file, backing)) if fresh => Some((file, Some(backing))),
            Some(_) => None,
            None if fresh => OpenOptions::new()
                .read(true)
                .write(true)
                .open(&idle.path)
                .ok()
                .map(|f| (f, None)),
            None => None,
        }
        .filter(|(f, _)| f.metadata().is_ok_and(|md| md.len() == size));
        if taken.is_none() {
            self.bytes -= idle.bytes;
            let _ = std::fs::remove_file(&idle.path);
        }
        taken
    }

    /// Makes room for one more held idle image: past [`MAX_HELD`], the least recently
    /// released one is closed and unregistered (kept by path).
    fn release_held(&mut self) {
        let held = self.idle.values().filter(|i| i.held.is_some()).count();
        if held < MAX_HELD {
            return;
        }
        if let Some(oldest) = self
            .idle
            .values_mut()
            .filter(|i| i.held.is_some())
            .min_by_key(|i| i.released)
        {
            oldest.held = None;
        }
    }

    /// Removes file `id`'s idle image, if any.
    fn drop_idle(&mut self, id: u64) {
        if let Some(idle) = self.idle.remove(&id) {
            self.bytes -= idle.bytes;
            let _ = std::fs::remove_file(&idle.path);
        }
    }

    /// Removes the least recently released idle image; whether there was one.
    fn drop_oldest_idle(&mut self) -> bool {
        let oldest = self
            .idle
            .iter()
            .min_by_key(|(_, i)| i.released)
            .map(|(&id, _)| id);
        match oldest {
            Some(id) => {
                self.drop_idle(id);
                true
            }
            None => false,
        }
    }
}
