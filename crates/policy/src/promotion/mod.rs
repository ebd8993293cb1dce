//! Promotion (admission) policies, docs/design.md §4.3: one trait, one file per policy.

mod nhit;
mod smq;

pub use nhit::NHit;
pub use smq::Smq;

use crate::config::PromotionConfig;
use tiercache_core::LineKey;

/// Decides whether missed data enters the cache.
pub trait Promotion: Send {
    /// Name as written in configs.
    fn name(&self) -> &'static str;
    /// A read missed `key`; answer whether to promote it. `occupancy` is resident / capacity
    /// lines of the partition (0.0..=1.0).
    fn should_promote(&mut self, key: LineKey, occupancy: f64) -> bool;
    /// A resident line was accessed (policies that learn from hits).
    fn on_hit(&mut self, _key: LineKey) {}
    /// Whether [`Promotion::on_hit`] does anything (lets the core skip the call on the hit path).
    fn learns_from_hits(&self) -> bool {
        false
    }
    /// Heap bytes used.
    fn memory_bytes(&self) -> usize {
        0
    }
}

/// Promotes on every miss.
#[derive(Debug, Default)]
pub struct Always;

impl Promotion for Always {
    fn name(&self) -> &'static str {
        "always"
    }
    fn should_promote(&mut self, _key: LineKey, _occupancy: f64) -> bool {
        true
    }
}

/// Never promotes.
#[derive(Debug, Default)]
pub struct Never;

impl Promotion for Never {
    fn name(&self) -> &'static str {
        "never"
    }
    fn should_promote(&mut self, _key: LineKey, _occupancy: f64) -> bool {
        false
    }
}

/// Builds the configured policy for a cache of `lines` lines.
pub fn build(cfg: &PromotionConfig, lines: u64) -> Box<dyn Promotion> {
    match *cfg {
        PromotionConfig::Always => Box::new(Always),
        PromotionConfig::Never => Box::new(Never),
        PromotionConfig::Nhit {
            n,
            table_ratio,
            occupancy_threshold,
        } => {
            let entries = ((lines as f64 * table_ratio).ceil() as usize).max(16);
            Box::new(NHit::new(n, entries, occupancy_threshold))
        }
        PromotionConfig::Smq { hotspot_lines } => Box::new(Smq::new(lines, hotspot_lines)),
    }
}
