//! Room on a file system: how much is free, and taking a file's blocks up front so that a
//! full file system is found at start rather than as ENOSPC mid-run (docs/design.md §11).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Bytes an unprivileged writer may still allocate on the file system holding `path`
/// (statvfs: available blocks times the fragment size).
pub fn free_bytes(path: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated path and `st` points to writable memory of the size
    // statvfs fills; it is read only after statvfs reported success.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it filled the struct.
    let st = unsafe { st.assume_init() };
    // The field types differ between targets (u32 on some 32-bit ones).
    #[allow(clippy::unnecessary_cast)]
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// What [`preallocate`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preallocated {
    /// Every block of `0..len` is allocated.
    Done,
    /// The file system cannot allocate ahead (no fallocate): the file stays sparse.
    Unsupported,
}

/// Allocates the blocks of `0..len` of `file` (a regular file), extending it to `len` if
/// shorter. A file system without the room fails with ENOSPC, and the file keeps its old
/// length (the blocks taken are given back by truncating to it).
pub fn preallocate(file: &File, len: u64) -> io::Result<Preallocated> {
    if len == 0 {
        return Ok(Preallocated::Done);
    }
    let old = file.metadata()?.len();
    let len_off = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "length past off_t"))?;
    // SAFETY: fallocate on a descriptor this function borrows; no memory is passed.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len_off) };
    if rc == 0 {
        return Ok(Preallocated::Done);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(Preallocated::Unsupported),
        _ => {
            // Give back the blocks taken past the old end (a partial allocation stays).
            if file.metadata().map(|m| m.len()).unwrap_or(old) != old {
                let _ = file.set_len(old);
            }
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preallocates_and_reports_free_space() {
        let dir = tempfile::tempdir().unwrap();
        let free = free_bytes(dir.path()).unwrap();
        assert!(free > 0);
        let path = dir.path().join("f");
        let f = crate::open_rw(&path).unwrap();
        match preallocate(&f, 1 << 20).unwrap() {
            Preallocated::Done => {
                use std::os::unix::fs::MetadataExt;
                let m = f.metadata().unwrap();
                assert_eq!(m.len(), 1 << 20);
                // Allocated, not sparse: 512-byte blocks cover the length.
                assert!(m.blocks() * 512 >= 1 << 20, "{} blocks", m.blocks());
            }
            Preallocated::Unsupported => {}
        }
        // Far more than any test machine has: ENOSPC (or EFBIG), and the length is kept.
        let e = preallocate(&f, 1 << 62).unwrap_err();
        assert!(e.raw_os_error().is_some(), "{e}");
        assert_eq!(f.metadata().unwrap().len(), 1 << 20);
        assert!(free_bytes(&dir.path().join("missing")).is_err());
    }
}
