//! Flush jobs: the cleaner's decisions turned into batches of dirty lines, and their
//! completion or failure.

use super::counters::Event;
use super::{Cache, ExecutorState, FlushJob};
use crate::cleaning::{sort_by_address, sweep_batch, CleaningOrder, DirtyState};
use tiercache_core::{Device, LineKey, Nanos, OpCause, Plan};
use tiercache_eviction::Slot;

/// The flush jobs of one cache: how many are in flight, the next number, and what waits for
/// them (clean sub-blocks to drop, a resize's jobs not yet taken by the executor).
#[derive(Debug, Default)]
pub(super) struct JobTracker {
    /// Jobs issued and not yet reported done.
    pub(super) in_flight: u32,
    /// Number of the last job issued (jobs are numbered from 1).
    last_id: u64,
    /// Clean sub-blocks to drop from lines that were under write-back when a failed plan
    /// asked for them to be dropped: the job's own sub-blocks (marked clean when it was made)
    /// are the only copy of their data until it completes, so the drop waits for it.
    pub(super) deferred_drops: std::collections::HashMap<Slot, u64>,
    /// Flush jobs of the last resize's shrinks, until the executor takes them.
    pub(super) resize_jobs: Vec<FlushJob>,
    /// Where the next `sweep`-ordered batch starts (a [`LineKey`]'s integer; see
    /// [`crate::cleaning::CleaningOrder::Sweep`]).
    sweep_cursor: u64,
}

impl JobTracker {
    /// Counts a new job in flight and returns its number.
    fn issue(&mut self) -> u64 {
        self.in_flight += 1;
        self.last_id += 1;
        self.last_id
    }

    /// Counts a job reported done (or failed).
    fn done(&mut self) {
        assert!(self.in_flight > 0, "flush_done without a job in flight");
        self.in_flight -= 1;
    }

    /// Jobs issued and not yet reported done.
    pub(super) fn in_flight(&self) -> u32 {
        self.in_flight
    }
}

impl Cache {
    /// Asks the cleaner for work given the executor's state; appends flush jobs to `jobs`.
    /// First finishes any partition shrink that could not complete before (see
    /// [`Cache::settle_partitions`]).
    pub fn clean(&mut self, state: &ExecutorState, jobs: &mut Vec<FlushJob>) {
        self.take_resize_jobs(jobs);
        self.settle_partitions(jobs);
        let d = self.dirty_state();
        let n = self.cleaner.poll(state, d);
        if n > 0 {
            if let Some(job) = self.make_job(n as usize, None) {
                jobs.push(job);
            }
        }
    }

    /// When the cleaner wants to be polled again if nothing else happens.
    pub fn next_clean_poll(&self, state: &ExecutorState) -> Option<Nanos> {
        if self.has_resize_jobs() {
            // A resize's write-backs wait: as soon as possible.
            return Some(state.now);
        }
        self.cleaner.next_poll(state, self.dirty_state())
    }

    /// Whether a poll of [`Cache::clean`] while the cache device serves foreground I/O, with a
    /// poll already scheduled, can change nothing: the cleaner acts only on an idle device
    /// ([`crate::cleaning::CleaningPolicy::acts_only_on_idle_cache`]), no resize's jobs wait
    /// and no partition is over its capacity (so `clean` has nothing to settle), and
    /// [`Cache::next_clean_poll`] cannot answer earlier than the scheduled poll.
    /// The executor asks after every arrival and acknowledgement: a cache of one partition
    /// (the common case) tests it without walking the partitions.
    #[inline]
    pub fn cleaning_waits_for_idle_cache(&self) -> bool {
        if !self.cleaner_waits_for_idle || self.has_resize_jobs() {
            return false;
        }
        match self.parts.single() {
            Some(p) => !p.over_capacity(),
            None => !self.parts.iter().any(|p| p.over_capacity()),
        }
    }

    pub(super) fn dirty_state(&self) -> DirtyState {
        DirtyState {
            dirty_lines: self.table.dirty_count(),
            capacity_lines: self.capacity_lines(),
            jobs_in_flight: self.jobs.in_flight,
        }
    }

    /// Up to `n` dirty, unpinned lines (of partition `only`, or of any), least recently written
    /// first (a shrink's choice, whatever the cleaning order).
    pub(super) fn dirty_unpinned(&self, n: usize, only: Option<usize>) -> Vec<Slot> {
        self.table
            .dirty_iter()
            .filter(|&s| self.flushable(s, only))
            .take(n)
            .collect()
    }

    /// Whether `s` (dirty) may join a flush batch of partition `only` (or of any).
    fn flushable(&self, s: Slot, only: Option<usize>) -> bool {
        let m = self.table.meta(s);
        !m.pinned && only.is_none_or(|p| m.partition as usize == p)
    }

    /// Up to `n` dirty, unpinned lines (of partition `only`, or of any), chosen and ordered
    /// as the configured [`CleaningOrder`] says: least recently written first (`written`),
    /// the same lines in ascending backend address (`address`), or the next lines of an
    /// address-order sweep (`sweep`, which moves the sweep's cursor).
    fn cleaning_batch(&mut self, n: usize, only: Option<usize>) -> Vec<Slot> {
        match self.cfg.cleaning_order {
            CleaningOrder::Written => self.dirty_unpinned(n, only),
            CleaningOrder::Address => {
                let mut slots = self.dirty_unpinned(n, only);
                sort_by_address(&mut slots, |&s| self.table.meta(s).key);
                slots
            }
            CleaningOrder::Sweep => {
                let keys = sweep_batch(
                    self.table
                        .dirty_iter()
                        .filter(|&s| self.flushable(s, only))
                        .map(|s| self.table.meta(s).key),
                    self.jobs.sweep_cursor,
                    n,
                );
                if let Some(last) = keys.last() {
                    self.jobs.sweep_cursor = last.0.wrapping_add(1);
                }
                keys.into_iter()
                    .map(|k| self.table.lookup(k).expect("a dirty line is resident"))
                    .collect()
            }
        }
    }

    /// Builds a flush job of up to `n` dirty, unpinned lines (of partition `only`, or of any),
    /// in the configured cleaning order (see [`Cache::cleaning_batch`]).
    pub(super) fn make_job(&mut self, n: usize, only: Option<usize>) -> Option<FlushJob> {
        let slots = self.cleaning_batch(n, only);
        if slots.is_empty() {
            return None;
        }
        self.record(Event::CleanJob {
            lines: slots.len() as u64,
        });
        Some(self.write_back_job(slots, OpCause::Clean))
    }

    /// Builds the job writing back `slots` (dirty, unpinned lines): marks them clean and
    /// pins them until the job is done.
    pub(super) fn write_back_job(&mut self, slots: Vec<Slot>, cause: OpCause) -> FlushJob {
        self.build_plan = true;
        self.scratch.clear();
        self.plan_write_backs.clear();
        for &slot in &slots {
            let key = self.table.meta(slot).key;
            let dirty = self.mark_clean(slot);
            self.write_back_ops(slot, key, dirty, 0, true, cause);
            self.table.set_pinned(slot, true);
            self.parts[self.table.meta(slot).partition as usize].pinned += 1;
        }
        let mut plan = Plan::new();
        self.scratch.sort_by_key(|o| o.stage);
        for o in self.scratch.drain(..) {
            plan.push(o);
        }
        FlushJob {
            id: self.jobs.issue(),
            plan,
            slots,
            shard: 0,
        }
    }

    /// The executor completed every op of `job`: its lines may be evicted again, and the
    /// lines a shrink evicted (see [`Cache::resize_partitions`]) leave the cache, unless they
    /// were written again meanwhile (then they return to their partition's policy as recent
    /// lines). A partition still over its capacity then drops clean lines to fit.
    pub fn flush_done(&mut self, job: FlushJob) {
        self.jobs.done();
        for slot in job.slots {
            let m = self.table.meta(slot);
            debug_assert!(m.pinned && m.resident);
            self.table.set_pinned(slot, false);
            let p = m.partition as usize;
            self.parts[p].pinned -= 1;
            self.parts[p].dirty_pinned -= (m.dirty != 0) as u32;
            if !self.leaving.is_empty() && self.leaving.remove(&slot) {
                self.leave(p, slot);
                continue;
            }
            if m.valid == 0 {
                // Trimmed while under write-back: drop it now.
                self.invalidate(slot, 0);
            } else if let Some(mask) = self.jobs.deferred_drops.remove(&slot) {
                // Sub-blocks made dirty again (a failed job, a newer write) stay.
                let drop = mask & m.valid & !self.table.meta(slot).dirty;
                if drop != 0 {
                    self.invalidate(slot, drop);
                }
            }
        }
        self.settle_clean();
    }

    /// The executor could not complete `job` (a device error): its lines, marked clean when
    /// the job was made, are dirty again (their data is still only in the cache) and unpinned.
    pub fn flush_failed(&mut self, job: FlushJob) {
        let line = self.geo.line_size();
        for o in job
            .plan
            .ops
            .iter()
            .filter(|o| o.device == Device::Backend && o.len > 0)
        {
            for index in o.offset / line..=(o.offset + o.len - 1) / line {
                let Some(slot) = self.table.lookup(LineKey::new(o.volume, index)) else {
                    continue;
                };
                let base = index * line;
                let (a, b) = (
                    o.offset.max(base) - base,
                    (o.offset + o.len).min(base + line) - base,
                );
                let mask = self.geo.touched_mask(a, b) & self.table.meta(slot).valid;
                if mask != 0 {
                    self.mark_dirty(slot, mask);
                }
            }
        }
        self.flush_done(job);
    }

    /// Final flush: jobs covering every dirty, unpinned line (128 lines a job).
    /// Under an address order the jobs go in ascending backend address, sorted once (not a
    /// sweep per job).
    pub fn flush_all(&mut self, jobs: &mut Vec<FlushJob>) {
        const LINES: usize = 128;
        if self.cfg.cleaning_order == CleaningOrder::Written {
            while let Some(job) = self.make_job(LINES, None) {
                jobs.push(job);
            }
            return;
        }
        let mut slots = self.dirty_unpinned(usize::MAX, None);
        sort_by_address(&mut slots, |&s| self.table.meta(s).key);
        for chunk in slots.chunks(LINES) {
            self.record(Event::CleanJob {
                lines: chunk.len() as u64,
            });
            let job = self.write_back_job(chunk.to_vec(), OpCause::Clean);
            jobs.push(job);
        }
    }

    /// A flush job of up to `lines` dirty, unpinned lines of one partition, least recently
    /// written first, appended to `jobs` (for a cleaner working per tenant; nothing if the
    /// partition has no such line). Returns whether a job was made.
    pub fn flush_partition(
        &mut self,
        id: crate::partition::PartitionId,
        lines: usize,
        jobs: &mut Vec<FlushJob>,
    ) -> bool {
        let p = id.0 as usize;
        if p >= self.parts.len() || lines == 0 {
            return false;
        }
        match self.make_job(lines, Some(p)) {
            Some(job) => {
                jobs.push(job);
                true
            }
            None => false,
        }
    }
}
