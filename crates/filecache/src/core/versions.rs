//! Content versions of cached files (docs/design.md §14): a number that names one state of a
//! file's cached content, so that a copy of the file made at version `v` (a passthrough image)
//! can be trusted later exactly while the file's version is still `v`.
//!
//! Versions come from one counter that only grows during a mount's life, so a value is never
//! given twice: a file gets a new one at every change of its cached content (a write of one
//! of its blocks, a block of it admitted, evicted or dropped, a truncate), and loses its
//! version with its entry when its last cached block leaves (a file with none has no version,
//! and gets a new one when a block comes back). A write-back changes a block's dirty state,
//! not the content: the version stays. Nothing persists: a restart starts over, and no copy
//! made before it is kept.

use std::collections::BTreeSet;

/// A file with cached blocks: which, and the version of their content.
#[derive(Debug, Default)]
pub(super) struct CachedFile {
    /// Indexes of its cached blocks.
    pub(super) blocks: BTreeSet<u64>,
    /// How many of them are dirty (`super::mirror`).
    pub(super) dirty: u64,
    /// Its content version (a fresh entry's is set as its first block comes in).
    pub(super) version: u64,
}

/// The next version of the counter `last`: a value never given before.
pub(super) fn next(last: &mut u64) -> u64 {
    *last += 1;
    *last
}
