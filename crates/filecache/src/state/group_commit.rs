//! Group commit of concurrent fsyncs (docs/design.md §14 "Dispatch"): an fsync that arrives
//! while another fsync's sync is in flight is answered by that sync, without a journal sync
//! of its own.
//!
//! Every full sync of the mount (blocks file, store files written, journal) is numbered as it
//! begins, under the mount's lock. An fsync notes the number of syncs begun when it arrives
//! ([`State::sync_mark`], read without the lock): its writes were applied before that (the
//! kernel sends FUSE_FSYNC after the writes it covers were answered). When it gets the lock,
//! a sync numbered above its mark that completed began after its writes were applied, so it
//! made them durable; the fsync then has nothing to do. While one sync holds the lock, every
//! fsync arriving meanwhile waits for it and is answered by it.

use std::io;
use std::sync::atomic::Ordering;

use super::State;

/// The number of the mount's syncs begun when an fsync arrived (see [`State::sync_mark`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncMark(pub(super) u64);

impl State {
    /// A handle to the count of syncs begun, for [`State::sync_mark`] without the lock.
    pub fn sync_counter(&self) -> SyncCounter {
        SyncCounter(self.syncs_begun.clone())
    }

    /// Notes that a full sync begins: its number.
    pub(super) fn sync_begins(&mut self) -> u64 {
        self.syncs_begun.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// fsync of file `id`, arrived at `mark` (taken after the writes it covers were
    /// applied): as [`State::fsync`], but answered without a sync of its own when a sync
    /// begun after `mark` completed (counted in `MountStats::fsyncs_grouped`).
    pub fn fsync_since(&mut self, id: u64, mark: SyncMark) -> io::Result<()> {
        if self.cached(id)
            && self.cfg.variant.is_write_back()
            && !self.health.degraded
            && self.last_full_sync > mark.0
        {
            self.stats.fsyncs += 1;
            self.stats.fsyncs_grouped += 1;
            self.note_request();
            self.promised = self.journal.as_ref().map_or(0, |j| j.synced_seq());
            return Ok(());
        }
        self.fsync(id)
    }
}

/// The count of the mount's syncs begun, readable without the mount's lock.
#[derive(Debug, Clone)]
pub struct SyncCounter(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl SyncCounter {
    /// The mark of an fsync arriving now.
    pub fn mark(&self) -> SyncMark {
        SyncMark(self.0.load(Ordering::SeqCst))
    }
}
