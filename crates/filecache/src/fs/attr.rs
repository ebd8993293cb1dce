//! Attributes and small helpers of the FUSE glue: store metadata into FUSE attributes (the
//! mount's own size for regular files), entries, times, statfs, errors into errnos.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, FileType, FopenFlags, Generation, INodeNo, ReplyEntry, TimeOrNow};

use crate::state::State;

pub(super) fn errno(e: &io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

pub(super) fn kind_of(md: &fs::Metadata) -> FileType {
    let ft = md.file_type();
    if ft.is_dir() {
        FileType::Directory
    } else if ft.is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    }
}

pub(super) fn time(secs: i64, nsecs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
    } else {
        UNIX_EPOCH
    }
}

pub(super) fn attr_of(st: &State, id: u64, md: &fs::Metadata) -> FileAttr {
    let size = match st.nodes.get(&id) {
        Some(n) if n.regular => n.size,
        _ => md.len(),
    };
    FileAttr {
        ino: INodeNo(id),
        size,
        blocks: size.div_ceil(512),
        atime: time(md.atime(), md.atime_nsec()),
        mtime: time(md.mtime(), md.mtime_nsec()),
        ctime: time(md.ctime(), md.ctime_nsec()),
        crtime: time(md.ctime(), md.ctime_nsec()),
        kind: kind_of(md),
        perm: (md.mode() & 0o7777) as u16,
        nlink: md.nlink() as u32,
        uid: md.uid(),
        gid: md.gid(),
        rdev: md.rdev() as u32,
        blksize: 4096,
        flags: 0,
    }
}

/// The attributes of `md` for node `id`, remembered for later getattr calls.
pub(super) fn cache_attr(st: &mut State, id: u64, md: &fs::Metadata) -> FileAttr {
    let attr = attr_of(st, id, md);
    if let Some(node) = st.nodes.get_mut(&id) {
        node.attr = Some(attr);
    }
    attr
}

/// Metadata of node `id` from the store (its open file when unlinked).
pub(super) fn node_metadata(st: &mut State, id: u64) -> io::Result<fs::Metadata> {
    let node = st
        .nodes
        .get(&id)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
    if node.unlinked {
        if let Some(f) = &node.file {
            return f.metadata();
        }
    }
    let path = st.store_path(&node.path.clone());
    st.meta_op();
    fs::symlink_metadata(path)
}

pub(super) fn open_flags(st: &State) -> FopenFlags {
    let cfg = st.config();
    if cfg.direct_io {
        FopenFlags::FOPEN_DIRECT_IO
    } else if cfg.kernel_cache {
        // The mount is the store's only writer: what the kernel cached of a file is still
        // its content at the next open.
        FopenFlags::FOPEN_KEEP_CACHE
    } else {
        FopenFlags::empty()
    }
}

/// `FOPEN_NOFLUSH` for a handle that cannot write: its close has nothing to bring into the
/// cache (`CacheFs::flush` does nothing for it), so the kernel skips the `FUSE_FLUSH` round
/// trip (docs/design.md §14). The kernel ignores the flag where it keeps written pages
/// (writeback caching), and a writable handle's close still flushes.
pub(super) fn no_flush(writable: bool) -> FopenFlags {
    if writable {
        FopenFlags::empty()
    } else {
        FopenFlags::FOPEN_NOFLUSH
    }
}

/// A directory's entries changed: its times and link count must be read again.
pub(super) fn forget_attr(st: &mut State, id: u64) {
    if let Some(node) = st.nodes.get_mut(&id) {
        node.attr = None;
    }
}

pub(super) fn child(st: &State, parent: u64, name: &OsStr) -> io::Result<PathBuf> {
    let node = st
        .nodes
        .get(&parent)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
    Ok(node.path.join(name))
}

/// Sets the access and modification times of the store path `path` (`None`: left as they
/// are), not following a symlink.
pub(super) fn set_times(
    path: &Path,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
) -> io::Result<()> {
    let to_spec = |t: Option<TimeOrNow>| match t {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(t)) => {
            let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
            libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            }
        }
    };
    let times = [to_spec(atime), to_spec(mtime)];
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c_path` is a NUL-terminated string and `times` two timespecs, both
    // alive for the call; utimensat reads them and keeps no pointer.
    let rc = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c_path.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The store file system's figures (statvfs of `path`).
pub(super) fn statvfs(path: &Path) -> io::Result<libc::statvfs> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: statvfs writes into the zeroed struct we pass; `c_path` is NUL-terminated
    // and outlives the call.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut s) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(s)
}

impl super::Inner {
    /// Replies with the entry `name` of directory `parent`: from the names and attributes the
    /// mount already knows when it can, else from the store.
    pub(super) fn entry(&self, st: &mut State, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let rel = match child(st, parent, name) {
            Ok(rel) => rel,
            Err(e) => return reply.error(errno(&e)),
        };
        if let Some(names) = st.dir_names(parent) {
            match names.get(name) {
                None => return reply.error(Errno::ENOENT),
                Some(Some(id)) => {
                    let id = *id;
                    if let Some(node) = st.nodes.get(&id) {
                        if let Some(mut attr) = node.attr {
                            if node.regular {
                                attr.size = node.size;
                                attr.blocks = node.size.div_ceil(512);
                            }
                            return reply.entry(
                                &self.options.cache_timeout,
                                &self.sized(attr),
                                Generation(0),
                            );
                        }
                    }
                }
                Some(None) => {}
            }
        }
        let path = st.store_path(&rel);
        st.meta_op();
        match fs::symlink_metadata(&path) {
            Ok(md) => {
                let id = match st.remember(rel, &md) {
                    Ok(id) => id,
                    Err(e) => return reply.error(errno(&e)),
                };
                st.name_added(parent, name, Some(id));
                let attr = cache_attr(st, id, &md);
                reply.entry(
                    &self.options.cache_timeout,
                    &self.sized(attr),
                    Generation(0),
                );
            }
            Err(e) => {
                if e.kind() == io::ErrorKind::NotFound {
                    st.name_removed(parent, name);
                }
                reply.error(errno(&e))
            }
        }
    }
}
