//! Write policies (cache modes) as one table: docs/design.md §4.5, row for row.
//!
//! Each mode answers three questions; the cache core carries out the answers. Keeping the modes as
//! data rather than code paths makes the table testable against docs/design.md §4.5 and lets load
//! balancing switch modes at run time without special cases.

use crate::config::WritePolicy;

/// What a write does to a line that is resident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteHit {
    /// Update the cache and mark dirty; ack (WB, WO, WBA).
    CacheDirty,
    /// Update cache and backend; ack after both (WT, WA).
    CacheAndBackend,
    /// Invalidate the cached copy and write the backend (RO, PT).
    InvalidateToBackend,
}

/// What a write does to a line that is not resident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMiss {
    /// Allocate a line, write it dirty; ack (WB, WO).
    AllocateDirty,
    /// Allocate a line, write cache and backend (WT).
    AllocateThrough,
    /// Backend only, no allocation (WA, RO, PT, WBA).
    BackendOnly,
}

/// What a read does when the line is not resident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMiss {
    /// Serve from the backend and promote per the promotion policy (WB, WT, WA, RO, WBA).
    Promote,
    /// Serve from the backend without promoting (WO, PT).
    BackendOnly,
}

/// The three answers of one write policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModeRules {
    /// Write to a resident line.
    pub write_hit: WriteHit,
    /// Write to a missing line.
    pub write_miss: WriteMiss,
    /// Read of a missing line.
    pub read_miss: ReadMiss,
    /// Whether read hits are served by the backend (PT), except for dirty data only the cache has.
    pub reads_bypass_cache: bool,
}

impl WritePolicy {
    /// The rules of this mode (docs/design.md §4.5).
    pub const fn rules(self) -> ModeRules {
        use ReadMiss as R;
        use WriteHit as H;
        use WriteMiss as M;
        let (write_hit, write_miss, read_miss, reads_bypass_cache) = match self {
            WritePolicy::WriteBack => (H::CacheDirty, M::AllocateDirty, R::Promote, false),
            WritePolicy::WriteThrough => {
                (H::CacheAndBackend, M::AllocateThrough, R::Promote, false)
            }
            WritePolicy::WriteAround => (H::CacheAndBackend, M::BackendOnly, R::Promote, false),
            WritePolicy::WriteOnly => (H::CacheDirty, M::AllocateDirty, R::BackendOnly, false),
            WritePolicy::ReadOnly => (H::InvalidateToBackend, M::BackendOnly, R::Promote, false),
            WritePolicy::PassThrough => {
                (H::InvalidateToBackend, M::BackendOnly, R::BackendOnly, true)
            }
            WritePolicy::WriteBackAround => (H::CacheDirty, M::BackendOnly, R::Promote, false),
        };
        ModeRules {
            write_hit,
            write_miss,
            read_miss,
            reads_bypass_cache,
        }
    }

    /// Short name as in the literature (WB, WT, WA, WO, RO, PT), and WBA for write-back
    /// with write-around misses.
    pub fn short_name(self) -> &'static str {
        match self {
            WritePolicy::WriteBack => "WB",
            WritePolicy::WriteThrough => "WT",
            WritePolicy::WriteAround => "WA",
            WritePolicy::WriteOnly => "WO",
            WritePolicy::ReadOnly => "RO",
            WritePolicy::PassThrough => "PT",
            WritePolicy::WriteBackAround => "WBA",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The docs/design.md §4.5 table, transcribed as strings, checked against the rules.
    #[test]
    fn matches_spec_table() {
        let table = [
            (WritePolicy::WriteBack, "dirty", "allocate-dirty", "promote"),
            (
                WritePolicy::WriteThrough,
                "both",
                "allocate-both",
                "promote",
            ),
            (WritePolicy::WriteAround, "both", "backend", "promote"),
            (WritePolicy::WriteOnly, "dirty", "allocate-dirty", "backend"),
            (WritePolicy::ReadOnly, "invalidate", "backend", "promote"),
            (WritePolicy::PassThrough, "invalidate", "backend", "backend"),
            (WritePolicy::WriteBackAround, "dirty", "backend", "promote"),
        ];
        for (mode, hit, miss, read) in table {
            let r = mode.rules();
            let h = match r.write_hit {
                WriteHit::CacheDirty => "dirty",
                WriteHit::CacheAndBackend => "both",
                WriteHit::InvalidateToBackend => "invalidate",
            };
            let m = match r.write_miss {
                WriteMiss::AllocateDirty => "allocate-dirty",
                WriteMiss::AllocateThrough => "allocate-both",
                WriteMiss::BackendOnly => "backend",
            };
            let rd = match r.read_miss {
                ReadMiss::Promote => "promote",
                ReadMiss::BackendOnly => "backend",
            };
            assert_eq!((h, m, rd), (hit, miss, read), "{mode:?}");
        }
    }
}
