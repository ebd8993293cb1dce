//! Property tests: random cache architectures, devices, hosts and workloads keep the
//! simulator's invariants.

use proptest::prelude::*;
use tiercache_policy::{
    CacheConfig, CleaningConfig, DirtyFullPolicy, EvictionKind, PromotionConfig, Report,
    ShardedCache, WritePolicy,
};
use tiercache_sim::testing::UniformSource;
use tiercache_sim::{
    simulate, DeviceConfig, HostConfig, LookupArch, RaidLevel, RunLimits, SimConfig,
};

fn write_policy() -> impl Strategy<Value = WritePolicy> {
    prop::sample::select(vec![
        WritePolicy::WriteBack,
        WritePolicy::WriteThrough,
        WritePolicy::WriteAround,
        WritePolicy::WriteOnly,
        WritePolicy::ReadOnly,
        WritePolicy::PassThrough,
    ])
}

fn cleaning() -> impl Strategy<Value = CleaningConfig> {
    prop_oneof![
        (1_000u64..200_000, 1u32..64)
            .prop_map(|(idle_ns, batch)| CleaningConfig::Lazy { idle_ns, batch }),
        (10_000u64..500_000, 1u32..128)
            .prop_map(|(period_ns, batch)| CleaningConfig::Aggressive { period_ns, batch }),
        (1u32..64).prop_map(|batch| CleaningConfig::Threshold {
            high: 0.5,
            low: 0.2,
            batch
        }),
        Just(CleaningConfig::None),
    ]
}

fn device() -> impl Strategy<Value = DeviceConfig> {
    prop_oneof![
        prop::sample::select(vec![
            "ram-disk",
            "optane-p5800x",
            "sata-ssd-5100",
            "nvme-ssd",
            "pmem-dimm"
        ])
        .prop_map(DeviceConfig::preset),
        (3u32..6).prop_map(|n| DeviceConfig::array(
            RaidLevel::Raid5,
            n,
            DeviceConfig::preset("sata-ssd-850pro"),
            16384
        )),
        Just(DeviceConfig {
            link: Some(tiercache_sim::LinkConfig::preset("net-10g")),
            ..DeviceConfig::preset("nvme-ssd")
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn every_request_completes_and_bytes_are_conserved(
        seed in any::<u64>(),
        line_shift in 12u32..16,
        lines in 16u64..512,
        eviction in prop::sample::select(EvictionKind::ALL.to_vec()),
        nhit in 1u32..4,
        wp in write_policy(),
        clean in cleaning(),
        bypass in any::<bool>(),
        cache_dev in device(),
        backend in device(),
        host in prop::option::of(prop::sample::select(vec![LookupArch::Lt, LookupArch::HtCg, LookupArch::HtFg])),
        (jobs, depth) in (1u32..6, 1u32..6),
        open in any::<bool>(),
        read_fraction in 0.0f64..1.0,
        block_sectors in prop::sample::select(vec![1u64, 8, 24, 64]),
        warmup in 0u64..300,
        shards in prop::sample::select(vec![1u32, 3]),
    ) {
        let line = 1u64 << line_shift;
        let cfg = CacheConfig {
            capacity: lines * line,
            line_size: line,
            eviction,
            promotion: if nhit == 1 { PromotionConfig::Always } else { PromotionConfig::Nhit { n: nhit, table_ratio: 1.0, occupancy_threshold: 0.0 } },
            write_policy: wp,
            cleaning: clean,
            dirty_full: if bypass { DirtyFullPolicy::Bypass } else { DirtyFullPolicy::EvictThenWrite },
            partitions: Vec::new(),
            shards,
            ..CacheConfig::default()
        };
        // One core, or the shards the engine would run: the same conservation laws.
        let mut cache = ShardedCache::new(&cfg).unwrap();
        let per_job = 1200 / (jobs * depth) as u64 + 1;
        let span = lines * line * 4;
        let block = block_sectors * 512;
        let mut src = if open {
            UniformSource::open(seed, per_job * jobs as u64, 3_000, span, block, read_fraction)
        } else {
            UniformSource::closed(seed, jobs, depth, per_job, span, block, read_fraction)
        }
        .with_hot_set(0.6, lines * line / 2);
        let total = per_job * jobs as u64;
        let sim = SimConfig {
            cache_device: cache_dev,
            backend,
            host: host.map(|lookup| HostConfig { lookup, cores: 4, ..Default::default() }),
            run: RunLimits { warmup_requests: warmup, final_flush: true, timeline_interval_ns: Some(200_000), ..Default::default() },
            ..Default::default()
        };
        let out = simulate(&mut cache, &mut src, &sim).unwrap();
        let s = &out.final_stats;
        prop_assert_eq!(s.requests, total);
        prop_assert_eq!(out.metrics.requests, total - warmup.min(total));
        prop_assert_eq!(out.metrics.latency_us.all.count, out.metrics.requests);
        prop_assert_eq!(s.line_hits + s.line_partial_hits + s.line_misses, s.line_accesses);
        prop_assert_eq!(out.backend_written_back_bytes, s.written_back_bytes);
        prop_assert_eq!(Report::dirty_lines(&cache), 0);
        cache.audit();
        let tl_requests: u64 = out.timeline.iter().map(|r| r.requests).sum();
        prop_assert_eq!(tl_requests, total);
        for d in out.metrics.devices.values() {
            prop_assert!(d.utilisation >= 0.0 && d.utilisation <= 1.0);
            prop_assert!(d.mean_queue_depth >= 0.0);
        }
        prop_assert!(serde_json::to_string(&out.metrics).is_ok());
    }
}
