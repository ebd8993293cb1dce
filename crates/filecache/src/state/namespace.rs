//! Deletes and truncates of cached files: the journal, the store and the cache changed in an
//! order every crash point recovers from (docs/design.md §4.9).

use std::io;

use super::{touch, State};
use crate::core::BlockKey;

impl State {
    /// File `id` loses its last name by `store_op` (the store's unlink, or a rename over it):
    /// the journal voids the file's dirty blocks first ([`State::deleting`]), then the store
    /// changes, then the cache drops the file ([`State::file_deleted`]).
    pub fn delete_file_with(
        &mut self,
        id: u64,
        store_op: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let journaled = self.degrading_on_error(|st| st.deleting(id))?;
        if let Err(e) = store_op() {
            if journaled {
                if let Err(e) = self.delete_failed(id) {
                    if !crate::faults::is_device_error(&e) {
                        return Err(e);
                    }
                    // Its dirty blocks go to the store instead (those the cache can read).
                    self.degrade_on(&e);
                }
            }
            return Err(e);
        }
        self.file_deleted(id)
    }

    /// Runs `op`; a cache-device error degrades the mount (these operations have no
    /// pass-through form for one request) and `op` runs once more, degraded. `op` must be
    /// safe to run again after failing part way.
    pub(super) fn degrading_on_error<T>(
        &mut self,
        mut op: impl FnMut(&mut Self) -> io::Result<T>,
    ) -> io::Result<T> {
        match op(self) {
            Err(e) if crate::faults::is_device_error(&e) => {
                self.degrade_on(&e);
                op(self)
            }
            r => r,
        }
    }

    /// File `id` is about to lose its last name (an unlink, or a rename over it): called
    /// before the store changes. Returns whether a `Deleted` record was journaled.
    ///
    /// Once the store file is gone, the journal's records of its dirty blocks name a file the
    /// store does not have (recovery would fail and the mount not start) or, when a new file
    /// reuses the inode number, that new file (recovery would write the deleted file's blocks
    /// into it). So the journal first records the file deleted, which voids its earlier
    /// records, and syncs it (one fdatasync of the journal: a power loss must not keep the
    /// unlink without the record). Only a file the journal may still name as dirty pays
    /// this: one with dirty blocks, or with a `Clean` record not yet synced (a power loss could
    /// drop that and keep the `Map` before it). The data of a file being deleted need not
    /// survive, so nothing is written back.
    fn deleting(&mut self, id: u64) -> io::Result<bool> {
        if !self.cfg.variant.is_write_back() {
            return Ok(false);
        }
        let named = self.core.dirty_blocks_of(id) > 0
            || self.cleaned_unsynced.contains(&id)
            || self.stranded.keys().any(|k| k.file == id);
        let Some(j) = self.journal.as_mut() else {
            return Ok(false);
        };
        if !named {
            return Ok(false);
        }
        j.deleted(id)?;
        // The journal alone, as for a truncate: the record orders nothing in the block file
        // or the store, and the slots earlier records gave up stay out of use until a full
        // sync.
        j.sync()?;
        self.cleaned_unsynced.clear();
        Ok(true)
    }

    /// The store refused the unlink or rename that [`State::deleting`] journaled: file `id`
    /// lives on, so its dirty blocks are journaled again (the `Deleted` record voided them)
    /// and synced, as durable as before.
    fn delete_failed(&mut self, id: u64) -> io::Result<()> {
        for (key, slot) in self.core.dirty_of_file(id) {
            let data = self.slot_data(slot)?;
            self.journal_map(slot, key, &data)?;
        }
        // Its first records' sequence numbers are kept (`journaled`): what an fsync promised
        // stays promised.
        self.sync_journal_raw()
    }

    /// File `id` lost its last name: its cached blocks are freed and their write-back
    /// cancelled. A file still open is read and written through its open store file from now
    /// on, uncached: its dirty blocks are written there first, so the open handles keep
    /// seeing its data.
    pub fn file_deleted(&mut self, id: u64) -> io::Result<()> {
        self.stats.files_deleted += 1;
        let open = self.nodes.get(&id).is_some_and(|n| n.handles > 0);
        if open && (self.health.degraded || self.stranded.keys().any(|k| k.file == id)) {
            // What the cache can read of it reaches the store file the handles go on with.
            self.drain(Some(id))?;
        }
        let mut ops = Vec::new();
        if open && !self.health.degraded {
            self.core.flush(Some(id), &mut ops);
        }
        self.core.delete_file(id, &mut ops);
        if let Err(e) = self.execute(&ops, 0, &mut [], None) {
            if !crate::faults::is_device_error(&e) {
                return Err(e);
            }
            // Discards left undone need nothing: the `Deleted` record voids the file's
            // records. Write-backs left undone are redone or set aside, then dropped below.
            self.count_error(&e);
            let failed_at = self.exec_failed_at;
            self.repair(&ops, failed_at, &std::collections::HashMap::new(), None)?;
            self.maybe_degrade();
        }
        let gone: Vec<BlockKey> = self
            .stranded
            .keys()
            .filter(|k| k.file == id)
            .copied()
            .collect();
        for key in gone {
            if let Some(s) = self.stranded.remove(&key) {
                if s.owned {
                    self.slots.release(s.phys);
                }
            }
        }
        let remove = match self.nodes.get_mut(&id) {
            Some(node) if node.handles > 0 => {
                node.unlinked = true;
                false
            }
            Some(_) => true,
            None => false,
        };
        if remove {
            if let Some(node) = self.nodes.remove(&id) {
                if node.file.is_some() {
                    self.open_files -= 1;
                }
            }
        }
        Ok(())
    }

    /// Truncates file `id` to `size`, through to the store at once; cached blocks past the end
    /// are freed (their write-back cancelled) and the partial last block is trimmed.
    ///
    /// When the cut reaches journaled dirty data, the store file and the journal must change
    /// together: a crash between the two would leave the old dirty blocks to be written back
    /// over a store already cut (old dirty data past the new end, clean data there lost), or a
    /// journal already trimmed over a store not cut (stale store data past the new end). So
    /// the journal first records the truncate and is synced (one fdatasync: a power loss
    /// must not keep the cut without the record), then drops and trims the blocks, then the
    /// store file is cut and synced, then the journal records the cut done. Recovery redoes a
    /// truncate not recorded done and cuts every version recorded before it at its size, so
    /// every crash point recovers to the file before or after the truncate, with the dirty
    /// bytes below the new size intact. A truncate that cuts no journaled data needs none of
    /// this (its store file is synced by the next fsync).
    pub fn truncate(&mut self, id: u64, size: u64) -> io::Result<()> {
        self.note_request();
        // The partial last block is cut outside the core's view (docs/design.md §14).
        self.core.content_changed(id);
        self.content_changed(id);
        // A first attempt that journaled `Truncate` and then failed leaves the second to
        // journal `Truncated` (else a restart would cut the file again, later writes and all).
        let mut journaled = false;
        self.degrading_on_error(|st| st.truncate_once(id, size, &mut journaled))
    }

    /// [`State::truncate`], once: run again after a cache-device error (degraded) it finishes
    /// what it started (every step is idempotent).
    fn truncate_once(&mut self, id: u64, size: u64, journaled: &mut bool) -> io::Result<()> {
        let f = self.store_file(id)?;
        let bs = self.bs();
        let journaled_cut =
            self.journal.is_some()
                && self.cfg.variant.is_write_back()
                && (*journaled
                    || self.core.dirty_of_file(id).iter().any(|&(key, slot)| {
                        key.block * bs + self.valid[slot as usize] as u64 > size
                    })
                    || self
                        .stranded
                        .iter()
                        .any(|(k, s)| k.file == id && k.block * bs + s.len as u64 > size));
        if journaled_cut {
            let j = self.journal.as_mut().expect("checked");
            *journaled = true;
            j.truncate(id, size)?;
            // The journal alone: the records before this one need not be durable for the
            // truncate (recovery cuts whatever version it finds), and the slots they gave up
            // stay out of use until a full sync.
            j.sync()?;
        }
        let mut ops = Vec::new();
        self.core.truncate(id, size.div_ceil(bs), &mut ops);
        self.execute(&ops, 0, &mut [], None)?;
        // Stranded blocks are cut alike; the `Truncate` record cuts their journaled versions.
        let cut: Vec<BlockKey> = self
            .stranded
            .keys()
            .filter(|k| k.file == id && k.block >= size.div_ceil(bs))
            .copied()
            .collect();
        for key in cut {
            self.drop_copy(key);
        }
        if let Some(s) = self.stranded.get_mut(&BlockKey::new(id, size / bs)) {
            s.len = s.len.min((size % bs) as u32);
        }
        if !size.is_multiple_of(bs) {
            let key = BlockKey::new(id, size / bs);
            if let Some((slot, dirty)) = self.core.lookup(key) {
                let keep = (size % bs) as u32;
                if self.valid[slot as usize] > keep {
                    self.valid[slot as usize] = keep;
                    if dirty {
                        match self.slot_data(slot) {
                            Ok(data) => self.journal_map(slot, key, &data)?,
                            // Degraded, a block it cannot read keeps its journaled version,
                            // which the `Truncate` record cuts at recovery.
                            Err(e)
                                if self.health.degraded && crate::faults::is_device_error(&e) =>
                            {
                                self.count_error(&e);
                            }
                            Err(e) => return Err(e),
                        }
                    }
                }
            }
        }
        self.meta_op();
        self.before_own_change(id);
        f.set_len(size)?;
        self.own_change(id);
        if journaled_cut {
            self.sync_store(id)?;
            self.journal.as_mut().expect("checked").truncated(id)?;
        } else if self.cfg.variant.is_write_back() {
            // An fsync of a write-back mount syncs the store files listed here.
            self.unsynced_store.insert(id);
        }
        if let Some(node) = self.nodes.get_mut(&id) {
            node.size = size;
            touch(node);
        }
        Ok(())
    }
}
