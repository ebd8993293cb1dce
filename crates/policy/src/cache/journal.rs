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
