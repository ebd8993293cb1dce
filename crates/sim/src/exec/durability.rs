//! Durability of the cache's write-backs on disks with a volatile write cache
//! (docs/design.md §5.1): the FLUSH a flush job sends before its lines count as clean
//! (`run.write_back_barrier`), and the power cut (`run.power_cut_ns`) that shows what a
//! write-back without it can lose.

use std::collections::BTreeSet;

use tiercache_core::{IoKind, VolumeId};

use super::levels::dev_index;
use super::*;
use crate::config::WriteBackBarrier;

/// A backend write of a flush job that finished (its lines counted as clean), kept while a
/// power cut is configured.
#[derive(Debug, Clone, Copy)]
pub(super) struct WriteBack {
    level: u16,
    dev: u16,
    volume: VolumeId,
    offset: u64,
    len: u64,
}

impl WriteBack {
    /// The write-back `op` (a backend write) makes at `level`, whose volumes map to devices
    /// by `vol_dev`.
    fn of(level: u16, vol_dev: &[u16], op: &DevOp) -> Self {
        WriteBack {
            level,
            dev: dev_index(vol_dev, op) as u16,
            volume: op.volume,
            offset: op.offset,
            len: op.len,
        }
    }
}

/// What a power cut (`run.power_cut_ns`) took (the record's `metrics.power_cut`).
pub type PowerCutReport = tiercache_metrics::PowerCutMetrics;

/// With the FLUSH barrier: after each stage of a request's plan holding eviction write-backs
/// (cause `evict-flush`) to backend devices with a volatile cache, a stage of one FLUSH per
/// such device, so the stages after it (the slot's new data) wait until the victim's data is
/// durable, as a flush job's lines wait before they count as clean.
pub(super) fn flush_after_evictions(plan: &mut Plan, vol_dev: &[u16], devs: &[DeviceModel]) {
    let mut end = plan.ops.len();
    while end > 0 {
        let stage = plan.ops[end - 1].stage;
        let start = plan.ops[..end]
            .iter()
            .rposition(|o| o.stage != stage)
            .map_or(0, |i| i + 1);
        let mut flushes: Vec<DevOp> = Vec::new();
        for op in &plan.ops[start..end] {
            if op.cause != OpCause::EvictFlush
                || op.device != Device::Backend
                || op.kind != IoKind::Write
            {
                continue;
            }
            let d = dev_index(vol_dev, op);
            let seen = flushes.iter().any(|f| dev_index(vol_dev, f) == d);
            if !seen && devs[d].has_volatile_cache() {
                flushes.push(barrier_op(op, stage + 1));
            }
        }
        if !flushes.is_empty() {
            // Ops are in stage order: the later stages move one down.
            for o in &mut plan.ops[end..] {
                o.stage += 1;
            }
            plan.ops.splice(end..end, flushes);
        }
        end = start;
    }
}

/// A FLUSH to the backend device `op` wrote to, in stage `stage`.
fn barrier_op(op: &DevOp, stage: tiercache_core::Stage) -> DevOp {
    DevOp {
        kind: IoKind::Flush,
        offset: 0,
        vaddr: 0,
        len: 0,
        stage,
        critical: false,
        cause: OpCause::Flush,
        ..*op
    }
}

/// Whether `op` is a backend write of an eviction.
fn is_eviction_write(op: &DevOp) -> bool {
    op.cause == OpCause::EvictFlush && op.device == Device::Backend && op.kind == IoKind::Write
}

impl<const MULTI: bool> Sim<'_, MULTI> {
    /// A stage of request `idx` completed (a power cut is configured): the eviction
    /// write-backs it made final are recorded as done: those of this stage unless a barrier
    /// stage follows, or those of the stage before when this one was their barrier.
    pub(super) fn record_evictions(&mut self, idx: u32) {
        let t = &self.tasks[idx as usize];
        let end = t.next_op as usize;
        if end == 0 {
            return;
        }
        let ops = &t.plan.ops;
        let stage = ops[end - 1].stage;
        let start = ops[..end]
            .iter()
            .rposition(|o| o.stage != stage)
            .map_or(0, |i| i + 1);
        let barrier = |o: &DevOp| o.kind == IoKind::Flush && o.cause == OpCause::Flush;
        let range = if ops[start..end].iter().any(is_eviction_write) {
            if ops
                .get(end)
                .is_some_and(|o| barrier(o) && o.stage == stage + 1)
            {
                return;
            }
            start..end
        } else if start > 0 && ops[start..end].iter().all(barrier) {
            let prev = ops[start - 1].stage;
            let first = ops[..start]
                .iter()
                .rposition(|o| o.stage != prev)
                .map_or(0, |i| i + 1);
            first..start
        } else {
            return;
        };
        let lv = &self.levels[t.level as usize];
        for op in ops[range].iter().filter(|o| is_eviction_write(o)) {
            self.write_backs
                .push(WriteBack::of(t.level, &lv.vol_dev, op));
        }
    }

    /// A flush job's ops are done: with the FLUSH barrier and backend devices with a volatile
    /// write cache written, appends a FLUSH to each as a stage of its own and issues it
    /// (returns true: the job finishes when they complete); otherwise false.
    pub(super) fn flush_barrier(&mut self, idx: u32) -> bool {
        if self.run_limits.write_back_barrier != WriteBackBarrier::Flush {
            return false;
        }
        let t = &mut self.tasks[idx as usize];
        let lv = &self.levels[t.level as usize];
        if t.barrier_ops > 0 || (MULTI && lv.below.is_some()) {
            // Sent already, or the backend is a level below (its own write-backs are its own).
            return false;
        }
        let mut flushes: Vec<DevOp> = Vec::new();
        let stage = t.plan.ops.last().map_or(0, |o| o.stage + 1);
        for op in &t.plan.ops {
            if op.device != Device::Backend || op.kind != IoKind::Write {
                continue;
            }
            let d = dev_index(&lv.vol_dev, op);
            let seen = flushes.iter().any(|f| dev_index(&lv.vol_dev, f) == d);
            if !seen && lv.devs[d].has_volatile_cache() {
                flushes.push(barrier_op(op, stage));
            }
        }
        if flushes.is_empty() {
            return false;
        }
        t.barrier_ops = flushes.len() as u32;
        t.ops_left = t.barrier_ops;
        t.plan.ops.extend(flushes);
        self.issue_stage(idx);
        true
    }

    /// Takes the barrier's FLUSH ops off a finished flush job's plan (the policy gets back the
    /// plan it made) and, with a power cut configured, records its backend writes.
    pub(super) fn after_flush_job(&mut self, idx: u32) {
        let t = &mut self.tasks[idx as usize];
        let keep = t.plan.ops.len() - t.barrier_ops as usize;
        t.plan.ops.truncate(keep);
        t.barrier_ops = 0;
        if self.run_limits.power_cut_ns.is_none() {
            return;
        }
        let lv = &self.levels[t.level as usize];
        for op in &t.plan.ops {
            if op.device == Device::Backend && op.kind == IoKind::Write {
                self.write_backs
                    .push(WriteBack::of(t.level, &lv.vol_dev, op));
            }
        }
    }

    /// The power fails at `at`: every backend disk loses what its volatile cache held, and
    /// the write-backs the cache counted as clean on the lost ranges are counted.
    pub(super) fn cut_power(&mut self, at: Nanos) {
        let mut report = PowerCutReport {
            at_ns: at,
            write_backs_done: self.write_backs.len() as u64,
            ..Default::default()
        };
        let mut lost_lines: BTreeSet<(u16, u32, u64)> = BTreeSet::new();
        for l in 0..self.levels.len() {
            let lv = &mut self.levels[l];
            let line = lv.cache.geometry().line_size();
            for d in 1..lv.devs.len() {
                let Some(loss) = lv.devs[d].power_cut(at) else {
                    continue;
                };
                report.lost_acknowledged_writes += loss.acknowledged_writes.len() as u64;
                report.lost_bytes += loss.ranges.iter().map(|r| r.1).sum::<u64>();
                let overlaps = |o: u64, n: u64| {
                    loss.ranges
                        .iter()
                        .any(|&(ro, rl)| o < ro.saturating_add(rl) && ro < o.saturating_add(n))
                };
                for w in self.write_backs.iter() {
                    if usize::from(w.level) != l || usize::from(w.dev) != d {
                        continue;
                    }
                    for index in w.offset / line..w.offset.saturating_add(w.len).div_ceil(line) {
                        let lo = (index * line).max(w.offset);
                        let hi = ((index + 1) * line).min(w.offset + w.len);
                        // A line dirty again, or under a write-back not finished, will be
                        // written back again (its clean state is not recorded yet): not lost.
                        let dirty = lv.cache.line_awaits_write_back(w.volume, index) == Some(true);
                        if !dirty && overlaps(lo, hi - lo) {
                            lost_lines.insert((w.level, w.volume.0, index));
                        }
                    }
                }
            }
        }
        report.lost_clean_lines = lost_lines.len() as u64;
        self.power_cut = Some(report);
    }
}
