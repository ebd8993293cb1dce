//! Counters the policy core keeps: every decision is counted, every decision not to cache with
//! its reason.

use serde::{Deserialize, Serialize};

/// Why data was not placed in (or served from) the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BypassReason {
    /// The promotion policy has not seen the line often enough yet.
    NotHotYet,
    /// The write policy sends this kind of access to the backend.
    Mode,
    /// A victim was needed and it was dirty, and the dirty-full policy is bypass.
    DirtyFull,
    /// Every candidate victim was pinned (under write-back).
    AllPinned,
    /// The volume's partition has no lines at all, or has room but no free line yet (another
    /// partition's shrink is still writing its lines back) and none of its own to evict.
    NoSpace,
    /// The admission policy turned the line away (docs/design.md §4.3).
    Admission,
}

impl BypassReason {
    /// All reasons, in report order.
    pub const ALL: [BypassReason; 6] = [
        BypassReason::NotHotYet,
        BypassReason::Mode,
        BypassReason::DirtyFull,
        BypassReason::AllPinned,
        BypassReason::NoSpace,
        BypassReason::Admission,
    ];

    /// Name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            BypassReason::NotHotYet => "not-hot-yet",
            BypassReason::Mode => "mode",
            BypassReason::DirtyFull => "dirty-full",
            BypassReason::AllPinned => "all-pinned",
            BypassReason::NoSpace => "no-space",
            BypassReason::Admission => "admission",
        }
    }
}

/// Cumulative counters of one cache (or one partition).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheStats {
    /// Requests processed (reads, writes, trims, flushes).
    pub requests: u64,
    /// Read requests.
    pub read_requests: u64,
    /// Write requests.
    pub write_requests: u64,
    /// Requests whose every line was fully present (no backend read needed).
    pub full_hit_requests: u64,
    /// Read requests fully served from the cache.
    pub read_hit_requests: u64,
    /// Write requests whose every line was resident before the write.
    pub write_hit_requests: u64,
    /// Line accesses by reads and writes (a request covering k lines is k accesses).
    pub line_accesses: u64,
    /// Line accesses finding the line resident with every needed sub-block valid.
    pub line_hits: u64,
    /// Line accesses finding the line resident but some needed sub-blocks invalid.
    pub line_partial_hits: u64,
    /// Line accesses not finding the line.
    pub line_misses: u64,
    /// Read line accesses and their full hits.
    pub read_line_accesses: u64,
    /// Read line accesses that were full hits.
    pub read_line_hits: u64,
    /// Write line accesses.
    pub write_line_accesses: u64,
    /// Write line accesses that found the line resident.
    pub write_line_hits: u64,
    /// Lines inserted into the cache (read promotions and write allocations).
    pub promotions: u64,
    /// Lines inserted by write allocation (subset of `promotions`).
    pub write_allocations: u64,
    /// Lines evicted to make room or because their partition shrank.
    pub evictions: u64,
    /// Evicted lines that were dirty and written back first.
    pub dirty_evictions: u64,
    /// Lines invalidated by trim or by writes in RO/PT/WA modes.
    pub invalidations: u64,
    /// Lines written back by the cleaner (including the final flush).
    pub cleaned_lines: u64,
    /// Flush jobs issued by the cleaner.
    pub clean_jobs: u64,
    /// Bytes written back to the backend (cleaning and dirty evictions).
    pub written_back_bytes: u64,
    /// Bytes written to the cache device (promotions, fills and application writes).
    pub cache_bytes_written: u64,
    /// Bytes read from the cache device (hits and write-back reads).
    pub cache_bytes_read: u64,
    /// Bytes read from the backend.
    pub backend_bytes_read: u64,
    /// Bytes written to the backend.
    pub backend_bytes_written: u64,
    /// Bytes of application writes that made lines dirty.
    pub dirtied_bytes: u64,
    /// Bytes of dirty data dropped by trim (the application discarded them).
    pub trimmed_dirty_bytes: u64,
    /// Line-level bypasses by reason (indexed as [`BypassReason::ALL`]).
    pub bypasses: [u64; 6],
    /// Times the load balancer was polled (once per interval it ran).
    pub balancer_polls: u64,
    /// Requests (pieces, on a sharded cache) the load balancer sent past the cache.
    pub balancer_bypassed: u64,
    /// Polls at which the load balancer changed its decision (a write policy switched, a
    /// share of requests sent past the cache started, changed or stopped).
    pub balancer_changes: u64,
    /// Clean victims demoted to the level below (`cache.victim = "demote"`).
    pub demotions: u64,
    /// Bytes of clean victims sent to the level below (not counted as backend writes).
    pub demoted_bytes: u64,
    /// Demotes received from the level above (docs/design.md §4.7): each was accepted, already held
    /// or rejected (`demotes_received = demotes_accepted + demotes_already_held +
    /// demotes_rejected`).
    #[serde(default)]
    pub demotes_received: u64,
    /// Demotes taken (some or all of their sub-blocks written to this cache).
    #[serde(default)]
    pub demotes_accepted: u64,
    /// Demotes of data this cache already held (no data moved).
    #[serde(default)]
    pub demotes_already_held: u64,
    /// Demotes refused (no clean unpinned line to drop, or a cache that serves no reads).
    #[serde(default)]
    pub demotes_rejected: u64,
    /// Bytes written to the cache device by accepted demotes (part of `cache_bytes_written`).
    #[serde(default)]
    pub demoted_in_bytes: u64,
}

impl CacheStats {
    /// Counts one whole request (the request-level counters) from its outcome over `lines`
    /// lines; line-level counters were counted as its lines were processed.
    pub fn count_request(
        &mut self,
        op: tiercache_core::Op,
        out: &crate::AccessOutcome,
        lines: u32,
    ) {
        use tiercache_core::Op;
        self.requests += 1;
        match op {
            Op::Read => {
                self.read_requests += 1;
                // A zero-length read found nothing: not a hit.
                self.read_hit_requests += u64::from(lines > 0 && out.line_hits == lines);
            }
            Op::Write => {
                self.write_requests += 1;
                self.write_hit_requests +=
                    u64::from(lines > 0 && out.line_misses == 0 && out.line_partial_hits == 0);
            }
            Op::Trim | Op::Flush => {}
        }
        if out.full_hit && matches!(op, Op::Read | Op::Write) {
            self.full_hit_requests += 1;
        }
    }

    /// Counts one demote received from the level above, by its outcome.
    pub fn count_demote(&mut self, out: crate::DemoteOutcome) {
        self.demotes_received += 1;
        match out {
            crate::DemoteOutcome::Accepted => self.demotes_accepted += 1,
            crate::DemoteOutcome::AlreadyHeld => self.demotes_already_held += 1,
            crate::DemoteOutcome::Rejected => self.demotes_rejected += 1,
        }
    }

    /// Takes the request-level counters (`requests`, `read_requests`, `write_requests`, the
    /// `*_hit_requests` and the `demotes_*` received) from `r`: an executor that cuts requests
    /// and demotes into shard pieces counts them once in its own counters
    /// ([`crate::shards::RequestPieces::finish`], [`crate::shards::DemotePieces::finish`]),
    /// while its shards count lines.
    pub fn take_request_counters(&mut self, r: &CacheStats) {
        self.requests = r.requests;
        self.read_requests = r.read_requests;
        self.write_requests = r.write_requests;
        self.full_hit_requests = r.full_hit_requests;
        self.read_hit_requests = r.read_hit_requests;
        self.write_hit_requests = r.write_hit_requests;
        self.demotes_received = r.demotes_received;
        self.demotes_accepted = r.demotes_accepted;
        self.demotes_already_held = r.demotes_already_held;
        self.demotes_rejected = r.demotes_rejected;
    }

    /// Adds `o`'s counts to these (the stats of several cores, e.g. the shards of one cache).
    pub fn merge(&mut self, o: &CacheStats) {
        self.requests += o.requests;
        self.read_requests += o.read_requests;
        self.write_requests += o.write_requests;
        self.full_hit_requests += o.full_hit_requests;
        self.read_hit_requests += o.read_hit_requests;
        self.write_hit_requests += o.write_hit_requests;
        self.line_accesses += o.line_accesses;
        self.line_hits += o.line_hits;
        self.line_partial_hits += o.line_partial_hits;
        self.line_misses += o.line_misses;
        self.read_line_accesses += o.read_line_accesses;
        self.read_line_hits += o.read_line_hits;
        self.write_line_accesses += o.write_line_accesses;
        self.write_line_hits += o.write_line_hits;
        self.promotions += o.promotions;
        self.write_allocations += o.write_allocations;
        self.evictions += o.evictions;
        self.dirty_evictions += o.dirty_evictions;
        self.invalidations += o.invalidations;
        self.cleaned_lines += o.cleaned_lines;
        self.clean_jobs += o.clean_jobs;
        self.written_back_bytes += o.written_back_bytes;
        self.cache_bytes_written += o.cache_bytes_written;
        self.cache_bytes_read += o.cache_bytes_read;
        self.backend_bytes_read += o.backend_bytes_read;
        self.backend_bytes_written += o.backend_bytes_written;
        self.dirtied_bytes += o.dirtied_bytes;
        self.trimmed_dirty_bytes += o.trimmed_dirty_bytes;
        self.balancer_polls += o.balancer_polls;
        self.demotions += o.demotions;
        self.balancer_bypassed += o.balancer_bypassed;
        self.balancer_changes += o.balancer_changes;
        self.demoted_bytes += o.demoted_bytes;
        self.demotes_received += o.demotes_received;
        self.demotes_accepted += o.demotes_accepted;
        self.demotes_already_held += o.demotes_already_held;
        self.demotes_rejected += o.demotes_rejected;
        self.demoted_in_bytes += o.demoted_in_bytes;
        for (a, b) in self.bypasses.iter_mut().zip(o.bypasses) {
            *a += b;
        }
    }

    /// Adds one bypass.
    pub fn bypass(&mut self, reason: BypassReason) {
        self.bypasses[reason as usize] += 1;
    }

    /// Bypasses for one reason.
    pub fn bypasses_for(&self, reason: BypassReason) -> u64 {
        self.bypasses[reason as usize]
    }

    /// All bypasses.
    pub fn total_bypasses(&self) -> u64 {
        self.bypasses.iter().sum()
    }

    /// Full line hits / line accesses (0 when no access).
    pub fn hit_ratio(&self) -> f64 {
        ratio(self.line_hits, self.line_accesses)
    }

    /// Read line hit ratio.
    pub fn read_hit_ratio(&self) -> f64 {
        ratio(self.read_line_hits, self.read_line_accesses)
    }

    /// Write line hit ratio.
    pub fn write_hit_ratio(&self) -> f64 {
        ratio(self.write_line_hits, self.write_line_accesses)
    }
}

/// Cumulative counters of one partition (see [`crate::Cache::partition_stats`]): what a
/// per-tenant sizer or cleaner needs. A line access counts in the partition holding the line,
/// or, on a miss, in the partition of the volume asking for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStats {
    /// Read line accesses finding the line resident with every needed sub-block valid.
    pub read_line_hits: u64,
    /// Read line accesses finding the line resident but some needed sub-blocks invalid.
    pub read_line_partial_hits: u64,
    /// Read line accesses not finding the line (or passing it by, in pass-through modes).
    pub read_line_misses: u64,
    /// Write line accesses finding the line resident.
    pub write_line_hits: u64,
    /// Write line accesses not finding the line.
    pub write_line_misses: u64,
    /// Lines inserted (read promotions and write allocations).
    pub promotions: u64,
    /// Lines evicted (to make room or because the partition shrank).
    pub evictions: u64,
    /// Evicted lines that were dirty and written back first.
    pub dirty_evictions: u64,
    /// Bytes written to the cache device for this partition's lines (promotions, fills and
    /// application writes): the partition's share of the device's wear.
    pub cache_bytes_written: u64,
    /// Bytes written back from this partition's lines (cleaning, dirty evictions, shrinks).
    pub written_back_bytes: u64,
    /// Bytes of demoted lines (from the level above) written for this partition.
    #[serde(default)]
    pub demoted_in_bytes: u64,
}

// Kept per kind of access so that a hit costs one increment (the hot path of hit-ratio runs);
// the sums are methods.
impl PartitionStats {
    /// Line hits (reads and writes; as [`CacheStats::line_hits`]).
    pub fn line_hits(&self) -> u64 {
        self.read_line_hits + self.write_line_hits
    }

    /// Line partial hits (reads only).
    pub fn line_partial_hits(&self) -> u64 {
        self.read_line_partial_hits
    }

    /// Line misses (reads and writes).
    pub fn line_misses(&self) -> u64 {
        self.read_line_misses + self.write_line_misses
    }

    /// Read line accesses.
    pub fn read_line_accesses(&self) -> u64 {
        self.read_line_hits + self.read_line_partial_hits + self.read_line_misses
    }

    /// Line accesses (hits, partial hits and misses).
    pub fn line_accesses(&self) -> u64 {
        self.line_hits() + self.line_partial_hits() + self.line_misses()
    }

    /// Full line hits / line accesses (0 when no access).
    pub fn hit_ratio(&self) -> f64 {
        ratio(self.line_hits(), self.line_accesses())
    }

    /// Read line hit ratio.
    pub fn read_hit_ratio(&self) -> f64 {
        ratio(self.read_line_hits, self.read_line_accesses())
    }

    /// Adds `o`'s counts to these.
    pub fn merge(&mut self, o: &PartitionStats) {
        self.read_line_hits += o.read_line_hits;
        self.read_line_partial_hits += o.read_line_partial_hits;
        self.read_line_misses += o.read_line_misses;
        self.write_line_hits += o.write_line_hits;
        self.write_line_misses += o.write_line_misses;
        self.promotions += o.promotions;
        self.evictions += o.evictions;
        self.dirty_evictions += o.dirty_evictions;
        self.cache_bytes_written += o.cache_bytes_written;
        self.written_back_bytes += o.written_back_bytes;
        self.demoted_in_bytes += o.demoted_in_bytes;
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}
