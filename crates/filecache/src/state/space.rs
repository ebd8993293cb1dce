//! Room for the mount's cache at start (docs/design.md §11): the block file's blocks taken up
//! front and the journal's largest size checked, so a cache directory without the room is an
//! error naming it at mount, never ENOSPC on a later write the store could have taken.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Takes the blocks of the cache's block file (`len` bytes: the capacity and its spare slots)
/// up front (docs/design.md §11): a cache directory without the room is an error now, naming
/// the directory, the size asked and the space free, not ENOSPC on some later write. Where
/// the file system cannot allocate ahead, its free space is checked against what the file
/// still lacks.
pub(super) fn reserve_blocks(
    file: &File,
    path: &Path,
    cache_dir: &Path,
    len: u64,
) -> io::Result<()> {
    use tiercache_blockdev::space::{free_bytes, preallocate, Preallocated};
    let no_room = |free: u64, e: Option<io::Error>| {
        io::Error::new(
            io::ErrorKind::StorageFull,
            format!(
                "cache directory {}: the cache needs {len} bytes for {} (its capacity and spare \
                 slots), and {free} bytes are free there{}: make room, or lower --cache-size",
                cache_dir.display(),
                path.display(),
                e.map_or(String::new(), |e| format!(" ({e})"))
            ),
        )
    };
    match preallocate(file, len) {
        Ok(Preallocated::Done) => Ok(()),
        Ok(Preallocated::Unsupported) => {
            let have = file.metadata()?.blocks() * 512;
            let free = free_bytes(cache_dir)?;
            if have.saturating_add(free) < len {
                return Err(no_room(free, None));
            }
            Ok(())
        }
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)) => {
            Err(no_room(free_bytes(cache_dir).unwrap_or(0), Some(e)))
        }
        Err(e) => Err(e),
    }
}

/// Checks that the cache directory has room for the journal at its largest
/// ([`crate::journal::max_bytes`]) once the block file took the `to_take` bytes it still
/// lacks: a journal append failing with ENOSPC would fail a write the store could take.
pub(super) fn check_journal_room(
    journal: &Path,
    cache_dir: &Path,
    capacity_blocks: u32,
    to_take: u64,
) -> io::Result<()> {
    let most = crate::journal::max_bytes(capacity_blocks);
    let now = std::fs::metadata(journal).map_or(0, |m| m.len());
    let free = tiercache_blockdev::space::free_bytes(cache_dir)?;
    if to_take > free {
        // The block file itself does not fit: its allocation says so.
        return Ok(());
    }
    let free = free - to_take;
    if now.saturating_add(free) < most {
        return Err(io::Error::new(
            io::ErrorKind::StorageFull,
            format!(
                "cache directory {}: the cache's journal may take {most} bytes, and {free} bytes \
                 are free there besides the block file: make room, or lower --cache-size",
                cache_dir.display()
            ),
        ));
    }
    Ok(())
}
