//! Multi-tenant sizing on a sharded cache (docs/design.md §4.10, "On shards"): shard 0 leads.
//!
//! The shards share one tenancy mode, held by the leader: every shard feeds the pieces it
//! plans to it, so it sees each request's lines in address order, as an unsharded cache's mode
//! sees the whole request (a request's pieces are cut at line boundaries and planned in
//! order). What it observes is a function of the request stream alone, the same in both
//! executors. At an interval end the leader decides per-volume targets for the whole cache
//! and splits them over the shards by [`split_lines`]; each shard applies its share, as the
//! balancer's followers apply the leader's decision ([`crate::Background::follow_balancing`]).
//! Static partitions (`cache.partitions`) and fixed sizes (`tenancy.fixed`) are split by the
//! same rule when the shards are built ([`super::ShardLayout::shard_config`]).

use super::ShardLayout;
use crate::cache::Cache;
use crate::config::CacheConfig;
use crate::tenancy::{TenancyMode, TenancyReport, VolumePlan};
use std::sync::{Arc, Mutex};
use tiercache_core::VolumeId;

/// Splits whole-cache line counts `targets` over shards with `room[k]` lines each:
/// `out[k][i]` lines of target `i` go to shard `k`.
///
/// The rule (docs/design.md §4.10): target `t` first gives shard `k` `floor(t · room[k] / R)`
/// lines (`R` the sum of `room`); then, target by target in order, each of its remaining lines
/// goes to a different shard, by largest remainder of that division (ties to the lower shard),
/// skipping shards with no line left. So a shard's shares never sum past its room (when the
/// targets sum to at most `R`; the rest of its lines stay in its shared partition), and a
/// target's shares sum to the target less at most one line per shard but one (the
/// remainders of `n` shards sum to less than `n` lines).
pub fn split_lines(targets: &[u64], room: &[u64]) -> Vec<Vec<u64>> {
    let n = room.len();
    let total: u128 = room.iter().map(|&r| u128::from(r)).sum();
    let mut out = vec![vec![0u64; targets.len()]; n];
    if total == 0 {
        return out;
    }
    let mut free: Vec<u64> = room.to_vec();
    let mut remainders: Vec<Vec<u128>> = vec![Vec::new(); targets.len()];
    for (i, &t) in targets.iter().enumerate() {
        remainders[i] = room
            .iter()
            .enumerate()
            .map(|(k, &r)| {
                let x = u128::from(t) * u128::from(r);
                let share = ((x / total) as u64).min(free[k]);
                out[k][i] = share;
                free[k] -= share;
                x % total
            })
            .collect();
    }
    let mut order: Vec<usize> = (0..n).collect();
    for (i, &t) in targets.iter().enumerate() {
        let mut left = t.saturating_sub((0..n).map(|k| out[k][i]).sum::<u64>());
        // Largest remainder first; the sort is stable, so ties keep the lower shard first.
        order.sort_by(|&a, &b| remainders[i][b].cmp(&remainders[i][a]));
        for &k in &order {
            if left == 0 {
                break;
            }
            if free[k] > 0 {
                out[k][i] += 1;
                free[k] -= 1;
                left -= 1;
            }
        }
    }
    out
}

/// What the leader needs of one shard to split a decision: its lines and its volumes' own
/// partitions (volume, lines).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardShare {
    /// Lines of the shard.
    pub lines: u64,
    /// Its volumes' own partitions: (volume, capacity in lines).
    pub partitions: Vec<(VolumeId, u64)>,
}

/// A leader's decision for the whole cache, split over the shards.
#[derive(Debug, Clone, PartialEq)]
pub struct TenancySplit {
    /// Decisions the leader made so far, this one included (followers apply each once).
    pub seq: u64,
    /// The plan of every volume for the whole cache (fixed sizes applied).
    pub plans: Vec<VolumePlan>,
    /// `shares[k][i]`: lines of `plans[i]`'s volume in shard `k`.
    pub shares: Vec<Vec<u64>>,
}

impl TenancySplit {
    /// The plans of shard `k`: the whole cache's, with the shard's lines.
    pub fn shard_plans(&self, k: usize) -> Vec<VolumePlan> {
        self.plans
            .iter()
            .zip(&self.shares[k])
            .map(|(p, &lines)| VolumePlan {
                allocation_lines: lines,
                ..*p
            })
            .collect()
    }
}

/// Makes shard 0 of `caches` (the shards of `cfg` as `layout` lays them out) the leader of
/// their tenancy: one mode, for the whole cache's lines, which every shard feeds. A no-op for
/// one shard or a mode that does not partition the cache (each shard keeps its `shared`).
pub fn link_tenancy(caches: &mut [Cache], layout: &ShardLayout, cfg: &CacheConfig) {
    if caches.len() < 2 || !cfg.tenancy.partitions() {
        return;
    }
    let lines = u64::from(layout.total_lines());
    let mode: Box<dyn TenancyMode> = crate::tenancy::build(
        &cfg.tenancy,
        lines.saturating_sub(cfg.tenancy.fixed_lines(cfg.line_size)),
    );
    let shared = Arc::new(Mutex::new(mode));
    for (k, c) in caches.iter_mut().enumerate() {
        c.join_tenancy(shared.clone(), k, &cfg.tenancy.fixed);
    }
}

/// The report of a sharded cache's tenancy: the leader's (mode, decisions, demands), with
/// every shard's lines, allocations, use and interval counts added up. `None` before the
/// leader's first decision.
pub fn merge_reports(
    mut reports: impl Iterator<Item = Option<TenancyReport>>,
) -> Option<TenancyReport> {
    let mut out = reports.next()??;
    for r in reports.flatten() {
        out.capacity_lines += r.capacity_lines;
        out.allocated_lines += r.allocated_lines;
        out.refused_decisions = out.refused_decisions.max(r.refused_decisions);
        if out.last_refusal.is_none() {
            out.last_refusal = r.last_refusal;
        }
        for v in r.volumes {
            if let Some(o) = out.volumes.iter_mut().find(|o| o.volume == v.volume) {
                o.allocation_lines += v.allocation_lines;
                o.used_lines += v.used_lines;
                o.interval_hits += v.interval_hits;
                o.interval_misses += v.interval_misses;
                o.interval_cache_bytes_written += v.interval_cache_bytes_written;
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_split_follows_the_room_and_gives_remainders_by_size() {
        // 10 lines over rooms 3:1: 7.5 and 2.5, the half line to the lower shard.
        assert_eq!(split_lines(&[10], &[30, 10]), vec![vec![8], vec![2]]);
        // Everything allocated: every shard's room is used exactly.
        let s = split_lines(&[5, 5, 6], &[8, 8]);
        assert_eq!(
            s.iter().map(|v| v.iter().sum::<u64>()).collect::<Vec<_>>(),
            [8, 8]
        );
        assert_eq!(split_lines(&[3], &[0, 0]), vec![vec![0], vec![0]]);
    }

    proptest! {
        /// Shards' shares never pass their room; each target's shares sum to the target less
        /// at most one line per shard (exactly when the room allows), never more.
        #[test]
        fn shares_fit_every_shard_and_track_the_targets(
            room in prop::collection::vec(0u64..5000, 1..17),
            weights in prop::collection::vec(0u64..1000, 0..12),
            fill in 0.0f64..=1.0,
        ) {
            let total: u64 = room.iter().sum();
            let wsum: u64 = weights.iter().sum::<u64>().max(1);
            let budget = (total as f64 * fill) as u64;
            let targets: Vec<u64> = weights.iter().map(|w| budget * w / wsum).collect();
            let s = split_lines(&targets, &room);
            prop_assert_eq!(s.len(), room.len());
            for (k, shares) in s.iter().enumerate() {
                prop_assert!(shares.iter().sum::<u64>() <= room[k]);
            }
            let n = room.len() as u64;
            for (i, &t) in targets.iter().enumerate() {
                let got: u64 = s.iter().map(|v| v[i]).sum();
                prop_assert!(got <= t && t - got < n.max(1), "target {} got {}", t, got);
            }
        }
    }
}
