//! A partitioning tenancy mode on a sharded engine (docs/design.md §4.10, "On shards"): the
//! config loads, shard 0's decisions give every shard its share of each volume's target, the
//! layout is journaled per shard, and a warm restart restores every shard's partitions with
//! each volume's lines and data.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::Arc;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_engine::device::VolumeSet;
use tiercache_engine::{Engine, EngineConfig};
use tiercache_policy::{CacheConfig, CleaningConfig, TenancyConfig, TenancyModeKind};

const LINE: u64 = 4096;
const VOLUME: usize = 2 << 20;
const HOUR: u64 = 3_600_000_000_000;

fn config(mode: TenancyModeKind) -> CacheConfig {
    CacheConfig {
        capacity: 203 * LINE,
        line_size: LINE,
        // No background cleaning: dirty lines leave only through shrinks and evictions.
        cleaning: CleaningConfig::None,
        shards: 4,
        tenancy: TenancyConfig {
            mode,
            // Never reached by the engine's own clock: decisions come from `repartition_at`.
            interval_ns: HOUR,
            ..TenancyConfig::default()
        },
        ..CacheConfig::default()
    }
}

fn open(cfg: &CacheConfig, cache: &Arc<MemDevice>, backends: &[Arc<MemDevice>]) -> Engine {
    let set = VolumeSet::new(
        backends
            .iter()
            .enumerate()
            .map(|(v, b)| (v as u32, b.clone() as Arc<dyn BlockDevice>))
            .collect(),
    )
    .unwrap();
    let extents = set.extents();
    Engine::with_volume_devices(
        cfg,
        &EngineConfig::default(),
        cache.clone(),
        Arc::new(set),
        extents,
    )
    .unwrap()
}

#[test]
fn sharded_partition_modes_load_and_a_restart_restores_every_shards_partitions() {
    for mode in [TenancyModeKind::Eci, TenancyModeKind::Trd] {
        let cfg = config(mode);
        let cache = Arc::new(MemDevice::new(4 << 20));
        let backends: Vec<Arc<MemDevice>> =
            (0..3).map(|_| Arc::new(MemDevice::new(VOLUME))).collect();
        let mut model: Vec<Vec<u8>> = vec![vec![0u8; VOLUME]; 3];
        let engine = open(&cfg, &cache, &backends);
        engine.repartition_at(0);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(mode as u64);
        for round in 1..=4u64 {
            for _ in 0..1500 {
                // Volume 0 re-reads 120 lines, volume 1 rewrites 40, volume 2 writes widely.
                let v = rng.gen_range(0..3usize);
                let span = [120, 40, 500][v];
                let off = rng.gen_range(0..span) * LINE;
                let len = LINE * rng.gen_range(1..=3u64);
                if v != 0 && rng.gen_bool(0.6) {
                    let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                    engine.write_volume(v as u32, &data, off, false).unwrap();
                    model[v][off as usize..(off + len) as usize].copy_from_slice(&data);
                } else {
                    let mut got = vec![0u8; len as usize];
                    engine.read_volume(v as u32, &mut got, off).unwrap();
                    assert!(got == model[v][off as usize..(off + len) as usize]);
                }
            }
            engine.repartition_at(round * HOUR + HOUR / 2);
        }
        // Volume 0 only re-reads, so `eci` keeps it write-back: leave dirty lines of it for
        // the restart to recover.
        let data = vec![0xa5u8; 8 * LINE as usize];
        engine.write_volume(0, &data, 4 * LINE, false).unwrap();
        model[0][4 * LINE as usize..12 * LINE as usize].copy_from_slice(&data);
        let report = engine.tenancy_report().unwrap();
        assert_eq!(report.decisions, 4, "{mode:?}");
        assert_eq!(report.capacity_lines, 203);
        let layout = engine.partition_layout();
        for v in 0..3u32 {
            let target = report
                .volumes
                .iter()
                .find(|r| r.volume == v)
                .map_or(0, |r| r.allocation_lines);
            let shards: Vec<u16> = layout
                .iter()
                .filter(|e| e.volume == v)
                .map(|e| e.shard)
                .collect();
            assert_eq!(shards, [0, 1, 2, 3], "{mode:?}: volume {v} in every shard");
            let got: u64 = layout
                .iter()
                .filter(|e| e.volume == v)
                .map(|e| u64::from(e.lines))
                .sum();
            assert_eq!(
                got, target,
                "{mode:?}: volume {v}'s shards add up to its allocation"
            );
        }
        let resident: Vec<Option<u64>> = engine
            .volume_stats()
            .iter()
            .map(|s| s.resident_lines)
            .collect();
        let policies = in_force(&engine);
        let dirty = engine.stats().dirty_lines;
        assert!(dirty > 0, "{mode:?}: leave dirty lines for the restart");
        engine.audit();
        // A warm restart: every shard's partitions as journaled, each volume's lines in them.
        let engine = restart(engine, &cfg, &cache, &backends);
        assert_eq!(engine.partition_layout(), layout, "{mode:?}");
        let after: Vec<Option<u64>> = engine
            .volume_stats()
            .iter()
            .map(|s| s.resident_lines)
            .collect();
        assert_eq!(after, resident, "{mode:?}");
        assert_eq!(engine.stats().dirty_lines, dirty, "{mode:?}");
        // The write policies the mode gave the volumes are journaled with the partitions.
        assert_eq!(in_force(&engine), policies, "{mode:?}");
        engine.audit();
        for (v, want) in model.iter().enumerate() {
            let mut got = vec![0u8; VOLUME];
            for at in (0..VOLUME).step_by(64 << 10) {
                engine
                    .read_volume(v as u32, &mut got[at..at + (64 << 10)], at as u64)
                    .unwrap();
            }
            assert!(
                got == *want,
                "{mode:?}: volume {v} differs after the restart"
            );
        }
        engine.shutdown().unwrap();
    }
}

/// A shared cache of three volumes (no partitions) on a fresh cache device.
fn shared_cache() -> (CacheConfig, Arc<MemDevice>, Vec<Arc<MemDevice>>) {
    let backends = (0..3).map(|_| Arc::new(MemDevice::new(VOLUME))).collect();
    (
        config(TenancyModeKind::Shared),
        Arc::new(MemDevice::new(4 << 20)),
        backends,
    )
}

/// Shuts `engine` down cleanly and opens it again on the same devices.
fn restart(
    engine: Engine,
    cfg: &CacheConfig,
    cache: &Arc<MemDevice>,
    backends: &[Arc<MemDevice>],
) -> Engine {
    engine.shutdown().unwrap();
    drop(engine);
    open(cfg, cache, backends)
}

/// The write policy in force for each of the three volumes.
fn in_force(e: &Engine) -> Vec<tiercache_policy::WritePolicy> {
    (0..3).map(|v| e.write_policy_in_force(v)).collect()
}

/// A write policy set live on one volume (an operator's `tiercache set
/// exports.NAME.write_policy`) is journaled with the partitions: a restart keeps it, and the
/// other volumes keep the cache's.
#[test]
fn a_write_policy_set_live_survives_a_restart() {
    use tiercache_policy::WritePolicy;
    let (cfg, cache, backends) = shared_cache();
    let engine = open(&cfg, &cache, &backends);
    engine
        .set_volume_write_policy(1, WritePolicy::ReadOnly)
        .unwrap();
    engine
        .set_volume_write_policy(2, WritePolicy::WriteThrough)
        .unwrap();
    let engine = restart(engine, &cfg, &cache, &backends);
    assert_eq!(
        in_force(&engine),
        [
            WritePolicy::WriteBack,
            WritePolicy::ReadOnly,
            WritePolicy::WriteThrough
        ]
    );
    engine.shutdown().unwrap();
}

/// A detach's write-through (every volume, for the rest of the run) is not journaled: the
/// restart runs the volumes' policies of before it. A cache-wide write policy set live clears
/// the volumes' own, and the journal follows: the restart does not bring them back.
#[test]
fn a_detachs_write_through_is_not_journaled_and_a_cache_wide_policy_clears_the_journaled_ones() {
    use tiercache_policy::WritePolicy;
    let (cfg, cache, backends) = shared_cache();
    let engine = open(&cfg, &cache, &backends);
    engine
        .set_volume_write_policy(1, WritePolicy::ReadOnly)
        .unwrap();
    engine.write_through_until_restart(&[0, 1, 2]).unwrap();
    assert_eq!(in_force(&engine), [WritePolicy::WriteThrough; 3]);
    let engine = restart(engine, &cfg, &cache, &backends);
    assert_eq!(
        in_force(&engine),
        [
            WritePolicy::WriteBack,
            WritePolicy::ReadOnly,
            WritePolicy::WriteBack
        ],
        "the policies of before the detach"
    );
    let mut whole = engine.policies();
    whole.write_policy = WritePolicy::WriteThrough;
    engine.set_policies(&whole).unwrap();
    assert_eq!(in_force(&engine), [WritePolicy::WriteThrough; 3]);
    let engine = restart(engine, &cfg, &cache, &backends);
    assert_eq!(
        in_force(&engine),
        [WritePolicy::WriteBack; 3],
        "the configured policy, and no volume's own brought back"
    );
    engine.shutdown().unwrap();
}

/// An operator's sizes set live on a 4-shard cache (`set_volume_partitions`) are split over
/// the shards by `split_lines`, the rule the tenancy leader and static partitions use: each
/// shard gets exactly its share, first on a fresh layout and again on a resize. (The sizes
/// are ones the engine's former rule of its own split differently: 60 lines over shards of
/// 51, 51, 51 and 50 lines were 16, 15, 15 and 14 under it, 15 each under `split_lines`.)
#[test]
fn live_partition_sizes_are_split_over_the_shards_as_the_leader_splits_them() {
    use tiercache_policy::shards::split_lines;
    use tiercache_policy::ShardLayout;
    let (cfg, cache, backends) = shared_cache();
    let layout = ShardLayout::new(&cfg).unwrap();
    let room: Vec<u64> = (0..layout.shards())
        .map(|k| u64::from(layout.lines(k)))
        .collect();
    assert_eq!(room.len(), 4);
    let engine = open(&cfg, &cache, &backends);
    for sizes in [[60u64, 100, 40], [37, 101, 13]] {
        let set: Vec<(u32, u64)> = sizes
            .iter()
            .enumerate()
            .map(|(v, &l)| (v as u32, l))
            .collect();
        engine.set_volume_partitions(&set).unwrap();
        let want = split_lines(&sizes, &room);
        let got = engine.partition_layout();
        for (k, shard) in want.iter().enumerate() {
            for (v, &lines) in shard.iter().enumerate() {
                let have = got
                    .iter()
                    .find(|e| usize::from(e.shard) == k && e.volume == v as u32)
                    .map_or(0, |e| u64::from(e.lines));
                assert_eq!(have, lines, "{sizes:?}: volume {v} in shard {k}");
            }
        }
        for (v, &target) in sizes.iter().enumerate() {
            let sum: u64 = want.iter().map(|shard| shard[v]).sum();
            assert_eq!(sum, target, "{sizes:?}: volume {v}'s shares add up");
        }
        engine.audit();
    }
    // The layout set live is journaled: a restart gives the same.
    let before = engine.partition_layout();
    let engine = restart(engine, &cfg, &cache, &backends);
    assert_eq!(engine.partition_layout(), before);
    engine.shutdown().unwrap();
}
