//! Multi-tenant sizing on a sharded cache (docs/design.md §4.10, "On shards"): shard 0 leads,
//! fed every request's lines by the shards, and decides for the whole cache as one unsharded
//! cache would on the same stream; each shard applies its split of the targets, which fills
//! each shard's lines exactly and keeps each volume within a line per shard of its target.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tiercache_core::{Op, Request, VolumeId};
use tiercache_policy::tenancy::TenancyModeKind;
use tiercache_policy::{
    Cache, CacheConfig, CleaningConfig, Decide, ExecutorState, PartitionConfig, Report,
    ShardLayout, ShardedCache, TenancyConfig,
};

const LINE: u64 = 4096;
const INTERVAL: u64 = 1_000_000;

fn config(mode: TenancyModeKind, shards: u32) -> CacheConfig {
    CacheConfig {
        capacity: 509 * LINE,
        line_size: LINE,
        cleaning: CleaningConfig::None,
        shards,
        tenancy: TenancyConfig {
            mode,
            interval_ns: INTERVAL,
            shares: vec![3.0, 1.0, 2.0],
            ..TenancyConfig::default()
        },
        ..CacheConfig::default()
    }
}

/// Three volumes: a re-read hot set of 200 lines, rewrites of 80 lines, and a scan in 64 KiB
/// reads; requests of 1–4 lines, some crossing chunks (and so shards).
fn requests(seed: u64, n: usize) -> Vec<Request> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut scan = 0u64;
    (0..n as u64)
        .map(|i| {
            let v = rng.gen_range(0..3u32);
            let (op, offset, len) = match v {
                0 => (
                    Op::Read,
                    rng.gen_range(0..200) * LINE,
                    LINE * rng.gen_range(1..=4),
                ),
                1 => (
                    Op::Write,
                    rng.gen_range(0..80) * LINE,
                    LINE * rng.gen_range(1..=2),
                ),
                _ => {
                    scan += 16 * LINE;
                    (Op::Read, scan % (1 << 30), 16 * LINE)
                }
            };
            Request {
                time_ns: i * 1_000,
                volume: VolumeId(v),
                op,
                offset,
                len,
            }
        })
        .collect()
}

fn at(now: u64) -> ExecutorState {
    ExecutorState {
        now,
        ..ExecutorState::default()
    }
}

/// Polls the tenancy of `c` at `now` and completes the flush jobs of its shrinks.
fn poll(c: &mut dyn tiercache_policy::PolicyCore, now: u64) {
    c.repartition(&at(now));
    let mut jobs = Vec::new();
    c.take_resize_jobs(&mut jobs);
    for j in jobs {
        c.flush_done(j);
    }
}

/// Each own partition's lines per volume, in one cache.
fn own(c: &Cache) -> Vec<(u32, u64)> {
    c.partition_stats()
        .iter()
        .filter_map(|p| p.volume.map(|v| (v.0, p.capacity_lines)))
        .collect()
}

#[test]
fn the_leader_decides_as_one_cache_and_every_shard_applies_its_split() {
    for mode in [
        TenancyModeKind::Eci,
        TenancyModeKind::Trd,
        TenancyModeKind::Static,
    ] {
        let mut sharded = ShardedCache::new(&config(mode, 4)).unwrap();
        let mut whole = Cache::new(&config(mode, 1)).unwrap();
        let n = sharded.shards().len();
        assert_eq!(n, 4);
        let layout = sharded.layout().clone();
        let mut decisions = 0;
        poll(&mut sharded, 0);
        poll(&mut whole, 0);
        for (i, r) in requests(mode as u64, 20_000).iter().enumerate() {
            sharded.access(r, None).unwrap();
            whole.access(r, None).unwrap();
            if i % 1000 != 999 {
                continue;
            }
            let now = r.time_ns;
            poll(&mut sharded, now);
            poll(&mut whole, now);
            sharded.audit();
            let Some(split) = sharded.shards()[0].tenancy_split().cloned() else {
                continue;
            };
            // The leader's targets are the unsharded cache's plan.
            let one = whole.tenancy_report().unwrap();
            let targets: Vec<(u32, u64, u64)> = split
                .plans
                .iter()
                .map(|p| (p.volume.0, p.demand_lines, p.allocation_lines))
                .collect();
            let want: Vec<(u32, u64, u64)> = one
                .volumes
                .iter()
                .map(|v| (v.volume, v.demand_lines, v.allocation_lines))
                .collect();
            assert_eq!(targets, want, "{mode:?} at {now}: leader vs one cache");
            // Every shard's partitions fill its lines exactly; each volume's shares add up to
            // its target less at most one line per shard.
            for (k, c) in sharded.shards().iter().enumerate() {
                let sum: u64 = c.partition_stats().iter().map(|p| p.capacity_lines).sum();
                assert_eq!(sum, u64::from(layout.lines(k)), "{mode:?}: shard {k}");
            }
            for p in &split.plans {
                let got: u64 = sharded
                    .shards()
                    .iter()
                    .flat_map(own)
                    .filter(|e| e.0 == p.volume.0)
                    .map(|e| e.1)
                    .sum();
                assert!(
                    got <= p.allocation_lines && p.allocation_lines - got < n as u64,
                    "{mode:?}: volume {} has {got} lines for a target of {}",
                    p.volume.0,
                    p.allocation_lines
                );
            }
            // The report is the whole cache's.
            let rep = sharded.tenancy_report().unwrap();
            assert_eq!(rep.capacity_lines, u64::from(layout.total_lines()));
            assert_eq!(rep.decisions, one.decisions);
            decisions = rep.decisions;
        }
        assert!(decisions >= 5, "{mode:?}: only {decisions} decisions");
        // A volume the mode runs read-only runs so in every shard.
        for v in 0..3 {
            let wp = sharded.shards()[0].write_policy(VolumeId(v));
            assert!(sharded
                .shards()
                .iter()
                .all(|c| c.write_policy(VolumeId(v)) == wp));
        }
    }
}

/// Static partitions load on shards, split by the shards' lines: each shard's share sums to
/// the configured size within a line per shard, and never past a shard's lines.
#[test]
fn static_partitions_load_on_shards_split_by_their_lines() {
    let cfg = CacheConfig {
        partitions: vec![
            PartitionConfig {
                volume: 1,
                bytes: 301 * LINE,
            },
            PartitionConfig {
                volume: 2,
                bytes: 3 * LINE,
            },
        ],
        ..config(TenancyModeKind::Shared, 8)
    };
    let c = ShardedCache::new(&cfg).unwrap();
    let layout = ShardLayout::new(&cfg).unwrap();
    for (v, want) in [(1u32, 301u64), (2, 3)] {
        let got: u64 = c
            .shards()
            .iter()
            .flat_map(own)
            .filter(|e| e.0 == v)
            .map(|e| e.1)
            .sum();
        assert!(got <= want && want - got < 8, "volume {v}: {got} of {want}");
    }
    for (k, s) in c.shards().iter().enumerate() {
        let sum: u64 = s.partition_stats().iter().map(|p| p.capacity_lines).sum();
        assert_eq!(sum, u64::from(layout.lines(k)));
    }
    // Sizes are checked for the whole cache, not for a shard's split.
    let too_big = CacheConfig {
        partitions: vec![PartitionConfig {
            volume: 1,
            bytes: 600 * LINE,
        }],
        ..cfg
    };
    let e = ShardedCache::new(&too_big).unwrap_err().to_string();
    assert!(e.contains("cache.partitions") && e.contains("600"), "{e}");
}
