//! Attributes and small helpers of the FUSE glue: store metadata into FUSE attributes (the
//! mount's own size for regular files), errors into errnos.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, FileType, FopenFlags, INodeNo};

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
