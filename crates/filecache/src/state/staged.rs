//! The store reads of block-path requests, outside the mount's lock (docs/design.md §14,
//! "The data path off the lock"): a read that misses, or a write that must fill a partial
//! block, first learns under the lock which of its blocks the cache lacks, then reads them
//! from the store with the lock let go, and executes its plan under the lock again with that
//! data in hand. A slow store then holds up only the request waiting for it: requests on
//! other files (hits, and misses of their own) run meanwhile.
//!
//! The data read is used only if the file's content did not change in between (its
//! [`super::Node::data_gen`] is the same): the store holds a block's current bytes while the
//! cache lacks it, and only a change of the file's content (a write, a truncate) can make it
//! cached-and-newer; write-backs and evictions in between leave the store's bytes the file's.
//! Otherwise the data is dropped and the plan reads the store under the lock, as before.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

use super::direct::InFlight;
use super::hits::HitPlan;
use super::State;
use crate::core::BlockKey;
use crate::recovery::pread_full;
use crate::store::StoreLatency;

/// The store reads a request needs, to run without the mount's lock.
pub struct StoreFill {
    id: u64,
    gen: u64,
    bs: u64,
    file: Arc<File>,
    /// Runs of consecutive blocks to read: (first block, count).
    runs: Vec<(u64, u64)>,
    latency: StoreLatency,
    in_flight: Arc<(AtomicU64, AtomicU64)>,
    #[cfg(test)]
    hold: Option<Arc<Hold>>,
}

/// What a [`StoreFill`] read: each block's bytes from the store (short at the store file's
/// end), for [`State::read_staged`] / [`State::write_staged`].
pub struct Staged {
    id: u64,
    gen: u64,
    blocks: HashMap<u64, Vec<u8>>,
    reads: u64,
    bytes: u64,
}

/// Tests: holds the store reads of one file until opened.
#[cfg(test)]
pub(crate) struct Hold {
    pub(super) id: u64,
    /// Set once a held read is waiting; `open` lets it go.
    pub(super) state: Mutex<(bool, bool)>,
    pub(super) cv: std::sync::Condvar,
}

impl StoreFill {
    /// Reads the blocks from the store (without the mount's lock), paying one data
    /// operation's latency per run of blocks, as a plan's fills do.
    pub fn run(self) -> io::Result<Staged> {
        let _counted = InFlight::start(&self.in_flight);
        #[cfg(test)]
        if let Some(h) = self.hold.as_ref().filter(|h| h.id == self.id) {
            let mut st = h.state.lock().unwrap();
            st.0 = true;
            h.cv.notify_all();
            while !st.1 {
                st = h.cv.wait(st).unwrap();
            }
        }
        let bs = self.bs;
        let mut staged = Staged {
            id: self.id,
            gen: self.gen,
            blocks: HashMap::new(),
            reads: 0,
            bytes: 0,
        };
        for &(first, count) in &self.runs {
            let mut all = vec![0u8; (count * bs) as usize];
            self.latency.data_op();
            let n = pread_full(&self.file, &mut all, first * bs)?;
            staged.reads += 1;
            staged.bytes += n as u64;
            for j in 0..count {
                let from = (j * bs) as usize;
                let valid = n.saturating_sub(from).min(bs as usize);
                staged
                    .blocks
                    .insert(first + j, all[from..from + valid].to_vec());
            }
        }
        Ok(staged)
    }
}

/// The mount's lock (a poisoned one is used: the state is kept consistent op by op).
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reads `size` bytes at `offset` of block-path file `id`, its store reads, and the cache
/// device's reads of a request of hits alone, without the lock (`hits.rs`).
/// `st` is the lock, held; it is let go for the store reads and taken again.
pub fn read_unlocked<'a>(
    state: &'a Mutex<State>,
    mut st: MutexGuard<'a, State>,
    id: u64,
    offset: u64,
    size: u32,
) -> io::Result<Vec<u8>> {
    if let Some(fill) = st.read_fills(id, offset, size)? {
        drop(st);
        let staged = fill.run();
        let mut st = lock(state);
        return match staged {
            Ok(staged) => st.read_staged(id, offset, size, staged),
            // The plan reads the store again under the lock, and reports its error.
            Err(_) => st.read(id, offset, size),
        };
    }
    match st.read_hits(id, offset, size) {
        None => st.read(id, offset, size),
        Some(HitPlan::Done(result)) => result,
        Some(HitPlan::Io(hits)) => {
            drop(st);
            // `run` lets the pins go before returning: the read under the lock below may
            // write those slots.
            hits.run().or_else(|_| {
                // A cache-device error: read again under the lock, which counts it and
                // serves the read past the cache (docs/design.md §11).
                lock(state).read(id, offset, size)
            })
        }
    }
}

/// Writes `data` at `offset` of block-path file `id`; the store reads of the partial blocks it
/// must fill are done without the lock (`st`, held, is let go for them).
pub fn write_unlocked<'a>(
    state: &'a Mutex<State>,
    mut st: MutexGuard<'a, State>,
    id: u64,
    offset: u64,
    data: &[u8],
) -> io::Result<()> {
    let fill = match st.write_fills(id, offset, data.len())? {
        None => return st.write(id, offset, data),
        Some(fill) => fill,
    };
    drop(st);
    let staged = fill.run();
    let mut st = lock(state);
    match staged {
        Ok(staged) => st.write_staged(id, offset, data, staged),
        Err(_) => st.write(id, offset, data),
    }
}

impl State {
    /// The next content generation ([`super::Node::data_gen`]).
    pub(super) fn next_gen(&mut self) -> u64 {
        self.last_gen += 1;
        self.last_gen
    }

    /// File `id`'s content changes: store data read for it before now is stale.
    pub(super) fn content_changed(&mut self, id: u64) {
        let gen = self.next_gen();
        if let Some(node) = self.nodes.get_mut(&id) {
            node.data_gen = gen;
        }
    }

    /// Whether requests on file `id` are planned by the core (not past the cache): the only
    /// ones with fills to read ahead.
    fn plans_blocks(&self, id: u64, blocks: std::ops::Range<u64>) -> bool {
        self.nodes.get(&id).is_some_and(|n| n.regular)
            && self.cached(id)
            && blocks.end <= crate::core::MAX_BLOCKS_PER_FILE
            && self.core.admits(id)
            && !self.past_cache(id, blocks)
    }

    /// The store reads for `blocks` of file `id` (those the cache lacks among them), if any.
    fn fills_of(&mut self, id: u64, blocks: &[u64]) -> io::Result<Option<StoreFill>> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for &b in blocks {
            if self.core.lookup(BlockKey::new(id, b)).is_some() {
                continue;
            }
            match runs.last_mut() {
                Some((first, count)) if *first + *count == b => *count += 1,
                _ => runs.push((b, 1)),
            }
        }
        if runs.is_empty() {
            return Ok(None);
        }
        let file = self.store_file(id)?;
        Ok(Some(StoreFill {
            id,
            gen: self.nodes.get(&id).map_or(0, |n| n.data_gen),
            bs: self.bs(),
            file,
            runs,
            latency: self.cfg.latency,
            in_flight: self.in_flight.clone(),
            #[cfg(test)]
            hold: self.hold.clone(),
        }))
    }

    /// The store reads a read of `size` bytes at `offset` of file `id` needs (its blocks the
    /// cache lacks), to do without the lock; `None`: none (a hit, or a request served
    /// otherwise), [`State::read`] serves it.
    pub fn read_fills(&mut self, id: u64, offset: u64, size: u32) -> io::Result<Option<StoreFill>> {
        let Some(node) = self.nodes.get(&id) else {
            return Ok(None);
        };
        if offset >= node.size || size == 0 {
            return Ok(None);
        }
        let end = (offset + size as u64).min(node.size);
        let bs = self.bs();
        let blocks = offset / bs..end.div_ceil(bs);
        if !self.plans_blocks(id, blocks.clone()) {
            return Ok(None);
        }
        self.fills_of(id, &blocks.collect::<Vec<_>>())
    }

    /// The store reads a write of `len` bytes at `offset` of file `id` needs: the old bytes
    /// of its partial first and last blocks the cache lacks (the rest it overwrites whole or
    /// lies past the file's end).
    pub fn write_fills(
        &mut self,
        id: u64,
        offset: u64,
        len: usize,
    ) -> io::Result<Option<StoreFill>> {
        let Some(node) = self.nodes.get(&id) else {
            return Ok(None);
        };
        if len == 0 {
            return Ok(None);
        }
        let old_size = node.size;
        let end = offset + len as u64;
        let bs = self.bs();
        let blocks = offset / bs..end.div_ceil(bs);
        if !self.plans_blocks(id, blocks.clone()) {
            return Ok(None);
        }
        // As `State::write` decides `needs_fill`.
        let partial: Vec<u64> = [blocks.start, blocks.end - 1]
            .into_iter()
            .filter(|&block| {
                let start = block * bs;
                let (lo, hi) = (offset.max(start), end.min(start + bs));
                start < old_size && (lo > start || hi < old_size.min(start + bs))
            })
            .collect();
        let mut partial = partial;
        partial.dedup();
        self.fills_of(id, &partial)
    }

    /// Takes what `staged` read if file `id` is unchanged since: its blocks serve the plan's
    /// fills. Counts the store reads either way (they were made).
    fn take_staged(&mut self, id: u64, staged: Staged) {
        self.stats.store_reads += staged.reads;
        self.stats.store_bytes_read += staged.bytes;
        self.stats.store_reads_unlocked += staged.reads;
        let gen = self.nodes.get(&id).map(|n| n.data_gen);
        if staged.id != id || gen != Some(staged.gen) {
            self.stats.store_reads_unlocked_dropped += staged.reads;
        } else {
            self.prefetched = staged
                .blocks
                .into_iter()
                .map(|(b, data)| (BlockKey::new(id, b), data))
                .collect();
        }
    }

    /// [`State::read`] with the store reads `staged` made outside the lock.
    pub fn read_staged(
        &mut self,
        id: u64,
        offset: u64,
        size: u32,
        staged: Staged,
    ) -> io::Result<Vec<u8>> {
        self.take_staged(id, staged);
        let result = self.read(id, offset, size);
        // Blocks the plan did not fill (cached by a request in between) are dropped.
        self.prefetched.clear();
        result
    }

    /// [`State::write`] with the store reads `staged` made outside the lock.
    pub fn write_staged(
        &mut self,
        id: u64,
        offset: u64,
        data: &[u8],
        staged: Staged,
    ) -> io::Result<()> {
        self.take_staged(id, staged);
        let result = self.write(id, offset, data);
        self.prefetched.clear();
        result
    }

    /// Tests: holds the store reads ahead of file `id` ([`StoreFill::run`]) until the
    /// returned hold is opened.
    #[cfg(test)]
    pub(crate) fn hold_store_reads(&mut self, id: u64) -> Arc<Hold> {
        let h = Arc::new(Hold {
            id,
            state: Mutex::new((false, false)),
            cv: std::sync::Condvar::new(),
        });
        self.hold = Some(h.clone());
        h
    }
}

#[cfg(test)]
impl Hold {
    /// Waits until a read is held.
    pub(crate) fn wait_held(&self) {
        let mut st = self.state.lock().unwrap();
        while !st.0 {
            st = self.cv.wait(st).unwrap();
        }
    }

    /// Lets the held reads go.
    pub(crate) fn open(&self) {
        self.state.lock().unwrap().1 = true;
        self.cv.notify_all();
    }
}
