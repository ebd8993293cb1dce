//! Devices the engine reads and writes: byte-addressed, thread-safe, synchronous.
//!
//! [`FileDevice`] is a file or block device (pread/pwrite, fdatasync); [`MemDevice`] keeps
//! bytes in memory for tests; [`Emulated`] makes any device take as long as a SPEC §5 preset
//! would, so a fast-cache/slow-backend system can be built on one machine; [`CrashDevice`]
//! records every write so tests can rebuild the device as a power loss would leave it;
//! [`NbdBackend`] is a remote NBD export.

mod crash;
mod emulated;
pub(crate) mod file;
mod remote;
pub mod uring;
mod volumes;

pub use crash::{CrashDevice, CrashLog};
pub use emulated::Emulated;
pub use file::FileDevice;
pub use remote::NbdBackend;
pub use volumes::{DuplicateVolume, VolumeSet};

use std::io;
use std::sync::RwLock;

/// A byte-addressed storage device.
pub trait Device: Send + Sync {
    /// Fills `buf` from byte `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes `data` at byte `offset`.
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()>;
    /// Fills each `(offset, buf)` of `reads`, handing the device as many at once as it can
    /// take (one io_uring submission for a [`FileDevice`] with io_uring on); one result per
    /// read, in order. Default: one [`read_at`](Self::read_at) after another.
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<io::Result<()>> {
        reads
            .iter_mut()
            .map(|(offset, buf)| self.read_at(buf, *offset))
            .collect()
    }
    /// Starts reads `(offset, len, tag)` without waiting for them, where the device can (a
    /// [`FileDevice`] with io_uring on): their bytes come back, tagged, from
    /// [`uring::reap_started`] on the calling thread. `None`: the device cannot (read them
    /// with [`read_at`](Self::read_at)); else one result per read (an error: not started).
    fn start_reads(&self, reads: &[(u64, usize, u64)]) -> Option<Vec<io::Result<()>>> {
        let _ = reads;
        None
    }
    /// Writes each `(offset, data)` of `writes` (which do not overlap), as many at once as
    /// the device can take (pipelined over a remote's connections); the first error, once
    /// every write ended. Default: one [`write_at`](Self::write_at) after another.
    fn write_many(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        writes
            .iter()
            .try_for_each(|(offset, data)| self.write_at(data, *offset))
    }
    /// Makes every completed write durable.
    fn sync(&self) -> io::Result<()>;
    /// A counter of events that may have lost completed writes (a remote's connection
    /// losses); local devices have none. Read it before writing, pass it to
    /// [`sync_since`](Self::sync_since).
    fn epoch(&self) -> u64 {
        0
    }
    /// As [`sync`](Self::sync), but fails if writes completed since `epoch` may have been lost
    /// (they must be written again).
    fn sync_since(&self, epoch: u64) -> io::Result<()> {
        let _ = epoch;
        self.sync()
    }
    /// Fault and retry counters of a remote device.
    fn link_stats(&self) -> Option<tiercache_nbd::RemoteStats> {
        None
    }
    /// Tells the device a range is no longer needed (a hint; contents become unspecified).
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }
    /// Whether [`demote`](Self::demote) can reach a cache level below (a remote tiercache
    /// that negotiated the DEMOTE extension, or an engine in this process).
    fn takes_demotes(&self) -> bool {
        false
    }
    /// Hands a clean copy of `data` at `offset`, which the cache above evicts, to the level
    /// below (exclusive caching, SPEC §4.7). The default keeps nothing.
    fn demote(&self, data: &[u8], offset: u64) -> io::Result<tiercache_nbd::DemoteReply> {
        let _ = (data, offset);
        Ok(tiercache_nbd::DemoteReply::Rejected)
    }
    /// Size in bytes.
    fn len(&self) -> u64;
    /// Whether the device has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<D: Device + ?Sized> Device for std::sync::Arc<D> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).read_at(buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        (**self).write_at(data, offset)
    }
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<io::Result<()>> {
        (**self).read_many(reads)
    }
    fn write_many(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        (**self).write_many(writes)
    }
    fn start_reads(&self, reads: &[(u64, usize, u64)]) -> Option<Vec<io::Result<()>>> {
        (**self).start_reads(reads)
    }
    fn sync(&self) -> io::Result<()> {
        (**self).sync()
    }
    fn epoch(&self) -> u64 {
        (**self).epoch()
    }
    fn sync_since(&self, epoch: u64) -> io::Result<()> {
        (**self).sync_since(epoch)
    }
    fn link_stats(&self) -> Option<tiercache_nbd::RemoteStats> {
        (**self).link_stats()
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        (**self).discard(offset, len)
    }
    fn takes_demotes(&self) -> bool {
        (**self).takes_demotes()
    }
    fn demote(&self, data: &[u8], offset: u64) -> io::Result<tiercache_nbd::DemoteReply> {
        (**self).demote(data, offset)
    }
    fn len(&self) -> u64 {
        (**self).len()
    }
}

pub(crate) fn check_range(offset: u64, len: usize, size: u64) -> io::Result<()> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= size => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("range {offset}+{len} beyond the device's {size} bytes"),
        )),
    }
}

/// Bytes in memory (tests, examples).
#[derive(Debug)]
pub struct MemDevice(RwLock<Vec<u8>>);

impl MemDevice {
    /// A zero-filled device of `size` bytes.
    pub fn new(size: usize) -> Self {
        Self(RwLock::new(vec![0; size]))
    }

    /// A device holding `bytes`.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Self(RwLock::new(bytes))
    }

    /// A copy of the contents.
    pub fn snapshot(&self) -> Vec<u8> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Device for MemDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let v = self.0.read().unwrap_or_else(|e| e.into_inner());
        check_range(offset, buf.len(), v.len() as u64)?;
        buf.copy_from_slice(&v[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        let mut v = self.0.write().unwrap_or_else(|e| e.into_inner());
        check_range(offset, data.len(), v.len() as u64)?;
        v[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
    fn len(&self) -> u64 {
        self.0.read().unwrap_or_else(|e| e.into_inner()).len() as u64
    }
}
