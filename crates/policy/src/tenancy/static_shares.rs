//! `static`: fixed partitions, equal or in given proportions (the "static shares" baseline).
//!
//! With `shares`, volume `i` gets `shares[i] / sum` of the cache from the first poll on. With
//! no shares, the cache is split equally among `volumes` volumes (ids 0 to `volumes - 1`), or,
//! when that is 0, among the volumes seen so far: then a volume seen for the first time is
//! taken in at the next interval boundary, and the split changes only then.

use super::{TenancyConfig, TenancyMode, VolumePlan};
use tiercache_core::{Nanos, VolumeId};

/// Fixed shares of the cache.
#[derive(Debug, Clone)]
pub struct StaticShares {
    interval_ns: Nanos,
    /// Weight per volume id (fixed, or 1 for each volume seen).
    weights: Vec<f64>,
    /// Whether the weights follow the volumes seen.
    learns: bool,
    /// The weights changed since the last decision.
    changed: bool,
}

impl StaticShares {
    /// The mode of `cfg` (validated).
    pub fn new(cfg: &TenancyConfig) -> Self {
        let (weights, learns) = if !cfg.shares.is_empty() {
            (cfg.shares.clone(), false)
        } else if cfg.volumes > 0 {
            (vec![1.0; cfg.volumes as usize], false)
        } else {
            (Vec::new(), true)
        };
        Self {
            interval_ns: cfg.interval_ns,
            weights,
            learns,
            changed: true,
        }
    }
}

impl TenancyMode for StaticShares {
    fn name(&self) -> &'static str {
        "static"
    }

    fn interval_ns(&self) -> Option<Nanos> {
        Some(self.interval_ns)
    }

    fn decides_at_start(&self) -> bool {
        !self.learns
    }

    fn observes(&self) -> bool {
        self.learns
    }

    fn observe(&mut self, volume: VolumeId, _first: u64, _lines: u64, _is_write: bool) {
        let v = volume.0 as usize;
        if self.weights.get(v).is_none_or(|&w| w == 0.0) {
            if self.weights.len() <= v {
                self.weights.resize(v + 1, 0.0);
            }
            self.weights[v] = 1.0;
            self.changed = true;
        }
    }

    fn plans_volume(&self, volume: VolumeId) -> bool {
        self.weights
            .get(volume.0 as usize)
            .is_some_and(|&w| w > 0.0)
    }

    fn decide(&mut self, capacity_lines: u64) -> Option<Vec<VolumePlan>> {
        if !std::mem::take(&mut self.changed) {
            return None;
        }
        let total: f64 = self.weights.iter().sum();
        if total <= 0.0 {
            return None;
        }
        Some(
            self.weights
                .iter()
                .enumerate()
                .filter(|(_, &w)| w > 0.0)
                .map(|(v, &w)| {
                    let lines = (capacity_lines as f64 * w / total).floor() as u64;
                    VolumePlan {
                        volume: VolumeId(v as u32),
                        demand_lines: lines,
                        allocation_lines: lines,
                        write_policy: None,
                    }
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_shares_split_the_cache_in_proportion_and_never_overcommit() {
        let cfg = TenancyConfig {
            shares: vec![1.0, 2.0, 0.0, 1.0],
            ..Default::default()
        };
        let mut m = StaticShares::new(&cfg);
        assert!(m.decides_at_start());
        let plan = m.decide(1001).unwrap();
        let lines: Vec<_> = plan
            .iter()
            .map(|p| (p.volume.0, p.allocation_lines))
            .collect();
        assert_eq!(lines, vec![(0, 250), (1, 500), (3, 250)]);
        assert!(m.decide(1001).is_none(), "nothing changes later");
    }

    #[test]
    fn without_shares_volumes_seen_get_equal_parts_from_the_next_boundary() {
        let mut m = StaticShares::new(&TenancyConfig::default());
        assert!(!m.decides_at_start());
        m.observe(VolumeId(0), 0, 1, false);
        m.observe(VolumeId(2), 0, 1, true);
        let plan = m.decide(100).unwrap();
        assert_eq!(plan.len(), 2);
        assert!(plan.iter().all(|p| p.allocation_lines == 50));
        m.observe(VolumeId(2), 5, 1, true);
        assert!(m.decide(100).is_none());
        m.observe(VolumeId(1), 5, 1, true);
        assert_eq!(m.decide(100).unwrap().len(), 3);
    }
}
