//! Hints to the memory system for executors that read requests ahead: they change nothing
//! but where the metadata of coming requests sits.

use super::Cache;
use crate::partition::Partition;
use tiercache_core::{LineKey, Request};

impl Cache {
    /// Hint that `req` is processed soon, for loops that read ahead (hit-ratio-only runs):
    /// stage 1 about a dozen requests ahead (index bucket), stage 2 about six (line entry and
    /// replacement-list links), stage 3 the next (the coming victim). Changes nothing.
    #[inline]
    pub fn prefetch(&self, req: &Request, stage: u8) {
        let Some(part) = self.parts.single() else {
            // With static partitions, finding a line's domain would read the entry being
            // prefetched: no hints.
            return;
        };
        if stage >= 3 {
            self.prefetch_victim(part);
        } else {
            self.prefetch_line(part, req, stage);
        }
    }

    /// The hints of [`Cache::prefetch`] for a lookahead of two, in one call: stage 1 for
    /// `newest` (just drawn), stage 2 for `soon` (issued next), stage 3 for the request issued
    /// now (whose hint is its coming victim, whatever the request).
    #[inline]
    pub fn prefetch_ahead(&self, newest: Option<&Request>, soon: Option<&Request>) {
        let Some(part) = self.parts.single() else {
            return;
        };
        if let Some(r) = newest {
            self.prefetch_line(part, r, 1);
        }
        if let Some(r) = soon {
            self.prefetch_line(part, r, 2);
        }
        self.prefetch_victim(part);
    }

    /// Stage 1 or 2 of [`Cache::prefetch`] (one partition).
    #[inline(always)]
    fn prefetch_line(&self, part: &Partition, req: &Request, stage: u8) {
        // Unchecked: a request the cache rejects, or a wrong guess, only loads a line for
        // nothing.
        let key = LineKey::new_for_hint(req.volume, self.geo.line_of(req.offset));
        if stage == 1 {
            self.table.prefetch_bucket(key);
        } else if let Some(slot) = self.table.prefetch_entry(key) {
            part.evict.prefetch(self.parts.numbers(), slot);
        }
    }

    /// Stage 3 of [`Cache::prefetch`] (one partition): the coming victim, if the partition
    /// is full.
    #[inline(always)]
    fn prefetch_victim(&self, part: &Partition) {
        if part.used >= part.capacity {
            if let Some((victim, then)) = part.evict.victim_hint_prefetching_next() {
                self.table.prefetch_victim(victim, then);
            }
        }
    }
}
