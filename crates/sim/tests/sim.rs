//! End-to-end checks of the simulator with the real policy core.

use tiercache_core::{Arrival, Op, Request, RequestSource};
use tiercache_policy::{Cache, CacheConfig, CleaningConfig, DirtyFullPolicy, WritePolicy};
use tiercache_sim::testing::UniformSource;
use tiercache_sim::{
    hit_ratio_only, simulate, DeviceConfig, HostConfig, LookupArch, RaidLevel, RunLimits, SimConfig,
};

fn cache(capacity: u64, cleaning: CleaningConfig) -> Cache {
    Cache::new(&CacheConfig {
        capacity,
        line_size: 4096,
        cleaning,
        ..Default::default()
    })
    .unwrap()
}

fn two_ssd_config() -> SimConfig {
    SimConfig {
        cache_device: DeviceConfig::preset("nvme-ssd"),
        backend: DeviceConfig::preset("sata-ssd-5100"),
        ..Default::default()
    }
}

#[test]
fn same_inputs_give_byte_identical_records() {
    let run = || {
        let mut c = cache(
            8 << 20,
            CleaningConfig::Lazy {
                idle_ns: 50_000,
                batch: 16,
            },
        );
        let mut src =
            UniformSource::closed(11, 4, 4, 3000, 64 << 20, 4096, 0.6).with_hot_set(0.7, 6 << 20);
        let cfg = SimConfig {
            host: Some(HostConfig {
                lookup: LookupArch::HtCg,
                ..Default::default()
            }),
            run: RunLimits {
                warmup_requests: 1000,
                timeline_interval_ns: Some(1_000_000),
                final_flush: true,
                ..Default::default()
            },
            ..two_ssd_config()
        };
        let out = simulate(&mut c, &mut src, &cfg).unwrap();
        (
            serde_json::to_string(&out.metrics).unwrap(),
            serde_json::to_string(&out.timeline).unwrap(),
        )
    };
    let (a, ta) = run();
    let (b, tb) = run();
    assert_eq!(a, b);
    assert_eq!(ta, tb);
    // A different seed gives a different run (the check above is not vacuous).
    let mut c = cache(
        8 << 20,
        CleaningConfig::Lazy {
            idle_ns: 50_000,
            batch: 16,
        },
    );
    let mut src =
        UniformSource::closed(12, 4, 4, 3000, 64 << 20, 4096, 0.6).with_hot_set(0.7, 6 << 20);
    let other = simulate(&mut c, &mut src, &two_ssd_config()).unwrap();
    assert_ne!(serde_json::to_string(&other.metrics).unwrap(), a);
}

#[test]
fn write_back_conserves_lines_and_bytes_and_final_flush_leaves_nothing_dirty() {
    // Requests of one 4 KiB line each; flush jobs of at most `MAX_BATCH` lines.
    const JOBS: u32 = 8;
    const DEPTH: u32 = 2;
    const LINE: u64 = 4096;
    const MAX_BATCH: u32 = 64;
    for cleaning in [
        CleaningConfig::Lazy {
            idle_ns: 20_000,
            batch: MAX_BATCH / 2,
        },
        CleaningConfig::Aggressive {
            period_ns: 100_000,
            batch: MAX_BATCH,
        },
        CleaningConfig::None,
    ] {
        let mut c = cache(4 << 20, cleaning.clone());
        let mut src = UniformSource::closed(3, JOBS, DEPTH, 2500, 32 << 20, LINE, 0.3)
            .with_hot_set(0.8, 3 << 20);
        let cfg = SimConfig {
            run: RunLimits {
                final_flush: true,
                ..Default::default()
            },
            ..two_ssd_config()
        };
        let out = simulate(&mut c, &mut src, &cfg).unwrap();
        let s = &out.final_stats;
        assert_eq!(
            s.line_hits + s.line_partial_hits + s.line_misses,
            s.line_accesses,
            "{cleaning:?}"
        );
        assert_eq!(s.requests, 8 * 2500);
        assert_eq!(out.metrics.requests, 8 * 2500);
        // Every byte the policy says it wrote back crossed the backend model as a write-back op.
        assert!(
            s.written_back_bytes > 0,
            "{cleaning:?}: the workload dirties more than the cache holds"
        );
        assert_eq!(
            out.backend_written_back_bytes, s.written_back_bytes,
            "{cleaning:?}"
        );
        assert_eq!(
            c.dirty_lines(),
            0,
            "{cleaning:?}: final flush cleaned everything"
        );
        assert!(out.metrics.final_flush_ns > 0 || out.metrics.dirty_lines_end == 0);
        c.audit();
        // Every byte the policy planned crossed a device model, over the whole run.
        let (cache_dev, backend_dev) = (out.devices["cache"], out.devices["backend"]);
        assert_eq!(
            cache_dev.bytes_written, s.cache_bytes_written,
            "{cleaning:?}"
        );
        assert_eq!(cache_dev.bytes_read, s.cache_bytes_read, "{cleaning:?}");
        assert_eq!(backend_dev.bytes_read, s.backend_bytes_read, "{cleaning:?}");
        assert_eq!(
            backend_dev.bytes_written, s.backend_bytes_written,
            "{cleaning:?}"
        );
        // Over the measured window (no warm-up here, the final flush outside it) the devices
        // trail the policy by at most the ops still in flight when the last request was
        // acknowledged: promotion writes and flush jobs, never a whole request's worth more.
        let m = &out.metrics;
        let (dev_w, dev_r) = (
            m.devices["cache"].bytes_written,
            m.devices["backend"].bytes_read,
        );
        assert!(dev_w <= m.cache_bytes_written, "{cleaning:?}");
        assert!(dev_r <= m.backend_bytes_read, "{cleaning:?}");
        // Every request in flight, and one flush job.
        let in_flight_max = u64::from(JOBS * DEPTH + MAX_BATCH) * LINE;
        assert!(
            m.cache_bytes_written - dev_w <= in_flight_max,
            "{cleaning:?}"
        );
        assert!(
            m.backend_bytes_read - dev_r <= in_flight_max,
            "{cleaning:?}"
        );
    }
}

#[test]
fn warm_up_is_excluded_from_metrics() {
    let cfg = |warmup| SimConfig {
        run: RunLimits {
            warmup_requests: warmup,
            requests: Some(4000),
            ..Default::default()
        },
        ..two_ssd_config()
    };
    let mut cold_cache = cache(16 << 20, CleaningConfig::None);
    let mut src = UniformSource::closed(5, 2, 4, 100_000, 12 << 20, 4096, 1.0);
    let cold = simulate(&mut cold_cache, &mut src, &cfg(0))
        .unwrap()
        .metrics;
    let mut warm_cache = cache(16 << 20, CleaningConfig::None);
    let mut src = UniformSource::closed(5, 2, 4, 100_000, 12 << 20, 4096, 1.0);
    let warm = simulate(&mut warm_cache, &mut src, &cfg(20_000))
        .unwrap()
        .metrics;
    assert_eq!(cold.requests, 4000);
    assert_eq!(warm.requests, 4000);
    assert_eq!(warm.read_requests, 4000);
    assert_eq!(warm.latency_us.all.count, 4000);
    // The working set fits: after 20K requests of warm-up nearly everything hits.
    assert!(warm.hit_ratio > 0.95, "warm {}", warm.hit_ratio);
    assert!(cold.hit_ratio < 0.5, "cold {}", cold.hit_ratio);
    assert!(warm.promotions < cold.promotions);
    assert!(warm.latency_us.all.mean < cold.latency_us.all.mean);

    // The most dirty lines is the window's too: 200 lines written in the warm-up, cleaned in
    // an idle second, then reads (it counted the warm-up's 200, where hit-ratio runs did not).
    let mut reqs: Vec<Request> = (0..200u64)
        .map(|i| Request {
            time_ns: i * 1000,
            ..Request::write(i * 4096, 4096)
        })
        .collect();
    reqs.extend((0..100u64).map(|i| Request {
        time_ns: 1_000_000_000 + i * 1000,
        ..Request::read(i * 4096, 4096)
    }));
    let mut c = cache(
        4 << 20,
        CleaningConfig::Lazy {
            idle_ns: 1_000_000,
            batch: 64,
        },
    );
    let m = simulate(&mut c, &mut Replay(reqs, 0), &cfg(200))
        .unwrap()
        .metrics;
    assert_eq!(m.requests, 100);
    assert_eq!(m.dirty_lines_max, 0);
}

#[test]
fn closed_loop_obeys_littles_law() {
    let mut c = cache(
        8 << 20,
        CleaningConfig::Lazy {
            idle_ns: 100_000,
            batch: 32,
        },
    );
    let (jobs, depth) = (4, 8);
    let mut src =
        UniformSource::closed(9, jobs, depth, 5000, 64 << 20, 4096, 0.7).with_hot_set(0.6, 6 << 20);
    let cfg = SimConfig {
        run: RunLimits {
            warmup_requests: 2000,
            ..Default::default()
        },
        ..two_ssd_config()
    };
    let m = simulate(&mut c, &mut src, &cfg).unwrap().metrics;
    // Requests in flight = throughput × latency; a closed loop keeps jobs × iodepth in flight
    // (except while the last requests drain).
    let in_flight = m.iops * m.latency_us.all.mean / 1e6;
    let n = (jobs * depth) as f64;
    assert!(
        (in_flight - n).abs() / n < 0.03,
        "L = {in_flight}, expected {n}"
    );
    // Per device too: mean queue depth = op throughput × mean op latency.
    for (name, d) in &m.devices {
        let l = d.ops as f64 / (m.duration_ns as f64 / 1e9) * d.mean_op_latency_us / 1e6;
        assert!(
            (l - d.mean_queue_depth).abs() <= 0.03 * d.mean_queue_depth.max(0.1),
            "{name}: {l} vs {}",
            d.mean_queue_depth
        );
    }
}

#[test]
fn open_loop_device_queue_obeys_littles_law_and_utilisation_tracks_load() {
    let mut c = cache(64 << 20, CleaningConfig::None);
    // 50K IOPS of cold 4 KiB reads onto a SATA SSD backend (93K IOPS): utilisation ~0.54.
    let mut src = UniformSource::open(4, 60_000, 20_000, 1 << 36, 4096, 1.0);
    let cfg = SimConfig {
        cache_device: DeviceConfig::preset("ram-disk"),
        backend: DeviceConfig::preset("sata-ssd-5100"),
        ..Default::default()
    };
    let m = simulate(&mut c, &mut src, &cfg).unwrap().metrics;
    let b = &m.devices["backend"];
    let secs = m.duration_ns as f64 / 1e9;
    let l = b.ops as f64 / secs * b.mean_op_latency_us / 1e6;
    assert!(
        (l - b.mean_queue_depth).abs() / b.mean_queue_depth < 0.02,
        "{l} vs {}",
        b.mean_queue_depth
    );
    assert!(
        (m.iops - 50_000.0).abs() / 50_000.0 < 0.05,
        "open loop keeps its rate: {}",
        m.iops
    );
    assert!(
        (b.utilisation - 50e3 / 93e3).abs() < 0.05,
        "utilisation {}",
        b.utilisation
    );
    assert!(
        m.latency_us.read.p50 > 150.0 && m.latency_us.read.p50 < 300.0,
        "{:?}",
        m.latency_us.read
    );
}

#[test]
fn hit_ratio_only_matches_the_timed_run_in_order() {
    // One submitter at depth 1: both runners see requests in the same order, and without a
    // cleaner (which pins lines) the policy makes the same decisions.
    let mk =
        || UniformSource::closed(21, 1, 1, 20_000, 24 << 20, 4096, 0.5).with_hot_set(0.5, 4 << 20);
    let mut a = cache(8 << 20, CleaningConfig::None);
    let timed = simulate(&mut a, &mut mk(), &two_ssd_config()).unwrap();
    let mut b = cache(8 << 20, CleaningConfig::None);
    let fast = hit_ratio_only(&mut b, &mut mk(), &RunLimits::default()).unwrap();
    assert_eq!(&timed.final_stats, b.stats());
    assert_eq!(fast.hit_ratio, timed.metrics.hit_ratio);
    assert_eq!(fast.promotions, timed.metrics.promotions);
    assert_eq!(fast.requests, 20_000);
    assert_eq!(fast.iops, 0.0);
    // Warm-up and limits apply the same way.
    let mut c = cache(8 << 20, CleaningConfig::None);
    let part = hit_ratio_only(
        &mut c,
        &mut mk(),
        &RunLimits {
            warmup_requests: 5000,
            requests: Some(1000),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(part.requests, 1000);
    assert_eq!(c.stats().requests, 6000);
}

#[test]
fn duration_limit_and_timeline() {
    let mut c = cache(
        8 << 20,
        CleaningConfig::Lazy {
            idle_ns: 50_000,
            batch: 32,
        },
    );
    let mut src = UniformSource::open(8, 1_000_000, 50_000, 64 << 20, 4096, 0.5);
    let cfg = SimConfig {
        run: RunLimits {
            duration_ns: Some(50_000_000),
            warmup_ns: 10_000_000,
            timeline_interval_ns: Some(5_000_000),
            ..Default::default()
        },
        ..two_ssd_config()
    };
    let out = simulate(&mut c, &mut src, &cfg).unwrap();
    let m = &out.metrics;
    // ~20K IOPS offered (well within the devices' capacity) for 50 ms.
    assert!((m.requests as f64 - 1000.0).abs() < 100.0, "{}", m.requests);
    assert!(
        m.duration_ns >= 50_000_000 && m.duration_ns < 52_000_000,
        "{}",
        m.duration_ns
    );
    let tl = &out.timeline;
    assert!(tl.len() >= 12 && tl.len() <= 13, "{} rows", tl.len());
    // Measuring starts with the first arrival at or after 10 ms: the third interval is partly warm-up.
    assert!(tl[0].warmup && tl[1].warmup && tl[2].warmup && !tl[3].warmup);
    for w in tl.windows(2) {
        assert_eq!(w[0].end_ns, w[1].start_ns);
    }
    let total: u64 = tl.iter().map(|r| r.requests).sum();
    assert_eq!(
        total,
        c.stats().requests,
        "every acknowledged request lands in one interval"
    );
    let mid = &tl[5];
    assert!((mid.iops - 20_000.0).abs() < 5_000.0, "{}", mid.iops);
    let mut csv = Vec::new();
    tiercache_metrics::write_timeline_csv(tl, &mut csv).unwrap();
    assert_eq!(
        String::from_utf8(csv).unwrap().lines().count(),
        tl.len() + 1
    );
}

/// Every submitter issues 4 KiB reads (90 %) and writes of a hot set that fits the cache, after a
/// warm-up that loads it: a RAM-disk cache over a fast SSD array, where the host CPU is the
/// bottleneck (docs/design.md §8).
fn scaling_iops(lookup: LookupArch, submitters: u32) -> f64 {
    let mut c = cache(64 << 20, CleaningConfig::None);
    let warmup = 12_000;
    let mut src = UniformSource::closed(
        1,
        submitters,
        1,
        warmup / submitters as u64 + 1500,
        8 << 20,
        4096,
        0.9,
    );
    let cfg = SimConfig {
        cache_device: DeviceConfig::preset("ram-disk"),
        backend: DeviceConfig::array(RaidLevel::Raid5, 8, DeviceConfig::preset("nvme-ssd"), 65536),
        host: Some(HostConfig {
            lookup,
            cores: 16,
            ..Default::default()
        }),
        run: RunLimits {
            warmup_requests: warmup,
            ..Default::default()
        },
        ..Default::default()
    };
    let m = simulate(&mut c, &mut src, &cfg).unwrap().metrics;
    assert!(
        m.hit_ratio > 0.99,
        "{lookup:?}/{submitters}: the hot set is cached ({})",
        m.hit_ratio
    );
    m.iops
}

#[test]
fn fine_grained_locking_scales_where_coarse_locking_and_few_workers_saturate() {
    let n = [1, 4, 16];
    let lt: Vec<f64> = n.iter().map(|&n| scaling_iops(LookupArch::Lt, n)).collect();
    let cg: Vec<f64> = n
        .iter()
        .map(|&n| scaling_iops(LookupArch::HtCg, n))
        .collect();
    let fg: Vec<f64> = n
        .iter()
        .map(|&n| scaling_iops(LookupArch::HtFg, n))
        .collect();
    eprintln!("submitters {n:?}\nLT {lt:?}\nHT+CG {cg:?}\nHT+FG {fg:?}");
    // One submitter: no contention, the architectures are equal.
    assert!((fg[0] / cg[0] - 1.0).abs() < 0.05 && (fg[0] / lt[0] - 1.0).abs() < 0.05);
    // FG keeps scaling from 4 to 16 submitters; LT and CG do not (CG even falls).
    assert!(fg[2] > 1.8 * fg[1], "fg {fg:?}");
    assert!(lt[2] < 1.1 * lt[1], "lt {lt:?}");
    assert!(cg[2] < 1.1 * cg[1], "cg {cg:?}");
    assert!(fg[2] > 2.0 * cg[2] && fg[2] > 2.0 * lt[2]);
}

#[test]
fn on_a_slow_backend_the_lookup_architecture_hardly_matters() {
    // SSD cache over an HDD array with a working set far beyond the cache: the disks bound
    // throughput and the host CPU model changes little (docs/design.md §8).
    let iops = |lookup| {
        let mut c = cache(64 << 20, CleaningConfig::None);
        let mut src = UniformSource::closed(3, 16, 1, 300, 16 << 30, 4096, 0.9);
        let cfg = SimConfig {
            cache_device: DeviceConfig::preset("sata-ssd-5100"),
            backend: DeviceConfig::array(
                RaidLevel::Raid5,
                8,
                DeviceConfig::preset("hdd-7200"),
                65536,
            ),
            host: Some(HostConfig {
                lookup,
                ..Default::default()
            }),
            ..Default::default()
        };
        simulate(&mut c, &mut src, &cfg).unwrap().metrics.iops
    };
    let (lt, cg, fg) = (
        iops(LookupArch::Lt),
        iops(LookupArch::HtCg),
        iops(LookupArch::HtFg),
    );
    for x in [lt, cg] {
        assert!((x / fg - 1.0).abs() < 0.05, "lt {lt} cg {cg} fg {fg}");
    }
}

/// A source replaying a fixed list (open loop).
struct Replay(Vec<Request>, usize);

impl RequestSource for Replay {
    fn arrival(&self) -> Arrival {
        Arrival::Open
    }
    fn next_request(&mut self, _job: u32) -> Option<Request> {
        let r = self.0.get(self.1).copied();
        self.1 += 1;
        r
    }
}

#[test]
fn single_request_latencies_follow_the_device_models() {
    let cfg = SimConfig {
        cache_device: DeviceConfig::preset("optane-p5800x"),
        backend: DeviceConfig::preset("hdd-7200"),
        ..Default::default()
    };
    let mut c = Cache::new(&CacheConfig {
        capacity: 1 << 20,
        line_size: 4096,
        write_policy: WritePolicy::WriteBack,
        dirty_full: DirtyFullPolicy::EvictThenWrite,
        cleaning: CleaningConfig::None,
        ..Default::default()
    })
    .unwrap();
    // Miss (HDD random read), then a hit 1 s later (Optane read), then a write hit.
    let reqs = vec![
        Request::read(1 << 30, 4096),
        Request::read(1 << 30, 4096).at(1_000_000_000),
        Request::write(1 << 30, 4096).at(2_000_000_000),
    ];
    let out = simulate(&mut c, &mut Replay(reqs, 0), &cfg).unwrap();
    let m = &out.metrics;
    assert_eq!(m.requests, 3);
    assert_eq!(m.read_requests, 2);
    let max_read = m.latency_us.read.max;
    assert!(
        (max_read - 7122.7).abs() < 10.0,
        "miss costs a random HDD read: {max_read}"
    );
    let min_read = out.read_latency.quantile_ns(0.0);
    assert!(
        (min_read as f64 - 6000.0).abs() < 100.0,
        "hit costs an Optane read: {min_read}"
    );
    assert!(
        (m.latency_us.write.mean - 5.6).abs() < 0.2,
        "write hit: {}",
        m.latency_us.write.mean
    );
    assert_eq!(m.devices["backend"].ops_by_cause["read-miss"], 1);
    assert_eq!(m.devices["cache"].ops_by_cause["promotion"], 1);
    assert_eq!(c.dirty_lines(), 1);
    let _ = Op::Read;
}

#[test]
fn bad_requests_and_configs_are_errors_not_panics() {
    let mut c = cache(1 << 20, CleaningConfig::None);
    let bad = Request {
        volume: tiercache_core::VolumeId(1 << 20),
        ..Request::read(0, 4096)
    };
    let e = simulate(
        &mut c,
        &mut Replay(vec![Request::read(0, 4096), bad], 0),
        &two_ssd_config(),
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("request #1"), "{e}");
    let cfg = SimConfig {
        backend: DeviceConfig::preset("tape"),
        ..Default::default()
    };
    let e = simulate(&mut c, &mut Replay(vec![], 0), &cfg).unwrap_err();
    assert!(e.to_string().contains("backend.preset"), "{e}");
    let cfg: Result<SimConfig, _> = toml::from_str("[run]\nrequests = 5\nwarmup = 3");
    assert!(cfg.unwrap_err().to_string().contains("warmup"));
    let cfg: SimConfig = toml::from_str(
        r#"
        cache_device = "ram-disk"
        backend = { raid = "raid5", members = 8, member = { preset = "sata-ssd-5100" }, stripe_unit = "64KiB" }
        volume_backends = [ { volume = 3, device = { preset = "hdd-7200", link = "net-1g" } } ]
        host = { lookup = "ht-fg", cores = 8 }
        [run]
        requests = 1000
        warmup_ns = "10ms"
        timeline_interval_ns = "1ms"
        final_flush = true
        "#,
    )
    .unwrap();
    assert_eq!(cfg.run.warmup_ns, 10_000_000);
    let back: SimConfig = toml::from_str(&toml::to_string(&cfg).unwrap()).unwrap();
    assert_eq!(back, cfg);
    // A request (or an op) at 2^64 ns ends the run with an error: time past it panicked in
    // the event queue, or wrapped around.
    let late = Request {
        time_ns: u64::MAX,
        ..Request::read(8192, 4096)
    };
    let e = simulate(
        &mut c,
        &mut Replay(vec![Request::read(0, 4096), late], 0),
        &two_ssd_config(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("2^64 ns"), "{e}");
}

#[test]
fn per_volume_backends_take_their_own_load() {
    let mut c = cache(1 << 20, CleaningConfig::None);
    let mut src = UniformSource::closed(2, 2, 2, 500, 1 << 30, 4096, 1.0).with_volumes(2);
    let mut cfg = two_ssd_config();
    cfg.volume_backends.push(tiercache_sim::VolumeBackend {
        volume: 1,
        device: DeviceConfig::preset("hdd-10k"),
    });
    let m = simulate(&mut c, &mut src, &cfg).unwrap().metrics;
    let (b0, b1) = (&m.devices["backend"], &m.devices["backend-vol1"]);
    assert!(b0.ops > 400 && b1.ops > 400, "{} {}", b0.ops, b1.ops);
    assert!(b1.mean_op_latency_us > 20.0 * b0.mean_op_latency_us);
}

#[test]
fn timeline_detects_which_device_is_the_bottleneck() {
    // Write burst on a write-back cache: a slow SATA cache over a fast NVMe RAID-0 saturates
    // first; an NVMe cache over a lone HDD never does (misses queue at the HDD).
    let run = |cache_dev: &str, backend: DeviceConfig, read_fraction| {
        let mut c = cache(64 << 20, CleaningConfig::None);
        let mut src = UniformSource::closed(6, 8, 16, 400, 256 << 20, 4096, read_fraction);
        let cfg = SimConfig {
            cache_device: DeviceConfig::preset(cache_dev),
            backend,
            run: RunLimits {
                timeline_interval_ns: Some(2_000_000),
                ..Default::default()
            },
            ..Default::default()
        };
        simulate(&mut c, &mut src, &cfg).unwrap().timeline
    };
    let tl = run(
        "sata-ssd-5100",
        DeviceConfig::array(RaidLevel::Raid0, 4, DeviceConfig::preset("nvme-ssd"), 65536),
        0.0,
    );
    let mid = &tl[tl.len() / 2];
    assert!(
        mid.cache_bottleneck && mid.cache_qtime_us > 1000.0,
        "{mid:?}"
    );
    assert!(mid.cache_ops_w > 0 && mid.cache_ops_r == 0);
    let tl = run("nvme-ssd", DeviceConfig::preset("hdd-7200"), 1.0);
    let mid = &tl[tl.len() / 2];
    assert!(
        !mid.cache_bottleneck && mid.backend_qtime_us > 10_000.0,
        "{mid:?}"
    );
}

/// Switches to read-only (writes to the backend) while the cache device is the bottleneck.
struct Balancer {
    calls: usize,
    switches: usize,
    read_only: bool,
}

impl tiercache_sim::SimObserver for Balancer {
    fn on_interval(
        &mut self,
        row: &tiercache_metrics::TimelineRow,
        cache: &mut dyn tiercache_policy::PolicyCore,
    ) {
        self.calls += 1;
        let want = row.cache_bottleneck;
        if want != self.read_only {
            self.read_only = want;
            self.switches += 1;
            cache.set_write_policy(
                None,
                if want {
                    WritePolicy::ReadOnly
                } else {
                    WritePolicy::WriteBack
                },
            );
        }
    }
}

#[test]
fn an_observer_can_balance_load_between_cache_and_backend() {
    let run = |balance: bool| {
        let mut c = cache(
            64 << 20,
            CleaningConfig::Lazy {
                idle_ns: 100_000,
                batch: 32,
            },
        );
        let mut src = UniformSource::closed(6, 8, 16, 1500, 32 << 20, 4096, 0.3);
        let cfg = SimConfig {
            cache_device: DeviceConfig::preset("sata-ssd-5100"),
            backend: DeviceConfig::array(
                RaidLevel::Raid0,
                4,
                DeviceConfig::preset("nvme-ssd"),
                65536,
            ),
            run: RunLimits {
                timeline_interval_ns: Some(1_000_000),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut lb = Balancer {
            calls: 0,
            switches: 0,
            read_only: false,
        };
        let out = if balance {
            tiercache_sim::simulate_with(&mut c, &mut src, &cfg, &mut lb).unwrap()
        } else {
            simulate(&mut c, &mut src, &cfg).unwrap()
        };
        (out, lb)
    };
    let (plain, _) = run(false);
    let (balanced, lb) = run(true);
    assert_eq!(lb.calls, balanced.timeline.len());
    assert!(lb.switches >= 1);
    let (p, b) = (&plain.metrics, &balanced.metrics);
    assert!(
        b.cache_bytes_written < p.cache_bytes_written / 2,
        "{} vs {}",
        b.cache_bytes_written,
        p.cache_bytes_written
    );
    assert!(b.iops > p.iops, "{} vs {}", b.iops, p.iops);
    assert!(b.bypasses["mode"] > 0);
}

/// Requests at fixed times, open loop.
struct AtTimes(std::vec::IntoIter<Request>);

impl RequestSource for AtTimes {
    fn arrival(&self) -> Arrival {
        Arrival::Open
    }
    fn next_request(&mut self, _job: u32) -> Option<Request> {
        self.0.next()
    }
}

/// A trace idle for 1,000 s at a 1 ms timeline interval: the idle stretch is one row (before,
/// a million empty rows), rows still tile the time without gaps, and every request is counted.
#[test]
fn an_idle_gap_is_one_timeline_row() {
    let at = |t: u64, off: u64| Request {
        time_ns: t,
        volume: tiercache_core::VolumeId(0),
        op: Op::Read,
        offset: off,
        len: 4096,
    };
    let s = 1_000_000_000u64;
    let reqs = vec![
        at(0, 0),
        at(s / 2000, 4096),
        at(1000 * s, 0),
        at(1000 * s + 5, 8192),
    ];
    let mut c = cache(1 << 20, CacheConfig::default().cleaning);
    let cfg = SimConfig {
        run: RunLimits {
            timeline_interval_ns: Some(1_000_000),
            ..Default::default()
        },
        ..two_ssd_config()
    };
    let out = simulate(&mut c, &mut AtTimes(reqs.into_iter()), &cfg).unwrap();
    let tl = &out.timeline;
    assert!(tl.len() <= 6, "{} rows", tl.len());
    assert_eq!(tl[0].start_ns, 0);
    for w in tl.windows(2) {
        assert_eq!(w[0].end_ns, w[1].start_ns);
    }
    assert!(tl.last().unwrap().end_ns >= 1000 * s);
    assert_eq!(tl.iter().map(|r| r.requests).sum::<u64>(), 4);
    // The idle row spans whole intervals and reports no traffic.
    let idle = tl.iter().max_by_key(|r| r.end_ns - r.start_ns).unwrap();
    assert!(idle.end_ns - idle.start_ns > 900 * s);
    assert_eq!((idle.requests, idle.iops), (0, 0.0));
    assert_eq!((idle.end_ns - idle.start_ns) % 1_000_000, 0);
}
