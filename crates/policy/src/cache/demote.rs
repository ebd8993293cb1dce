//! The receiving side of DEMOTE (docs/design.md §4.7): a clean line the level above evicts is
//! offered to this level, which keeps it if it can make room without cost.
//!
//! Rules, per line of the demote request:
//! - only whole sub-blocks are taken (a sub-block the request covers in part is ignored:
//!   validity is kept per sub-block);
//! - the line is resident with every demoted sub-block valid: **already held**. No data
//!   moves; the line moves to the policy's "evict last" end (see below);
//! - the line is resident with some demoted sub-blocks not valid: only those are taken (a
//!   valid sub-block, clean or dirty, is this level's own copy and is at least as new as the
//!   one coming down, so it is never overwritten); **accepted**;
//! - the line is not resident: room comes from a free slot of its partition or from a clean,
//!   unpinned victim, which is dropped (never demoted further, never written back). When
//!   neither exists the demote is **rejected** and nothing changes. An accepted line is clean
//!   and valid for the demoted sub-blocks;
//! - a cache whose reads go past it (pass-through) rejects every demote: it would never serve
//!   the data.
//!
//! The promotion policy is not asked: it filters what the backend sends up, while a demote is
//! a line the level above has just shown to be worth caching.
//!
//! Placement: demoted lines (and already-held ones) go to [`Eviction::insert_demoted`]'s
//! position, the "evict last" end: LRU's most-recent end, MRU's least-recent end. An
//! already-held line is moved there too (remove, then `insert_demoted`): the level above has
//! just dropped it, so this level now holds the only cached copy. Without the move an MRU
//! array would keep such a line at its "evict next" end (where it entered when it was read
//! from the backend for the level above), and LRU-over-MRU with DEMOTE would no longer act
//! as one LRU cache of the summed size (the test `lru_over_mru_demote_is_one_lru` shows it).
//!
//! The plan holds the cache-device writes of the taken sub-blocks (`OpCause::Demote`, stage 0,
//! critical: the demote is complete when its data is on the device) and, with the journal on,
//! the slot updates (as a fill's).
//!
//! [`Eviction::insert_demoted`]: tiercache_eviction::Eviction::insert_demoted

use super::counters::Event;
use super::{runs, Cache, PolicyError};
use tiercache_core::geometry::LineSlice;
use tiercache_core::{DevOp, IoKind, LineKey, OpCause, Plan, Request, VolumeId};
use tiercache_eviction::Slot;

/// What the level below did with a demoted line (docs/design.md §4.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DemoteOutcome {
    /// The line was taken (all or some of its sub-blocks were written to this cache).
    Accepted,
    /// This cache already held every demoted sub-block: no data moved.
    AlreadyHeld,
    /// No room without a dirty write-back or a pinned line (or the cache does not serve
    /// reads): for a demote of one line, nothing changed. A demote spanning several lines of
    /// this cache is `Rejected` when any line was: lines before it may have been taken.
    Rejected,
}

impl DemoteOutcome {
    /// The outcome of a demote made of pieces (lines, or policy shards) from theirs:
    /// rejected if any piece was, already held only if every piece was.
    pub fn combine(self, o: DemoteOutcome) -> DemoteOutcome {
        use DemoteOutcome::*;
        match (self, o) {
            (Rejected, _) | (_, Rejected) => Rejected,
            (AlreadyHeld, AlreadyHeld) => AlreadyHeld,
            _ => Accepted,
        }
    }

    /// Name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            DemoteOutcome::Accepted => "accepted",
            DemoteOutcome::AlreadyHeld => "already-held",
            DemoteOutcome::Rejected => "rejected",
        }
    }
}

impl Cache {
    /// A line demoted from the level above: `req` is a write-shaped request (volume, offset,
    /// len, whole lines or sub-blocks) carrying clean data. Metadata changes at once; unless
    /// `plan` is `None` it is cleared and filled with the cache-device writes. Counted once
    /// in [`CacheStats`](crate::CacheStats)' `demotes_*` counters (a request over several lines is one demote).
    pub fn accept_demote(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<DemoteOutcome, PolicyError> {
        let out = self.accept_demote_piece(req, plan)?;
        self.record(Event::Demote(out));
        Ok(out)
    }

    /// As [`Cache::accept_demote`] for one piece of a demote that other pieces (on other
    /// policy shards) share: nothing is counted; the caller counts the combined outcome with
    /// [`CacheStats::count_demote`](crate::CacheStats::count_demote).
    pub fn accept_demote_piece(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<DemoteOutcome, PolicyError> {
        self.geo.check_request(req.volume, req.offset, req.len)?;
        self.build_plan = plan.is_some();
        self.scratch.clear();
        self.plan_write_backs.clear();
        let mut out: Option<DemoteOutcome> = None;
        if self.write_policy(req.volume).rules().reads_bypass_cache || req.len == 0 {
            out = Some(DemoteOutcome::Rejected);
        } else {
            for s in self.geo.split(req.offset, req.len) {
                let o = self.demote_line(req.volume, s);
                out = Some(out.map_or(o, |a| a.combine(o)));
            }
        }
        if let Some(plan) = plan {
            plan.clear();
            for o in self.scratch.drain(..) {
                plan.push(o);
            }
        }
        Ok(out.unwrap_or(DemoteOutcome::Rejected))
    }

    /// Sub-blocks wholly inside `start..end` of a line.
    fn covered_mask(&self, start: u64, end: u64) -> u64 {
        let sub = self.geo.sub_size();
        let first = start.div_ceil(sub);
        let last = end / sub; // one past the last covered
        if last <= first {
            return 0;
        }
        let n = last - first;
        let ones = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        ones << first
    }

    fn demote_line(&mut self, vol: VolumeId, s: LineSlice) -> DemoteOutcome {
        let mask = self.covered_mask(s.start, s.end);
        if mask == 0 {
            return DemoteOutcome::Rejected;
        }
        let key = LineKey::new(vol, s.index);
        if let Some(slot) = self.table.lookup(key) {
            let m = self.table.meta(slot);
            let p = m.partition as usize;
            let missing = mask & !m.valid;
            // Moved to the evict-last end, unless a shrink is taking it out of its policy.
            if !(m.pinned && self.leaving.contains(&slot)) {
                self.parts.order(p).move_demoted(slot, key);
            }
            if missing == 0 {
                return DemoteOutcome::AlreadyHeld;
            }
            self.demote_fill(p, slot, key, missing);
            return DemoteOutcome::Accepted;
        }
        let p = self.partition(vol);
        let Some(slot) = self.demote_slot(p, key) else {
            return DemoteOutcome::Rejected;
        };
        self.table.install(slot, key, p as u16);
        self.parts.order(p).insert_demoted(slot, key);
        self.demote_fill(p, slot, key, mask);
        DemoteOutcome::Accepted
    }

    /// A slot for a demoted line of partition `p`: a free one while the partition is below
    /// its capacity, else a clean unpinned victim, dropped. `None` (nothing changed) if
    /// neither.
    fn demote_slot(&mut self, p: usize, key: LineKey) -> Option<Slot> {
        let part = &self.parts[p];
        if part.capacity == 0 {
            return None;
        }
        if part.used < part.capacity {
            if let Some(slot) = self.table.take_free() {
                self.parts[p].used += 1;
                return Some(slot);
            }
        }
        // Asked only when a clean unpinned line exists (resident lines not leaving are
        // linked; leaving ones are pinned), so the policy finds one and a refusal leaves even
        // CLOCK's reference bits untouched.
        if part.linked() == 0 || part.clean_unpinned() == 0 {
            return None;
        }
        let table = &self.table;
        let victim = self.parts[p].evict.evict(key, &|s| {
            let m = table.meta(s);
            m.pinned || m.dirty != 0
        })?;
        debug_assert!({
            let m = self.table.meta(victim);
            m.resident && !m.pinned && m.dirty == 0
        });
        self.record(Event::Eviction { p, dirty: false });
        self.table.remove(victim);
        Some(victim)
    }

    /// Marks `mask` of the line in `slot` valid and plans its cache-device writes.
    fn demote_fill(&mut self, p: usize, slot: Slot, key: LineKey, mask: u64) {
        let sub = self.geo.sub_size();
        let base = self.geo.line_start(key.index());
        for (lo, hi) in runs(mask) {
            let (a, b) = (lo as u64 * sub, hi as u64 * sub);
            let addr = self.cache_addr(slot, a);
            self.record(Event::CacheWrite {
                p,
                volume: key.volume(),
                len: b - a,
            });
            self.emit(DevOp::cache(
                IoKind::Write,
                key.volume(),
                addr,
                base + a,
                b - a,
                OpCause::Demote,
            ));
        }
        self.table.add_valid(slot, mask);
        let bytes = u64::from(mask.count_ones()) * sub;
        self.record(Event::DemotedIn { p, bytes });
    }
}
