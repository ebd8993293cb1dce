//! Partitions at run time: resizing them, giving a volume its own, and reading their state.
//!
//! A shrink never loses dirty data and never lets a slot be reused before its data is safe:
//! - the partition's policy sees the new capacity, then the cache evicts its victims (for no
//!   incoming line) until the lines in the policy fit;
//! - a clean victim is dropped at once and its slot is free;
//! - a dirty victim *leaves*: it is marked clean and pinned and a flush job (cause
//!   `EvictFlush`) writing it back is appended to the caller's list; the line stays resident
//!   and readable (hits do not touch the policy it has left) until the executor reports the
//!   job done ([`Cache::flush_done`]), which frees the slot. If it was written again
//!   meanwhile, it stays and returns to its partition's policy as a recent line; if the job
//!   failed ([`Cache::flush_failed`]) it is dirty again and stays the same way;
//! - pinned lines (under a cleaning job) cannot be evicted: the partition stays over its
//!   capacity until they are done; [`Cache::flush_done`] then drops clean lines and
//!   [`Cache::clean`] (or [`Cache::settle_partitions`]) writes dirty ones back.
//!
//! So a shrink is complete once the jobs it returned are done ([`Cache::partitions_settled`]).
//! A growing partition takes free slots as they appear; while none is free (a shrink elsewhere
//! is still writing back) it makes room among its own lines, as a full partition does. Every
//! byte written back was dirty and every dirty byte is written back before its slot is reused,
//! as for cleaning.

use super::counters::Event;
use super::{config_error, Cache, FlushJob, PolicyError};
use crate::cleaning::{sort_by_address, CleaningOrder, DirtyState};
use crate::partition::{PartitionId, PartitionInfo};
use tiercache_core::MAX_VOLUMES;
use tiercache_core::{OpCause, VolumeId};
use tiercache_eviction::Slot;
use tiercache_eviction::NO_INCOMING;

/// Lines per flush job of a shrink.
const SHRINK_JOB_LINES: usize = 128;

impl Cache {
    /// Number of partitions (the shared one included).
    pub fn partition_count(&self) -> usize {
        self.parts.len()
    }

    /// Partition receiving `volume`'s new lines: its own, or the shared one.
    pub fn partition_of(&self, volume: VolumeId) -> PartitionId {
        PartitionId(self.parts.of_volume(volume) as u16)
    }

    /// Sizes, occupancy and counters of every partition, in [`PartitionId`] order.
    pub fn partition_stats(&self) -> Vec<PartitionInfo> {
        (0..self.parts.len()).map(|p| self.parts.info(p)).collect()
    }

    /// Sizes, occupancy and counters of one partition.
    pub fn partition_info(&self, id: PartitionId) -> Option<PartitionInfo> {
        let p = id.0 as usize;
        (p < self.parts.len()).then(|| self.parts.info(p))
    }

    /// What a cleaner sees of one partition: its dirty lines against its capacity (jobs in
    /// flight are the cache's).
    pub fn partition_dirty_state(&self, id: PartitionId) -> Option<DirtyState> {
        let p = id.0 as usize;
        (p < self.parts.len()).then(|| DirtyState {
            dirty_lines: self.parts[p].dirty as u64,
            capacity_lines: self.parts[p].capacity as u64,
            jobs_in_flight: self.jobs.in_flight,
        })
    }

    /// Whether every partition fits its capacity with no line waiting to leave: every shrink
    /// is complete.
    pub fn partitions_settled(&self) -> bool {
        self.parts
            .iter()
            .all(|p| !p.over_capacity() && p.leaving == 0)
    }

    /// Sets the capacity in lines of each listed partition (others keep theirs), e.g. at an
    /// interval boundary. The capacities of all partitions must sum to at most the cache's
    /// lines. Shrinking partitions evict at once: clean victims are dropped, dirty ones are
    /// written back by the flush jobs appended to `jobs` (the executor runs them like
    /// cleaning jobs and reports them with [`Cache::flush_done`]); see the module notes. On
    /// error nothing changes.
    pub fn resize_partitions(
        &mut self,
        sizes: &[(PartitionId, u64)],
        jobs: &mut Vec<FlushJob>,
    ) -> Result<(), PolicyError> {
        let mut caps: Vec<u64> = self.parts.iter().map(|p| p.capacity as u64).collect();
        let mut listed = vec![false; caps.len()];
        for (i, &(id, lines)) in sizes.iter().enumerate() {
            let p = id.0 as usize;
            if p >= caps.len() {
                return Err(config_error(
                    "partitions",
                    format!(
                        "resize entry {i}: no partition {} (the cache has {})",
                        id.0,
                        caps.len()
                    ),
                ));
            }
            if std::mem::replace(&mut listed[p], true) {
                return Err(config_error(
                    "partitions",
                    format!("resize entry {i}: partition {} listed twice", id.0),
                ));
            }
            caps[p] = lines;
        }
        let total = caps.iter().fold(0u64, |a, &c| a.saturating_add(c));
        let lines = self.table.slots() as u64;
        if total > lines {
            return Err(config_error(
                "partitions",
                format!("resize to {total} lines in all, the cache has {lines}"),
            ));
        }
        self.apply_capacities(&caps, jobs);
        Ok(())
    }

    /// Gives `volume` a partition of `lines` lines: resizes its own, or creates one (its lines
    /// resident in the shared partition move into it, in slot order: their recency there is
    /// not kept). Lines come from the capacity no partition holds first, then from the
    /// shared partition; lines given up return to the shared partition. Shrinks append flush
    /// jobs to `jobs` as [`Cache::resize_partitions`] does. On error nothing changes.
    ///
    /// Run-time partitions are not journaled: an executor rebuilding a cache from its
    /// journal re-applies them before [`Cache::restore_line`].
    pub fn set_partition(
        &mut self,
        volume: VolumeId,
        lines: u64,
        jobs: &mut Vec<FlushJob>,
    ) -> Result<PartitionId, PolicyError> {
        if volume.0 >= MAX_VOLUMES {
            return Err(config_error(
                "partitions",
                format!(
                    "volume {} exceeds the limit of {MAX_VOLUMES} volumes",
                    volume.0
                ),
            ));
        }
        let shared = self.parts.shared();
        let own = self.parts.own(volume);
        let mut caps: Vec<u64> = self.parts.iter().map(|p| p.capacity as u64).collect();
        let current = own.map_or(0, |p| caps[p]);
        let unallocated = self.table.slots() as u64 - self.parts.total_capacity();
        if lines > current {
            let need = lines - current;
            let from_shared = need.saturating_sub(unallocated);
            if from_shared > caps[shared] {
                return Err(config_error(
                    "partitions",
                    format!(
                        "volume {} needs {need} more lines: {unallocated} are unallocated and \
                         the shared partition has {}",
                        volume.0, caps[shared]
                    ),
                ));
            }
            caps[shared] -= from_shared;
        } else {
            caps[shared] += current - lines;
        }
        let p = match own {
            Some(p) => p,
            None => {
                let p = self.parts.add(volume)?;
                caps.push(0);
                self.move_volume_lines(volume, shared, p);
                p
            }
        };
        caps[p] = lines;
        self.apply_capacities(&caps, jobs);
        Ok(PartitionId(p as u16))
    }

    /// Writes back (through flush jobs appended to `jobs`) and drops the lines of partitions
    /// still over their capacity: shrinks that found lines pinned or written again. Called by
    /// [`Cache::clean`]; a no-op when every partition fits.
    pub fn settle_partitions(&mut self, jobs: &mut Vec<FlushJob>) {
        for p in 0..self.parts.len() {
            if self.parts[p].over_capacity() {
                self.shrink(p, Some(jobs));
            }
        }
    }

    /// Drops clean, unpinned lines of partitions over their capacity (no jobs).
    pub(super) fn settle_clean(&mut self) {
        for p in 0..self.parts.len() {
            if self.parts[p].over_capacity() {
                self.shrink(p, None);
            }
        }
    }

    /// Sets every partition's capacity (validated by the caller) and shrinks those over it.
    pub(super) fn apply_capacities(&mut self, caps: &[u64], jobs: &mut Vec<FlushJob>) {
        for (p, &c) in caps.iter().enumerate() {
            if self.parts[p].capacity as u64 != c {
                self.parts.set_capacity(p, c as u32);
            }
        }
        self.settle_partitions(jobs);
    }

    /// Evicts partition `p`'s victims until the lines in its policy fit its capacity or every
    /// candidate is pinned. Clean victims are dropped; dirty ones leave through flush jobs
    /// appended to `jobs` or, without `jobs`, are passed over. Dirty lines held out of the
    /// policy (`dirty_full = "bypass"`) are taken after the policy's clean victims, least
    /// recently written first.
    fn shrink(&mut self, p: usize, jobs: Option<&mut Vec<FlushJob>>) {
        let write_back = jobs.is_some();
        let mut leaving = Vec::new();
        while self.parts[p].over_capacity() {
            let table = &self.table;
            let victim = self.parts[p].evict.evict(NO_INCOMING, &|s| {
                let m = table.meta(s);
                m.pinned || (!write_back && m.dirty != 0)
            });
            let Some(v) = victim else {
                break;
            };
            self.evict_for_shrink(p, v, &mut leaving);
        }
        if write_back && self.parts[p].over_capacity() && self.parts[p].evict.held_out() > 0 {
            // The policy has nothing left to give: the held-out dirty lines, oldest written
            // first, out of the order and into write-back.
            let need = (self.parts[p].linked() - self.parts[p].capacity) as usize;
            for v in self.dirty_unpinned(need, Some(p)) {
                self.parts.order(p).remove(v);
                self.evict_for_shrink(p, v, &mut leaving);
            }
        }
        if let Some(jobs) = jobs {
            // The eviction write-back is batched: under an address order its jobs write in
            // ascending backend address, as the cleaner's do (the same lines leave).
            if self.cfg.cleaning_order != CleaningOrder::Written {
                sort_by_address(&mut leaving, |&s| self.table.meta(s).key);
            }
            for chunk in leaving.chunks(SHRINK_JOB_LINES) {
                let job = self.write_back_job(chunk.to_vec(), OpCause::EvictFlush);
                jobs.push(job);
            }
        }
    }

    /// Evicts `v` (already out of partition `p`'s order) for a shrink: a clean line is freed,
    /// a dirty one leaves through a write-back job (collected in `leaving`).
    fn evict_for_shrink(&mut self, p: usize, v: Slot, leaving: &mut Vec<Slot>) {
        let dirty = self.table.meta(v).dirty != 0;
        self.record(Event::Eviction { p, dirty });
        if dirty {
            self.parts[p].leaving += 1;
            self.leaving.insert(v);
            leaving.push(v);
        } else {
            self.table.remove(v);
            self.table.release(v);
            self.parts[p].used -= 1;
        }
    }

    /// A leaving line's write-back job completed (`slot` is unpinned and out of the leaving
    /// set): free its slot, or keep it if it holds dirty data again.
    pub(super) fn leave(&mut self, p: usize, slot: Slot) {
        self.parts[p].leaving -= 1;
        let m = self.table.meta(slot);
        let deferred = self.jobs.deferred_drops.remove(&slot);
        if m.valid == 0 {
            // Trimmed while leaving.
            self.invalidate(slot, 0);
        } else if m.dirty != 0 {
            // Written again during its write-back: the only copy of that data, so it stays,
            // back in the policy as a recent line (the partition settles later).
            self.parts.order(p).insert(slot, m.key, true);
            if let Some(mask) = deferred {
                let drop = mask & m.valid & !m.dirty;
                if drop != 0 {
                    self.invalidate(slot, drop);
                }
            }
        } else {
            self.table.remove(slot);
            self.table.release(slot);
            self.parts[p].used -= 1;
        }
    }

    /// Moves `volume`'s resident lines from partition `from` to partition `to`.
    pub(super) fn move_volume_lines(&mut self, volume: VolumeId, from: usize, to: usize) {
        let slots: Vec<Slot> = self
            .table
            .resident_slots()
            .filter(|&s| {
                let m = self.table.meta(s);
                m.partition as usize == from && m.key.volume() == volume
            })
            .collect();
        for s in slots {
            let m = self.table.meta(s);
            if m.pinned && self.leaving.contains(&s) {
                self.parts[from].leaving -= 1;
                self.parts[to].leaving += 1;
            } else {
                self.parts.order(from).remove(s);
                self.parts.order(to).insert(s, m.key, m.dirty != 0);
            }
            let (dirty, pinned) = ((m.dirty != 0) as u32, m.pinned as u32);
            let f = &mut self.parts[from];
            f.used -= 1;
            f.dirty -= dirty;
            f.pinned -= pinned;
            f.dirty_pinned -= dirty & pinned;
            let t = &mut self.parts[to];
            t.used += 1;
            t.dirty += dirty;
            t.pinned += pinned;
            t.dirty_pinned += dirty & pinned;
            self.table.set_partition(s, to as u16);
        }
    }
}
