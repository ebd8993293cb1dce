//! The timed simulator's results are fixed: fixed configurations' full results (metrics,
//! timeline, final counters), serialised to JSON, hash to values computed with the simulator
//! before its speed work (commit 5dd122d). An optimisation of the executor or the device models
//! that changes any event's order or time changes a hash. When a change of results is meant
//! (a model fixed), recompute the hashes and say why in the commit. New result fields change
//! the bytes too: the hashes were last recomputed when the demote counters and the tenancy
//! record were added, after checking field by field that every earlier value was identical,
//! and again when a plan's contiguous backend reads came to merge past the cache ops of their
//! stage (the two-line requests of the open-loop run read the backend in fewer, larger ops).
//! The closed-loop hash changed once more when `UniformSource` gave each job its own random
//! stream (so the executor may draw a job's requests ahead): that hash was computed with the
//! executor as it was before the draw-ahead and the new event queue, then held unchanged by
//! them. It changed again when dirty lines came to be held out of the replacement policy
//! under `dirty_full = "bypass"`: with `metadata_bytes` zeroed, the result hashes the same
//! before and after (15119699467168760034); the held-out bits add 1 KiB of metadata.

use tiercache_policy::{Cache, CacheConfig};
use tiercache_sim::testing::UniformSource;
use tiercache_sim::{simulate, DeviceConfig, HostConfig, SimConfig, SimOutput, VolumeBackend};

/// FNV-1a, 64 bits: a stable hash of the result's bytes (no dependency, same on every
/// platform).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Everything a run reports, as JSON bytes.
fn result_json(out: &SimOutput) -> String {
    let mut s = serde_json::to_string(&out.metrics).unwrap();
    s.push_str(&serde_json::to_string(&out.timeline).unwrap());
    s.push_str(&serde_json::to_string(&out.final_stats).unwrap());
    s.push_str(&format!(
        "{} {} {} {} {}",
        out.end_ns,
        out.backend_written_back_bytes,
        out.latency.count(),
        out.read_latency.count(),
        out.write_latency.count()
    ));
    s
}

fn cache(extra: &str) -> Cache {
    let cfg: CacheConfig =
        toml::from_str(&format!("capacity = 33554432\nline_size = 4096\n{extra}")).unwrap();
    Cache::new(&cfg).unwrap()
}

/// The speed benchmark's setting (`examples/sim_throughput.rs`), smaller: a write-back cache
/// on an NVMe SSD over a SATA SSD, 64 requests in flight, a hot set; lazy cleaning, a
/// timeline and the final flush.
#[test]
fn write_back_on_two_devices_is_unchanged() {
    let mut c = cache("write_policy = \"write-back\"\ncleaning = { policy = \"lazy\", idle_ns = \"50us\", batch = 16 }\ndirty_full = \"bypass\"");
    let mut src =
        UniformSource::closed(7, 16, 4, 2_500, 512 << 20, 4096, 0.7).with_hot_set(0.8, 24 << 20);
    let mut cfg = SimConfig {
        cache_device: DeviceConfig::preset("nvme-ssd"),
        backend: DeviceConfig::preset("sata-ssd-5100"),
        ..Default::default()
    };
    cfg.run.warmup_requests = 20_000;
    cfg.run.final_flush = true;
    cfg.run.timeline_interval_ns = Some(2_000_000);
    let out = simulate(&mut c, &mut src, &cfg).unwrap();
    assert_eq!(out.metrics.requests, 20_000);
    assert_eq!(
        fnv1a(result_json(&out).as_bytes()),
        17_002_254_944_445_930_613
    );
}

/// Open loop with the host CPU model, a RAID-5 backend behind a link (multi-phase ops) and a
/// second volume on a backend of its own.
#[test]
fn open_loop_with_host_raid_and_volume_backends_is_unchanged() {
    let mut c = cache("write_policy = \"write-back\"");
    let mut src = UniformSource::open(11, 60_000, 4_000, 256 << 20, 8192, 0.6)
        .with_hot_set(0.7, 16 << 20)
        .with_volumes(2);
    let mut backend = DeviceConfig::array(
        tiercache_sim::RaidLevel::Raid5,
        5,
        DeviceConfig::preset("sata-ssd-5100"),
        65536,
    );
    backend.link = Some(toml::from_str("preset = \"net-10g\"").unwrap());
    let mut cfg = SimConfig {
        cache_device: DeviceConfig::preset("sata-ssd-863a"),
        backend,
        volume_backends: vec![VolumeBackend {
            volume: 1,
            device: DeviceConfig::preset("hdd-7200-sas"),
        }],
        host: Some(HostConfig::default()),
        ..Default::default()
    };
    cfg.run.warmup_requests = 10_000;
    cfg.run.final_flush = true;
    cfg.run.timeline_interval_ns = Some(5_000_000);
    let out = simulate(&mut c, &mut src, &cfg).unwrap();
    assert_eq!(out.metrics.requests, 50_000);
    assert_eq!(
        fnv1a(result_json(&out).as_bytes()),
        6_353_532_219_807_021_471
    );
}
