//! Demotes (exclusive caching, docs/design.md §4.7): clean victims sent down to the level below,
//! and clean lines taken from a level above.
//!
//! Taking one runs like a write of clean data: the shard's core decides under its lock
//! ([`DemotePieces::accept`], the helper `ShardedCache` uses too: insert at the evict-last end if a free slot or a clean victim
//! makes room, else reject), the plan registers in the ordering table like any other, its
//! cache writes run. The line's record is not written (see [`unrecorded`]): the line is clean,
//! so a crash may forget it, and a slot cycling through demoted lines then costs no metadata
//! I/O at all.

use super::degraded::predecessor_failed;
use super::*;
use tiercache_blockdev::DemoteReply;
use tiercache_policy::{DemoteOutcome, DemotePieces};

impl<C: EngineCore> Inner<C> {
    /// Sends a clean victim's bytes (at volume address `addr`) to the level below and counts
    /// the answer. Nothing here depends on it: the victim is gone either way, and a demote
    /// that fails only costs a later miss.
    pub(super) fn demote_down(&self, data: &[u8], addr: u64) {
        let d = &self.counters.demotes;
        Counters::add(&d.sent, 1);
        // Nothing to re-check here: the ordering table runs this before any later write of the
        // line (a remote level runs its own check).
        let c = match self.backend.demote_at(data, addr, &|| true) {
            Ok(DemoteReply::Accepted) => &d.sent_accepted,
            Ok(DemoteReply::AlreadyHeld) => &d.sent_already_held,
            Ok(DemoteReply::Rejected) => &d.sent_rejected,
            Err(_) => &d.sent_failed,
        };
        Counters::add(c, 1);
    }

    /// Writes the records of the demoted lines still unrecorded, so that a restart after a
    /// clean shutdown finds them (a crash forgets them: they are clean). Runs once nothing
    /// else does (shutdown, after the last plan): the core's state of a slot is then what its
    /// bytes hold, and its durable record is empty or of the same line (a line taking a slot
    /// whose record names another clears that record first), so the record written is
    /// exactly the one the demote skipped, updated by whatever came since.
    pub(super) fn record_demoted(&self) -> io::Result<()> {
        if self.halted.get().is_some() {
            // A halted engine writes no records (see `forget_failed`).
            return Ok(());
        }
        for shard in &self.shards {
            let mut core = self.core(shard);
            let marked = std::mem::take(&mut core.unrecorded);
            for slot in marked
                .iter()
                .enumerate()
                .filter(|(_, m)| **m)
                .map(|(i, _)| i as u32)
            {
                let rec = record_of(&core.cache.slot_record(slot));
                let Some(line) = rec.line else { continue };
                let at = shard.base + slot;
                if self.table.persisted_line(at).is_some_and(|l| l != line) {
                    continue;
                }
                self.table.write(&*self.cache_dev, at, &rec)?;
                Counters::add(&self.counters.records_written, 1);
            }
        }
        Ok(())
    }

    /// Takes one shard's piece of a demote, adding its outcome to `pieces` (counted once, by
    /// the caller, for the whole demote).
    fn demote_piece(
        &self,
        k: usize,
        req: &Request,
        data: &[u8],
        still_valid: &dyn Fn() -> bool,
        pieces: &mut DemotePieces,
    ) -> io::Result<DemoteReply> {
        self.check_halted()?;
        let shard = &self.shards[k];
        let (plan, updates, mut ticket) = {
            let _decide =
                (self.lookup == Lookup::HtCg && self.shards.len() > 1).then(|| lock(&self.decide));
            let mut core = self.core(shard);
            self.check_halted()?;
            // Under the lock every write of these bytes is decided under: a write decided
            // before this point has made `still_valid` false; one decided after lands over.
            if !still_valid() {
                pieces.refuse();
                return Ok(DemoteReply::Rejected);
            }
            let mut plan = Plan::new();
            match pieces
                .accept(&mut core.cache, req, Some(&mut plan))
                .map_err(io_err)?
            {
                DemoteOutcome::Accepted => {}
                DemoteOutcome::AlreadyHeld => return Ok(DemoteReply::AlreadyHeld),
                DemoteOutcome::Rejected => return Ok(DemoteReply::Rejected),
            }
            let mut updates = std::mem::take(&mut core.updates);
            updates.clear();
            core.cache.drain_meta_updates(&mut updates);
            // A demoted line is clean: no record of it is written (see `unrecorded`) until a
            // clean shutdown.
            updates.retain(|u| {
                let skip = unrecorded(u);
                if skip {
                    let i = u.slot as usize;
                    if core.unrecorded.len() <= i {
                        core.unrecorded.resize(i + 1, false);
                    }
                    core.unrecorded[i] = true;
                }
                !skip
            });
            let ticket = self.register_plan(shard.base, &mut core.order, &plan, &updates);
            (plan, updates, ticket)
        };
        if ticket.wait_turn() > 0 {
            Counters::add(&self.counters.ordering_waits, 1);
        }
        let client = Client::Write {
            volume: req.volume.0,
            offset: req.offset,
            data,
        };
        let result = if ticket.predecessor_failed() {
            Err(predecessor_failed())
        } else {
            self.execute(shard, &plan, &updates, client, false)
                .map(|_| DemoteReply::Accepted)
        };
        if let Err(e) = &result {
            // What the demote was to fill holds nothing defined: forgotten (best effort; the
            // demote's own error is the one to report).
            let _ = self.forget_failed(shard, req, &plan, &[], ticket.seq(), e);
        }
        let mut core = self.core(shard);
        core.order.end(ticket, result.is_ok());
        core.updates = updates;
        result
    }
}

/// Whether a demote's slot update goes unrecorded: it leaves its slot holding a line with no
/// dirty data. Such a record would cost a cache-device write per demote, and more: the next
/// line to take the slot would find a record naming another line there and have to clear it
/// durably (two record writes and a sync) before its bytes may land.
///
/// Why a crash stays safe without it: the slot's durable record is, at the demote, either
/// empty, or of the same line (the line was resident: its record describes older, still
/// valid sub-blocks; a demote never writes over a valid sub-block), or of another line.
/// The last case is the victim's (or an older, unsynced one's): `execute` sees that a crash
/// could recover it (`SlotTable::may_recover_other`) and clears it durably before the
/// demoted bytes land, as for any line taking another's slot, and `check_op` refuses any
/// cache write into a slot whose recoverable record names another line. So recovery finds
/// the slot empty, or its line with sub-blocks whose bytes are that line's: never a record
/// paired with bytes written over its data. It forgets the demoted sub-blocks, which are
/// clean copies of what the backend (or the level above's write, which went through this
/// engine) holds: a later miss reads them again. The next plan on the slot that records it
/// (a write making it dirty, a trim) writes the full state, demoted sub-blocks included,
/// which are on the device by then (plans on a slot run in decision order).
fn unrecorded(u: &MetaUpdate) -> bool {
    u.line.is_some() && u.dirty == 0
}

impl Engine {
    /// Takes a clean copy of `data` at `offset` that a cache level above evicts (DEMOTE,
    /// docs/design.md §4.7), if `still_valid()` holds when each shard's core decides (it is called
    /// under the lock writes are decided under; pass `&|| true` when the caller orders demotes
    /// after the writes they could race with). Accepted: it is kept, at the evict-last end;
    /// already held: nothing was written; rejected: nothing was done (a demote across policy
    /// shards may be rejected by one after another took its piece: each piece is a clean
    /// copy, kept or not on its own).
    pub fn demote(
        &self,
        offset: u64,
        data: &[u8],
        still_valid: &dyn Fn() -> bool,
    ) -> io::Result<DemoteReply> {
        let inner = &self.inner;
        let len = data.len() as u64;
        // Demotes come from the level above the engine's own (primary) export.
        let volume = inner.volumes[0].id;
        if !inner.in_volume(volume, offset, len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "demote {offset}+{len} beyond the volume's {} bytes",
                    inner.volumes[0].size
                ),
            ));
        }
        let d = &inner.counters.demotes;
        Counters::add(&d.received, 1);
        let _serial = (inner.lookup == Lookup::Lt).then(|| lock(&inner.serial));
        // Pieces combine as the core combines them (rejected if any piece was, already held
        // only if every piece was), and the demote is counted once, as `ShardedCache` counts
        // it: one helper for both executors.
        let whole = Request {
            time_ns: inner.now_ns(),
            volume: VolumeId(volume),
            op: Op::Write,
            offset,
            len,
        };
        let mut pieces = DemotePieces::new();
        for (k, piece) in inner.shard_layout.demote_pieces(&whole) {
            // Each piece is stamped when its shard takes it.
            let req = Request {
                time_ns: inner.now_ns(),
                ..piece
            };
            let at = (req.offset - offset) as usize;
            let bytes = &data[at..at + req.len as usize];
            inner.demote_piece(k, &req, bytes, still_valid, &mut pieces)?;
        }
        let out = match pieces.finish(&mut lock(&inner.request_tally)) {
            DemoteOutcome::Accepted => DemoteReply::Accepted,
            DemoteOutcome::AlreadyHeld => DemoteReply::AlreadyHeld,
            DemoteOutcome::Rejected => DemoteReply::Rejected,
        };
        let c = match out {
            DemoteReply::Accepted => &d.received_accepted,
            DemoteReply::AlreadyHeld => &d.received_already_held,
            DemoteReply::Rejected => &d.received_rejected,
        };
        Counters::add(c, 1);
        Ok(out)
    }
}
