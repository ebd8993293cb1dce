//! The mount's counters.

/// Counters of a mount (also written as JSON to the stats file).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MountStats {
    /// Policy decisions, block granularity.
    pub core: crate::core::CoreStats,
    /// Read requests served.
    pub reads: u64,
    /// Write requests served.
    pub writes: u64,
    /// Bytes returned to readers.
    pub bytes_read: u64,
    /// Bytes accepted from writers.
    pub bytes_written: u64,
    /// Data read calls on the store.
    pub store_reads: u64,
    /// Data write calls on the store.
    pub store_writes: u64,
    /// Bytes read from the store.
    pub store_bytes_read: u64,
    /// Bytes written to the store.
    pub store_bytes_written: u64,
    /// Namespace and attribute operations on the store.
    pub store_meta_ops: u64,
    /// Bytes read from the cache device.
    pub cache_bytes_read: u64,
    /// Bytes written to the cache device.
    pub cache_bytes_written: u64,
    /// Files created.
    pub files_created: u64,
    /// Files deleted (unlinked, or replaced by a rename).
    pub files_deleted: u64,
    /// fsync calls.
    pub fsyncs: u64,
    /// Syncs of the cache the mount made itself, because every spare slot was waiting for a
    /// sync (overwrites of fsync'd dirty blocks or reuse of written-back ones, more between
    /// two fsyncs than there are spare slots).
    pub spare_syncs: u64,
    /// `FUSE_FLUSH` requests received (closes of handles the kernel did not open with
    /// `FOPEN_NOFLUSH`, docs/design.md §14).
    pub flushes: u64,
    /// Journal syncs of full syncs (fsyncs, unmount, flushes; docs/design.md §14).
    pub journal_syncs: u64,
    /// fsyncs answered by a sync that began after they arrived, with no sync of their own
    /// (group commit, docs/design.md §14 "Dispatch").
    pub fsyncs_grouped: u64,
    /// Store files synced (by fsync, flush, unmount or journal compaction).
    pub store_syncs: u64,
    /// Lookups refused because the entry is on another file system than the store's root.
    pub cross_device_refused: u64,
    /// Dirty blocks a restart found in the journal and wrote back.
    pub recovered_blocks: u64,
    /// Clean blocks a restart took back from the checkpoint of the last clean unmount.
    pub restored_blocks: u64,
    /// Of those, blocks dropped since because their store file had changed.
    pub restored_blocks_dropped: u64,
    /// Requests served from the store because the cap on cached files refused their file.
    pub files_cap_refused: u64,
    /// Dirty blocks the background cleaner wrote back.
    pub cleaned_blocks: u64,
    /// Background cleaning passes that failed (the store refused a write-back; the blocks
    /// are retried by the next pass, fsync or unmount).
    pub cleaner_errors: u64,
    /// The most store data operations of uncached files seen in flight at once (they run
    /// in parallel, outside the mount's lock).
    pub store_ops_in_flight_peak: u64,
    /// Dirty blocks resident now.
    pub dirty_blocks: u64,
    /// Blocks resident now.
    pub cached_blocks: u64,
    /// Files with blocks resident now (capped by `--cache-max-files`, docs/design.md §15).
    pub cached_files: u64,
    /// Serving in pass-through because of cache-device errors (docs/design.md §11).
    pub degraded: bool,
    /// Why it degraded.
    pub degraded_reason: Option<String>,
    /// Nanoseconds from the first cache-device error to degraded mode.
    pub first_error_to_degraded_ns: Option<u64>,
    /// Cache-device errors by file, op and kind (`blocks_write_enospc`, `journal_sync_eio`).
    pub cache_errors: std::collections::BTreeMap<String, u64>,
    /// Requests served past the cache (a cache-device error, or degraded mode).
    pub served_past_cache: u64,
    /// Dirty blocks set aside because the cache could not read them for a write-back (counted
    /// in `dirty_blocks` too; written back once readable).
    pub stranded_blocks: u64,
    /// Times an operator returned the degraded mount to service (SIGUSR1).
    pub returned_to_service: u64,
    /// Opens served in FUSE passthrough mode (docs/design.md §14): their reads and writes
    /// never reach the mount.
    pub passthrough_opens: u64,
    /// Bytes the kernel wrote to passthrough images that the mount brought into the cache
    /// (at close, fsync and last release).
    pub passthrough_bytes_ingested: u64,
    /// Passthrough images made by copying a file from the cache (an open with no image kept,
    /// or with a stale one).
    pub passthrough_images_copied: u64,
    /// Opens served by an image kept from an earlier open, unchanged since: no copy.
    pub passthrough_images_reused: u64,
    /// Opens of files the cache held whole that stayed on the block path because the file
    /// was smaller than the mount's `passthrough_min_size`.
    pub passthrough_below_min_size: u64,
    /// Reads and writes on the block path served on the reading thread, without a hand-off
    /// to a request thread: their blocks were all cached and the mount's lock was free
    /// (docs/design.md §14 "Served inline").
    pub served_inline: u64,
    /// Store reads of block-path requests (misses, partial blocks to fill) made without the
    /// mount's lock (docs/design.md §14, "The data path off the lock").
    pub store_reads_unlocked: u64,
    /// Of those, the ones whose data was dropped: the file changed before the request's
    /// plan ran (its store reads were then made again under the lock).
    pub store_reads_unlocked_dropped: u64,
    /// Changes made to the store behind the mount that it saw (`--watch-store`,
    /// docs/design.md §14 "Changes to the store"): a file's content or attributes, or a name
    /// created, removed or renamed. The mount's own changes are not counted.
    pub store_changes_seen: u64,
    /// Of those, changes to files the mount held writes of not yet in the store (dirty
    /// blocks, an open passthrough image written): the mount's writes win.
    pub store_conflicts: u64,
    /// Times the watch's event queue overflowed (every listed directory checked again).
    pub store_watch_overflows: u64,
    /// Store directories that could not be watched (the inotify watch limit): changes there
    /// are not seen.
    pub store_dirs_unwatched: u64,
}
