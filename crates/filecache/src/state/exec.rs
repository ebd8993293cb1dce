//! Executing the core's [`DevOp`] plans: cache slots in the block file, store files, and the
//! journal records that keep a recoverable version of every dirty block at every instant.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::unix::fs::FileExt;

use super::State;
use crate::core::{BlockKey, DevOp, FileId};
use crate::faults::{device_error, Op, Target};
use crate::recovery::pread_full;

impl State {
    /// Executes a plan for one request covering `offset .. offset + buf.len()`: reads land in
    /// `buf`; `write` is the data of a write request.
    pub(super) fn execute(
        &mut self,
        ops: &[DevOp],
        offset: u64,
        buf: &mut [u8],
        write: Option<&[u8]>,
    ) -> io::Result<()> {
        let bs = self.bs();
        let end = offset + buf.len() as u64;
        // Blocks already read from the store in one call for a run of fills.
        let mut staged: HashMap<u64, Vec<u8>> = HashMap::new();
        // Store writes already issued for a run of blocks.
        let mut stored: HashSet<u64> = HashSet::new();
        // The content of the slot last filled, to serve the read without re-reading it.
        let mut last_fill: Option<(u32, Vec<u8>)> = None;
        // Write-backs already done by a batch that started at an earlier one.
        let mut written_back: HashSet<usize> = HashSet::new();
        self.exec_cleaned.clear();
        for (i, op) in ops.iter().enumerate() {
            self.exec_failed_at = i;
            match *op {
                DevOp::WriteBack { .. } => {
                    if !written_back.contains(&i) {
                        self.write_back_batch(ops, i, &mut written_back)?;
                    }
                }
                DevOp::Discard {
                    slot,
                    key,
                    was_dirty,
                } => {
                    self.valid[slot as usize] = 0;
                    if was_dirty {
                        self.journal_clean(slot, key.file)?;
                    }
                }
                DevOp::Fill { slot, key } => {
                    // Read ahead without the lock (`staged.rs`), or with another fill.
                    let ahead = staged
                        .remove(&key.block)
                        .or_else(|| self.prefetched.remove(&key));
                    let content = match ahead {
                        Some(c) => c,
                        None => {
                            // One store read for this block and the fills that follow it.
                            // A request larger than the cache can evict (and write back)
                            // blocks of its own file before filling them again: the run
                            // stops at the first such write-back.
                            let mut run = 1u64;
                            for later in &ops[i + 1..] {
                                match later {
                                    DevOp::WriteBack { key: k, .. } if k.file == key.file => break,
                                    DevOp::Fill { key: k, .. }
                                        if k.file == key.file && k.block == key.block + run =>
                                    {
                                        run += 1
                                    }
                                    _ => {}
                                }
                            }
                            let mut all = vec![0u8; (run * bs) as usize];
                            let f = self.store_file(key.file)?;
                            self.cfg.latency.data_op();
                            let n = pread_full(&f, &mut all, key.block * bs)?;
                            self.stats.store_reads += 1;
                            self.stats.store_bytes_read += n as u64;
                            for j in (1..run).rev() {
                                let from = (j * bs) as usize;
                                let valid = n.saturating_sub(from).min(bs as usize);
                                staged.insert(key.block + j, all[from..from + valid].to_vec());
                            }
                            all.truncate(n.min(bs as usize));
                            all
                        }
                    };
                    self.make_writable(slot)?;
                    self.write_slot(slot, 0, &content)?;
                    self.slots.overwritten(slot);
                    self.valid[slot as usize] = content.len() as u32;
                    last_fill = Some((slot, content));
                }
                DevOp::CacheRead { slot, key } => {
                    let start = key.block * bs;
                    let lo = offset.max(start);
                    let hi = end.min(start + bs);
                    let content = match last_fill.take() {
                        Some((s, c)) if s == slot => c,
                        _ => self.slot_data(slot)?,
                    };
                    let dst = &mut buf[(lo - offset) as usize..(hi - offset) as usize];
                    let from = (lo - start) as usize;
                    let avail = content.len().saturating_sub(from).min(dst.len());
                    if avail > 0 {
                        dst[..avail].copy_from_slice(&content[from..from + avail]);
                    }
                    dst[avail..].fill(0);
                }
                DevOp::CacheWrite {
                    slot,
                    key,
                    fresh,
                    dirty,
                } => {
                    let data = write.expect("cache writes belong to write requests");
                    let start = key.block * bs;
                    let lo = offset.max(start);
                    let hi = end.min(start + bs);
                    let mut content = if fresh {
                        Vec::new()
                    } else {
                        match last_fill.take() {
                            Some((s, c)) if s == slot => c,
                            _ => self.slot_data(slot)?,
                        }
                    };
                    let (a, b) = ((lo - start) as usize, (hi - start) as usize);
                    // Bytes between the slot's valid end and the write are zeros on the
                    // device too: the slot may hold a previous block's stale bytes there.
                    let from = a.min(content.len());
                    if content.len() < b {
                        content.resize(b, 0);
                    }
                    content[a..b]
                        .copy_from_slice(&data[(lo - offset) as usize..(hi - offset) as usize]);
                    if dirty && self.journaled[slot as usize].is_some() {
                        // The slot holds the only recoverable version of a dirty block: the
                        // new one goes to a spare slot and is journaled before the old one
                        // is given up, so a crash at any point leaves one of them.
                        self.write_to_spare(slot, key, &content)?;
                    } else {
                        let moved = self.make_writable(slot)?;
                        if fresh || moved {
                            self.write_slot(slot, 0, &content)?;
                        } else {
                            self.write_slot(slot, from, &content[from..b])?;
                        }
                        self.slots.overwritten(slot);
                        if dirty {
                            self.journal_map(slot, key, &content)?;
                        }
                    }
                    self.valid[slot as usize] = content.len() as u32;
                }
                DevOp::StoreWrite { key } => {
                    if stored.contains(&key.block) {
                        continue;
                    }
                    let data = write.expect("store writes belong to write requests");
                    let mut last = key.block;
                    for later in &ops[i + 1..] {
                        match later {
                            DevOp::WriteBack { key: k, .. } if k.file == key.file => break,
                            DevOp::StoreWrite { key: k }
                                if k.file == key.file && k.block == last + 1 =>
                            {
                                last += 1
                            }
                            _ => {}
                        }
                    }
                    let lo = offset.max(key.block * bs);
                    let hi = end.min((last + 1) * bs);
                    self.store_write(
                        key.file,
                        &data[(lo - offset) as usize..(hi - offset) as usize],
                        lo,
                    )?;
                    // Under write-back an fsync syncs the cache and the store files listed
                    // here (write-through syncs the file itself).
                    if self.cfg.variant.is_write_back() {
                        self.unsynced_store.insert(key.file);
                    }
                    stored.extend(key.block..=last);
                }
                DevOp::StoreRead { key } => {
                    let start = key.block * bs;
                    let lo = offset.max(start);
                    let hi = end.min(start + bs);
                    let dst = &mut buf[(lo - offset) as usize..(hi - offset) as usize];
                    if let Some(c) = self.prefetched.remove(&key) {
                        // Read ahead without the lock (`staged.rs`): the block from its start.
                        let from = (lo - start) as usize;
                        let avail = c.len().saturating_sub(from).min(dst.len());
                        dst[..avail].copy_from_slice(&c[from..from + avail]);
                        dst[avail..].fill(0);
                        continue;
                    }
                    let f = self.store_file(key.file)?;
                    self.cfg.latency.data_op();
                    let n = pread_full(&f, dst, lo)?;
                    dst[n..].fill(0);
                    self.stats.store_reads += 1;
                    self.stats.store_bytes_read += n as u64;
                }
            }
        }
        Ok(())
    }

    /// Writes back the dirty block of `ops[first]` (a [`DevOp::WriteBack`]) together with
    /// every later write-back of the plan whose slot no op in between writes (its content is
    /// the same now as then), then journals them clean; marks them in `done`.
    ///
    /// A `Clean` record gives up the cache's copy of a block in favour of the store's, so it
    /// must not be durable before the store data it relies on: the kernel writes the journal
    /// and the store files back in any order, and a power loss that kept the `Clean` but lost
    /// the store write would recover the store's older bytes (the fsync'd version lived only
    /// in the cache). So the store files are synced between the writes and the `Clean`
    /// records, once per file per batch rather than once per block (an eviction of several
    /// blocks of a file by one request, or a flush, costs one fdatasync per file). And only
    /// where an fsync promised the block: if no record of it since it was last clean was
    /// made durable by an fsync, a power loss that keeps the `Clean` and loses the write-back
    /// leaves the store's copy as of the last fsync (which synced the store files) or later,
    /// all an fsync promised. Records made durable by the mount's own syncs (spare slots,
    /// compaction, truncates) do not count: counting them, a workload that never fsyncs paid
    /// an fdatasync per evicting write in a test of random writes over a cache of an eighth
    /// of the file (2398 store syncs for 4000 writes, against 305 before this ordering). (Keeping the `Clean`
    /// records pending until the next sync instead would cost nothing here, but a kill -9
    /// would then recover stale versions over later store changes: deletes, truncates,
    /// write-around writes, each of which would have to flush them first.)
    fn write_back_batch(
        &mut self,
        ops: &[DevOp],
        first: usize,
        done: &mut HashSet<usize>,
    ) -> io::Result<()> {
        let bs = self.bs();
        // Slots an op after `first` writes (or frees): a later write-back of one of them
        // writes back that newer content, so it waits for its own batch.
        let mut touched: HashSet<u32> = HashSet::new();
        let mut batch: Vec<(usize, u32, FileId)> = Vec::new();
        let mut to_sync: Vec<u64> = Vec::new();
        for (j, op) in ops.iter().enumerate().skip(first) {
            match *op {
                DevOp::WriteBack { slot, key } if !touched.contains(&slot) => {
                    let data = self.slot_data(slot)?;
                    self.store_write(key.file, &data, key.block * bs)?;
                    self.unsynced_store.insert(key.file);
                    let promised = self.journaled[slot as usize].is_some_and(|s| s < self.promised);
                    if promised && !to_sync.contains(&key.file) {
                        to_sync.push(key.file);
                    }
                    batch.push((j, slot, key.file));
                    done.insert(j);
                }
                DevOp::Fill { slot, .. }
                | DevOp::CacheWrite { slot, .. }
                | DevOp::Discard { slot, .. } => {
                    touched.insert(slot);
                }
                _ => {}
            }
        }
        for file in to_sync {
            self.sync_store(file)?;
        }
        for (j, slot, file) in batch {
            self.journal_clean(slot, file)?;
            // A plan that fails later knows this victim is in the store.
            self.exec_cleaned.insert(j);
        }
        Ok(())
    }

    /// The valid content of (core) slot `slot`.
    pub(super) fn slot_data(&mut self, slot: u32) -> io::Result<Vec<u8>> {
        let len = self.valid[slot as usize] as usize;
        let mut data = vec![0u8; len];
        let blocks = self
            .blocks
            .as_ref()
            .expect("a cache with slots has a block file");
        let at = self.slots.phys(slot) as u64 * self.cfg.block_size as u64;
        let n = self.read_phys_at(blocks, &mut data, at)?;
        data.truncate(n);
        self.stats.cache_bytes_read += n as u64;
        Ok(data)
    }

    /// Reads the block file at byte `at` into `data` (what it has: a short file gives less),
    /// through the fault injector; a failure is a cache-device error.
    pub(super) fn read_phys_at(
        &self,
        blocks: &std::fs::File,
        data: &mut [u8],
        at: u64,
    ) -> io::Result<usize> {
        if let Some(f) = &self.faults {
            f.check(Target::Blocks, Op::Read, at, data.len() as u64)?;
        }
        pread_full(blocks, data, at).map_err(|e| device_error(Target::Blocks, Op::Read, at, e))
    }

    /// Writes `data` at byte `at` of (core) slot `slot`.
    pub(super) fn write_slot(&mut self, slot: u32, at: usize, data: &[u8]) -> io::Result<()> {
        self.write_phys(self.slots.phys(slot), at, data)
    }

    /// Makes sure a spare slot is free: when all of them wait for a sync (the records that
    /// gave them up are not durable yet), syncs.
    fn ensure_spare(&mut self) -> io::Result<()> {
        if !self.slots.has_free() {
            self.sync_journal_raw()?;
            self.stats.spare_syncs += 1;
        }
        if !self.slots.has_free() {
            // Every spare holds a block the cache could not read (docs/design.md §11): the
            // cache has no room for a second version, as if its device were full.
            return Err(device_error(
                Target::Blocks,
                Op::Write,
                0,
                io::Error::from_raw_os_error(libc::ENOSPC),
            ));
        }
        Ok(())
    }

    /// Before core slot `slot` is written in place: if a synced record still names its
    /// content (given up by a `Clean` not synced yet), it moves to a free slot first.
    /// Returns whether it moved (its whole content must then be written).
    pub(super) fn make_writable(&mut self, slot: u32) -> io::Result<bool> {
        if !self.slots.must_move(slot) {
            return Ok(false);
        }
        self.ensure_spare()?;
        // A sync releases every pinned slot.
        if !self.slots.must_move(slot) {
            return Ok(false);
        }
        let synced = self.journal.as_ref().map_or(0, |j| j.synced_seq());
        self.slots.relocate(slot, synced);
        Ok(true)
    }

    /// Writes dirty `key`'s new content `data` to a spare slot, journals it there, and makes
    /// that slot core slot `slot`'s place; the old place is given up (to quarantine if a synced
    /// record names it).
    fn write_to_spare(&mut self, slot: u32, key: BlockKey, data: &[u8]) -> io::Result<()> {
        self.ensure_spare()?;
        self.journal_usable()?;
        let to = self.slots.spare().expect("ensured");
        self.write_phys(to, 0, data)?;
        let j = self
            .journal
            .as_mut()
            .expect("a journaled slot has a journal");
        let seq = j.next_seq();
        // The record supersedes the block's previous one (see [`crate::journal`]).
        j.map(to, key, data)?;
        let synced = j.synced_seq();
        self.slots.relocate(slot, synced);
        self.slots.named_by(slot, seq);
        Ok(())
    }

    fn write_phys(&mut self, phys: u32, at: usize, data: &[u8]) -> io::Result<()> {
        // The checkpoint's removal failing is the cache directory's error, served past.
        self.retire_checkpoint()
            .map_err(|e| device_error(Target::Blocks, Op::Write, 0, e))?;
        let blocks = self
            .blocks
            .as_ref()
            .expect("a cache with slots has a block file");
        let offset = phys as u64 * self.cfg.block_size as u64 + at as u64;
        // A read of this slot off the lock (`hits.rs`) finishes first: it reads the bytes it
        // was planned on.
        self.pins.wait_unpinned(phys);
        if let Some(f) = &self.faults {
            f.check(Target::Blocks, Op::Write, offset, data.len() as u64)?;
        }
        blocks
            .write_all_at(data, offset)
            .map_err(|e| device_error(Target::Blocks, Op::Write, offset, e))?;
        #[cfg(test)]
        crate::powerloss::write(
            &crate::store::CacheDir::new(&self.cfg.cache_dir).blocks(),
            offset,
            data,
        );
        self.stats.cache_bytes_written += data.len() as u64;
        Ok(())
    }

    /// Makes the blocks file durable.
    pub(super) fn sync_blocks(&self) -> io::Result<()> {
        if let Some(b) = self.blocks.as_ref() {
            if let Some(f) = &self.faults {
                f.check(Target::Blocks, Op::Sync, 0, 0)?;
            }
            b.sync_data()
                .map_err(|e| device_error(Target::Blocks, Op::Sync, 0, e))?;
            #[cfg(test)]
            crate::powerloss::sync(&crate::store::CacheDir::new(&self.cfg.cache_dir).blocks());
        }
        Ok(())
    }

    /// A journal that failed an op takes no new version until it is rewritten: the error its
    /// failure was.
    fn journal_usable(&self) -> io::Result<()> {
        if self.health.journal_broken {
            return Err(device_error(
                Target::Journal,
                Op::Write,
                0,
                io::Error::from_raw_os_error(libc::EIO),
            ));
        }
        Ok(())
    }

    /// Journals that (core) slot `slot` holds dirty `key` with valid content `data`.
    pub(super) fn journal_map(&mut self, slot: u32, key: BlockKey, data: &[u8]) -> io::Result<()> {
        self.journal_usable()?;
        if let Some(j) = self.journal.as_mut() {
            let seq = j.next_seq();
            j.map(self.slots.phys(slot), key, data)?;
            self.journaled[slot as usize].get_or_insert(seq);
            self.slots.named_by(slot, seq);
        }
        Ok(())
    }

    /// Journals that (core) slot `slot`, a block of `file`, holds nothing dirty any more.
    pub(super) fn journal_clean(&mut self, slot: u32, file: FileId) -> io::Result<()> {
        match self.journal.as_mut() {
            Some(j) if self.cfg.variant.is_write_back() => {
                // A broken journal takes no record (its rewrite names what is left).
                if !self.health.journal_broken {
                    j.clean(self.slots.phys(slot))?;
                }
                // Until synced, a power loss may drop this record and keep an older `Map` of
                // the file: a delete of the file must sync its `Deleted` record then.
                self.cleaned_unsynced.insert(file);
                self.journaled[slot as usize] = None;
                self.slots.cleaned(slot, j.synced_seq());
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Keeps the journal from growing without bound: rewrites it with the live dirty blocks.
    pub(super) fn maybe_compact(&mut self) -> io::Result<()> {
        let limit = 4 * self.cfg.capacity_blocks as u64 + 4096;
        if self.journal.as_ref().is_none_or(|j| j.records() < limit) {
            return Ok(());
        }
        let mut live = Vec::new();
        for slot in 0..self.cfg.capacity_blocks {
            if let Some((key, true)) = self.core.slot_state(slot) {
                live.push((self.slots.phys(slot), key, self.slot_data(slot)?));
            }
        }
        // The records name data in the block file: it must be durable first.
        self.sync_blocks()?;
        self.sync_written_back()?;
        self.journal.as_mut().expect("checked").compact(&live)?;
        // The journal names the live blocks only, durably.
        self.slots.synced();
        self.cleaned_unsynced.clear();
        Ok(())
    }
}
