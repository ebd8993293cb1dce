//! Counters that must add up: per-volume line accesses sum to the cache's, a request cut
//! into shard pieces is one request of its volume, and a request over no line is no hit.

use tiercache_core::{Request, VolumeId};
use tiercache_policy::{
    Cache, CacheConfig, CleaningConfig, Decide, PromotionConfig, Report, ShardedCache, WritePolicy,
};

fn config(shards: u32, promotion: PromotionConfig) -> CacheConfig {
    CacheConfig {
        capacity: 64 * 4096,
        line_size: 4096,
        promotion,
        write_policy: WritePolicy::WriteBack,
        cleaning: CleaningConfig::None,
        shards,
        ..CacheConfig::default()
    }
}

fn on(volume: u32, r: Request) -> Request {
    Request {
        volume: VolumeId(volume),
        ..r
    }
}

#[test]
fn per_volume_line_accesses_sum_to_the_caches_and_bypasses_are_misses() {
    let nhit = PromotionConfig::Nhit {
        n: 2,
        table_ratio: 1.0,
        occupancy_threshold: 0.0,
    };
    let mut c = Cache::new(&config(1, nhit)).unwrap();
    // Volume 0: a bypassed miss (not hot yet), a promoted miss, a hit: 1 hit in 3.
    for _ in 0..3 {
        c.access(&on(0, Request::read(0, 4096)), None).unwrap();
    }
    // Volume 1: a mix over several lines, with write-around bypasses.
    c.set_write_policy(Some(VolumeId(1)), WritePolicy::WriteAround);
    for i in 0..50u64 {
        let off = (i * 5 % 23) * 4096;
        c.access(&on(1, Request::read(off, 3 * 4096)), None)
            .unwrap();
        c.access(&on(1, Request::write(off + 1024, 4096)), None)
            .unwrap();
    }
    let v = c.volume_stats();
    assert_eq!(v[0].line_bypasses, 1);
    assert_eq!(v[0].line_accesses(), 3);
    assert_eq!(
        v[0].line_hits as f64 / v[0].line_accesses() as f64,
        1.0 / 3.0
    );
    assert!(v[1].line_bypasses > 0);
    assert_eq!(
        v.iter().map(|s| s.line_accesses()).sum::<u64>(),
        c.stats().line_accesses
    );
    assert!(v.iter().all(|s| s.line_bypasses <= s.line_misses));
}

#[test]
fn a_request_across_shards_is_one_request_of_its_volume() {
    for shards in [1, 2, 4] {
        let mut c = ShardedCache::new(&config(shards, PromotionConfig::Always)).unwrap();
        for i in 0..40u64 {
            let vol = (i % 2) as u32;
            // Eight lines: across every shard.
            c.access(&on(vol, Request::read(i * 4096, 8 * 4096)), None)
                .unwrap();
            c.access(&on(vol, Request::write(i * 2048, 5 * 4096)), None)
                .unwrap();
        }
        let v = Report::volume_stats(&c);
        let s = c.stats_snapshot();
        assert_eq!(
            v.iter().map(|s| s.read_requests).sum::<u64>(),
            s.read_requests,
            "{shards} shards"
        );
        assert_eq!(
            v.iter().map(|s| s.write_requests).sum::<u64>(),
            s.write_requests,
            "{shards} shards"
        );
        assert_eq!(s.read_requests, 40);
        assert_eq!(
            v.iter().map(|s| s.line_accesses()).sum::<u64>(),
            s.line_accesses
        );
    }
}

#[test]
fn a_request_over_no_line_is_no_hit() {
    for shards in [1, 2] {
        let mut c = ShardedCache::new(&config(shards, PromotionConfig::Always)).unwrap();
        for r in [Request::read(4096, 0), Request::write(4096, 0)] {
            let out = c.access(&r, None).unwrap();
            assert!(!out.full_hit, "{r:?}");
        }
        let s = c.stats_snapshot();
        assert_eq!(s.requests, 2);
        assert_eq!(
            (
                s.read_hit_requests,
                s.write_hit_requests,
                s.full_hit_requests
            ),
            (0, 0, 0),
            "{shards} shards"
        );
    }
    let mut c = Cache::new(&config(1, PromotionConfig::Always)).unwrap();
    let mut plan = tiercache_core::Plan::new();
    let out = c.access(&Request::read(0, 0), Some(&mut plan)).unwrap();
    assert!(!out.full_hit);
    assert_eq!(c.stats().read_hit_requests, 0);
}

/// Durations beyond a year are refused, each naming its field; the policies' own arithmetic
/// saturates (a policy built directly, without the config checks, never panics or wraps).
#[test]
fn durations_are_bounded_and_never_overflow() {
    use tiercache_policy::cleaning::{Aggressive, CleaningPolicy, DirtyState, Lazy};
    use tiercache_policy::{BalancingConfig, ExecutorState, PolicyError, TenancyConfig};
    let huge = u64::MAX - 5;
    let bad = [
        (
            "cleaning.idle_ns",
            CacheConfig {
                cleaning: CleaningConfig::Lazy {
                    idle_ns: huge,
                    batch: 8,
                },
                ..CacheConfig::default()
            },
        ),
        (
            "cleaning.period_ns",
            CacheConfig {
                cleaning: CleaningConfig::Aggressive {
                    period_ns: huge,
                    batch: 8,
                },
                ..CacheConfig::default()
            },
        ),
        (
            "balancing.interval_ns",
            CacheConfig {
                balancing: BalancingConfig::Sib { interval_ns: huge },
                ..CacheConfig::default()
            },
        ),
        (
            "tenancy.interval_ns",
            CacheConfig {
                tenancy: TenancyConfig {
                    mode: tiercache_policy::TenancyModeKind::Static,
                    interval_ns: huge,
                    ..TenancyConfig::default()
                },
                ..CacheConfig::default()
            },
        ),
    ];
    for (field, cfg) in bad {
        match Cache::new(&cfg) {
            Err(PolicyError::Config { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: expected a config error, got {other:?}"),
        }
    }
    // A year is accepted.
    let year = tiercache_policy::config::MAX_DURATION_NS;
    Cache::new(&CacheConfig {
        cleaning: CleaningConfig::Lazy {
            idle_ns: year,
            batch: 8,
        },
        ..CacheConfig::default()
    })
    .unwrap();
    let dirty = DirtyState {
        dirty_lines: 3,
        capacity_lines: 16,
        jobs_in_flight: 0,
    };
    let late = ExecutorState {
        now: u64::MAX - 10,
        ..ExecutorState::default()
    };
    let lazy = Lazy {
        idle_ns: huge,
        batch: 8,
    };
    assert_eq!(lazy.next_poll(&late, dirty), Some(u64::MAX));
    let mut agg = Aggressive::new(huge, 8);
    let early = ExecutorState {
        now: 7,
        ..ExecutorState::default()
    };
    assert_eq!(agg.poll(&early, dirty), 8);
    assert_eq!(agg.next_poll(&early, dirty), Some(huge));
    let end = ExecutorState {
        now: u64::MAX - 1,
        ..ExecutorState::default()
    };
    assert_eq!(agg.poll(&end, dirty), 8);
    assert_eq!(agg.next_poll(&end, dirty), Some(u64::MAX));
    assert_eq!(agg.poll(&late, dirty), 0);
}
