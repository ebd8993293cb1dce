//! The engine's view of its devices: every error counted in [`Health`] (device, op, errno;
//! the first of each kind logged with its offset), and a cache-device error marked as one
//! ([`CacheDeviceError`]) so the request path can serve its request from the backend.

use crate::health::{CacheDeviceError, DeviceOp, DeviceRole, Health};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use tiercache_blockdev::{BlockDevice, DemoteReply, ReapWait, RemoteStats};

/// A device whose errors are counted (see the module docs).
pub(crate) struct Watched {
    inner: Arc<dyn BlockDevice>,
    role: DeviceRole,
    health: Arc<Health>,
    /// Set when an error passes the threshold: the engine looks at it after the failed op.
    pub(crate) crossed: Arc<AtomicBool>,
}

impl Watched {
    pub(crate) fn new(
        inner: Arc<dyn BlockDevice>,
        role: DeviceRole,
        health: Arc<Health>,
        crossed: Arc<AtomicBool>,
    ) -> Self {
        Self {
            inner,
            role,
            health,
            crossed,
        }
    }

    fn seen<T>(&self, op: DeviceOp, offset: u64, r: io::Result<T>) -> io::Result<T> {
        r.map_err(|e| self.note(op, offset, e))
    }

    fn note(&self, op: DeviceOp, offset: u64, e: io::Error) -> io::Error {
        if self.health.record(self.role, op, offset, &e) {
            self.crossed.store(true, Relaxed);
        }
        match self.role {
            DeviceRole::Cache => io::Error::new(
                e.kind(),
                CacheDeviceError {
                    op: op.name(),
                    offset,
                    source: e,
                },
            ),
            DeviceRole::Backend => e,
        }
    }
}

impl BlockDevice for Watched {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.seen(DeviceOp::Read, off, self.inner.read_at(buf, off))
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        self.seen(DeviceOp::Write, off, self.inner.write_at(data, off, fua))
    }
    fn flush(&self) -> io::Result<()> {
        self.seen(DeviceOp::Flush, 0, self.inner.flush())
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        self.seen(DeviceOp::Write, off, self.inner.trim(off, len))
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> io::Result<()> {
        self.seen(DeviceOp::Write, off, self.inner.write_zeroes(off, len, fua))
    }
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<io::Result<()>> {
        let results = self.inner.read_many(reads);
        results
            .into_iter()
            .enumerate()
            .map(|(i, r)| self.seen(DeviceOp::Read, reads[i].0, r))
            .collect()
    }
    fn write_many(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        let first = writes.first().map_or(0, |w| w.0);
        self.seen(DeviceOp::Write, first, self.inner.write_many(writes))
    }
    fn hits_wait_for_device(&self) -> bool {
        self.inner.hits_wait_for_device()
    }
    fn start_reads(&self, reads: &[(u64, u64, u32)]) -> Vec<Option<io::Result<()>>> {
        self.inner
            .start_reads(reads)
            .into_iter()
            .zip(reads)
            .map(|(r, &(_, off, _))| r.map(|r| self.seen(DeviceOp::Read, off, r)))
            .collect()
    }
    fn reap_started(&self, wait: ReapWait, f: &mut dyn FnMut(u64, io::Result<&[u8]>)) -> usize {
        self.inner.reap_started(wait, &mut |tag, r| match r {
            Ok(b) => f(tag, Ok(b)),
            // The offset is the caller's (behind the tag): not known here.
            Err(e) => f(tag, Err(self.note(DeviceOp::Read, 0, e))),
        })
    }
    fn epoch(&self) -> u64 {
        self.inner.epoch()
    }
    fn allocation(&self, off: u64, len: u64) -> io::Result<Vec<tiercache_blockdev::Extent>> {
        self.inner.allocation(off, len)
    }
    fn fast_zeroes(&self) -> bool {
        self.inner.fast_zeroes()
    }
    fn flush_since(&self, epoch: u64) -> io::Result<()> {
        self.seen(DeviceOp::Flush, 0, self.inner.flush_since(epoch))
    }
    fn link_stats(&self) -> Option<RemoteStats> {
        self.inner.link_stats()
    }
    fn multi_conn(&self) -> bool {
        self.inner.multi_conn()
    }
    fn takes_demotes(&self) -> bool {
        self.inner.takes_demotes()
    }
    fn demote_at(
        &self,
        data: &[u8],
        off: u64,
        still_valid: &dyn Fn() -> bool,
    ) -> io::Result<DemoteReply> {
        // A demote's failure fails nothing (the line was clean): not a device error to count.
        self.inner.demote_at(data, off, still_valid)
    }
    fn demote_tracker(&self) -> Option<Arc<dyn std::any::Any + Send + Sync>> {
        self.inner.demote_tracker()
    }
}
