//! Requests served past the cache (docs/design.md §11): after a cache-device error stopped a
//! request's plan, and every request of a degraded mount. Data comes from and goes to the
//! store; the cache is read only for dirty blocks (it holds their only copy), and a write
//! over one merges into it and writes the block to the store, after which the cache lets it
//! go. An error reaches the client only where the cache held the only copy and cannot read
//! it: a read of such a block, or a write that does not cover it.

use std::io;

use super::State;
use crate::core::{BlockKey, FileId};
use crate::faults::is_device_error;
use crate::recovery::pread_full;

/// The error a client gets when the cache held the only copy of data it cannot read.
fn only_copy_lost() -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}

impl State {
    /// Whether a request on blocks `blocks` of `file` must be served past the cache: the mount
    /// is degraded, or one of them is stranded (the core no longer knows it is dirty).
    pub(super) fn past_cache(&self, file: FileId, blocks: std::ops::Range<u64>) -> bool {
        // Whichever is shorter is walked: the range, or the stranded blocks (few, if any).
        self.health.degraded
            || (!self.stranded.is_empty()
                && if (self.stranded.len() as u64) < blocks.end.saturating_sub(blocks.start) {
                    self.stranded
                        .keys()
                        .any(|k| k.file == file && blocks.contains(&k.block))
                } else {
                    blocks
                        .into_iter()
                        .any(|b| self.stranded.contains_key(&BlockKey::new(file, b)))
                })
    }

    /// Reads `out.len()` bytes at `offset` of file `id` from the store, with the dirty blocks
    /// the cache holds read from it.
    pub(super) fn read_past_cache(
        &mut self,
        id: FileId,
        offset: u64,
        out: &mut [u8],
    ) -> io::Result<()> {
        self.health.served_past_cache += 1;
        let f = self.store_file(id)?;
        self.cfg.latency.data_op();
        let n = pread_full(&f, out, offset)?;
        out[n..].fill(0);
        self.stats.store_reads += 1;
        self.stats.store_bytes_read += n as u64;
        let bs = self.bs();
        let end = offset + out.len() as u64;
        for block in offset / bs..end.div_ceil(bs) {
            let key = BlockKey::new(id, block);
            let content = match self.read_copy(key) {
                Ok(Some(c)) => c,
                Ok(None) => continue,
                Err(e) if is_device_error(&e) => {
                    self.count_error(&e);
                    return Err(only_copy_lost());
                }
                Err(e) => return Err(e),
            };
            let start = block * bs;
            let (lo, hi) = (offset.max(start), end.min(start + bs));
            let dst = &mut out[(lo - offset) as usize..(hi - offset) as usize];
            let from = (lo - start) as usize;
            let avail = content.len().saturating_sub(from).min(dst.len());
            if avail > 0 {
                dst[..avail].copy_from_slice(&content[from..from + avail]);
            }
            dst[avail..].fill(0);
        }
        Ok(())
    }

    /// Writes `data` at `offset` of file `id` to the store. A dirty block the cache holds is
    /// merged with the write and written whole to the store first, then let go (a `Clean`
    /// record, after the store file is synced where an fsync promised the block); clean
    /// copies are dropped.
    pub(super) fn write_past_cache(
        &mut self,
        id: FileId,
        offset: u64,
        data: &[u8],
    ) -> io::Result<()> {
        self.health.served_past_cache += 1;
        let bs = self.bs();
        let end = offset + data.len() as u64;
        let mut merged = Vec::new();
        let mut dropped = Vec::new();
        let mut promised = false;
        for block in offset / bs..end.div_ceil(bs) {
            let key = BlockKey::new(id, block);
            let start = block * bs;
            let (lo, hi) = (offset.max(start), end.min(start + bs));
            let Some((_, len, first_seq)) = self.dirty_copy(key) else {
                // A clean copy would be stale after the write.
                self.forget(key);
                continue;
            };
            promised |= first_seq.is_some_and(|s| s < self.promised);
            match self.read_copy(key) {
                Ok(Some(mut content)) => {
                    let (a, b) = ((lo - start) as usize, (hi - start) as usize);
                    if content.len() < b {
                        content.resize(b, 0);
                    }
                    content[a..b]
                        .copy_from_slice(&data[(lo - offset) as usize..(hi - offset) as usize]);
                    merged.push((key, content));
                }
                Ok(None) => continue,
                Err(e) if is_device_error(&e) => {
                    self.count_error(&e);
                    // The write replaces every byte the cache held: the lost copy no longer
                    // matters. Otherwise the rest of the block is gone with the device.
                    if lo > start || hi < start + len as u64 {
                        return Err(only_copy_lost());
                    }
                }
                Err(e) => return Err(e),
            }
            dropped.push(key);
        }
        for (key, content) in &merged {
            self.store_write(key.file, content, key.block * bs)?;
        }
        self.store_write(id, data, offset)?;
        if self.cfg.variant.is_write_back() {
            self.unsynced_store.insert(id);
        }
        if !dropped.is_empty() {
            // The `Clean` records give up versions an fsync may have promised: the store's copy
            // must be durable first.
            if promised {
                self.sync_store(id)?;
            }
            for key in dropped {
                self.drop_copy(key);
            }
        }
        Ok(())
    }
}
