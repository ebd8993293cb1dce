//! The metadata journal and recovery: slot updates for the executor to persist, lines
//! restored from persisted records, and clean data dropped after a failed plan.

use super::{config_error, Cache, MetaUpdate, PolicyError};
use tiercache_core::{LineKey, VolumeId};
use tiercache_eviction::Slot;

impl Cache {
    /// Turns recording of line-state changes on or off (off by default: the simulator has
    /// nothing to persist). When on, [`drain_meta_updates`](Self::drain_meta_updates) returns
    /// every slot changed by `access`, `clean`, `flush_done` or `flush_all`.
    pub fn set_journal(&mut self, on: bool) {
        self.table.set_journal(on);
    }

    /// Appends the state of every slot changed since the last call (each slot once, in slot
    /// order) to `out`. An executor persists them once the data they describe is durable: a
    /// request's updates when its plan completes, a flush job's when its backend writes are
    /// durable.
    pub fn drain_meta_updates(&mut self, out: &mut Vec<MetaUpdate>) {
        let mut slots = Vec::new();
        self.table.take_touched(&mut slots);
        out.extend(slots.into_iter().map(|slot| self.slot_record(slot)));
    }

    /// The record of `slot`'s current state, as [`Cache::drain_meta_updates`] reports it; an
    /// executor that left a demoted line's record unwritten (a crash may forget a clean line)
    /// writes it later from this.
    pub fn slot_record(&self, slot: Slot) -> MetaUpdate {
        let m = self.table.meta(slot);
        // A resident line with nothing valid (trimmed while pinned) holds no data.
        let holds = m.resident && m.valid != 0;
        MetaUpdate {
            slot,
            line: holds.then(|| (m.key.volume(), m.key.index())),
            valid: if holds { m.valid } else { 0 },
            dirty: if holds { m.dirty } else { 0 },
        }
    }

    /// Recovery: puts a line recovered from a journal back into `slot`, before any request.
    /// Dirty sub-blocks must be valid; the slot must be free; the line's partition must have
    /// room. Restore in ascending slot order (O(1) a line).
    pub fn restore_line(
        &mut self,
        slot: Slot,
        volume: VolumeId,
        index: u64,
        valid: u64,
        dirty: u64,
    ) -> Result<(), PolicyError> {
        let bad = |reason: String| Err(config_error("restore", reason));
        if self.counters.global.requests != 0 {
            return bad("lines can only be restored before the first request".into());
        }
        if slot >= self.table.slots() {
            return bad(format!("slot {slot} beyond {} slots", self.table.slots()));
        }
        if volume.0 >= tiercache_core::MAX_VOLUMES || index >= LineKey::MAX_INDEX {
            return bad(format!(
                "slot {slot}: line {index} of volume {} is out of range",
                volume.0
            ));
        }
        if valid == 0 || dirty & !valid != 0 || (valid & !self.geo.full_mask()) != 0 {
            return bad(format!(
                "slot {slot}: masks valid {valid:#x} dirty {dirty:#x}"
            ));
        }
        let key = LineKey::new(volume, index);
        if self.table.meta(slot).resident || self.table.lookup(key).is_some() {
            return bad(format!("slot {slot}: slot or line restored twice"));
        }
        let p = self.partition(volume);
        if self.parts[p].used >= self.parts[p].capacity {
            return bad(format!("slot {slot}: partition {p} is full"));
        }
        self.table.restore(slot, key, p as u16, valid, dirty);
        self.parts[p].used += 1;
        if dirty != 0 {
            self.parts[p].dirty += 1;
        }
        self.parts.order(p).insert(slot, key, dirty != 0);
        Ok(())
    }

    /// After a failed plan that evicted dirty line `index` of `volume` from `slot` and could
    /// not write it back (it never read the slot, or its write-back did not become durable):
    /// the slot still holds the line's `dirty` sub-blocks, the only copy of acknowledged
    /// data, and the line goes back there, those sub-blocks valid and dirty. Whatever the core
    /// put in the slot since, and wherever it put the line since, came from plans decided
    /// after the failed one, which the executor orders after it and fails with it (their data
    /// never landed): it is dropped, dirty or not. Refused, nothing changed, when either is
    /// pinned by a write-back in flight, or the line's partition has no room left.
    pub fn reinstate_evicted(
        &mut self,
        slot: Slot,
        volume: VolumeId,
        index: u64,
        dirty: u64,
    ) -> Result<(), PolicyError> {
        let bad = |reason: String| Err(config_error("reinstate", reason));
        if slot >= self.table.slots() {
            return bad(format!("slot {slot} beyond {} slots", self.table.slots()));
        }
        if volume.0 >= tiercache_core::MAX_VOLUMES || index >= LineKey::MAX_INDEX {
            return bad(format!(
                "line {index} of volume {} is out of range",
                volume.0
            ));
        }
        let full = self.geo.full_mask();
        if dirty == 0 || dirty & !full != 0 {
            return bad(format!("slot {slot}: dirty mask {dirty:#x}"));
        }
        let key = LineKey::new(volume, index);
        let here = self.table.meta(slot);
        let here = here.resident.then_some(here);
        let elsewhere = self.table.lookup(key).filter(|&s| s != slot);
        if here.is_some_and(|m| m.pinned) || elsewhere.is_some_and(|s| self.table.meta(s).pinned) {
            return bad(format!("slot {slot} or line {index} is under a write-back"));
        }
        let p = self.partition(volume);
        let freed = here.is_some_and(|m| m.partition as usize == p) as u32
            + elsewhere.is_some_and(|s| self.table.meta(s).partition as usize == p) as u32;
        if self.parts[p].used - freed >= self.parts[p].capacity {
            return bad(format!("slot {slot}: partition {p} is full"));
        }
        // Unpinned: dropping every sub-block frees the slot.
        if here.is_some() {
            self.invalidate(slot, full);
        }
        if let Some(s) = elsewhere {
            self.invalidate(s, full);
        }
        self.table.restore(slot, key, p as u16, dirty, dirty);
        self.parts[p].used += 1;
        self.parts[p].dirty += 1;
        self.parts.order(p).insert(slot, key, true);
        Ok(())
    }

    /// After a failed execution of a plan touching `index`: forgets the line's clean
    /// sub-blocks (a failed fill may have left them unwritten) and keeps its dirty ones, the
    /// only copy of acknowledged data. Returns whether anything was dropped.
    pub fn drop_clean(&mut self, volume: VolumeId, index: u64) -> bool {
        if volume.0 >= tiercache_core::MAX_VOLUMES || index >> 48 != 0 {
            return false;
        }
        let Some(slot) = self.table.lookup(LineKey::new(volume, index)) else {
            return false;
        };
        let m = self.table.meta(slot);
        let clean = m.valid & !m.dirty;
        if clean == 0 {
            return false;
        }
        if m.pinned {
            *self.jobs.deferred_drops.entry(slot).or_default() |= clean;
            return true;
        }
        self.invalidate(slot, clean);
        true
    }
}

#[cfg(test)]
mod tests {
    use crate::cache::Cache;
    use crate::config::{CacheConfig, DirtyFullPolicy, WritePolicy};
    use tiercache_core::{Device, IoKind, OpCause, Plan, Request, VolumeId};

    /// A dirty victim evicted inline goes back in its slot, dirty, replacing what the failed
    /// plan put there; the counts stay consistent (audit), and a line under a write-back
    /// refuses it, changing nothing.
    #[test]
    fn an_evicted_dirty_line_goes_back_in_its_slot() {
        let cfg = CacheConfig {
            capacity: 4 * 4096,
            line_size: 4096,
            write_policy: WritePolicy::WriteBack,
            dirty_full: DirtyFullPolicy::EvictThenWrite,
            ..CacheConfig::default()
        };
        let mut c = Cache::new(&cfg).unwrap();
        let v = VolumeId(0);
        for i in 0..4 {
            c.access(&Request::write(i * 4096, 4096), None).unwrap();
        }
        assert_eq!(c.dirty_lines(), 4);
        // A write miss evicts a dirty victim inline.
        let mut plan = Plan::new();
        c.access(&Request::write(10 * 4096, 4096), Some(&mut plan))
            .unwrap();
        let evict = plan
            .ops
            .iter()
            .find(|o| o.device == Device::Cache && o.kind == IoKind::Read)
            .filter(|o| o.cause == OpCause::EvictFlush)
            .expect("an inline write-back");
        let victim = evict.vaddr / 4096;
        let slot = (evict.offset / 4096) as u32;
        assert!(c.line_state(v, victim).is_none());
        assert_eq!(c.line_state(v, 10).unwrap().slot, slot);
        c.reinstate_evicted(slot, v, victim, 1).unwrap();
        let back = c.line_state(v, victim).unwrap();
        assert_eq!((back.slot, back.valid, back.dirty), (slot, 1, 1));
        assert!(c.line_state(v, 10).is_none(), "the new line left the slot");
        assert_eq!(c.dirty_lines(), 4);
        assert_eq!(c.resident_lines(), 4);
        c.audit();
        // Bad masks and lines under a write-back are refused.
        assert!(c.reinstate_evicted(slot, v, victim, 0).is_err());
        let mut jobs = Vec::new();
        c.flush_all(&mut jobs);
        assert!(c.line_state(v, victim).unwrap().pinned);
        assert!(c.reinstate_evicted(slot, v, victim, 1).is_err());
        c.audit();
    }
}
