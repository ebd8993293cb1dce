//! The engine's hit path, per request: IOPS and latency percentiles of 4 KiB read hits and
//! 4 KiB write hits on a write-back cache of in-memory devices, from two threads (docs/design.md
//! §13: the compact metadata must not slow it). Every request's time is taken, so p50 and p99
//! are of single requests; IOPS is requests over the round's wall time.
//!
//! Meant to be run against another build of itself, interleaved (`bench/interleave.py`): the
//! figures of one run alone say little on a shared machine.
//!
//! ```text
//! cargo run --release -p tiercache-engine --example hit_path -- [OPS_PER_THREAD] [CACHE_MIB]
//! ```

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::Arc;
use std::time::Instant;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_engine::{Engine, EngineConfig};
use tiercache_policy::{CacheConfig, CleaningConfig, PromotionConfig, WritePolicy};

const THREADS: usize = 2;

/// Runs `op` `n` times on each of [`THREADS`] threads; (requests per second, p50 ns, p99 ns).
fn timed(n: usize, op: impl Fn(&mut Xoshiro256PlusPlus, &mut [u8]) + Sync) -> (f64, u64, u64) {
    let start = Instant::now();
    let mut all: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let op = &op;
                s.spawn(move || {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(t as u64 + 1);
                    let mut buf = vec![t as u8; 4096];
                    let mut times = Vec::with_capacity(n);
                    for _ in 0..n {
                        let t0 = Instant::now();
                        op(&mut rng, &mut buf);
                        times.push(t0.elapsed().as_nanos() as u64);
                    }
                    times
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("thread"))
            .collect()
    });
    let secs = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let at = |q: f64| all[((all.len() - 1) as f64 * q) as usize];
    ((n * THREADS) as f64 / secs, at(0.5), at(0.99))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .map(|a| a.parse().expect("OPS_PER_THREAD: a number"))
        .unwrap_or(300_000);
    let mib: u64 = args
        .next()
        .map(|a| a.parse().expect("CACHE_MIB: a number"))
        .unwrap_or(128);
    let capacity = mib << 20;
    // Every line of the hot set fits; the cache keeps a few lines free beside it.
    let hot = capacity - capacity / 16;
    let cfg = CacheConfig {
        capacity,
        line_size: 4096,
        write_policy: WritePolicy::WriteBack,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::None,
        ..CacheConfig::default()
    };
    let (c, b): (Arc<dyn BlockDevice>, Arc<dyn BlockDevice>) = (
        Arc::new(MemDevice::new(
            (capacity + capacity / 8 + (8 << 20)) as usize,
        )),
        Arc::new(MemDevice::new(hot as usize)),
    );
    let engine = Engine::with_devices(&cfg, &EngineConfig::default(), c, b).expect("engine");
    // Every hot line resident (clean: read in once), so what follows hits.
    let mut line = vec![0u8; 4096];
    for at in (0..hot).step_by(4096) {
        engine.read(&mut line, at).unwrap();
    }
    let aligned = |rng: &mut Xoshiro256PlusPlus| rng.gen_range(0..hot / 4096) * 4096;
    let before = engine.stats();
    let (read_iops, read_p50, read_p99) = timed(n, |rng, buf| {
        engine.read(buf, aligned(rng)).unwrap();
    });
    let (write_iops, write_p50, write_p99) = timed(n / 2, |rng, buf| {
        engine.write(buf, aligned(rng), false).unwrap();
    });
    let st = engine.stats();
    assert_eq!(st.errors, 0);
    let served = st.cache.full_hit_requests - before.cache.full_hit_requests;
    assert!(
        served >= (n + n / 2) as u64 * THREADS as u64 * 99 / 100,
        "the measured requests were not hits: {served}"
    );
    println!("{THREADS} threads, {mib} MiB cache of 4 KiB lines, every request a hit");
    println!("read_hit iops={read_iops:.0} p50_ns={read_p50} p99_ns={read_p99}");
    println!("write_hit iops={write_iops:.0} p50_ns={write_p50} p99_ns={write_p99}");
}
