//! Allocation: a free slot or a victim (clean first under `dirty_full = bypass`), and the
//! write-back of a dirty victim.

use super::counters::Event;
use super::{runs, Cache};
use crate::config::DirtyFullPolicy;
use crate::stats::BypassReason;
use tiercache_core::{DevOp, Device, IoKind, LineKey, OpCause, Stage};
use tiercache_eviction::Slot;

impl Cache {
    /// Finds a slot for `key` in partition `p`, evicting (and, if dirty, writing back) a victim
    /// when the partition is full. Returns the slot and the first stage at which it may be
    /// written. Victim write-back ops are critical for writes (the write waits for them).
    ///
    /// The admission policy (docs/design.md §4.3) is asked once the line `key` would take is
    /// known: a free line, or the victim the eviction policy chose. Turned away, `key` is not
    /// cached ([`BypassReason::Admission`]) and the victim stays: it goes back into the
    /// policy at its evict-next end ([`tiercache_eviction::Eviction::insert_cold`]), where it
    /// was for the recency policies, FIFO and CLOCK.
    pub(super) fn allocate(
        &mut self,
        p: usize,
        key: LineKey,
        for_write: bool,
    ) -> Result<(Slot, Stage), BypassReason> {
        let part = &self.parts[p];
        if part.capacity == 0 {
            return Err(BypassReason::NoSpace);
        }
        let mut stage = 0;
        // Asked before the free slot is taken. A partition whose free slot turns out to be
        // held by another's shrink evicts one of its own lines below without asking again:
        // the candidate was admitted (rare, and only while partitions are resized).
        let mut admitted = false;
        if self.admission_filters && part.used < part.capacity {
            if !self.admission.admit(key, None) {
                return Err(BypassReason::Admission);
            }
            admitted = true;
        }
        let part = &self.parts[p];
        // Capacities sum to at most the slot count, so a partition below its capacity finds a
        // free slot unless another partition's shrink still holds lines it is writing back:
        // then this one makes room among its own lines, or goes around the cache.
        let free = if part.used < part.capacity {
            self.table.take_free()
        } else {
            None
        };
        let slot = if let Some(slot) = free {
            self.parts[p].used += 1;
            self.table.install(slot, key, p as u16);
            slot
        } else {
            if part.linked() == 0 {
                return Err(BypassReason::NoSpace);
            }
            let table = &self.table;
            let victim = match self.cfg.dirty_full {
                DirtyFullPolicy::Bypass => {
                    // The cache is "full of dirty data" when no clean, unpinned line is left:
                    // then the request goes around the cache instead of waiting for a flush.
                    // Dirty lines are held out of the policy (`partition::ReplacementOrder`),
                    // so the predicate passes over pinned lines only; testing `dirty` too
                    // costs nothing (the entry is loaded for `pinned`).
                    if part.clean_unpinned() == 0 {
                        return Err(BypassReason::DirtyFull);
                    }
                    let v = self.parts[p].evict.evict(key, &|s| {
                        let m = table.meta(s);
                        m.pinned || m.dirty != 0
                    });
                    v.ok_or(BypassReason::DirtyFull)?
                }
                DirtyFullPolicy::EvictThenWrite => {
                    let v = self.parts[p].evict.evict(key, &|s| table.meta(s).pinned);
                    v.ok_or(BypassReason::AllPinned)?
                }
            };
            let m = self.table.meta(victim);
            debug_assert!(m.resident && !m.pinned && m.partition as usize == p);
            if self.admission_filters && !admitted && !self.admission.admit(key, Some(m.key)) {
                self.parts.order(p).keep_victim(victim, m.key);
                return Err(BypassReason::Admission);
            }
            // A request may evict a line it touched itself (a long request over a small cache):
            // its ops on the victim's slot must finish before the slot is written back or reused.
            let (lo, hi) = (self.cache_addr(victim, 0), self.cache_addr(victim + 1, 0));
            stage = self
                .scratch
                .iter()
                .filter(|o| o.device == Device::Cache && o.offset < hi && o.offset + o.len > lo)
                .map(|o| o.stage + 1)
                .max()
                .unwrap_or(0);
            if m.dirty != 0 {
                let dirty = self.mark_clean(victim);
                self.write_back_ops(victim, m.key, dirty, stage, for_write, OpCause::EvictFlush);
                stage += 2;
            } else if self.victims.on_clean_victim(m.key, m.valid)
                == crate::victim::VictimAction::Demote
            {
                // Read the line before its slot is reused; the request does not wait for the
                // level below to take it.
                self.demote_ops(victim, m.key, m.valid, stage);
                self.record(Event::Demotion);
                stage += 1;
            }
            self.record(Event::Eviction {
                p,
                dirty: m.dirty != 0,
            });
            // The victim's slot takes `key` at once (remove then install, in one call).
            self.table.replace(victim, key, p as u16);
            victim
        };
        self.parts.order(p).insert(slot, key, false);
        Ok((slot, stage))
    }

    /// Emits the ops that demote a clean line: cache reads of its valid sub-blocks at
    /// `stage`, their transfer to the level below at `stage + 1`; neither critical.
    pub(super) fn demote_ops(&mut self, slot: Slot, key: LineKey, valid: u64, stage: Stage) {
        let sub = self.geo.sub_size();
        let base = self.geo.line_start(key.index());
        for (lo, hi) in runs(valid) {
            let (a, b) = (lo as u64 * sub, hi as u64 * sub);
            let addr = self.cache_addr(slot, a);
            self.emit(
                DevOp::cache(
                    IoKind::Read,
                    key.volume(),
                    addr,
                    base + a,
                    b - a,
                    OpCause::Demote,
                )
                .at_stage(stage)
                .critical(false),
            );
        }
        for (lo, hi) in runs(valid) {
            let (a, b) = (lo as u64 * sub, hi as u64 * sub);
            self.emit(
                DevOp::backend(
                    IoKind::Write,
                    key.volume(),
                    base + a,
                    b - a,
                    OpCause::Demote,
                )
                .at_stage(stage + 1)
                .critical(false),
            );
        }
    }

    /// Emits the ops that write a line's dirty sub-blocks back: cache reads at `stage`, backend
    /// writes at `stage + 1`.
    pub(super) fn write_back_ops(
        &mut self,
        slot: Slot,
        key: LineKey,
        dirty: u64,
        stage: Stage,
        critical: bool,
        cause: OpCause,
    ) {
        let sub = self.geo.sub_size();
        let base = self.geo.line_start(key.index());
        let p = self.table.meta(slot).partition as usize;
        self.record(Event::WrittenBack {
            p,
            bytes: dirty.count_ones() as u64 * sub,
        });
        for (lo, hi) in runs(dirty) {
            let (a, b) = (lo as u64 * sub, hi as u64 * sub);
            let addr = self.cache_addr(slot, a);
            self.emit(
                DevOp::cache(IoKind::Read, key.volume(), addr, base + a, b - a, cause)
                    .at_stage(stage)
                    .critical(critical),
            );
        }
        for (lo, hi) in runs(dirty) {
            let (a, b) = (lo as u64 * sub, hi as u64 * sub);
            self.emit(
                DevOp::backend(IoKind::Write, key.volume(), base + a, b - a, cause)
                    .at_stage(stage + 1)
                    .critical(critical),
            );
        }
    }
}
