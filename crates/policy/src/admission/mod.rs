//! Admission policies, docs/design.md §4.3: one trait, one file per policy.
//!
//! Admission is the last word on whether a missed line enters the cache at all. It is asked
//! whenever a miss would take a line (a read miss the promotion policy chose to promote, and a
//! write miss under a write-allocating policy), after the eviction policy has named the
//! victim, so it can weigh the candidate against the line it would displace; a rejected
//! line is served around the cache (a read from the backend, a write to the backend) and
//! counted as a bypass for reason `admission`, and the victim stays. Promotion
//! (`crate::promotion`) decides earlier and more narrowly: whether a read miss is worth
//! fetching into the cache, from the candidate's own history.

mod bloom;
mod probabilistic;
mod tinylfu;

pub use bloom::BloomSecondHit;
pub use probabilistic::Probabilistic;
pub use tinylfu::TinyLfu;

use crate::config::AdmissionConfig;
use tiercache_core::LineKey;

/// Decides whether a missed line may take a line of the cache.
pub trait Admission: Send {
    /// Name as written in configs.
    fn name(&self) -> &'static str;
    /// A miss on `key` would take a line: the free one (`victim` is `None`) or `victim`'s,
    /// the resident line the eviction policy chose. True admits `key`.
    fn admit(&mut self, key: LineKey, victim: Option<LineKey>) -> bool;
    /// A line was accessed by a read or write (hit or miss; before [`Admission::admit`] for
    /// that access), for policies that learn frequencies.
    fn on_access(&mut self, _key: LineKey) {}
    /// Whether [`Admission::on_access`] does anything (lets the core skip the call).
    fn learns_from_accesses(&self) -> bool {
        false
    }
    /// Heap bytes used.
    fn memory_bytes(&self) -> usize {
        0
    }
}

/// Admits every line (no admission filter): the default.
#[derive(Debug, Default)]
pub struct AdmitAll;

impl Admission for AdmitAll {
    fn name(&self) -> &'static str {
        "all"
    }
    fn admit(&mut self, _key: LineKey, _victim: Option<LineKey>) -> bool {
        true
    }
}

/// Builds the configured policy for a cache (or one shard or partition set of it) of
/// `lines` lines.
pub fn build(cfg: &AdmissionConfig, lines: u64) -> Box<dyn Admission> {
    match *cfg {
        AdmissionConfig::All => Box::new(AdmitAll),
        AdmissionConfig::Probabilistic { probability, seed } => {
            Box::new(Probabilistic::new(probability, seed))
        }
        AdmissionConfig::Tinylfu { sketch_ratio } => Box::new(TinyLfu::new(
            ((lines as f64 * sketch_ratio).ceil() as usize).max(16),
        )),
        AdmissionConfig::Bloom {
            window_ratio,
            bits_per_key,
        } => Box::new(BloomSecondHit::new(
            ((lines as f64 * window_ratio).ceil() as usize).max(16),
            bits_per_key,
        )),
    }
}
