//! The devices a server exports.

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::RwLock;

/// A byte-addressed block device served over NBD.
pub trait BlockDevice: Send + Sync {
    /// Export size in bytes.
    fn size(&self) -> u64;
    /// Fill `buf` from offset `off`.
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()>;
    /// Write `data` at `off`; `fua` asks for durability before return.
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()>;
    /// Make all completed writes durable.
    fn flush(&self) -> io::Result<()>;
    /// Discard a range (contents become zero here).
    fn trim(&self, off: u64, len: u64) -> io::Result<()>;
    /// Zero a range.
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> io::Result<()>;
    /// Serves a read at once if that is cheap (e.g. a cache hit): `None` means "not cheap,
    /// run it on a worker". Servers call it from the connection's reader to skip a thread
    /// hand-off; the default never claims a read.
    fn read_fast(&self, buf: &mut [u8], off: u64) -> Option<io::Result<()>> {
        let _ = (buf, off);
        None
    }
    /// [`read_fast`](Self::read_fast) for several reads a connection has waiting at once
    /// (`(offset, buffer)` each), so the device can start them together (one io_uring
    /// submission for the engine's hits); one answer per read, in order, `None` for a read
    /// not claimed. The default asks `read_fast` one read after another.
    fn read_fast_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<Option<io::Result<()>>> {
        reads
            .iter_mut()
            .map(|(off, buf)| self.read_fast(buf, *off))
            .collect()
    }
    /// Whether even cache hits wait for a device (an O_DIRECT cache file): the server then
    /// starts a connection's reads with [`start_reads`](Self::start_reads) and answers them
    /// as [`reap_started`](Self::reap_started) hands them back, several submissions in
    /// flight at once, instead of serving hits one batch at a time.
    fn hits_wait_for_device(&self) -> bool {
        false
    }
    /// Starts reads `(tag, offset, len)` without waiting, where that is cheap (cache hits):
    /// per read `None` (not started: run it as usual), `Some(Ok)` (started: its bytes come
    /// from [`reap_started`](Self::reap_started), on this same thread) or `Some(Err)`.
    /// The default starts none.
    fn start_reads(&self, reads: &[(u64, u64, u32)]) -> Vec<Option<io::Result<()>>> {
        reads.iter().map(|_| None).collect()
    }
    /// Hands each finished started read of this thread to `f` (tag, bytes or error), first
    /// waiting for one with `wait` if none finished and some are in flight; returns how many.
    fn reap_started(&self, wait: bool, f: &mut dyn FnMut(u64, io::Result<&[u8]>)) -> usize {
        let _ = (wait, f);
        0
    }
    /// As [`read_fast`](Self::read_fast) for a write (e.g. a write-back cache hit); FUA
    /// writes are never offered. The default never claims a write.
    fn write_fast(&self, data: &[u8], off: u64) -> Option<io::Result<()>> {
        let _ = (data, off);
        None
    }
    /// Whether several connections may safely share the export.
    fn multi_conn(&self) -> bool {
        false
    }
    /// Takes a clean copy of `data` at `off` that a cache above evicts (tiercache's DEMOTE
    /// extension, [`crate::demote`]), if `still_valid()` holds when the device decides (a
    /// cache calls it under the lock its writes are decided under, so no write of these
    /// bytes can be decided in between). The default takes nothing.
    fn demote_at(
        &self,
        data: &[u8],
        off: u64,
        still_valid: &dyn Fn() -> bool,
    ) -> io::Result<crate::DemoteReply> {
        let _ = (data, off, still_valid);
        Ok(crate::DemoteReply::Rejected)
    }
    /// The race-safety state shared by every connection when the device is served with
    /// demotes offered ([`crate::DemoteExport`]); `None`: demotes are not offered.
    fn demote_tracker(&self) -> Option<std::sync::Arc<crate::DemoteTracker>> {
        None
    }
}

/// In-memory device for tests.
pub struct MemDevice(RwLock<Vec<u8>>);
impl MemDevice {
    /// A zero-filled device of `size` bytes.
    pub fn new(size: usize) -> Self {
        MemDevice(RwLock::new(vec![0; size]))
    }
}
fn range(off: u64, len: u64, size: u64) -> io::Result<(usize, usize)> {
    match off.checked_add(len) {
        Some(end) if end <= size => Ok((off as usize, end as usize)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "range beyond device",
        )),
    }
}
impl BlockDevice for MemDevice {
    fn size(&self) -> u64 {
        self.0.read().unwrap().len() as u64
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let v = self.0.read().unwrap();
        let (a, b) = range(off, buf.len() as u64, v.len() as u64)?;
        buf.copy_from_slice(&v[a..b]);
        Ok(())
    }
    fn write_at(&self, data: &[u8], off: u64, _fua: bool) -> io::Result<()> {
        let mut v = self.0.write().unwrap();
        let (a, b) = range(off, data.len() as u64, v.len() as u64)?;
        v[a..b].copy_from_slice(data);
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        self.write_zeroes(off, len, false)
    }
    fn write_zeroes(&self, off: u64, len: u64, _fua: bool) -> io::Result<()> {
        let mut v = self.0.write().unwrap();
        let (a, b) = range(off, len, v.len() as u64)?;
        v[a..b].fill(0);
        Ok(())
    }
    fn multi_conn(&self) -> bool {
        true
    }
}

/// File-backed device (pread/pwrite; fdatasync for flush and FUA).
pub struct FileDevice {
    file: std::fs::File,
    size: u64,
}
impl FileDevice {
    /// Wrap an open read-write file; its current length is the export size.
    pub fn new(file: std::fs::File) -> io::Result<Self> {
        let size = file.metadata()?.len();
        Ok(FileDevice { file, size })
    }
}
impl BlockDevice for FileDevice {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        self.file.write_all_at(data, off)?;
        if fua {
            self.file.sync_data()?;
        }
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        // No hole punching yet: zeroing keeps trim semantics (reads return zeroes).
        self.write_zeroes(off, len, false)
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> io::Result<()> {
        range(off, len, self.size)?;
        let zeros = vec![0u8; 1 << 20];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(zeros.len() as u64);
            self.file.write_all_at(&zeros[..n as usize], off + done)?;
            done += n;
        }
        if fua {
            self.file.sync_data()?;
        }
        Ok(())
    }
}
