//! Measures simulator speed: requests simulated per second of wall-clock time for a write-back
//! cache on two devices.
//!
//! `cargo run --release -p tiercache-sim --example sim_throughput -- [requests] [host|nohost] [hot|all] [timed]`
//!
//! The default workload (70 % reads, 80 % of requests to a 200 MiB hot set of a 4 GiB span, a
//! 256 MiB write-back cache on an NVMe SSD over a SATA SSD) exercises promotion, eviction and
//! write-back; `hot` shrinks the span to 128 MiB so every request hits and the executor's own
//! cost dominates.

use std::time::Instant;

/// CPU time of this thread in seconds (Linux), so a loaded machine does not distort the figure;
/// falls back to wall-clock time elsewhere.
fn cpu_seconds(wall: Instant) -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|ns| ns.parse::<f64>().ok())
        })
        .map_or_else(|| wall.elapsed().as_secs_f64(), |ns| ns / 1e9)
}
use tiercache_policy::{Cache, CacheConfig};
use tiercache_sim::testing::UniformSource;
use tiercache_sim::{hit_ratio_only, simulate, DeviceConfig, HostConfig, SimConfig};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let with_host = args.next().is_some_and(|a| a == "host");
    let span: u64 = if args.next().is_some_and(|a| a == "hot") {
        128 << 20
    } else {
        4 << 30
    };
    let timed_only = args.next().is_some_and(|a| a == "timed");
    let cache_cfg = CacheConfig {
        capacity: 256 << 20,
        line_size: 4096,
        ..Default::default()
    };
    let jobs = 16;
    let make_source = || {
        UniformSource::closed(7, jobs, 4, n / (jobs as u64 * 4) * 4, span, 4096, 0.7)
            .with_hot_set(0.8, span.min(200 << 20))
    };
    let cfg = SimConfig {
        cache_device: DeviceConfig::preset("nvme-ssd"),
        backend: DeviceConfig::preset("sata-ssd-5100"),
        host: with_host.then(HostConfig::default),
        ..Default::default()
    };
    let mut cache = Cache::new(&cache_cfg).expect("valid cache");
    let mut src = make_source();
    let origin = Instant::now();
    let (t0, c0) = (Instant::now(), cpu_seconds(origin));
    let out = simulate(&mut cache, &mut src, &cfg).expect("simulation runs");
    let (dt, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds(origin) - c0);
    let m = &out.metrics;
    println!(
        "timed simulation: {} requests in {:.3} s wall, {:.3} s CPU = {:.2} M requests/s of CPU time (hit ratio {:.3}, simulated {:.0} IOPS, mean {:.1} us, host model: {})",
        m.requests,
        dt,
        cpu,
        m.requests as f64 / cpu / 1e6,
        m.hit_ratio,
        m.iops,
        m.latency_us.all.mean,
        with_host
    );
    if timed_only {
        return;
    }
    let mut cache = Cache::new(&cache_cfg).expect("valid cache");
    let mut src = make_source();
    let (t0, c0) = (Instant::now(), cpu_seconds(origin));
    let m = hit_ratio_only(&mut cache, &mut src, &Default::default()).expect("runs");
    let (dt, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds(origin) - c0);
    println!(
        "hit-ratio-only: {} requests in {:.3} s wall, {:.3} s CPU = {:.2} M requests/s of CPU time (hit ratio {:.3})",
        m.requests,
        dt,
        cpu,
        m.requests as f64 / cpu / 1e6,
        m.hit_ratio
    );
}
