//! A file or block device through pread/pwrite.

use super::{check_range, Device};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// A regular file or block device. Writes go through the page cache; `sync` is fdatasync.
#[derive(Debug)]
pub struct FileDevice {
    file: File,
    len: u64,
}

impl FileDevice {
    /// Opens `path` read-write. A regular file is created when missing and extended (sparse)
    /// to `min_len` bytes when shorter; a block device keeps its size.
    pub fn open(path: &Path, min_len: u64) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let meta = file.metadata()?;
        let mut len = if meta.file_type().is_file() {
            meta.len()
        } else {
            // Block devices report 0 as their metadata length: ask for the end.
            use std::io::Seek;
            (&file).seek(io::SeekFrom::End(0))?
        };
        if len < min_len && meta.file_type().is_file() {
            file.set_len(min_len)?;
            len = min_len;
        }
        Ok(Self { file, len })
    }
}

impl Device for FileDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        check_range(offset, buf.len(), self.len)?;
        self.file.read_exact_at(buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        check_range(offset, data.len(), self.len)?;
        self.file.write_all_at(data, offset)
    }
    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        check_range(offset, len as usize, self.len)?;
        // SAFETY: fallocate only reads its integer arguments; the fd is owned by `self.file`
        // and open for the duration of the call.
        let r = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        // Punching holes is an optimisation: file systems without it keep the data.
        if r != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
                return Err(e);
            }
        }
        Ok(())
    }
    fn len(&self) -> u64 {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_extends_and_punches_holes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("dev");
        let d = FileDevice::open(&p, 1 << 20).unwrap();
        assert_eq!(d.len(), 1 << 20);
        d.write_at(&[7u8; 8192], 4096).unwrap();
        d.discard(4096, 4096).unwrap();
        let mut b = [1u8; 4096];
        d.read_at(&mut b, 4096).unwrap();
        assert_eq!(b, [0u8; 4096], "a punched hole reads as zeroes");
        d.read_at(&mut b, 8192).unwrap();
        assert_eq!(b, [7u8; 4096]);
        assert!(d.read_at(&mut b, (1 << 20) - 100).is_err());
        // Reopening keeps size and data.
        let d2 = FileDevice::open(&p, 4096).unwrap();
        assert_eq!(d2.len(), 1 << 20);
    }
}
