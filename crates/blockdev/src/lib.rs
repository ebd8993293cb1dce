//! One block-device abstraction for tiercache: [`BlockDevice`].
//!
//! The NBD server (`tiercache-nbd`) exports any `BlockDevice`, and the engine
//! (`tiercache-engine`) uses one for its cache device and one for each backend, so anything
//! that is a block device can be both: a file, memory, a remote NBD export, an emulated slow
//! device, or a whole engine (an engine can be another engine's backend in-process).
//!
//! This crate holds the trait, its blanket implementation for [`Arc`], and the two devices
//! everything else builds on: [`MemDevice`] (bytes in memory) and [`FileDevice`] (a regular
//! file or block device: pread/pwrite, O_DIRECT, io_uring through [`uring`]). It also holds
//! the small types the trait's optional methods speak in: [`DemoteReply`] (what a cache
//! level below did with a demoted line), [`RemoteStats`] (counters of a device reached over
//! a network link) and [`ReapWait`] (what a reap of started reads waits for).
#![warn(missing_docs)]

pub mod extent;
mod file;
mod mem;
pub mod space;
pub mod uring;

pub use extent::{Extent, Extents};
pub use file::{open_rw, FileDevice, DIRECT_ALIGN};
pub use mem::MemDevice;

use std::any::Any;
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

/// What [`BlockDevice::reap_started`] waits for when none of the calling thread's started
/// reads has finished (and some are in flight).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReapWait {
    /// Nothing: hands over what finished, if anything.
    No,
    /// One started read to finish.
    Completion,
    /// One started read to finish, or the descriptor to have bytes to read (or an error or
    /// hang-up to report), whichever comes first: a server's next request is taken as it
    /// arrives instead of waiting behind the device. The reap then hands over nothing.
    /// Where a device cannot wait on both, it waits for a completion only.
    CompletionOrReadable(RawFd),
}

/// A byte-addressed block device: fixed size, synchronous, shared by many threads.
///
/// # Protocol
///
/// - **Size.** [`size`](Self::size) is the device's length in bytes and does not change while
///   the device is in use. Offsets and lengths are in bytes, with no alignment required
///   (devices that have an alignment, such as an O_DIRECT file, handle unaligned requests
///   themselves).
/// - **Ranges.** A request whose range ends past `size` (or overflows) fails with
///   [`io::ErrorKind::InvalidInput`] and changes nothing.
/// - **Reads.** [`read_at`](Self::read_at) fills the whole buffer or fails: a short read is an
///   error, never a partial success.
/// - **Writes.** [`write_at`](Self::write_at) writes all of `data` or fails (after a failure
///   the range's contents are unspecified). A write is *completed* once it returned `Ok`: later
///   reads see it. With `fua` (NBD's Force Unit Access) this write is durable when the call
///   returns; without it, it may be lost in a power loss until the next
///   [`flush`](Self::flush).
/// - **Durability.** [`flush`](Self::flush) makes every write completed before the call durable
///   (survives a power loss). Remote devices count the events that may have lost completed
///   writes ([`epoch`](Self::epoch)): [`flush_since`](Self::flush_since) fails if such an event
///   came since the given epoch, so the caller knows to write again.
/// - **Trim.** [`trim`](Self::trim) is a hint that a range is no longer needed: afterwards its
///   reads return unspecified data until it is written (each device documents what it returns;
///   [`MemDevice`] returns zeroes). [`write_zeroes`](Self::write_zeroes) makes a range read as
///   zeroes, durably with `fua`.
/// - **Thread safety.** Every method may be called from any thread, concurrently with any
///   other. Concurrent requests on overlapping ranges (a write with a read or another write)
///   land in an unspecified order and a read may see a mix; callers that care order them (the
///   engine's ordering table does). Reads started with [`start_reads`](Self::start_reads)
///   belong to the starting thread and are reaped there.
/// - **Optional methods.** Everything past `flush` has a default that is correct for any
///   device (batched methods run one request after another; "fast" and "started" paths claim
///   nothing; no demotes are taken), so a device overrides only what it does better.
pub trait BlockDevice: Send + Sync {
    /// The device's size in bytes (fixed while it is in use).
    fn size(&self) -> u64;

    /// Fills all of `buf` from byte `off` (a short read is an error).
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()>;

    /// Writes all of `data` at byte `off`; with `fua` the write is durable when this returns.
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()>;

    /// Makes every write completed before this call durable.
    fn flush(&self) -> io::Result<()>;

    /// Tells the device `len` bytes at `off` are no longer needed: a hint, after which reads of
    /// the range return unspecified data until it is written. Default: checks the range and
    /// keeps the data.
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        check_range(off, len, self.size())
    }

    /// Makes `len` bytes at `off` read as zeroes (durable on return with `fua`). Default:
    /// writes zeroes a MiB at a time with [`write_at`](Self::write_at), then
    /// [`flush`](Self::flush) if `fua`.
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> io::Result<()> {
        check_range(off, len, self.size())?;
        const CHUNK: u64 = 1 << 20;
        let zeros = vec![0u8; CHUNK.min(len) as usize];
        let mut at = 0;
        while at < len {
            let n = CHUNK.min(len - at);
            self.write_at(&zeros[..n as usize], off + at, false)?;
            at += n;
        }
        if fua {
            self.flush()?;
        }
        Ok(())
    }

    /// Fills each `(offset, buffer)` of `reads`, handing the device as many at once as it can
    /// take (one io_uring submission for a [`FileDevice`] with io_uring on); one result per
    /// read, in order. Default: one [`read_at`](Self::read_at) after another.
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<io::Result<()>> {
        reads
            .iter_mut()
            .map(|(off, buf)| self.read_at(buf, *off))
            .collect()
    }

    /// Writes each `(offset, data)` of `writes` (which do not overlap; none with FUA), as many
    /// at once as the device can take (pipelined over a remote's connections); the first
    /// error, once every write ended. Default: one [`write_at`](Self::write_at) after another.
    fn write_many(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        writes
            .iter()
            .try_for_each(|(off, data)| self.write_at(data, *off, false))
    }

    /// Serves a read at once if that is cheap (e.g. a cache hit): `None` means "not cheap, run
    /// it with [`read_at`](Self::read_at)" (nothing was done). Servers call it from a
    /// connection's reader to skip a thread hand-off. Default: claims no read.
    fn read_fast(&self, buf: &mut [u8], off: u64) -> Option<io::Result<()>> {
        let _ = (buf, off);
        None
    }

    /// [`read_fast`](Self::read_fast) for several reads waiting at once (`(offset, buffer)`
    /// each), so the device can start them together (one io_uring submission for an engine's
    /// hits); one answer per read, in order, `None` for a read not claimed. Default: asks
    /// `read_fast` one read after another.
    fn read_fast_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<Option<io::Result<()>>> {
        reads
            .iter_mut()
            .map(|(off, buf)| self.read_fast(buf, *off))
            .collect()
    }

    /// As [`read_fast`](Self::read_fast) for a write (e.g. a write-back cache hit); FUA writes
    /// are never offered. Default: claims no write.
    fn write_fast(&self, data: &[u8], off: u64) -> Option<io::Result<()>> {
        let _ = (data, off);
        None
    }

    /// Whether even cheap reads wait for a device (an engine over an O_DIRECT cache file): a
    /// server then starts a connection's reads with [`start_reads`](Self::start_reads) and
    /// answers them as [`reap_started`](Self::reap_started) hands them back, several
    /// submissions in flight at once, instead of serving them one batch at a time. Default:
    /// `false`.
    fn hits_wait_for_device(&self) -> bool {
        false
    }

    /// Starts reads `(tag, offset, len)` without waiting, where the device can: per read
    /// `None` (not started, nothing done: run it with [`read_at`](Self::read_at)), `Some(Ok)`
    /// (started: its bytes come, with its tag, from [`reap_started`](Self::reap_started) on
    /// this same thread) or `Some(Err)` (failed). Tags are the caller's; they must be unique
    /// among the reads in flight on the calling thread. Default: starts none.
    fn start_reads(&self, reads: &[(u64, u64, u32)]) -> Vec<Option<io::Result<()>>> {
        reads.iter().map(|_| None).collect()
    }

    /// Hands each finished started read of this thread to `f` (its tag, its bytes or its
    /// error), first waiting as `wait` says if none finished and some are in flight; returns
    /// how many were handed over (0 after a wait ended by a readable descriptor). Default:
    /// none (no read is ever started).
    fn reap_started(&self, wait: ReapWait, f: &mut dyn FnMut(u64, io::Result<&[u8]>)) -> usize {
        let _ = (wait, f);
        0
    }

    /// A counter of events that may have lost completed writes (a remote's connection
    /// losses): read it before writing, pass it to [`flush_since`](Self::flush_since). Local
    /// devices have none. Default: 0.
    fn epoch(&self) -> u64 {
        0
    }

    /// As [`flush`](Self::flush), but fails if writes completed since `epoch` may have been
    /// lost (they must be written again). Default: [`flush`](Self::flush).
    fn flush_since(&self, epoch: u64) -> io::Result<()> {
        let _ = epoch;
        self.flush()
    }

    /// Fault and retry counters of the network link under a remote device. Default: `None`
    /// (not remote).
    fn link_stats(&self) -> Option<RemoteStats> {
        None
    }

    /// Whether several NBD connections may safely share the device (their FLUSH then covers
    /// every connection's writes). Default: `false`.
    fn multi_conn(&self) -> bool {
        false
    }

    /// Whether [`demote_at`](Self::demote_at) can reach a cache level (an engine in this
    /// process, or a remote tiercache that negotiated the DEMOTE extension). Default: `false`.
    fn takes_demotes(&self) -> bool {
        false
    }

    /// Offers a clean copy of `data` at `off`, which a cache above evicts, to the cache level
    /// this device is (exclusive caching, docs/design.md §4.7). The device keeps it only if
    /// `still_valid()` holds when it decides (a cache calls it under the lock its writes are
    /// decided under, so no write of these bytes can be decided in between). Default: takes
    /// nothing ([`DemoteReply::Rejected`]).
    fn demote_at(
        &self,
        data: &[u8],
        off: u64,
        still_valid: &dyn Fn() -> bool,
    ) -> io::Result<DemoteReply> {
        let _ = (data, off, still_valid);
        Ok(DemoteReply::Rejected)
    }

    /// The race-safety state an NBD server shares among a device's connections when it offers
    /// demotes into it (`tiercache_nbd::DemoteTracker`, which the server downcasts to; typed
    /// loosely here because a block device does not depend on a protocol). Default: `None`,
    /// demotes are not offered.
    fn demote_tracker(&self) -> Option<Arc<dyn Any + Send + Sync>> {
        None
    }

    /// The allocation of the bytes from `off`: runs of [`extent::HOLE`] / [`extent::ZERO`]
    /// state or data (flags 0), the first at `off`, covering at least one byte when `len` is
    /// not zero, at most [`extent::MAX_EXTENTS`] runs, and no further than `len` (a reply may
    /// cover less; the caller asks again). Default: checks the range, all data (always true:
    /// data may hold zeroes).
    fn allocation(&self, off: u64, len: u64) -> io::Result<Vec<Extent>> {
        check_range(off, len, self.size())?;
        let mut x = Extents::new();
        x.push(len, 0);
        Ok(x.into_vec())
    }

    /// What a cache holds of the bytes from `off`: runs of [`extent::RESIDENT`] and
    /// [`extent::DIRTY`] state, as [`allocation`](Self::allocation) bounds them. Default:
    /// `None`, the device is no cache.
    fn cache_state(&self, off: u64, len: u64) -> Option<io::Result<Vec<Extent>>> {
        let _ = (off, len);
        None
    }

    /// Whether [`write_zeroes`](Self::write_zeroes) takes less time than writing the zeroes
    /// (NBD's fast zero: a client that asks for it is refused at once otherwise). Default:
    /// `false`.
    fn fast_zeroes(&self) -> bool {
        false
    }
}

impl<D: BlockDevice + ?Sized> BlockDevice for Arc<D> {
    fn size(&self) -> u64 {
        (**self).size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        (**self).read_at(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        (**self).write_at(data, off, fua)
    }
    fn flush(&self) -> io::Result<()> {
        (**self).flush()
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        (**self).trim(off, len)
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> io::Result<()> {
        (**self).write_zeroes(off, len, fua)
    }
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<io::Result<()>> {
        (**self).read_many(reads)
    }
    fn write_many(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        (**self).write_many(writes)
    }
    fn read_fast(&self, buf: &mut [u8], off: u64) -> Option<io::Result<()>> {
        (**self).read_fast(buf, off)
    }
    fn read_fast_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<Option<io::Result<()>>> {
        (**self).read_fast_many(reads)
    }
    fn write_fast(&self, data: &[u8], off: u64) -> Option<io::Result<()>> {
        (**self).write_fast(data, off)
    }
    fn hits_wait_for_device(&self) -> bool {
        (**self).hits_wait_for_device()
    }
    fn start_reads(&self, reads: &[(u64, u64, u32)]) -> Vec<Option<io::Result<()>>> {
        (**self).start_reads(reads)
    }
    fn reap_started(&self, wait: ReapWait, f: &mut dyn FnMut(u64, io::Result<&[u8]>)) -> usize {
        (**self).reap_started(wait, f)
    }
    fn epoch(&self) -> u64 {
        (**self).epoch()
    }
    fn flush_since(&self, epoch: u64) -> io::Result<()> {
        (**self).flush_since(epoch)
    }
    fn link_stats(&self) -> Option<RemoteStats> {
        (**self).link_stats()
    }
    fn multi_conn(&self) -> bool {
        (**self).multi_conn()
    }
    fn takes_demotes(&self) -> bool {
        (**self).takes_demotes()
    }
    fn demote_at(
        &self,
        data: &[u8],
        off: u64,
        still_valid: &dyn Fn() -> bool,
    ) -> io::Result<DemoteReply> {
        (**self).demote_at(data, off, still_valid)
    }
    fn demote_tracker(&self) -> Option<Arc<dyn Any + Send + Sync>> {
        (**self).demote_tracker()
    }
    fn allocation(&self, off: u64, len: u64) -> io::Result<Vec<Extent>> {
        (**self).allocation(off, len)
    }
    fn cache_state(&self, off: u64, len: u64) -> Option<io::Result<Vec<Extent>>> {
        (**self).cache_state(off, len)
    }
    fn fast_zeroes(&self) -> bool {
        (**self).fast_zeroes()
    }
}

/// Checks that `len` bytes at `off` lie inside a device of `size` bytes: an
/// [`io::ErrorKind::InvalidInput`] error naming the range otherwise.
pub fn check_range(off: u64, len: u64, size: u64) -> io::Result<()> {
    match off.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("range {off}+{len} beyond the device's {size} bytes"),
        )),
    }
}

/// What a cache level below did with a demoted line ([`BlockDevice::demote_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum DemoteReply {
    /// It keeps the data (inserted at its "evict last" end).
    Accepted,
    /// It already held the line; nothing was written.
    AlreadyHeld,
    /// It refused (no room, or it cannot prove the data is current); nothing was written.
    Rejected,
}

/// A snapshot of the counters of a device reached over a network link (a remote NBD
/// export's pool of connections): [`BlockDevice::link_stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RemoteStats {
    /// The remote, as a URI.
    pub uri: String,
    /// Connections in the pool.
    pub connections: usize,
    /// Requests asked of the pool (before retries).
    pub requests: u64,
    /// Attempts repeated after a failure.
    pub retries: u64,
    /// Error replies from the server (the connection stayed up).
    pub error_replies: u64,
    /// Requests unanswered within the timeout (the connection was declared stalled).
    pub timeouts: u64,
    /// Connections that died (closed, reset, stalled, or broke the protocol).
    pub connection_losses: u64,
    /// Connections opened again after a loss.
    pub reconnects: u64,
    /// Connection attempts that failed.
    pub failed_connects: u64,
    /// Requests that failed after every retry (the caller got an error).
    pub failed_requests: u64,
    /// FLUSHes acknowledged by the remote.
    pub flushes: u64,
    /// FLUSHes acknowledged but refused here because a connection died since the writes
    /// they were to cover.
    pub flushes_refused: u64,
    /// Whether the server took tiercache's DEMOTE extension.
    pub demote_negotiated: bool,
    /// DEMOTEs sent.
    pub demotes_sent: u64,
    /// DEMOTEs the server kept.
    pub demotes_accepted: u64,
    /// DEMOTEs of lines the server already held.
    pub demotes_already_held: u64,
    /// DEMOTEs the server refused.
    pub demotes_rejected: u64,
    /// DEMOTEs that failed (connection lost, error reply): nothing is retried.
    pub demotes_failed: u64,
}
