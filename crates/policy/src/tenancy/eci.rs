//! `eci`: ECI-Cache (docs/design.md §4.10). Each interval, every volume's demand is its largest
//! useful reuse distance + 1 (reads after reads or writes: the only reuses a cache turns into
//! hits), or the knee of its URD hit curve; demands beyond the cache are cut by marginal gain along
//! the URD curves. A volume whose reuses are mostly write-after-read or write-after-write
//! (share above `waw_war_threshold`) runs read-only: caching its writes costs device time and
//! wear and earns no later hit. Others run write-back.

use super::analysis::{ReuseSizer, Reuses};
use super::{TenancyConfig, TenancyMode, VolumePlan};
use crate::config::WritePolicy;
use tiercache_core::{Nanos, VolumeId};

/// ECI-Cache sizing and write policies.
#[derive(Debug, Clone)]
pub struct Eci {
    sizer: ReuseSizer,
    threshold: f64,
    /// Write policy each volume was given last (index = volume id): kept while a volume
    /// shows no reuse at all (no evidence either way).
    last_policy: Vec<WritePolicy>,
}

impl Eci {
    /// The mode of `cfg` (validated) for a cache of `capacity_lines` lines.
    pub fn new(cfg: &TenancyConfig, capacity_lines: u64) -> Self {
        Self {
            sizer: ReuseSizer::new(cfg, capacity_lines, Reuses::Useful),
            threshold: cfg.waw_war_threshold,
            last_policy: Vec::new(),
        }
    }
}

impl TenancyMode for Eci {
    fn name(&self) -> &'static str {
        "eci"
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
        let sized = self.sizer.size(capacity_lines);
        let mut plans = Vec::with_capacity(sized.len());
        for ((v, a), (demand, alloc)) in sized {
            let i = v.0 as usize;
            if self.last_policy.len() <= i {
                self.last_policy.resize(i + 1, WritePolicy::WriteBack);
            }
            if a.types.iter().sum::<f64>() > 0.0 {
                self.last_policy[i] = if a.write_reuse_share() > self.threshold {
                    WritePolicy::ReadOnly
                } else {
                    WritePolicy::WriteBack
                };
            }
            plans.push(VolumePlan {
                volume: v,
                demand_lines: demand,
                allocation_lines: alloc,
                write_policy: Some(self.last_policy[i]),
            });
        }
        Some(plans)
    }
}
