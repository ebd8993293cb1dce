//! The write path: write hits and misses per write policy, dirty sub-blocks, partial-line
//! fills, trims and invalidation.

use super::counters::Event;
use super::{runs, AccessOutcome, Cache};
use crate::config::WritePolicy;
use crate::engine::{WriteHit, WriteMiss};
use crate::stats::BypassReason;
use tiercache_core::geometry::LineSlice;
use tiercache_core::{DevOp, IoKind, LineKey, OpCause, Request, Stage, VolumeId};
use tiercache_eviction::Slot;

impl Cache {
    /// Writes one line's slice (inlined into the request's own path, where most requests are
    /// one line; see [`Cache::write_lines`] for the others).
    #[inline(always)]
    pub(super) fn write_line(
        &mut self,
        vol: VolumeId,
        s: LineSlice,
        mode: WritePolicy,
        out: &mut AccessOutcome,
    ) {
        let key = LineKey::new(vol, s.index);
        let touched = self.geo.touched_mask(s.start, s.end);
        let covered = self.geo.covered_mask(s.start, s.end);
        let line_base = self.geo.line_start(s.index);
        let len = s.end - s.start;
        let rules = mode.rules();
        if self.admission_learns {
            self.admission.on_access(key);
        }
        let backend_write = |stage| {
            DevOp::backend(IoKind::Write, vol, line_base + s.start, len, OpCause::Write)
                .at_stage(stage)
        };
        if let Some(slot) = self.table.lookup(key) {
            let m = self.table.meta(slot);
            out.line_hits += 1;
            let p = m.partition as usize;
            self.record(Event::WriteHit { p });
            self.policy_hit(p, slot, m.pinned);
            if self.promotion_learns {
                self.promotion.on_hit(key);
            }
            let mut action = rules.write_hit;
            // Under a flush job (pinned) the line's sub-blocks count as clean before the backend
            // has them: should the job fail, they are dirty again, so they count as dirty here.
            let maybe_dirty = if m.pinned { m.dirty | m.valid } else { m.dirty };
            if action == WriteHit::InvalidateToBackend && maybe_dirty & touched & !covered != 0 {
                // The write lands inside dirty sub-blocks without covering them: only the cache
                // holds the rest of those sub-blocks, so merge there instead of invalidating.
                action = WriteHit::CacheDirty;
            }
            match action {
                WriteHit::CacheDirty => {
                    self.write_dirty(vol, slot, line_base, s, touched & !covered & !m.valid, 0);
                }
                WriteHit::CacheAndBackend => {
                    let a = self.cache_addr(slot, s.start);
                    self.record(Event::CacheWrite {
                        p,
                        volume: vol,
                        len,
                    });
                    self.emit(DevOp::cache(
                        IoKind::Write,
                        vol,
                        a,
                        line_base + s.start,
                        len,
                        OpCause::Write,
                    ));
                    self.emit(backend_write(0));
                    self.table.add_valid(slot, covered);
                }
                WriteHit::InvalidateToBackend => {
                    self.emit(backend_write(0));
                    self.invalidate(slot, touched);
                }
            }
            return;
        }
        out.line_misses += 1;
        let p = self.partition(vol);
        self.record(Event::WriteMiss { p });
        let alloc = match rules.write_miss {
            WriteMiss::BackendOnly => Err(BypassReason::Mode),
            WriteMiss::AllocateDirty | WriteMiss::AllocateThrough => self.allocate(p, key, true),
        };
        let (slot, stage) = match alloc {
            Ok(x) => x,
            Err(r) => {
                self.record(Event::Bypass(r));
                out.line_bypasses += 1;
                self.emit(backend_write(0));
                return;
            }
        };
        self.record(Event::WriteAllocation { p });
        let a = self.cache_addr(slot, s.start);
        if rules.write_miss == WriteMiss::AllocateDirty {
            self.write_dirty(vol, slot, line_base, s, touched & !covered, stage);
        } else {
            self.record(Event::CacheWrite {
                p,
                volume: vol,
                len,
            });
            self.emit(
                DevOp::cache(
                    IoKind::Write,
                    vol,
                    a,
                    line_base + s.start,
                    len,
                    OpCause::Write,
                )
                .at_stage(stage),
            );
            self.emit(backend_write(stage));
            self.table.add_valid(slot, covered);
        }
    }

    /// Writes every line of a request spanning several.
    #[inline(never)]
    pub(super) fn write_lines(
        &mut self,
        req: &Request,
        mode: WritePolicy,
        out: &mut AccessOutcome,
    ) {
        for s in self.geo.split(req.offset, req.len) {
            self.write_line(req.volume, s, mode, out);
        }
    }

    /// Writes a request's slice into a line as dirty data: completes the partly covered,
    /// not yet valid sub-blocks `edges` from the backend first (see [`Self::fill_edges`]), then
    /// writes the data at or after `stage` and marks the touched sub-blocks dirty.
    pub(super) fn write_dirty(
        &mut self,
        vol: VolumeId,
        slot: Slot,
        line_base: u64,
        s: LineSlice,
        edges: u64,
        stage: Stage,
    ) {
        let stage = self.fill_edges(vol, slot, line_base, edges, s.start, s.end, stage);
        let (a, len) = (self.cache_addr(slot, s.start), s.end - s.start);
        self.record(Event::CacheWrite {
            p: self.table.meta(slot).partition as usize,
            volume: vol,
            len,
        });
        self.emit(
            DevOp::cache(
                IoKind::Write,
                vol,
                a,
                line_base + s.start,
                len,
                OpCause::Write,
            )
            .at_stage(stage),
        );
        self.mark_dirty(slot, self.geo.touched_mask(s.start, s.end));
        self.record(Event::Dirtied { bytes: len });
    }

    /// Reads the parts of the sub-blocks a dirty write only partly covers (`edges`) that the
    /// write leaves untouched from the backend into the line, so each whole sub-block is valid
    /// before it becomes dirty. The fill writes and the application write `[start, end)` do not
    /// overlap, so they share a stage. Returns the stage the application write may use.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fill_edges(
        &mut self,
        vol: VolumeId,
        slot: Slot,
        line_base: u64,
        edges: u64,
        start: u64,
        end: u64,
        stage: Stage,
    ) -> Stage {
        if edges == 0 {
            return stage;
        }
        let sub = self.geo.sub_size();
        let mut after = stage + 1;
        for (lo, hi) in runs(edges) {
            let (a, b) = (lo as u64 * sub, hi as u64 * sub);
            for (x, y) in [(a, b.min(start)), (a.max(end), b)] {
                if x < y {
                    let fetched = self.emit(
                        DevOp::backend(IoKind::Read, vol, line_base + x, y - x, OpCause::Fill)
                            .at_stage(stage),
                    );
                    let addr = self.cache_addr(slot, x);
                    self.record(Event::CacheWrite {
                        p: self.table.meta(slot).partition as usize,
                        volume: vol,
                        len: y - x,
                    });
                    self.emit(
                        DevOp::cache(
                            IoKind::Write,
                            vol,
                            addr,
                            line_base + x,
                            y - x,
                            OpCause::Fill,
                        )
                        .at_stage(fetched + 1),
                    );
                    after = after.max(fetched + 1);
                }
            }
        }
        self.table.add_valid(slot, edges);
        after
    }

    pub(super) fn trim_line(&mut self, vol: VolumeId, s: LineSlice) {
        let key = LineKey::new(vol, s.index);
        let Some(slot) = self.table.lookup(key) else {
            return;
        };
        let covered = self.geo.covered_mask(s.start, s.end);
        if covered & self.table.meta(slot).valid == 0 {
            return;
        }
        let dropped = self.invalidate(slot, covered);
        self.record(Event::TrimmedDirty {
            bytes: dropped.count_ones() as u64 * self.geo.sub_size(),
        });
    }

    /// Invalidates sub-blocks of a line and drops the line once nothing in it is valid.
    /// Returns the dirty sub-blocks discarded.
    pub(super) fn invalidate(&mut self, slot: Slot, mask: u64) -> u64 {
        let m = self.table.meta(slot);
        let p = m.partition as usize;
        let dropped = self.table.invalidate(slot, mask);
        let dropped_now = self.table.meta(slot).valid == 0 && !m.pinned;
        if m.dirty != 0 && self.table.meta(slot).dirty == 0 {
            self.parts[p].dirty -= 1;
            self.parts[p].dirty_pinned -= m.pinned as u32;
            if !dropped_now {
                // Clean and staying: back into the policy if it was held out.
                self.parts.order(p).became_clean(slot, m.key);
            }
        }
        if dropped_now {
            self.record(Event::Invalidation);
            self.parts.order(p).remove(slot);
            self.table.remove(slot);
            self.table.release(slot);
            self.parts[p].used -= 1;
        }
        dropped
    }

    /// Marks sub-blocks of a resident line dirty; a line turning dirty leaves its policy when
    /// dirty lines are held out of it (a line leaving its partition is in no policy).
    pub(super) fn mark_dirty(&mut self, slot: Slot, mask: u64) {
        let m = self.table.meta(slot);
        if m.dirty == 0 {
            let p = m.partition as usize;
            self.parts[p].dirty += 1;
            self.parts[p].dirty_pinned += m.pinned as u32;
            if !(m.pinned && self.leaving.contains(&slot)) {
                self.parts.order(p).became_dirty(slot);
            }
        }
        self.table.make_dirty(slot, mask);
    }

    /// Marks a line clean (its dirty data handed to a write-back); a line held out of its
    /// policy while dirty re-enters it. Returns the dirty mask it had.
    pub(super) fn mark_clean(&mut self, slot: Slot) -> u64 {
        let m = self.table.meta(slot);
        let was = self.table.make_clean(slot);
        if was != 0 {
            let p = m.partition as usize;
            self.parts[p].dirty -= 1;
            self.parts[p].dirty_pinned -= m.pinned as u32;
            self.parts.order(p).became_clean(slot, m.key);
        }
        was
    }
}

#[cfg(test)]
mod tests {
    use crate::cache::Cache;
    use crate::config::{CacheConfig, WritePolicy};
    use tiercache_core::{Device, IoKind, Plan, Request, VolumeId};

    /// A pass-through write into part of a sub-block of a line a flush job is writing back
    /// merges into the cache (the job may fail, leaving the rest of that sub-block dirty and
    /// only there) rather than invalidating it; after the job fails the line's data is
    /// still dirty in the cache.
    #[test]
    fn a_partial_pass_through_write_into_a_line_under_write_back_merges() {
        let cfg = CacheConfig {
            capacity: 64 * 4096,
            line_size: 4096,
            write_policy: WritePolicy::WriteBack,
            ..CacheConfig::default()
        };
        let mut c = Cache::new(&cfg).unwrap();
        c.access(&Request::write(0, 4096), None).unwrap();
        let mut jobs = Vec::new();
        c.flush_all(&mut jobs);
        assert_eq!(jobs.len(), 1, "one job, line 0 marked clean under it");
        assert_eq!(c.line_state(VolumeId(0), 0).unwrap().dirty, 0);
        c.force_write_policy(Some(WritePolicy::PassThrough));
        let mut plan = Plan::new();
        c.access(&Request::write(100, 50), Some(&mut plan)).unwrap();
        assert!(
            plan.ops
                .iter()
                .any(|o| o.device == Device::Cache && o.kind == IoKind::Write),
            "merged into the cache: {:?}",
            plan.ops
        );
        c.flush_failed(jobs.pop().unwrap());
        let l = c.line_state(VolumeId(0), 0).unwrap();
        assert_eq!(
            l.valid & l.dirty,
            l.valid,
            "every valid sub-block dirty again"
        );
        // A write covering whole sub-blocks still goes to the backend and invalidates them.
        c.flush_all(&mut jobs);
        let mut plan = Plan::new();
        c.access(&Request::write(512, 1024), Some(&mut plan))
            .unwrap();
        assert!(plan
            .ops
            .iter()
            .all(|o| !(o.device == Device::Cache && o.kind == IoKind::Write)));
    }
}
