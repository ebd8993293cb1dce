//! The queueing disk in the simulator (docs/design.md §5.1): requests that reach a
//! `hdd-c2-sas` backend are served shortest positioning time first among the queued ones,
//! writes are acknowledged from the drive's cache, and runs are deterministic.

use tiercache_policy::{Cache, CacheConfig, WritePolicy};
use tiercache_sim::testing::UniformSource;
use tiercache_sim::{simulate, DeviceConfig, RunLimits, SimConfig};

/// (IOPS, mean latency µs, the run's metrics as JSON) of 32 jobs of random 4 KiB requests
/// (`read_fraction` reads) over 64 GiB passed through a cache to the backend `backend`.
fn run(backend: DeviceConfig, read_fraction: f64) -> (f64, f64, String) {
    let mut c = Cache::new(&CacheConfig {
        capacity: 16 << 20,
        line_size: 4096,
        write_policy: WritePolicy::PassThrough,
        ..Default::default()
    })
    .unwrap();
    let mut src = UniformSource::closed(3, 32, 1, 60, 64 << 30, 4096, read_fraction);
    let cfg = SimConfig {
        cache_device: DeviceConfig::preset("sata-ssd-863a"),
        backend,
        run: RunLimits {
            final_flush: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let out = simulate(&mut c, &mut src, &cfg).unwrap();
    let m = &out.metrics;
    (
        m.iops,
        m.latency_us.all.mean,
        serde_json::to_string(m).unwrap(),
    )
}

fn hdd(queue_depth: u32, write_cache: u64) -> DeviceConfig {
    DeviceConfig {
        queue_depth: Some(queue_depth),
        write_cache: Some(write_cache),
        ..DeviceConfig::preset("hdd-c2-sas")
    }
}

#[test]
fn a_deep_queue_serves_random_reads_faster_than_arrival_order() {
    let (fifo, _, _) = run(hdd(1, 0), 1.0);
    let (deep, _, deep_json) = run(hdd(32, 0), 1.0);
    // At 32 in flight, shortest positioning time first serves about 2.9× as many.
    assert!(deep > 2.0 * fifo, "QD32 {deep:.0} IOPS vs QD1 {fifo:.0}");
    // In arrival order over 64 GiB (6.4% of the stroke): a short seek (about 1.6 ms), half
    // a revolution (4.17 ms) and the overhead (0.2 ms): about 167 IOPS.
    assert!(fifo > 150.0 && fifo < 185.0, "QD1 {fifo:.0} IOPS");
    // Deterministic: the same run twice gives the same record.
    assert_eq!(run(hdd(32, 0), 1.0).2, deep_json);
}

#[test]
fn the_write_cache_acknowledges_writes_early() {
    let (_, off_lat, _) = run(hdd(32, 0), 0.0);
    let (_, on_lat, _) = run(hdd(32, 64 << 20), 0.0);
    // 1920 random writes of 4 KiB fit in 64 MiB: acknowledged after the command overhead.
    assert!(
        on_lat * 10.0 < off_lat,
        "cache on {on_lat:.0} µs, off {off_lat:.0} µs"
    );
}

/// An array of queueing HDDs as the backend (`{ raid = "raid0", members = 4, member =
/// "hdd-c2-sas" }`, docs/design.md §5.1): 32 jobs of random reads through a pass-through
/// cache are served more than twice as fast as by one drive, deterministically.
#[test]
fn an_array_of_queued_hdds_serves_random_reads_faster_than_one() {
    use tiercache_sim::RaidLevel;
    let (one, _, _) = run(hdd(32, 0), 1.0);
    let array = || DeviceConfig::array(RaidLevel::Raid0, 4, hdd(32, 0), 64 << 10);
    let (four, _, json) = run(array(), 1.0);
    assert!(
        four > 2.0 * one,
        "four drives {four:.0} IOPS vs one {one:.0}"
    );
    assert_eq!(run(array(), 1.0).2, json);
}
