//! `trd`: the Centaur-like baseline (SPEC §4.10). Each interval, every volume's demand is its
//! largest traditional reuse distance + 1 (every reuse, writes included), or the knee of its
//! plain LRU hit curve; demands beyond the cache are cut by marginal gain along those curves.
//! Write policies are left as configured: a volume whose reuse is rewrites gets lines that
//! earn no read hit.

use super::analysis::{size_by_reuse, Analyses, Reuses};
use super::{Sizing, TenancyConfig, TenancyMode, VolumePlan};
use tiercache_core::{Nanos, VolumeId};

/// Sizing from traditional reuse distances.
#[derive(Debug, Clone)]
pub struct Trd {
    interval_ns: Nanos,
    sizing: Sizing,
    knee_share: f64,
    analyses: Analyses,
}

impl Trd {
    /// The mode of `cfg` (validated) for a cache of `capacity_lines` lines.
    pub fn new(cfg: &TenancyConfig, capacity_lines: u64) -> Self {
        Self {
            interval_ns: cfg.interval_ns,
            sizing: cfg.sizing,
            knee_share: cfg.knee_share,
            analyses: Analyses::new(capacity_lines, cfg.sample_rate, cfg.history),
        }
    }
}

impl TenancyMode for Trd {
    fn name(&self) -> &'static str {
        "trd"
    }

    fn interval_ns(&self) -> Option<Nanos> {
        Some(self.interval_ns)
    }

    fn observes(&self) -> bool {
        true
    }

    #[inline]
    fn observe(&mut self, volume: VolumeId, first: u64, lines: u64, is_write: bool) {
        self.analyses.observe(volume, first, lines, is_write);
    }

    fn decide(&mut self, capacity_lines: u64) -> Option<Vec<VolumePlan>> {
        let iv = self.analyses.take_interval();
        let sized = size_by_reuse(
            &iv,
            capacity_lines,
            self.analyses.granule(),
            Reuses::All,
            self.sizing,
            self.knee_share,
        );
        Some(
            iv.iter()
                .zip(sized)
                .map(|((v, _), (demand, alloc))| VolumePlan {
                    volume: *v,
                    demand_lines: demand,
                    allocation_lines: alloc,
                    write_policy: None,
                })
                .collect(),
        )
    }
}
