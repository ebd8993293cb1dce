//! The mount's cache-device errors and degraded mode (docs/design.md §11): errors counted per
//! file, op and kind, scored with a half-life, a threshold that switches the mount to
//! pass-through; the repair of a plan a cache-device error stopped part way; blocks whose
//! dirty data could not be read ("stranded"); the drain of dirty blocks; the journal's
//! retirement when it cannot be written.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::ops::Range;
use std::time::Duration;

use tiercache_eviction::Slot;

use super::State;
use crate::core::{BlockKey, DevOp, FileId};
use crate::faults::{as_device_error, is_device_error, ErrorKind, Op, Target};

/// What the mount does about cache-device errors (`tiercache mount --error-threshold`,
/// `--error-halflife`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OnError {
    /// The error score at which the mount degrades: each error adds 1, the score halves
    /// every `halflife` (bcache's `io_error_limit` and `io_error_halflife`) and is rounded to
    /// whole errors (so `threshold` errors within about a half-life reach it).
    pub threshold: f64,
    /// How fast old errors are forgotten.
    pub halflife: Duration,
}

impl Default for OnError {
    fn default() -> Self {
        OnError {
            threshold: 8.0,
            halflife: Duration::from_secs(60),
        }
    }
}

/// Error counts and the degraded state.
#[derive(Debug, Default)]
pub(super) struct Health {
    /// Errors by `file_op_kind` (`blocks_write_enospc`).
    pub(super) counts: BTreeMap<String, u64>,
    /// The decayed error score, as of `score_at_ns`.
    score: f64,
    score_at_ns: u64,
    logged: HashSet<(Target, Op, ErrorKind)>,
    pub(super) first_error_ns: Option<u64>,
    pub(super) degraded: bool,
    pub(super) reason: Option<String>,
    pub(super) first_error_to_degraded_ns: Option<u64>,
    /// Requests served past the cache because of a cache-device error or degraded mode.
    pub(super) served_past_cache: u64,
    /// The journal failed a write or sync: no record may be appended until it is rewritten
    /// (a torn record would hide every later one from replay).
    pub(super) journal_broken: bool,
    /// An error that degrades at once happened (a sync failed, or no slot was left to set a
    /// stranded block aside).
    pub(super) degrade_now: Option<String>,
    /// Times an operator returned the mount to service.
    pub(super) returned_to_service: u64,
}

/// The score after `errors` more errors at `now_ns`, starting from `score` at `at_ns`,
/// halving every `halflife`.
pub fn decayed_score(score: f64, at_ns: u64, now_ns: u64, halflife: Duration) -> f64 {
    let h = halflife.as_nanos().max(1) as f64;
    score * 0.5f64.powf(now_ns.saturating_sub(at_ns) as f64 / h)
}

/// A dirty block the core no longer tracks (its write-back could not read it, or the slot
/// it was in went to another block): kept where it lies, out of use, until it can be read and
/// written back. The journal still names it, so a restart recovers it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stranded {
    /// Its place in the block file.
    pub(super) phys: u32,
    /// Valid bytes.
    pub(super) len: u32,
    /// The journal's first record of it since it was last clean (see `State::journaled`).
    pub(super) first_seq: Option<u64>,
    /// Whether the place is its own (moved out of the core's slots); `false` when no free
    /// slot was left, the core slot still points there and the mount is degraded (nothing is
    /// written to the block file then).
    pub(super) owned: bool,
}

impl State {
    /// Whether the mount serves in pass-through.
    pub fn degraded(&self) -> bool {
        self.health.degraded
    }

    /// Counts a cache-device error, logging the first of each kind. Returns whether the mount
    /// must degrade now.
    pub(super) fn count_error(&mut self, e: &io::Error) -> bool {
        let Some(d) = as_device_error(e) else {
            return false;
        };
        let kind = ErrorKind::of(&d.source);
        let (target, op, offset) = (d.target, d.op, d.offset);
        let name = format!("{target:?}_{op:?}_{kind:?}").to_lowercase();
        *self.health.counts.entry(name).or_default() += 1;
        if self.health.logged.insert((target, op, kind)) {
            eprintln!(
                "tiercache mount: cache device error: {} {:?} at byte {offset} failed: {} \
                 (errno {}); further errors of this kind are counted only",
                match target {
                    Target::Blocks => "block file",
                    Target::Journal => "journal",
                },
                op,
                d.source,
                d.source.raw_os_error().unwrap_or(0)
            );
        }
        let now = self.now_ns();
        self.health.first_error_ns.get_or_insert(now);
        let h = &mut self.health;
        h.score = decayed_score(h.score, h.score_at_ns, now, self.cfg.on_error.halflife) + 1.0;
        h.score_at_ns = now;
        if target == Target::Journal {
            h.journal_broken = true;
            h.degrade_now
                .get_or_insert_with(|| format!("the journal failed a {op:?} ({kind:?})"));
        } else if op == Op::Sync {
            h.degrade_now
                .get_or_insert_with(|| format!("the block file failed a sync ({kind:?})"));
        }
        h.degrade_now.is_some() || h.score.round() >= self.cfg.on_error.threshold
    }

    /// Handles a cache-device error `e` of an operation that has no pass-through form for one
    /// request (fsync, truncate, delete, write-back): counted, and the mount degrades.
    pub(super) fn degrade_on(&mut self, e: &io::Error) {
        self.count_error(e);
        let why = self
            .health
            .degrade_now
            .clone()
            .unwrap_or_else(|| format!("{e}"));
        self.degrade(why);
    }

    /// Degrades if the errors so far call for it.
    pub(super) fn maybe_degrade(&mut self) {
        let reason = if let Some(r) = self.health.degrade_now.clone() {
            Some(r)
        } else {
            let h = &self.health;
            let score = decayed_score(
                h.score,
                h.score_at_ns,
                self.now_ns(),
                self.cfg.on_error.halflife,
            );
            (score.round() >= self.cfg.on_error.threshold).then(|| {
                format!(
                    "{} cache device errors (score {:.1} reached the threshold {})",
                    self.health.counts.values().sum::<u64>(),
                    score,
                    self.cfg.on_error.threshold
                )
            })
        };
        match reason {
            Some(r) => self.degrade(r),
            None if self.health.journal_broken => self.retire_journal(),
            None => {}
        }
    }

    /// Switches to pass-through (once; later calls only retire a broken journal): every clean
    /// block leaves the cache, every dirty block it can read is written back, and from now on
    /// requests are served by the store (the dirty blocks left, unreadable, from the cache).
    pub(super) fn degrade(&mut self, reason: String) {
        if !self.health.degraded {
            self.health.degraded = true;
            let now = self.now_ns();
            self.health.first_error_to_degraded_ns = self
                .health
                .first_error_ns
                .map(|first| now.saturating_sub(first));
            eprintln!(
                "tiercache mount: DEGRADED: {reason}; serving from the store (pass-through), \
                 writing back the dirty blocks the cache can still read"
            );
            self.health.reason = Some(reason);
            for key in self.core.clean_all() {
                self.forget(key);
            }
            match self.drain(None) {
                Ok((written, left)) => eprintln!(
                    "tiercache mount: degraded: {written} dirty blocks written back, {left} \
                     could not be read (retried by the cleaner, fsync and unmount)"
                ),
                Err(e) => eprintln!(
                    "tiercache mount: degraded: writing dirty blocks back failed ({e}); \
                     retried by the cleaner, fsync and unmount"
                ),
            }
        }
        if self.health.journal_broken {
            self.retire_journal();
        }
    }

    /// Takes the mount out of service (an operator who knows its cache directory is failing:
    /// `tiercache mount` on SIGUSR2): degraded, as past the error threshold.
    pub fn take_out_of_service(&mut self, reason: &str) {
        self.degrade(format!("operator request: {reason}"));
    }

    /// Returns a degraded mount to service once its cache directory is fixed (`tiercache
    /// mount` on SIGUSR1). Every dirty block the cache still holds is written back first
    /// (store files synced); if one still cannot be read, the mount stays degraded and this
    /// fails, naming how many. A journal retired while degraded is made anew, the block file
    /// and the journal are synced, and the error score starts again from zero (the counts
    /// stay); from then on requests use the cache again. `Ok(false)`: it was not degraded.
    pub fn return_to_service(&mut self) -> io::Result<bool> {
        if !self.health.degraded {
            return Ok(false);
        }
        let (_, left) = self.drain(None)?;
        self.sync_written_back()?;
        if left > 0 {
            return Err(io::Error::other(format!(
                "{left} dirty blocks still cannot be read from the cache directory: the mount \
                 stays degraded (fix the device, or unmount: the journal keeps them)"
            )));
        }
        if self.cfg.variant.is_write_back()
            && self.cfg.capacity_blocks > 0
            && self.journal.is_none()
        {
            let path = crate::store::CacheDir::new(&self.cfg.cache_dir).journal();
            let mut j = crate::journal::Journal::create(&path)
                .map_err(|e| crate::faults::device_error(Target::Journal, Op::Write, 0, e))?;
            j.set_faults(self.faults.clone());
            self.journal = Some(j);
        }
        // Quarantined places are free again once the journal no longer names them.
        self.sync_journal_raw()?;
        let now = self.now_ns();
        let h = &mut self.health;
        h.degraded = false;
        h.reason = None;
        h.score = 0.0;
        h.score_at_ns = now;
        h.first_error_ns = None;
        h.degrade_now = None;
        h.journal_broken = false;
        h.logged.clear();
        h.returned_to_service += 1;
        eprintln!(
            "tiercache mount: returned to service: the cache directory is used again (error \
             score reset; the counts stay)"
        );
        Ok(true)
    }

    /// A block leaves the core without reaching the store (no journal record: the caller
    /// records a `Clean` if one is due).
    pub(super) fn forget(&mut self, key: BlockKey) {
        if let Some((slot, _)) = self.core.lookup(key) {
            let mut ops = Vec::new();
            self.core.discard(key, &mut ops);
            self.valid[slot as usize] = 0;
        }
    }

    /// The dirty copy the cache holds of `key` (the core's, or a stranded one): its place, its
    /// valid bytes and the journal's first record of it.
    pub(super) fn dirty_copy(&self, key: BlockKey) -> Option<(u32, u32, Option<u64>)> {
        if let Some(s) = self.stranded.get(&key) {
            return Some((s.phys, s.len, s.first_seq));
        }
        match self.core.lookup(key)? {
            (slot, true) => Some((
                self.slots.phys(slot),
                self.valid[slot as usize],
                self.journaled[slot as usize],
            )),
            _ => None,
        }
    }

    /// Reads the dirty copy of `key` (see [`State::dirty_copy`]).
    pub(super) fn read_copy(&mut self, key: BlockKey) -> io::Result<Option<Vec<u8>>> {
        let Some((phys, len, _)) = self.dirty_copy(key) else {
            return Ok(None);
        };
        let blocks = self
            .blocks
            .as_ref()
            .expect("a cache with dirty blocks has a block file");
        let mut data = vec![0u8; len as usize];
        let n = self.read_phys_at(blocks, &mut data, phys as u64 * self.bs())?;
        data.truncate(n);
        self.stats.cache_bytes_read += n as u64;
        Ok(Some(data))
    }

    /// The dirty copy of `key` is in the store now (synced where an fsync promised it): the
    /// cache lets it go, with a `Clean` record.
    pub(super) fn drop_copy(&mut self, key: BlockKey) {
        if let Some(s) = self.stranded.remove(&key) {
            self.journal_clean_phys(s.phys, key.file);
            if s.owned {
                self.slots.release(s.phys);
            }
        } else if let Some((slot, dirty)) = self.core.lookup(key) {
            if dirty && self.journaled[slot as usize].is_some() {
                if let Err(e) = self.journal_clean(slot, key.file) {
                    self.count_error(&e);
                }
            }
            self.forget(key);
        }
    }

    /// Journals that place `phys` (of a block of `file`) holds nothing dirty; nothing while the
    /// journal is broken (its rewrite names only what is left).
    pub(super) fn journal_clean_phys(&mut self, phys: u32, file: FileId) {
        if self.health.journal_broken || !self.cfg.variant.is_write_back() {
            return;
        }
        if let Some(j) = self.journal.as_mut() {
            match j.clean(phys) {
                Ok(()) => {
                    self.cleaned_unsynced.insert(file);
                }
                Err(e) => {
                    self.count_error(&e);
                }
            }
        }
    }

    /// Sets dirty `key` in core slot `slot` aside as stranded: the core slot moves to a free
    /// place and the block's stays out of use; the core forgets the block if it still maps it
    /// there.
    pub(super) fn strand(&mut self, slot: Slot, key: BlockKey) {
        let len = self.valid[slot as usize];
        let first_seq = self.journaled[slot as usize].take();
        if !self.slots.has_free() {
            // A sync frees the quarantined places (its failure is counted and degrades).
            if let Err(e) = self.sync_journal_raw() {
                self.count_error(&e);
            }
        }
        let (phys, owned) = match self.slots.strand(slot) {
            Some(old) => (old, true),
            None => {
                self.health
                    .degrade_now
                    .get_or_insert_with(|| "no free slot to set an unreadable block aside".into());
                (self.slots.phys(slot), false)
            }
        };
        self.stranded.insert(
            key,
            Stranded {
                phys,
                len,
                first_seq,
                owned,
            },
        );
        self.valid[slot as usize] = 0;
        if self.core.lookup(key).is_some_and(|(s, _)| s == slot) {
            let mut ops = Vec::new();
            self.core.discard(key, &mut ops);
        }
    }

    /// Writes back every dirty block (of `file`, or all) the cache can read, syncs their store
    /// files, and lets them go. Returns the blocks written and those left (unreadable).
    pub(super) fn drain(&mut self, file: Option<FileId>) -> io::Result<(u64, u64)> {
        self.drain_some(file, false)
    }

    /// [`State::drain`] of the stranded blocks only (`stranded_only`), or of all.
    pub(super) fn drain_some(
        &mut self,
        file: Option<FileId>,
        stranded_only: bool,
    ) -> io::Result<(u64, u64)> {
        let bs = self.bs();
        let mut keys: Vec<BlockKey> = if stranded_only {
            Vec::new()
        } else {
            self.core.dirty_all().into_iter().map(|(k, _)| k).collect()
        };
        keys.extend(self.stranded.keys().copied());
        keys.retain(|k| file.is_none_or(|f| k.file == f));
        keys.sort_unstable();
        let mut written = Vec::new();
        let mut files = Vec::new();
        let mut left = 0;
        for key in keys {
            match self.read_copy(key) {
                Ok(Some(data)) => {
                    self.store_write(key.file, &data, key.block * bs)?;
                    if !files.contains(&key.file) {
                        files.push(key.file);
                    }
                    written.push(key);
                }
                Ok(None) => {}
                Err(e) if is_device_error(&e) => {
                    self.count_error(&e);
                    left += 1;
                }
                Err(e) => return Err(e),
            }
        }
        for f in files {
            if self.store_file(f).is_ok() {
                self.sync_store(f)?;
            }
        }
        for &key in &written {
            self.drop_copy(key);
        }
        Ok((written.len() as u64, left))
    }

    /// The journal cannot be appended to: it is replaced by one naming only the dirty blocks
    /// left (unreadable: their records are taken from the journal as it is), or removed when
    /// none is left. If it can be neither, it is removed anyway (a restart must not write the
    /// versions it names over the store's newer data) and the blocks left lose their chance at
    /// a restart.
    pub(super) fn retire_journal(&mut self) {
        let Some(path) = self.journal.as_ref().map(|j| j.path().to_path_buf()) else {
            self.health.journal_broken = false;
            return;
        };
        let mut left: Vec<(u32, BlockKey)> = self
            .core
            .dirty_all()
            .into_iter()
            .map(|(k, s)| (self.slots.phys(s), k))
            .collect();
        left.extend(self.stranded.iter().map(|(k, s)| (s.phys, *k)));
        let rewritten = if left.is_empty() {
            Err(io::Error::other("nothing left to journal"))
        } else {
            crate::journal::replay(&path).and_then(|r| {
                let records: Vec<_> = left
                    .iter()
                    .filter_map(|&(phys, key)| {
                        r.blocks
                            .iter()
                            .flatten()
                            .find(|d| d.slot == phys && d.key == key)
                            .map(|d| (d.slot, d.key, d.len, d.crc))
                    })
                    .collect();
                self.journal
                    .as_mut()
                    .expect("checked")
                    .rewrite(&records)
                    .map(|()| records.len())
            })
        };
        match rewritten {
            Ok(n) => {
                eprintln!(
                    "tiercache mount: journal {} rewritten naming the {n} dirty blocks the \
                     cache could not write back",
                    path.display()
                );
                self.slots.synced();
                self.cleaned_unsynced.clear();
            }
            Err(_) => {
                self.journal = None;
                let removed = std::fs::remove_file(&path)
                    .and_then(|()| std::fs::File::open(path.parent().unwrap_or(&path))?.sync_all());
                match removed {
                    Ok(()) if left.is_empty() => eprintln!(
                        "tiercache mount: journal {} removed: every dirty block is in the store",
                        path.display()
                    ),
                    Ok(()) => eprintln!(
                        "tiercache mount: journal {} removed; {} dirty blocks the cache could \
                         not read will not be recovered at a restart",
                        path.display(),
                        left.len()
                    ),
                    Err(e) => eprintln!(
                        "tiercache mount: journal {} could be neither rewritten nor removed \
                         ({e}): remove it before mounting again, or a restart may write stale \
                         blocks",
                        path.display()
                    ),
                }
            }
        }
        self.health.journal_broken = false;
    }

    /// Brings the cache back to a consistent state after `ops`, a plan for the request on
    /// `request` (file, blocks), failed at op `failed_at` with a cache-device error: its
    /// victims' dirty data is written back or stranded, and every block of the request the
    /// plan changed leaves the cache, except dirty blocks it held before (`pre`: block → slot),
    /// whose cached version is whole (dirty blocks are rewritten in a spare slot, never in
    /// place). The request is then served past the cache.
    pub(super) fn repair(
        &mut self,
        ops: &[DevOp],
        failed_at: usize,
        pre: &HashMap<BlockKey, Slot>,
        request: Option<(FileId, Range<u64>)>,
    ) -> io::Result<()> {
        let bs = self.bs();
        let in_request = |k: BlockKey| {
            request
                .as_ref()
                .is_some_and(|(f, r)| *f == k.file && r.contains(&k.block))
        };
        let mut evicted = HashSet::new();
        let mut redone = Vec::new();
        let mut files = Vec::new();
        let mut store_error = None;
        // Victims whose `Clean` is not recorded. One the plan brought in itself and evicted
        // after the failure holds only the store's data and the request's (served again):
        // nothing to keep.
        for (j, op) in ops.iter().enumerate() {
            let DevOp::WriteBack { slot, key } = *op else {
                continue;
            };
            evicted.insert(key);
            let ours = j > failed_at && in_request(key) && pre.get(&key) != Some(&slot);
            if self.exec_cleaned.contains(&j) || ours {
                continue;
            }
            match self.slot_data(slot) {
                Ok(data) => match self.store_write(key.file, &data, key.block * bs) {
                    Ok(()) => {
                        if !files.contains(&key.file) {
                            files.push(key.file);
                        }
                        redone.push((slot, key));
                    }
                    Err(e) => {
                        self.strand(slot, key);
                        store_error.get_or_insert(e);
                    }
                },
                Err(e) => {
                    self.count_error(&e);
                    self.strand(slot, key);
                }
            }
        }
        // The request's blocks whose cached content this plan may have left half made.
        let mut to_clean = Vec::new();
        if let Some((file, blocks)) = request.clone() {
            for block in blocks {
                let key = BlockKey::new(file, block);
                let Some((slot, dirty)) = self.core.lookup(key) else {
                    continue;
                };
                let whole = dirty && pre.get(&key) == Some(&slot) && !evicted.contains(&key);
                if whole {
                    continue;
                }
                if self.journaled[slot as usize].is_some() {
                    to_clean.push((slot, file));
                }
                self.forget(key);
            }
        }
        for f in files {
            if let Err(e) = self.sync_store(f) {
                store_error.get_or_insert(e);
            }
        }
        for (slot, key) in redone {
            if let Err(e) = self.journal_clean(slot, key.file) {
                self.count_error(&e);
            }
        }
        for (slot, file) in to_clean {
            if let Err(e) = self.journal_clean(slot, file) {
                self.count_error(&e);
            }
        }
        match store_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
