//! Failure and fail-stop: what a failed plan leaves undefined, the dirty victims it evicted
//! put back, and the halt that ends service when the core's state can no longer be trusted.

use super::*;

impl<C: EngineCore> Inner<C> {
    /// An error if the engine has halted.
    /// A shard's policy core. A thread that panicked holding it may have left it half updated
    /// (a line in the index but not the lists, a dirty bit without its record …): serving from
    /// it could return wrong data, so the engine halts (fail-stop) as it does when a dirty
    /// line's write-back fails, and every request from now on gets EIO. A restart recovers
    /// from the cache device's durable records, which the core never wrote half.
    pub(super) fn core<'a>(&self, shard: &'a Shard<C>) -> MutexGuard<'a, Core<C>> {
        shard.core.lock().unwrap_or_else(|poisoned| {
            let _ = self.halted.set(
                "a thread panicked while holding a policy core's lock, whose state may be \
                 broken; restart to recover from the cache device's records"
                    .into(),
            );
            poisoned.into_inner()
        })
    }

    pub(super) fn check_halted(&self) -> io::Result<()> {
        match self.halted.get() {
            Some(why) => Err(io::Error::other(format!("cache engine halted: {why}"))),
            None => Ok(()),
        }
    }

    /// After failed `plan`: puts back, dirty, each line it evicted dirty whose write-back did
    /// not become durable (`dirty_full = "evict-then-write"`, docs/design.md §11). Such a
    /// line's slot was not written yet (its durable record still names the line: a slot's
    /// record is durably cleared before anything else lands there, and only once the victim's
    /// write-back is synced on the backend), so its dirty data is there, the only copy; the
    /// core has forgotten it. Back in the core it is served as any dirty line (read from the
    /// slot, merged into, written back by the flusher, which retries while its reads fail).
    /// If the core cannot take it back (the slot is under a write-back, the partition full),
    /// the engine halts as it did before: a restart recovers the line from its record.
    pub(super) fn keep_evicted(
        &self,
        shard: &Shard<C>,
        core: &mut Core<C>,
        plan: &Plan,
        e: &io::Error,
    ) {
        for v in evicted_dirty(&self.geo, plan) {
            let slot = shard.base + v.slot;
            if self.table.persisted_line(slot) != Some((v.volume.0, v.index)) {
                // Written back and synced before the slot was cleared: nothing to keep.
                continue;
            }
            match core
                .cache
                .reinstate_evicted(v.slot, v.volume, v.index, v.mask)
            {
                Ok(()) => {
                    let at = core.order.next_seq();
                    core.reinstated.insert(v.slot, at);
                    // Its record now says what the core holds (the clean sub-blocks it had
                    // are not kept). Best effort: the old record names the line dirty too.
                    let rec = SlotRecord {
                        line: Some((v.volume.0, v.index)),
                        valid: v.mask,
                        dirty: v.mask,
                    };
                    let _ = self.table.write(&*self.cache_dev, slot, &rec);
                    self.health.eviction_kept(|| {
                        format!(
                            "writing back dirty line {} of volume {} evicted from slot {slot} \
                             failed ({e}): the line stays in its slot, dirty, and the request \
                             is served past the cache",
                            v.index, v.volume.0
                        )
                    });
                }
                Err(why) => {
                    let why = format!(
                        "writing back an evicted dirty line failed ({e}) and it cannot go back \
                         in its slot ({why}); its data is kept on the cache device and a \
                         restart recovers it"
                    );
                    self.health.log(format!("HALTED: {why}"));
                    if self.halted.set(why).is_ok() {
                        self.kick();
                    }
                    return;
                }
            }
        }
    }
}

/// The dirty lines `plan` evicts inline (its `EvictFlush` cache reads): each victim, the slot
/// (of the shard) it was in and the dirty sub-blocks its write-back reads.
pub(super) fn evicted_dirty(geo: &LineGeometry, plan: &Plan) -> Vec<Undefined> {
    let line = geo.line_size();
    let mut out: Vec<Undefined> = Vec::new();
    for o in plan.ops.iter().filter(|o| {
        o.device == Dev::Cache
            && o.kind == IoKind::Read
            && o.cause == OpCause::EvictFlush
            && o.len > 0
    }) {
        // Cut at line boundaries, as in `undefined_after_failure`.
        let mut at = o.offset;
        let end = o.offset + o.len;
        while at < end {
            let slot = at / line;
            let upto = end.min((slot + 1) * line);
            let index = (o.vaddr + (at - o.offset)) / line;
            let mask = geo.touched_mask(at % line, upto - slot * line);
            match out
                .iter_mut()
                .find(|u| (u.volume, u.index, u.slot) == (o.volume, index, slot as u32))
            {
                Some(u) => u.mask |= mask,
                None => out.push(Undefined {
                    volume: o.volume,
                    index,
                    slot: slot as u32,
                    mask,
                }),
            }
            at = upto;
        }
    }
    out
}

/// Sub-blocks of one line in one slot: those a failed plan leaves holding undefined bytes, or
/// a dirty victim's (see [`evicted_dirty`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Undefined {
    /// The line's volume.
    pub volume: VolumeId,
    /// The line's index.
    pub index: u64,
    /// The slot (of the shard's core) the plan wrote: a line found elsewhere now was evicted
    /// and re-read since, and its new slot owes nothing to the failed plan.
    pub slot: u32,
    /// The sub-blocks.
    pub mask: u64,
}

/// The runs of set bits of `mask`, as `[lo, hi)` bit ranges.
pub(super) fn bit_runs(mut mask: u64) -> impl Iterator<Item = (u32, u32)> {
    let mut base = 0u32;
    std::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let skip = mask.trailing_zeros();
        mask >>= skip;
        let len = mask.trailing_ones();
        let lo = base + skip;
        // `len` may be 64 (all ones): shift in two steps.
        mask = (mask >> (len - 1)) >> 1;
        base = lo + len;
        Some((lo, lo + len))
    })
}

/// The sub-blocks a failed plan leaves undefined, line by line. `valid_before` holds, for a
/// write request, the valid sub-blocks of each of its lines before it was planned (empty for
/// other requests and for flush jobs).
///
/// - A cache write of a fill (a read miss's promotion, a partial write's edge fill) lands
///   backend bytes in sub-blocks that were not valid when the plan was decided (the core fills
///   only those). The plan failed, so they may never have arrived. Whatever later plans did to
///   those sub-blocks (a write smaller than a sub-block, planned as a hit on the fill, dirties
///   one without writing the rest of it) rests on them, and every such plan touches this slot
///   after this one: it waits for this plan and fails too, unacknowledged. So all of them go,
///   dirty or not.
/// - A write's own cache write into sub-blocks that were not valid before it: the write failed
///   (itself or behind a failed plan), so they hold whatever the slot held (another line's
///   bytes). Sub-blocks valid before it keep their data (acknowledged writes included): the
///   failed write may have changed only its own range there.
pub(super) fn undefined_after_failure(
    geo: &LineGeometry,
    req_first_line: u64,
    plan: &Plan,
    valid_before: &[u64],
) -> Vec<Undefined> {
    let line = geo.line_size();
    let mut out = Vec::new();
    for o in plan
        .ops
        .iter()
        .filter(|o| o.device == Dev::Cache && o.kind == IoKind::Write && o.len > 0)
    {
        let fill = matches!(o.cause, OpCause::Promotion | OpCause::Fill);
        if !fill && (o.cause != OpCause::Write || valid_before.is_empty()) {
            continue;
        }
        // Ops of adjacent slots holding adjacent lines merge: cut at line boundaries (the
        // cache address and the volume address are equal modulo the line size).
        debug_assert_eq!(o.offset % line, o.vaddr % line, "a cache op off its line");
        let mut at = o.offset;
        let end = o.offset + o.len;
        while at < end {
            let slot = at / line;
            let within = at % line;
            let upto = end.min((slot + 1) * line);
            let index = (o.vaddr + (at - o.offset)) / line;
            let mut mask = geo.touched_mask(within, upto - (slot * line));
            if !fill {
                // Sub-blocks valid before the write keep their data.
                let before = index
                    .checked_sub(req_first_line)
                    .and_then(|n| valid_before.get(n as usize));
                mask &= !before.copied().unwrap_or(u64::MAX);
            }
            if mask != 0 {
                out.push(Undefined {
                    volume: o.volume,
                    index,
                    slot: slot as u32,
                    mask,
                });
            }
            at = upto;
        }
    }
    out
}

impl<C: EngineCore> Inner<C> {
    /// Invalidates `u`'s sub-blocks, dirty or not, if its line still sits in the slot the
    /// failed plan (decided as ticket `decided`) wrote, and was not put back there since
    /// (see [`Inner::keep_evicted`]: the plan was then decided on a state that is gone).
    pub(super) fn invalidate_undefined(&self, core: &mut Core<C>, u: &Undefined, decided: u64) {
        if core.reinstated.get(&u.slot).is_some_and(|&at| decided < at) {
            return;
        }
        let Some(state) = core.cache.line_state(u.volume, u.index) else {
            return;
        };
        let mask = u.mask & state.valid;
        if state.slot != u.slot || mask == 0 {
            return;
        }
        // The policy core invalidates sub-blocks, dirty ones too, through a trim (its only
        // public way to): a metadata-only access (no plan), whose exact sub-block range
        // invalidates exactly `mask` (it is counted among the core's requests).
        let sub = self.geo.sub_size();
        let base = self.geo.line_start(u.index);
        for (lo, hi) in bit_runs(mask) {
            let trim = Request {
                time_ns: self.now_ns(),
                volume: u.volume,
                op: Op::Trim,
                offset: base + lo as u64 * sub,
                len: (hi - lo) as u64 * sub,
            };
            if let Err(e) = core.cache.access(&trim, None) {
                // A line the core holds is addressable: this cannot happen.
                debug_assert!(false, "trimming a resident line: {e}");
            }
        }
        let left = core
            .cache
            .line_state(u.volume, u.index)
            .map_or(0, |s| s.valid & mask);
        // The trim covered exactly these sub-blocks of a resident line: none may be left.
        assert_eq!(left, 0, "sub-blocks {mask:#x} of line {} survived", u.index);
    }
}

#[cfg(test)]
mod tests {
    use super::{bit_runs, undefined_after_failure, Undefined};
    use tiercache_core::{DevOp, IoKind, LineGeometry, OpCause, Plan, VolumeId};

    /// A fill's sub-blocks all go; a write's only where nothing was valid before it; ops that
    /// merged across slots are cut line by line; reads and write-backs leave nothing.
    #[test]
    fn undefined_sub_blocks_of_failed_plans() {
        let geo = LineGeometry::new(4096).unwrap();
        let v = VolumeId(0);
        let mut plan = Plan::new();
        // A promotion into slots 3 and 4 holding lines 10 and 11 (merged into one op).
        plan.push(DevOp::cache(
            IoKind::Write,
            v,
            3 * 4096,
            10 * 4096,
            8192,
            OpCause::Promotion,
        ));
        // A write's edge fill of sub-block 1 of line 12 (slot 7), then its data over
        // sub-blocks 1..=2 of it.
        plan.push(
            DevOp::cache(
                IoKind::Write,
                v,
                7 * 4096 + 512,
                12 * 4096 + 512,
                100,
                OpCause::Fill,
            )
            .at_stage(1),
        );
        plan.push(
            DevOp::cache(
                IoKind::Write,
                v,
                7 * 4096 + 612,
                12 * 4096 + 612,
                900,
                OpCause::Write,
            )
            .at_stage(1),
        );
        // Reads and write-backs write nothing into the cache.
        plan.push(DevOp::cache(IoKind::Read, v, 0, 0, 4096, OpCause::EvictFlush).at_stage(2));
        let at = |index, slot, mask| Undefined {
            volume: v,
            index,
            slot,
            mask,
        };
        // The write request covered lines 12..: sub-block 2 of line 12 was valid before it.
        let got = undefined_after_failure(&geo, 12, &plan, &[0b100]);
        assert_eq!(
            got,
            vec![
                at(10, 3, u64::MAX >> 56),
                at(11, 4, u64::MAX >> 56),
                at(12, 7, 0b10),
                at(12, 7, 0b10),
            ]
        );
        // Without the write's view (a read request), its own data ops are not counted.
        let got = undefined_after_failure(&geo, 12, &plan, &[]);
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn runs_of_set_bits() {
        let runs = |m| bit_runs(m).collect::<Vec<_>>();
        assert_eq!(runs(0), vec![]);
        assert_eq!(runs(0b1011_0110), vec![(1, 3), (4, 6), (7, 8)]);
        assert_eq!(runs(u64::MAX), vec![(0, 64)]);
        assert_eq!(runs(1 << 63), vec![(63, 64)]);
        assert_eq!(runs(!1), vec![(1, 64)]);
        assert_eq!(runs(1 | 1 << 63), vec![(0, 1), (63, 64)]);
    }
}
