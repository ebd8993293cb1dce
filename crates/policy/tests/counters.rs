//! Counters that must add up: per-volume line accesses sum to the cache's, a request cut
//! into shard pieces is one request of its volume, and a request over no line is no hit.

use tiercache_core::{Request, VolumeId};
use tiercache_policy::{
    Cache, CacheConfig, CleaningConfig, PolicyCore, PromotionConfig, ShardedCache, WritePolicy,
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
        let v = PolicyCore::volume_stats(&c);
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
