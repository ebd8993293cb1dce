//! The mount's requests, each run on a request thread with its arguments owned
//! ([`super::CacheFs`] hands them out, docs/design.md §14 "Dispatch"). Namespace and
//! attribute operations go to the store before the reply; file data goes through
//! [`State`]'s data path under the mount's lock; reads and writes of uncached files do their
//! store I/O outside it, ordered against truncates by a per-file lock.

use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::SystemTime;

use fuser::{
    Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, TimeOrNow,
    WriteFlags,
};

use super::attr::{
    attr_of, cache_attr, child, errno, forget_attr, kind_of, no_flush, node_metadata, open_flags,
    set_times, statvfs,
};
use super::{passthrough, DirListEntry, Inner};
use crate::state::ROOT;

impl Inner {
    pub(super) fn init(&self, config: &mut KernelConfig) -> io::Result<()> {
        let cfg = self.lock().config().clone();
        let mut passthrough = false;
        if self.options.passthrough && cfg.capacity_blocks > 0 && !cfg.direct_io {
            // Backing files on the cache directory's file system: one level of stacking.
            passthrough = config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok()
                && config.set_max_stack_depth(1).is_ok();
            if passthrough {
                self.images.enable();
            } else {
                eprintln!(
                    "tiercache mount: the kernel offers no FUSE passthrough (Linux 6.9+); \
                     every file is served through the mount"
                );
            }
        }
        if cfg.kernel_cache && !cfg.direct_io && !passthrough {
            // The kernel buffers writes and sends them in large requests at its write-back,
            // close (flush) and fsync, which writes the pages out before FUSE_FSYNC: what an
            // fsync acknowledged is journaled as before (docs/design.md §4.9).
            if config
                .add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE)
                .is_err()
            {
                eprintln!(
                    "tiercache mount: the kernel offers no FUSE writeback caching; every \
                     write reaches the mount as it is made"
                );
            }
        }
        Ok(())
    }

    pub(super) fn destroy(&self) {
        let mut st = self.lock();
        self.images.close_all(&mut st);
        if let Err(e) = st.sync_journal() {
            eprintln!("tiercache mount: syncing the journal at unmount failed: {e}");
        }
    }

    pub(super) fn lookup(&self, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut st = self.lock();
        self.entry(&mut st, parent.0, name, reply)
    }

    pub(super) fn getattr(&self, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let mut st = self.lock();
        if let Some(node) = st.nodes.get(&ino.0) {
            if let Some(mut attr) = node.attr {
                if node.regular {
                    attr.size = node.size;
                    attr.blocks = node.size.div_ceil(512);
                }
                return reply.attr(&self.options.cache_timeout, &self.sized(attr));
            }
        }
        match node_metadata(&mut st, ino.0) {
            Ok(md) => {
                // Met without the watcher: a change behind the mount is found here too.
                st.met_store(ino.0, &md);
                let attr = cache_attr(&mut st, ino.0, &md);
                reply.attr(&self.options.cache_timeout, &self.sized(attr))
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    #[allow(clippy::too_many_arguments)] // the request's fields, as fuser gives them
    pub(super) fn setattr(
        &self,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // A truncate waits for the file's uncached reads and writes in flight (their I/O
        // lock first, then the mount's: the order they take them in).
        let io_lock = size.and_then(|_| self.lock().file_io_lock(ino.0));
        let _exclusive = io_lock
            .as_ref()
            .map(|l| l.write().unwrap_or_else(|p| p.into_inner()));
        let mut st = self.lock();
        let id = ino.0;
        // The kernel's write-back of a file's times after writes it buffered (FUSE writeback
        // caching: mtime and ctime, nothing else, through the open file that wrote): kept in
        // the mount's attributes, as for writes received one by one (`touch` in `state`),
        // not a store round trip; the store's own times follow the data written back. A
        // user's utimensat or futimens names no file handle (only a truncate does), so it
        // still reaches the store.
        if let (Some(_), Some(TimeOrNow::SpecificTime(m)), Some(c), None, None, None, None, None) =
            (fh, mtime, ctime, mode, uid, gid, size, atime)
        {
            if let Some(node) = st.nodes.get_mut(&id) {
                let (regular, file_size) = (node.regular, node.size);
                if let Some(attr) = node.attr.as_mut() {
                    attr.mtime = m;
                    attr.ctime = c;
                    let mut attr = *attr;
                    if regular {
                        attr.size = file_size;
                        attr.blocks = file_size.div_ceil(512);
                    }
                    return reply.attr(&self.options.cache_timeout, &self.sized(attr));
                }
            }
        }
        let result = (|| -> io::Result<fs::Metadata> {
            let rel = st
                .nodes
                .get(&id)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?
                .path
                .clone();
            let path = st.store_path(&rel);
            st.before_own_change(id);
            if let Some(size) = size {
                st.truncate(id, size)?;
                self.images.truncated(id, size)?;
            }
            if let Some(mode) = mode {
                st.meta_op();
                fs::set_permissions(&path, fs::Permissions::from_mode(mode & 0o7777))?;
            }
            if uid.is_some() || gid.is_some() {
                st.meta_op();
                std::os::unix::fs::lchown(&path, uid, gid)?;
            }
            if atime.is_some() || mtime.is_some() {
                st.meta_op();
                set_times(&path, atime, mtime)?;
            }
            node_metadata(&mut st, id)
        })();
        match result {
            Ok(md) => {
                st.own_change_to(id, &md);
                let attr = cache_attr(&mut st, id, &md);
                reply.attr(&self.options.cache_timeout, &self.sized(attr))
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(super) fn readlink(&self, ino: INodeNo, reply: ReplyData) {
        let mut st = self.lock();
        let Some(node) = st.nodes.get(&ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        let path = st.store_path(&node.path.clone());
        st.meta_op();
        match fs::read_link(path) {
            Ok(target) => reply.data(target.as_os_str().as_encoded_bytes()),
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(super) fn mkdir(
        &self,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut st = self.lock();
        let rel = match child(&st, parent.0, name) {
            Ok(rel) => rel,
            Err(e) => return reply.error(errno(&e)),
        };
        let path = st.store_path(&rel);
        st.meta_op();
        let made = fs::create_dir(&path).and_then(|_| {
            fs::set_permissions(&path, fs::Permissions::from_mode(mode & !umask & 0o7777))
        });
        forget_attr(&mut st, parent.0);
        match made {
            Ok(()) => {
                st.name_added(parent.0, name, None);
                self.entry(&mut st, parent.0, name, reply)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(super) fn symlink(
        &self,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let mut st = self.lock();
        let rel = match child(&st, parent.0, link_name) {
            Ok(rel) => rel,
            Err(e) => return reply.error(errno(&e)),
        };
        let path = st.store_path(&rel);
        st.meta_op();
        forget_attr(&mut st, parent.0);
        match std::os::unix::fs::symlink(target, path) {
            Ok(()) => {
                st.name_added(parent.0, link_name, None);
                self.entry(&mut st, parent.0, link_name, reply)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(super) fn unlink(&self, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut st = self.lock();
        let result = (|| -> io::Result<()> {
            let rel = child(&st, parent.0, name)?;
            let path = st.store_path(&rel);
            // What the name is (regular file, links): known, or asked of the store.
            let known = st
                .dirs
                .get(&parent.0)
                .and_then(|names| names.get(name).copied().flatten())
                .and_then(|id| {
                    let attr = st.nodes.get(&id)?.attr?;
                    Some((id, attr.kind == FileType::RegularFile, attr.nlink))
                });
            st.meta_op();
            let (id, regular, nlink) = match known {
                Some(k) => k,
                None => {
                    let md = fs::symlink_metadata(&path)?;
                    (st.node_id(md.ino()), md.is_file(), md.nlink() as u32)
                }
            };
            let last_name = regular && nlink <= 1;
            if last_name {
                // The journal voids the file's dirty blocks before its store file goes.
                st.delete_file_with(id, || fs::remove_file(&path))?;
                self.images.forget(id);
            } else {
                fs::remove_file(&path)?;
            }
            forget_attr(&mut st, parent.0);
            st.name_removed(parent.0, name);
            // A regular file's last name: `delete_file_with` dropped its node.
            if !regular {
                st.nodes.remove(&id);
            } else if !last_name {
                if let Some(node) = st.nodes.get_mut(&id) {
                    node.attr = None; // another name remains; its link count changed
                }
                st.own_change(id);
            }
            Ok(())
        })();
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(super) fn rmdir(&self, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut st = self.lock();
        let result = (|| -> io::Result<()> {
            let rel = child(&st, parent.0, name)?;
            let path = st.store_path(&rel);
            st.meta_op();
            let md = fs::symlink_metadata(&path)?;
            fs::remove_dir(&path)?;
            forget_attr(&mut st, parent.0);
            st.name_removed(parent.0, name);
            let id = st.node_id(md.ino());
            st.nodes.remove(&id);
            st.dirs.remove(&id);
            Ok(())
        })();
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    #[allow(clippy::too_many_arguments)] // the request's fields, as fuser gives them
    pub(super) fn rename(
        &self,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mut st = self.lock();
        let result = (|| -> io::Result<()> {
            if !flags.is_empty() {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            let from = child(&st, parent.0, name)?;
            let to = child(&st, newparent.0, newname)?;
            let (from_path, to_path) = (st.store_path(&from), st.store_path(&to));
            st.meta_op();
            let moved = fs::symlink_metadata(&from_path)?;
            let replaced = fs::symlink_metadata(&to_path).ok();
            // A file the rename replaces loses its last name: the journal voids its dirty
            // blocks before the rename (`State::delete_file_with`).
            let doomed = replaced
                .as_ref()
                .filter(|old| old.ino() != moved.ino() && old.is_file() && old.nlink() <= 1)
                .map(|old| st.node_id(old.ino()));
            match doomed {
                Some(old_id) => {
                    st.delete_file_with(old_id, || fs::rename(&from_path, &to_path))?;
                    self.images.forget(old_id);
                }
                None => fs::rename(&from_path, &to_path)?,
            }
            forget_attr(&mut st, parent.0);
            forget_attr(&mut st, newparent.0);
            if let (Some(old), None) = (replaced, doomed) {
                if old.ino() != moved.ino() {
                    // Another name keeps it (or it is no regular file): no cached data to drop.
                    let old_id = st.node_id(old.ino());
                    st.nodes.remove(&old_id);
                }
            }
            st.rename_paths(&from, &to);
            let moved_id = st.node_id(moved.ino());
            st.name_removed(parent.0, name);
            st.name_added(newparent.0, newname, Some(moved_id));
            if let Some(node) = st.nodes.get_mut(&moved_id) {
                node.attr = None; // its ctime changed
            }
            st.own_change(moved_id);
            Ok(())
        })();
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(super) fn open(&self, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        // O_TRUNC is a truncate: as in setattr.
        let io_lock = (flags.0 & libc::O_TRUNC != 0)
            .then(|| self.lock().file_io_lock(ino.0))
            .flatten();
        let _exclusive = io_lock
            .as_ref()
            .map(|l| l.write().unwrap_or_else(|p| p.into_inner()));
        let mut st = self.lock();
        let result = (|| -> io::Result<()> {
            st.open_handle(ino.0)?;
            if flags.0 & libc::O_TRUNC != 0 {
                st.truncate(ino.0, 0)?;
                self.images.truncated(ino.0, 0)?;
            }
            Ok(())
        })();
        if let Err(e) = result {
            return reply.error(errno(&e));
        }
        let writable = flags.0 & libc::O_ACCMODE != libc::O_RDONLY;
        let passed = self.images.try_open(
            &mut st,
            ino.0,
            writable,
            reply,
            |r, f| r.open_backing(f),
            |r, fh, b| r.opened_passthrough(fh, no_flush(writable), b),
        );
        if let Err(reply) = passed {
            let mut flags = open_flags(&st) | no_flush(writable);
            if !self.images.may_keep_pages(ino.0) {
                flags.remove(FopenFlags::FOPEN_KEEP_CACHE);
            }
            reply.opened(FileHandle(0), flags)
        }
    }

    #[allow(clippy::too_many_arguments)] // the request's fields, as fuser gives them
    pub(super) fn create(
        &self,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut st = self.lock();
        let result = (|| -> io::Result<FileAttr> {
            let rel = child(&st, parent.0, name)?;
            let path = st.store_path(&rel);
            st.meta_op();
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .create_new(flags & libc::O_EXCL != 0)
                .truncate(flags & libc::O_TRUNC != 0)
                .mode(mode & !umask & 0o7777)
                .open(&path)?;
            let md = file.metadata()?;
            // Its own change (an O_TRUNC of an existing file, whose content goes): not someone
            // else's. Without O_TRUNC nothing changed, and `remember` checks the stamp.
            if flags & libc::O_TRUNC != 0 {
                let created = st.node_id(md.ino());
                st.own_change_to(created, &md);
            }
            forget_attr(&mut st, parent.0);
            let id = st.remember(rel, &md)?;
            st.adopt_file(id, file);
            st.name_added(parent.0, name, Some(id));
            cache_attr(&mut st, id, &md);
            if flags & libc::O_TRUNC != 0 && st.nodes.get(&id).is_some_and(|n| n.size > 0) {
                st.truncate(id, 0)?;
            }
            st.note_created();
            st.open_handle(id)?;
            Ok(attr_of(&st, id, &md))
        })();
        let attr = match result {
            Ok(attr) => attr,
            Err(e) => return reply.error(errno(&e)),
        };
        let id = attr.ino.0;
        let writable = flags & libc::O_ACCMODE != libc::O_RDONLY;
        let passed = self.images.try_open(
            &mut st,
            id,
            writable,
            reply,
            |r, f| r.open_backing(f),
            |r, fh, b| {
                r.created_passthrough(
                    &self.options.cache_timeout,
                    &attr,
                    Generation(0),
                    fh,
                    no_flush(writable),
                    b,
                )
            },
        );
        if let Err(reply) = passed {
            let mut flags = open_flags(&st) | no_flush(writable);
            if !self.images.may_keep_pages(id) {
                flags.remove(FopenFlags::FOPEN_KEEP_CACHE);
            }
            reply.created(
                &self.options.cache_timeout,
                &attr,
                Generation(0),
                FileHandle(0),
                flags,
            )
        }
    }

    #[allow(clippy::too_many_arguments)] // the request's fields, as fuser gives them
    pub(super) fn read(
        &self,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let io = {
            let mut st = self.lock();
            match st.uncached_io(ino.0) {
                Ok(Some(io)) => io,
                Ok(None) => {
                    // Its store reads (a miss) without the lock (docs/design.md §14).
                    return match crate::state::read_unlocked(&self.state, st, ino.0, offset, size) {
                        Ok(data) => reply.data(&data),
                        Err(e) => reply.error(errno(&e)),
                    };
                }
                Err(e) => return reply.error(errno(&e)),
            }
        };
        // Uncached: the store alone, without the mount's lock (docs/design.md §4.9).
        let _shared = io.io.read().unwrap_or_else(|p| p.into_inner());
        let result = (|| -> io::Result<(Vec<u8>, Option<usize>)> {
            let file_size = self.lock().file_size(ino.0)?;
            if offset >= file_size || size == 0 {
                return Ok((Vec::new(), None));
            }
            let len = (offset + size as u64).min(file_size) - offset;
            let (data, n) = io.read(offset, len as usize)?;
            Ok((data, Some(n)))
        })();
        match result {
            Ok((data, from_store)) => {
                self.lock().uncached_read_done(from_store, data.len());
                reply.data(&data)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    #[allow(clippy::too_many_arguments)] // the request's fields, as fuser gives them
    pub(super) fn write(
        &self,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let io = {
            let mut st = self.lock();
            match st.uncached_io(ino.0) {
                Ok(Some(io)) if !data.is_empty() => io,
                Ok(_) => {
                    // Its store reads (partial blocks to fill) without the lock (§14).
                    return match crate::state::write_unlocked(&self.state, st, ino.0, offset, data)
                    {
                        Ok(()) => reply.written(data.len() as u32),
                        Err(e) => reply.error(errno(&e)),
                    };
                }
                Err(e) => return reply.error(errno(&e)),
            }
        };
        // Uncached: the store alone, without the mount's lock; the file's I/O lock is held
        // until its size is updated, so no truncate comes in between.
        let _shared = io.io.read().unwrap_or_else(|p| p.into_inner());
        match io.write(offset, data) {
            Ok(()) => {
                let end = offset + data.len() as u64;
                self.lock().uncached_write_done(ino.0, end, data.len());
                reply.written(data.len() as u32)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(super) fn flush(
        &self,
        ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.flushes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A close: what the kernel wrote to a passthrough image reaches the cache, so the
        // close reports an error doing so. A handle on the block path has nothing to do.
        if !passthrough::is_passed(fh) {
            return reply.ok();
        }
        let mut st = self.lock();
        match self.images.ingest(&mut st, ino.0, fh) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    #[allow(clippy::too_many_arguments)] // the request's fields, as fuser gives them
    pub(super) fn release(
        &self,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let mut st = self.lock();
        self.images.release(&mut st, ino.0, fh);
        st.release_handle(ino.0);
        reply.ok();
    }

    pub(super) fn fsync(&self, ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        // Taken before the lock: the writes this fsync covers were applied already, so a
        // sync begun after it covers them (group commit, `state/group_commit.rs`).
        let mark = self.sync_counter.mark();
        let mut st = self.lock();
        // A passthrough file's writes are in its image: into the cache (journaled) first,
        // after the mark, so such an fsync syncs itself.
        let synced = if passthrough::is_passed(fh) {
            self.images
                .ingest(&mut st, ino.0, fh)
                .and_then(|()| st.fsync(ino.0))
        } else {
            st.fsync_since(ino.0, mark)
        };
        match synced {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(super) fn opendir(&self, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut st = self.lock();
        let result = (|| -> io::Result<Vec<DirListEntry>> {
            let rel = st
                .nodes
                .get(&ino.0)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?
                .path
                .clone();
            let path = st.store_path(&rel);
            st.meta_op();
            let mut entries = vec![
                (ino.0, FileType::Directory, ".".into()),
                (ROOT, FileType::Directory, "..".into()),
            ];
            for entry in fs::read_dir(path)? {
                let entry = entry?;
                let md = entry.metadata()?;
                entries.push((st.node_id(md.ino()), kind_of(&md), entry.file_name()));
            }
            Ok(entries)
        })();
        match result {
            Ok(entries) => {
                let fh = self
                    .next_dir
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.dirs
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(fh, entries);
                reply.opened(FileHandle(fh), FopenFlags::empty())
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(super) fn readdir(
        &self,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let dirs = self.dirs.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entries) = dirs.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        for (i, (id, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*id), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    pub(super) fn releasedir(
        &self,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.dirs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&fh.0);
        reply.ok();
    }

    pub(super) fn fsyncdir(
        &self,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Namespace operations already reached the store before their replies.
        reply.ok();
    }

    pub(super) fn statfs(&self, _ino: INodeNo, reply: ReplyStatfs) {
        let st = self.lock();
        let path = st.store_path(Path::new(""));
        drop(st);
        let s = match statvfs(&path) {
            Ok(s) => s,
            Err(e) => return reply.error(errno(&e)),
        };
        reply.statfs(
            s.f_blocks,
            s.f_bfree,
            s.f_bavail,
            s.f_files,
            s.f_ffree,
            s.f_bsize as u32,
            s.f_namemax as u32,
            s.f_frsize as u32,
        );
    }
}
