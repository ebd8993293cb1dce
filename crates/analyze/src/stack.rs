//! Exact LRU stack distances: the [`tiercache_stackdist`] crate, here under its old path.

pub use tiercache_stackdist::{Layout, Marks, StackDistance};

/// The bitmap sizes of this crate's stacks: tiny in its unit tests, so that they compact often
/// (`cfg!(test)` is this crate's, not the stack crate's).
pub(crate) const LAYOUT: Layout = if cfg!(test) {
    Layout::TINY
} else {
    Layout::DEFAULT
};
