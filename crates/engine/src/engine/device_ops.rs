//! What a plan's device ops address and whether they stay where they must (a shard's
//! slots, the volume's lines), and the syncs that make completed requests durable.

use super::*;

impl<C: EngineCore> Inner<C> {
    /// The first slot past `shard`'s: the next shard's first, or the device's end.
    pub(super) fn shard_slot_end(&self, shard: &Shard<C>) -> u32 {
        self.shards
            .iter()
            .map(|s| s.base)
            .filter(|&b| b > shard.base)
            .min()
            .unwrap_or(self.layout.slots)
    }

    /// The invariants of one op about to run at device address `addr`, for the shard whose
    /// slots are `base..slot_end`.
    pub(super) fn check_op(&self, base: u32, slot_end: u32, o: &DevOp, addr: u64) {
        let line = self.geo.line_size();
        match o.device {
            Dev::Cache if o.kind == IoKind::Flush => {}
            Dev::Cache => {
                // The core addresses its own slots only: a cache op outside the data area
                // would overwrite the slot table or run off the device.
                assert!(
                    addr >= self.layout.data_offset
                        && addr + o.len <= self.layout.device_len()
                        && o.len > 0,
                    "cache op {o:?} at {addr} outside the slot data"
                );
                // Nor another shard's slots (lines of other chunks, under another lock).
                debug_assert!(
                    base as u64 + (o.offset + o.len - 1) / line < slot_end as u64,
                    "cache op {o:?} past shard slots {base}..{slot_end}"
                );
                // A cache op moves bytes of the lines at its volume address; both addresses
                // are equal modulo the line size (see `DevOp::vaddr`).
                assert_eq!(
                    o.offset % line,
                    o.vaddr % line,
                    "cache op {o:?} off its line"
                );
                for (slot, want) in slot_lines(o, line) {
                    let slot = base + slot;
                    match (o.kind, o.cause) {
                        // New data lands in a slot only once no crash can recover a record
                        // naming another line there (the old line's record is durably cleared
                        // first, see `execute`): a crash must not pair another line's name
                        // with these bytes.
                        (IoKind::Write, _) => assert!(
                            !self.table.may_recover_other(slot, want),
                            "slot {slot} may recover another line than {want:?} under {o:?}"
                        ),
                        // A write-back reads its line's bytes from a slot holding that line
                        // (or, in a plan that filled the line itself, one it cleared).
                        (IoKind::Read, OpCause::EvictFlush | OpCause::Clean) => {
                            let named = self.table.persisted_line(slot);
                            assert!(
                                named.is_none_or(|l| l == want),
                                "slot {slot}'s record names {named:?}, not {want:?}, under {o:?}"
                            );
                        }
                        _ => {}
                    }
                }
            }
            Dev::Backend if o.kind == IoKind::Flush => {}
            Dev::Backend => {
                // Backend ops stay inside their volume's backend.
                assert!(
                    self.in_volume(o.volume.0, o.offset, o.len),
                    "backend op {o:?} outside its volume ({:?})",
                    self.volume(o.volume.0).map(|v| v.size)
                );
            }
        }
    }

    /// Where `op` of a plan of the shard starting at slot `base` lands on its device.
    pub(super) fn device_addr(&self, base: u32, op: &DevOp) -> u64 {
        match op.device {
            Dev::Cache => self.layout.data_offset + base as u64 * self.geo.line_size() + op.offset,
            // Each volume's backend sits at its base in the backend device (a `VolumeSet`
            // when there are several); an unknown volume is caught by `check_op`.
            Dev::Backend => self.volume(op.volume.0).map_or(0, |v| v.base) + op.offset,
        }
    }

    /// Makes every completed request durable: the cache device, and the backend if
    /// requests wrote to it since its last sync.
    pub(super) fn sync_all(&self) -> io::Result<()> {
        self.table.sync(&*self.cache_dev)?;
        self.sync_backend()
    }

    /// [`sync_all`](Self::sync_all) for a client's FLUSH or FUA: when the cache device
    /// cannot sync, what it holds is not durable there, so the engine degrades, writes every
    /// dirty line back and syncs the backend; the flush succeeds if that does (the cache
    /// device then holds no data a client wrote that the backend lacks).
    pub(super) fn sync_for_client(&self) -> io::Result<()> {
        match self.sync_all() {
            Err(e) if self.may_serve_past_cache(&e) => {
                self.enter_degraded(format!("a cache-device flush failed ({e})"));
                self.write_back_all()?;
                self.sync_backend()
            }
            r => r,
        }
    }

    /// Syncs the backend if requests wrote to it since its last sync.
    fn sync_backend(&self) -> io::Result<()> {
        let since = self.backend_unsynced.swap(u64::MAX, Relaxed);
        if since != u64::MAX {
            if let Err(e) = self.backend.flush_since(since) {
                // Writes that may have been lost with a connection are reported once, to
                // this flush (no later flush can cover them); other failures are retried.
                if self.backend.epoch() == since {
                    self.backend_unsynced.fetch_min(since, Relaxed);
                }
                return Err(e);
            }
        }
        Ok(())
    }
}

/// The (slot of the shard, line) pairs a cache op spans: ops of adjacent slots holding
/// adjacent lines merge, and a cache address and its volume address are equal modulo the line
/// size.
pub(super) fn slot_lines(o: &DevOp, line: u64) -> impl Iterator<Item = (u32, (u32, u64))> + '_ {
    let first = o.offset / line;
    let last = (o.offset + o.len - 1) / line;
    (first..=last).map(move |slot| {
        let index = (o.vaddr + (slot * line).max(o.offset) - o.offset) / line;
        (slot as u32, (o.volume.0, index))
    })
}
