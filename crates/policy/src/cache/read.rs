//! The read path: hits, partial hits and misses of one line, promotion decisions, and the
//! fast untimed hit.

use super::counters::Event;
use super::{runs, AccessOutcome, Cache};
use crate::config::WritePolicy;
use crate::engine::ReadMiss;
use crate::stats::BypassReason;
use tiercache_core::geometry::LineSlice;
use tiercache_core::{DevOp, IoKind, LineKey, Op, OpCause, Request, VolumeId};

impl Cache {
    /// Hit-ratio-only fast path for the commonest request: a read inside one line that finds
    /// all its data. Same state changes and counters as the general path (the simulator's
    /// tests compare hit-ratio-only counters with a timed run's); `None` means take the
    /// general path.
    #[inline]
    pub(super) fn untimed_read_hit(&mut self, req: &Request) -> Option<AccessOutcome> {
        if req.op != Op::Read || req.len == 0 {
            return None;
        }
        let index = self.geo.line_of(req.offset);
        if self.geo.line_of(req.end() - 1) != index
            || self.write_policy(req.volume).rules().reads_bypass_cache
        {
            return None;
        }
        let key = LineKey::new(req.volume, index);
        let slot = self.table.lookup(key)?;
        let start = req.offset - self.geo.line_start(index);
        let need = self.geo.touched_mask(start, start + req.len);
        let m = self.table.meta(slot);
        if m.valid & need != need {
            return None;
        }
        let (p, pinned) = (m.partition as usize, m.pinned);
        self.record(Event::UntimedReadHit {
            p,
            volume: req.volume,
            len: req.len,
        });
        if !pinned || !self.leaving.contains(&slot) {
            self.parts.order(p).hit(slot);
        }
        if self.promotion_learns {
            self.promotion.on_hit(key);
        }
        if self.admission_learns {
            self.admission.on_access(key);
        }
        Some(AccessOutcome {
            line_hits: 1,
            full_hit: true,
            ..AccessOutcome::default()
        })
    }

    /// Reads one line's slice (inlined into the request's own path, where most requests are
    /// one line; see [`Cache::read_lines`] for the others).
    #[inline(always)]
    pub(super) fn read_line(
        &mut self,
        vol: VolumeId,
        s: LineSlice,
        mode: WritePolicy,
        out: &mut AccessOutcome,
    ) {
        let key = LineKey::new(vol, s.index);
        let need = self.geo.touched_mask(s.start, s.end);
        let line_base = self.geo.line_start(s.index);
        let rules = mode.rules();
        let sub = self.geo.sub_size();
        if self.admission_learns {
            self.admission.on_access(key);
        }
        let Some(slot) = self.table.lookup(key) else {
            out.line_misses += 1;
            let p = self.partition(vol);
            self.record(Event::ReadMiss { p });
            let reason = if rules.read_miss == ReadMiss::BackendOnly {
                Some(BypassReason::Mode)
            } else {
                let occ = self.occupancy(p);
                if self.promotion.should_promote(key, occ) {
                    match self.allocate(p, key, false) {
                        Ok((slot, stage)) => {
                            // Promotion fetches the whole line (docs/design.md §4.2): the request waits for the
                            // backend read; the cache write follows in the background.
                            let l = self.geo.line_size();
                            let fetched = self.emit(DevOp::backend(
                                IoKind::Read,
                                vol,
                                line_base,
                                l,
                                OpCause::ReadMiss,
                            ));
                            let a = self.cache_addr(slot, 0);
                            self.record(Event::CacheWrite {
                                p,
                                volume: vol,
                                len: l,
                            });
                            self.emit(
                                DevOp::cache(
                                    IoKind::Write,
                                    vol,
                                    a,
                                    line_base,
                                    l,
                                    OpCause::Promotion,
                                )
                                .at_stage(stage.max(fetched + 1))
                                .critical(false),
                            );
                            self.table.add_valid(slot, self.geo.full_mask());
                            self.record(Event::Promotion { p });
                            return;
                        }
                        Err(r) => Some(r),
                    }
                } else {
                    Some(BypassReason::NotHotYet)
                }
            };
            if let Some(r) = reason {
                self.record(Event::Bypass(r));
                out.line_bypasses += 1;
            }
            self.read_slice_from_backend(vol, line_base, s);
            return;
        };
        let m = self.table.meta(slot);
        let p = m.partition as usize;
        if rules.reads_bypass_cache && m.dirty & need == 0 {
            // Pass-through: the backend has current data for every needed sub-block.
            self.record(Event::ReadMiss { p });
            self.record(Event::Bypass(BypassReason::Mode));
            out.line_misses += 1;
            out.line_bypasses += 1;
            self.read_slice_from_backend(vol, line_base, s);
            return;
        }
        self.policy_hit(p, slot, m.pinned);
        if self.promotion_learns {
            self.promotion.on_hit(key);
        }
        if m.valid & need == need {
            self.record(Event::ReadHit { p });
            out.line_hits += 1;
            let a = self.cache_addr(slot, s.start);
            self.emit(DevOp::cache(
                IoKind::Read,
                vol,
                a,
                line_base + s.start,
                s.end - s.start,
                OpCause::ReadHit,
            ));
            return;
        }
        // Partial hit: valid sub-blocks from the cache, the rest from the backend, then filled in.
        self.record(Event::ReadPartialHit { p });
        out.line_partial_hits += 1;
        for (lo, hi) in runs(need & m.valid) {
            let (a, b) = ((lo as u64 * sub).max(s.start), (hi as u64 * sub).min(s.end));
            let addr = self.cache_addr(slot, a);
            self.emit(DevOp::cache(
                IoKind::Read,
                vol,
                addr,
                line_base + a,
                b - a,
                OpCause::ReadHit,
            ));
        }
        let missing = need & !m.valid;
        for (lo, hi) in runs(missing) {
            let (a, b) = (lo as u64 * sub, hi as u64 * sub);
            let fetched = self.emit(DevOp::backend(
                IoKind::Read,
                vol,
                line_base + a,
                b - a,
                OpCause::ReadMiss,
            ));
            let addr = self.cache_addr(slot, a);
            self.record(Event::CacheWrite {
                p,
                volume: vol,
                len: b - a,
            });
            self.emit(
                DevOp::cache(
                    IoKind::Write,
                    vol,
                    addr,
                    line_base + a,
                    b - a,
                    OpCause::Promotion,
                )
                .at_stage(fetched + 1)
                .critical(false),
            );
        }
        self.table.add_valid(slot, missing);
    }

    /// Reads every line of a request spanning several.
    #[inline(never)]
    pub(super) fn read_lines(&mut self, req: &Request, mode: WritePolicy, out: &mut AccessOutcome) {
        for s in self.geo.split(req.offset, req.len) {
            self.read_line(req.volume, s, mode, out);
        }
    }

    /// Serves a read's slice of one line from the backend (a miss or a bypass).
    pub(super) fn read_slice_from_backend(&mut self, vol: VolumeId, line_base: u64, s: LineSlice) {
        let (offset, len) = (line_base + s.start, s.end - s.start);
        self.emit(DevOp::backend(
            IoKind::Read,
            vol,
            offset,
            len,
            OpCause::ReadMiss,
        ));
    }
}
