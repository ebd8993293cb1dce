//! The simulator driven by the synthetic workload generator of `tiercache-workload`.

use tiercache_core::{Arrival, Nanos, Request, RequestSource};
use tiercache_policy::{Cache, CacheConfig, CleaningConfig};
use tiercache_sim::{hit_ratio_only_iter, simulate, DeviceConfig, RunLimits, SimConfig};
use tiercache_workload::{AddressDist, BlockSize, SyntheticWorkload, WorkloadSpec};

fn spec(seed: u64) -> WorkloadSpec {
    WorkloadSpec {
        seed,
        jobs: 4,
        iodepth: Some(8),
        read_fraction: 0.7,
        trim_fraction: 0.02,
        block_sizes: vec![
            BlockSize {
                size: 4096,
                weight: 3.0,
            },
            BlockSize {
                size: 16384,
                weight: 1.0,
            },
        ],
        footprint: 256 << 20,
        distribution: AddressDist::Zipf {
            theta: 0.9,
            scramble: true,
        },
        requests: Some(20_000),
        flush_every: Some(500),
        ..WorkloadSpec::default()
    }
}

fn run(seed: u64) -> (String, Cache) {
    let mut cache = Cache::new(&CacheConfig {
        capacity: 16 << 20,
        cleaning: CleaningConfig::Lazy {
            idle_ns: 100_000,
            batch: 32,
        },
        ..Default::default()
    })
    .unwrap();
    let mut src = SyntheticWorkload::new(&spec(seed)).unwrap();
    let cfg = SimConfig {
        cache_device: DeviceConfig::preset("optane-p5800x"),
        backend: DeviceConfig::preset("sata-ssd-850pro"),
        run: RunLimits {
            warmup_requests: 5000,
            final_flush: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let out = simulate(&mut cache, &mut src, &cfg).unwrap();
    assert_eq!(out.final_stats.requests, 20_000);
    assert_eq!(out.metrics.requests, 15_000);
    assert_eq!(
        out.backend_written_back_bytes,
        out.final_stats.written_back_bytes
    );
    (serde_json::to_string(&out.metrics).unwrap(), cache)
}

#[test]
fn synthetic_workload_runs_deterministically_and_conserves() {
    let (a, cache) = run(42);
    let (b, _) = run(42);
    assert_eq!(a, b);
    assert_ne!(a, run(43).0);
    assert_eq!(cache.dirty_lines(), 0);
    cache.audit();
    let s = cache.stats();
    assert_eq!(
        s.line_hits + s.line_partial_hits + s.line_misses,
        s.line_accesses
    );
}

#[test]
fn hit_ratio_only_over_the_generator_stream() {
    let mut cache = Cache::new(&CacheConfig {
        capacity: 16 << 20,
        ..Default::default()
    })
    .unwrap();
    let stream = SyntheticWorkload::new(&spec(1)).unwrap().into_stream();
    let m = hit_ratio_only_iter(
        &mut cache,
        stream,
        &RunLimits {
            warmup_requests: 5000,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(m.requests, 15_000);
    // Zipf 0.9 over 64K blocks with a cache of 4K lines: a clear but partial hit ratio.
    assert!(m.hit_ratio > 0.2 && m.hit_ratio < 0.9, "{}", m.hit_ratio);
}

/// Hides a source's promise of independent streams, so the executor draws every request at
/// the moment it issues it.
struct DrawnAtIssue<S>(S);

impl<S: RequestSource> RequestSource for DrawnAtIssue<S> {
    fn arrival(&self) -> Arrival {
        self.0.arrival()
    }
    fn next_request(&mut self, job: u32) -> Option<Request> {
        self.0.next_request(job)
    }
    fn next_request_at(&mut self, job: u32, now_ns: Nanos) -> Option<Request> {
        self.0.next_request_at(job, now_ns)
    }
}

/// Everything a run reports, timeline and per-request latencies included.
fn everything(out: &tiercache_sim::SimOutput) -> String {
    format!(
        "{} {} {} {:?} {} {:?}",
        serde_json::to_string(&out.metrics).unwrap(),
        serde_json::to_string(&out.timeline).unwrap(),
        serde_json::to_string(&out.final_stats).unwrap(),
        out.devices,
        out.end_ns,
        out.latency.summary(),
    )
}

/// The executor draws a closed-loop job's requests ahead (to prefetch their metadata) only
/// when the source promises independent streams; doing so changes no result, byte for byte:
/// the generator (whose `time_ns` is the clock at drawing, raised at issue) and the test
/// source, each with and without the promise, on a write-back cache with lazy cleaning and a
/// timeline.
#[test]
fn drawing_requests_ahead_changes_no_result() {
    let cfg = SimConfig {
        cache_device: DeviceConfig::preset("nvme-ssd"),
        backend: DeviceConfig::preset("sata-ssd-5100"),
        run: RunLimits {
            warmup_requests: 2000,
            final_flush: true,
            timeline_interval_ns: Some(1_000_000),
            ..Default::default()
        },
        ..Default::default()
    };
    let cache = || {
        Cache::new(&CacheConfig {
            capacity: 8 << 20,
            write_policy: tiercache_policy::WritePolicy::WriteBack,
            cleaning: CleaningConfig::Lazy {
                idle_ns: 20_000,
                batch: 16,
            },
            ..Default::default()
        })
        .unwrap()
    };
    let run = |src: &mut dyn RequestSource| {
        let mut c = cache();
        everything(&simulate(&mut c, src, &cfg).unwrap())
    };
    let generator = || SyntheticWorkload::new(&spec(9)).unwrap();
    assert!(generator().streams_independent());
    let ahead = run(&mut generator());
    assert_eq!(ahead, run(&mut DrawnAtIssue(generator())));
    let uniform = || {
        tiercache_sim::testing::UniformSource::closed(4, 6, 3, 3000, 64 << 20, 4096, 0.6)
            .with_hot_set(0.7, 6 << 20)
    };
    assert!(uniform().streams_independent());
    let ahead = run(&mut uniform());
    assert_eq!(ahead, run(&mut DrawnAtIssue(uniform())));
    // A mix of volumes, one of them with several slots per job (iodepth 4) sharing that job's
    // stream: drawing ahead for one slot took requests another would have drawn.
    let mix = || {
        let part = |seed: u64, iodepth: u32| -> tiercache_workload::mix::BoxedSource {
            Box::new(
                SyntheticWorkload::new(&WorkloadSpec {
                    iodepth: Some(iodepth),
                    requests: Some(6000),
                    ..spec(seed)
                })
                .unwrap(),
            )
        };
        tiercache_workload::VolumeMix::new(vec![
            (tiercache_core::VolumeId(0), part(3, 4)),
            (tiercache_core::VolumeId(1), part(4, 1)),
        ])
        .unwrap()
    };
    let ahead = run(&mut mix());
    assert_eq!(ahead, run(&mut DrawnAtIssue(mix())));
    // A source whose jobs depend on the clock (bursts) does not make the promise.
    let mut bursty = spec(9);
    bursty.bursts = Some(tiercache_workload::Bursts {
        on_ns: 1_000_000,
        off_ns: 1_000_000,
    });
    assert!(!SyntheticWorkload::new(&bursty)
        .unwrap()
        .streams_independent());
}
