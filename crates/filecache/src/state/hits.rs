//! Reads of cached blocks off the mount's lock (docs/design.md §14, "The data path off the
//! lock"): a read whose blocks are all cached is planned under the lock (the policy learns of
//! the hits, the counters count it) and each block's physical slot is pinned; the cache
//! device's reads then run with the lock let go, and the pins are let go after them. Every
//! write to the block file ([`State::write_phys`]: a fill, a write, a new version in a spare)
//! waits first until its physical slot has no pin, so the bytes a pinned read was planned on
//! stay in place until it has read them, whatever the lock's holders decided meanwhile (an
//! eviction, a truncate, an unlink, a write-back, a write to the block).

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::sync::{Arc, Condvar, Mutex};

use super::State;
use crate::core::BlockKey;
use crate::faults::{device_error, CacheFaults, Op, Target};
use crate::recovery::pread_full;

/// Pin counts of physical slots of the block file.
#[derive(Default)]
pub(super) struct Pins {
    counts: Mutex<HashMap<u32, u32>>,
    unpinned: Condvar,
    /// Tests: writes that waited for a pin, so far.
    #[cfg(test)]
    pub(super) waited: std::sync::atomic::AtomicUsize,
}

impl Pins {
    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<u32, u32>> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pin(&self, phys: u32) {
        *self.counts().entry(phys).or_insert(0) += 1;
    }

    fn unpin(&self, phys: u32) {
        let mut c = self.counts();
        if let Some(n) = c.get_mut(&phys) {
            *n -= 1;
            if *n == 0 {
                c.remove(&phys);
                self.unpinned.notify_all();
            }
        }
    }

    /// Waits until physical slot `phys` has no pin. Called under the mount's lock: a pin's
    /// holder lets it go after its read alone, without taking that lock, so this ends.
    pub(super) fn wait_unpinned(&self, phys: u32) {
        let mut c = self.counts();
        #[cfg(test)]
        if c.contains_key(&phys) {
            self.waited
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        while c.contains_key(&phys) {
            c = self.unpinned.wait(c).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// One piece of a hit read: `len` bytes at byte `at` of the block file, into the request's
/// buffer at `to`.
struct Piece {
    phys: u32,
    at: u64,
    to: usize,
    len: usize,
}

/// A read of cached blocks planned under the lock, to run without it.
pub struct HitRead {
    blocks: Arc<File>,
    pins: Arc<Pins>,
    faults: Option<Arc<CacheFaults>>,
    pieces: Vec<Piece>,
    len: usize,
}

impl HitRead {
    /// Reads the pieces from the cache device (without the mount's lock); bytes of a block
    /// past its valid end are zeros. A failure is a cache-device error.
    pub fn run(self) -> io::Result<Vec<u8>> {
        let mut out = vec![0u8; self.len];
        for p in &self.pieces {
            if let Some(f) = &self.faults {
                f.check(Target::Blocks, Op::Read, p.at, p.len as u64)?;
            }
            let dst = &mut out[p.to..p.to + p.len];
            let n = pread_full(&self.blocks, dst, p.at)
                .map_err(|e| device_error(Target::Blocks, Op::Read, p.at, e))?;
            dst[n..].fill(0);
        }
        Ok(out)
    }
}

impl Drop for HitRead {
    fn drop(&mut self) {
        for p in &self.pieces {
            self.pins.unpin(p.phys);
        }
    }
}

/// A read planned under the lock: done already, or its cache reads to make without it.
pub enum HitPlan {
    /// Served under the lock (its plan was not hits alone).
    Done(io::Result<Vec<u8>>),
    /// Hits to read off the lock.
    Io(HitRead),
}

impl State {
    /// Plans a read of `size` bytes at `offset` of file `id` whose blocks are all cached
    /// ([`State::read_is_cached`]): `None` if they are not (the caller reads as before).
    /// Counts the read as [`State::read`] does.
    pub fn read_hits(&mut self, id: u64, offset: u64, size: u32) -> Option<HitPlan> {
        let file_size = self.nodes.get(&id)?.size;
        if offset >= file_size || size == 0 || !self.read_is_cached(id, offset, size) {
            return None;
        }
        let blocks = Arc::clone(self.blocks.as_ref()?);
        self.stats.reads += 1;
        self.note_request();
        let end = (offset + size as u64).min(file_size);
        let bs = self.bs();
        let range = offset / bs..end.div_ceil(bs);
        let pre = self.dirty_before(id, range.clone());
        let mut ops = Vec::new();
        for block in offset / bs..end.div_ceil(bs) {
            if self.core.read(BlockKey::new(id, block), &mut ops).is_err() {
                // Checked by `read_is_cached` (the range is within the blocks per file).
                return Some(HitPlan::Done(Err(io::Error::from_raw_os_error(
                    libc::EFBIG,
                ))));
            }
        }
        let mut pieces = Vec::with_capacity(ops.len());
        for op in &ops {
            let crate::core::DevOp::CacheRead { slot, key } = *op else {
                // Not hits alone after all: executed under the lock, as `read` does.
                pieces.clear();
                break;
            };
            let start = key.block * bs;
            let (lo, hi) = (offset.max(start), end.min(start + bs));
            let from = lo - start;
            let valid = (self.valid[slot as usize] as u64).saturating_sub(from);
            let phys = self.slots.phys(slot);
            pieces.push(Piece {
                phys,
                at: phys as u64 * bs + from,
                to: (lo - offset) as usize,
                len: valid.min(hi - lo) as usize,
            });
        }
        let len = (end - offset) as usize;
        self.stats.bytes_read += len as u64;
        if pieces.len() != ops.len() {
            let mut out = vec![0u8; len];
            let mut result = Ok(());
            if let Err(e) = self.execute(&ops, offset, &mut out, None) {
                result = self
                    .served_past_error(e, &ops, &pre, id, range)
                    .and_then(|()| self.read_past_cache(id, offset, &mut out));
            }
            return Some(HitPlan::Done(result.map(|()| out)));
        }
        for p in &pieces {
            self.pins.pin(p.phys);
            self.stats.cache_bytes_read += p.len as u64;
        }
        Some(HitPlan::Io(HitRead {
            blocks,
            pins: self.pins.clone(),
            faults: self.faults.clone(),
            pieces,
            len,
        }))
    }
}
