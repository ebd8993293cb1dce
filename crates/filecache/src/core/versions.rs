//! Content versions of cached files (docs/design.md §14): a number that names one state of a
//! file's cached content, so that a copy of the file made at version `v` (a passthrough image)
//! can be trusted later exactly while the file's version is still `v`.
//!
//! Versions come from one counter that only grows during a mount's life, so a value is never
//! given twice: a file gets a new one at every change of its cached content (a write of one
//! of its blocks, a block of it admitted, evicted or dropped, a truncate), and loses its
//! version when its last cached block leaves (a file with none has no version, and gets a new
//! one when a block comes back). Nothing persists: a restart starts over, and no copy made
//! before it is kept.

use std::collections::HashMap;

use super::FileId;

/// The content version of every file with cached blocks.
#[derive(Debug, Default)]
pub(super) struct Versions {
    /// The last version given.
    last: u64,
    of: HashMap<FileId, u64>,
}

impl Versions {
    /// `file`'s content changed, and it has cached blocks: a new version.
    pub(super) fn changed(&mut self, file: FileId) {
        self.last += 1;
        self.of.insert(file, self.last);
    }

    /// `file`'s content changed, if it has a version (cached blocks); else nothing to do.
    pub(super) fn touched(&mut self, file: FileId) {
        if self.of.contains_key(&file) {
            self.changed(file);
        }
    }

    /// `file` has no cached block any more: no version.
    pub(super) fn gone(&mut self, file: FileId) {
        self.of.remove(&file);
    }

    /// `file`'s version (`None`: no cached block).
    pub(super) fn get(&self, file: FileId) -> Option<u64> {
        self.of.get(&file).copied()
    }
}
