//! `trd`: the Centaur-like baseline (docs/design.md §4.10). Each interval, every volume's demand is
//! its largest traditional reuse distance + 1 (every reuse, writes included), or the knee of its
//! plain LRU hit curve; demands beyond the cache are cut by marginal gain along those curves.
//! Write policies are left as configured: a volume whose reuse is rewrites gets lines that
//! earn no read hit.

use super::analysis::{ReuseSizer, Reuses};
use super::{TenancyConfig, TenancyMode, VolumePlan};
use tiercache_core::{Nanos, VolumeId};

/// Sizing from traditional reuse distances.
#[derive(Debug, Clone)]
pub struct Trd {
    sizer: ReuseSizer,
}

impl Trd {
    /// The mode of `cfg` (validated) for a cache of `capacity_lines` lines.
    pub fn new(cfg: &TenancyConfig, capacity_lines: u64) -> Self {
        Self {
            sizer: ReuseSizer::new(cfg, capacity_lines, Reuses::All),
        }
    }
}

impl TenancyMode for Trd {
    fn name(&self) -> &'static str {
        "trd"
    }

    fn interval_ns(&self) -> Option<Nanos> {
        Some(self.sizer.interval_ns)
    }

    fn observes(&self) -> bool {
        true
    }

    #[inline]
    fn observe(&mut self, volume: VolumeId, first: u64, lines: u64, is_write: bool) {
        self.sizer.observe(volume, first, lines, is_write);
    }

    fn plans_volume(&self, volume: VolumeId) -> bool {
        self.sizer.has_seen(volume)
    }

    fn decide(&mut self, capacity_lines: u64) -> Option<Vec<VolumePlan>> {
        Some(
            self.sizer
                .size(capacity_lines)
                .into_iter()
                .map(|((volume, _), (demand, alloc))| VolumePlan {
                    volume,
                    demand_lines: demand,
                    allocation_lines: alloc,
                    write_policy: None,
                })
                .collect(),
        )
    }
}
