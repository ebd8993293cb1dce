//! Requests on uncached files, outside the mount's lock (docs/design.md §4.9, parallel
//! dispatch): a file the cache does not hold (every file of a mount without a cache, or one
//! unlinked while open) is served by its store file alone, so the lock is taken only to find
//! the file and to count; the store's I/O and latency run without it, in parallel with
//! requests on other files. Its per-file [`StoreIo::io`] lock orders a truncate against
//! reads and writes of that file in flight (writes share it: the store orders them).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::State;
use crate::recovery::pread_full;
use crate::store::StoreLatency;

/// What an uncached request needs once the mount's lock is let go.
pub struct StoreIo {
    file: Arc<File>,
    /// The file's I/O lock: shared by reads and writes, exclusive for a truncate.
    pub io: Arc<RwLock<()>>,
    latency: StoreLatency,
    in_flight: Arc<(AtomicU64, AtomicU64)>,
}

/// Counts one store operation in flight while alive.
pub(super) struct InFlight<'a>(&'a (AtomicU64, AtomicU64));

impl<'a> InFlight<'a> {
    pub(super) fn start(counters: &'a (AtomicU64, AtomicU64)) -> Self {
        let now = counters.0.fetch_add(1, Ordering::Relaxed) + 1;
        counters.1.fetch_max(now, Ordering::Relaxed);
        InFlight(counters)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl State {
    /// The store I/O of file `id` if it is uncached (`None`: the cache serves it, under the
    /// mount's lock).
    pub fn uncached_io(&mut self, id: u64) -> io::Result<Option<StoreIo>> {
        if self.cached(id) || !self.nodes.get(&id).is_some_and(|n| n.regular) {
            return Ok(None);
        }
        let file = self.store_file(id)?;
        let node = self
            .nodes
            .get(&id)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        Ok(Some(StoreIo {
            file,
            io: node.io.clone(),
            latency: self.cfg.latency,
            in_flight: self.in_flight.clone(),
        }))
    }

    /// The I/O lock of file `id` (a truncate takes it exclusively before the mount's lock).
    pub fn file_io_lock(&self, id: u64) -> Option<Arc<RwLock<()>>> {
        self.nodes.get(&id).map(|n| n.io.clone())
    }

    /// The size of file `id` as the mount knows it.
    pub fn file_size(&self, id: u64) -> io::Result<u64> {
        self.nodes
            .get(&id)
            .map(|n| n.size)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))
    }

    /// Counts an uncached read returning `out` bytes, `store` of them read from the store
    /// (`None`: past the end, no store read).
    pub fn uncached_read_done(&mut self, store: Option<usize>, out: usize) {
        self.note_request();
        self.stats.reads += 1;
        if let Some(n) = store {
            self.stats.store_reads += 1;
            self.stats.store_bytes_read += n as u64;
        }
        self.stats.bytes_read += out as u64;
    }

    /// Counts an uncached write of `len` bytes ending at `end` of file `id`, which grows to
    /// `end` if shorter.
    pub fn uncached_write_done(&mut self, id: u64, end: u64, len: usize) {
        self.note_request();
        self.stats.writes += 1;
        self.stats.bytes_written += len as u64;
        self.stats.store_writes += 1;
        self.stats.store_bytes_written += len as u64;
        self.core.content_changed(id);
        self.content_changed(id);
        if let Some(node) = self.nodes.get_mut(&id) {
            node.size = node.size.max(end);
            super::touch(node);
        }
        self.own_change(id);
    }
}

impl StoreIo {
    /// Reads `len` bytes at `offset` (zeros past the store file's end: data the mount
    /// counts in the size but has not written there), paying one data operation's latency.
    /// Returns the bytes and how many the store gave.
    pub fn read(&self, offset: u64, len: usize) -> io::Result<(Vec<u8>, usize)> {
        let mut out = vec![0u8; len];
        let _counted = InFlight::start(&self.in_flight);
        self.latency.data_op();
        let n = pread_full(&self.file, &mut out, offset)?;
        Ok((out, n))
    }

    /// Writes `data` at `offset`, paying one data operation's latency.
    pub fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let _counted = InFlight::start(&self.in_flight);
        self.latency.data_op();
        self.file.write_all_at(data, offset)
    }
}
