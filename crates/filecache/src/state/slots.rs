//! Where the core's slots lie in the blocks file, and which of the file's slots may be
//! written now.
//!
//! The blocks file has [`spare_slots`] more slots than the core. A dirty block whose content
//! the journal records is never overwritten in place: its new version goes to a free slot,
//! is journaled there, and the two trade places. The slot given up must not be written again
//! while a journal record that a power loss keeps (a synced one) still names it as the
//! block's version, that is until the record that gives it up is synced too (with the data
//! it relies on: the fsync sequence syncs the blocks file and the store files before the
//! journal). Such a slot waits in quarantine until the next sync; a slot that no synced
//! record names (its version was never fsync'd) is free at once, since recovery falls back
//! past a version whose data was overwritten (see [`crate::journal`]). A slot still in use
//! whose synced record was given up by a `Clean` (written back, discarded) is pinned: the
//! next write to it moves it to a free slot first.
//!
//! Why several spares rather than one spare and a journal sync before reusing it: with one
//! spare, every overwrite of an fsync'd dirty block after the first since the last fsync
//! would sync the blocks file and the journal (two fdatasyncs on the write path). With `k`
//! spares the state only syncs when all `k` are in quarantine: at most once per `k` such
//! overwrites between two fsyncs of the application, and never for an application that
//! fsyncs more often than that. The price is `k` blocks of cache space.

/// Spare slots of a cache of `capacity` slots: one in sixteen, at least 1 and at most 4096.
pub(crate) fn spare_slots(capacity: u32) -> u32 {
    (capacity / 16).clamp(1, 4096)
}

/// The placement of the core's slots in the blocks file.
pub(super) struct Slots {
    /// Core slot → slot of the blocks file.
    phys: Vec<u32>,
    /// Slots of the file no core slot uses that may be written.
    free: Vec<u32>,
    /// Slots of the file no core slot uses that a synced record names, given up by a record
    /// not synced yet: free after the next sync.
    quarantine: Vec<u32>,
    /// Per slot of the file: sequence number of the first journal record naming its current
    /// content, if one does.
    named: Vec<Option<u64>>,
    /// Per slot of the file: in use, but its content is what a synced record names and an
    /// unsynced one gave up; moved before it is written.
    pinned: Vec<bool>,
    /// The slots `pinned` marks (a sync clears these, not the whole table: it is per fsync).
    pinned_list: Vec<u32>,
}

impl Slots {
    /// `capacity` core slots in a file of `capacity + spare_slots(capacity)` slots.
    pub(super) fn new(capacity: u32) -> Slots {
        let total = capacity + spare_slots(capacity);
        Slots {
            phys: (0..capacity).collect(),
            free: (capacity..total).rev().collect(),
            quarantine: Vec::new(),
            named: vec![None; total as usize],
            pinned: vec![false; total as usize],
            pinned_list: Vec::new(),
        }
    }

    /// `capacity` core slots as [`Slots::new`], the first `placed.len()` of them at the
    /// places `placed` gives (a warm restart's checkpoint: distinct slots of the file), the
    /// others at the file's remaining slots in ascending order; the rest are free. No record
    /// names any content yet.
    pub(super) fn with_placement(capacity: u32, placed: &[u32]) -> Slots {
        let mut s = Slots::new(capacity);
        let total = s.named.len();
        let mut taken = vec![false; total];
        for &p in placed {
            taken[p as usize] = true;
        }
        let mut rest = (0..total as u32).filter(|&p| !taken[p as usize]);
        for (slot, phys) in s.phys.iter_mut().enumerate() {
            *phys = match placed.get(slot) {
                Some(&p) => p,
                None => rest
                    .next()
                    .expect("the file has a slot per core slot and spares"),
            };
        }
        s.free = rest.collect();
        s.free.reverse();
        s
    }

    /// Where core slot `slot` lies.
    pub(super) fn phys(&self, slot: u32) -> u32 {
        self.phys[slot as usize]
    }

    /// Whether a free slot is available (if not, a sync frees the quarantined ones).
    pub(super) fn has_free(&self) -> bool {
        !self.free.is_empty()
    }

    /// Whether core slot `slot` must move before it is written.
    pub(super) fn must_move(&self, slot: u32) -> bool {
        self.pinned[self.phys(slot) as usize]
    }

    /// The free slot [`Slots::relocate`] moves to next, if any.
    pub(super) fn spare(&self) -> Option<u32> {
        self.free.last().copied()
    }

    /// Core slot `slot` moves to [`Slots::spare`] (the caller checked there is one); the
    /// one it leaves is given up: quarantined if a synced record (`synced`: sequence numbers
    /// below it are synced) names it or it is pinned, free otherwise. Returns the new slot.
    pub(super) fn relocate(&mut self, slot: u32, synced: u64) -> u32 {
        let to = self.free.pop().expect("the caller checked for a free slot");
        let from = std::mem::replace(&mut self.phys[slot as usize], to);
        let keep =
            self.pinned[from as usize] || self.named[from as usize].is_some_and(|s| s < synced);
        self.pinned[from as usize] = false;
        self.named[from as usize] = None;
        if keep {
            self.quarantine.push(from);
        } else {
            self.free.push(from);
        }
        to
    }

    /// A journal record numbered `seq` names core slot `slot`'s content (a content already
    /// named keeps its first record: that is the one a power loss may keep).
    pub(super) fn named_by(&mut self, slot: u32, seq: u64) {
        let p = self.phys(slot) as usize;
        self.named[p].get_or_insert(seq);
    }

    /// Core slot `slot`'s content is no longer named (a `Clean` record, numbered at or
    /// after `synced` so not synced yet): pinned until the next sync if a synced record names
    /// it.
    pub(super) fn cleaned(&mut self, slot: u32, synced: u64) {
        let p = self.phys(slot) as usize;
        if self.named[p].take().is_some_and(|s| s < synced) && !self.pinned[p] {
            self.pinned[p] = true;
            self.pinned_list.push(p as u32);
        }
    }

    /// Core slot `slot` is written in place (its content is not journaled: no record a
    /// recovery would use names it).
    pub(super) fn overwritten(&mut self, slot: u32) {
        let p = self.phys(slot) as usize;
        debug_assert!(
            !self.pinned[p],
            "a pinned slot is moved before it is written"
        );
        self.named[p] = None;
    }

    /// Core slot `slot` moves to a free slot, leaving its old place out of use (it holds a
    /// dirty block the mount could not read or write back: docs/design.md §11) until
    /// [`Slots::release`]. Returns the old place, or `None` if no slot is free.
    pub(super) fn strand(&mut self, slot: u32) -> Option<u32> {
        let to = self.free.pop()?;
        let from = std::mem::replace(&mut self.phys[slot as usize], to);
        self.pinned[from as usize] = false;
        self.named[from as usize] = None;
        Some(from)
    }

    /// A place [`Slots::strand`] left out of use is given up: free after the next sync (the
    /// record that gives it up is not durable yet).
    pub(super) fn release(&mut self, phys: u32) {
        self.quarantine.push(phys);
    }

    /// The journal was synced: every record that gave a slot up is durable.
    pub(super) fn synced(&mut self) {
        self.free.append(&mut self.quarantine);
        for p in self.pinned_list.drain(..) {
            self.pinned[p as usize] = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_placement_maps_every_core_slot_to_a_distinct_file_slot() {
        let s = Slots::with_placement(32, &[33, 0, 7]);
        assert_eq!((s.phys(0), s.phys(1), s.phys(2)), (33, 0, 7));
        let mut all: Vec<u32> = (0..32).map(|c| s.phys(c)).chain(s.free.clone()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..34).collect::<Vec<u32>>());
        assert_eq!(s.free.len(), 2);
    }
}
