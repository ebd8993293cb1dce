//! What finding a clean victim costs when most of the cache is dirty, under
//! `dirty_full = "bypass"` (victims must be clean).
//!
//! `cargo run --release -p tiercache-policy --example clean_victim -- [dirty_lines] [misses]`
//!
//! A 65,536-line write-back cache without cleaning first takes `dirty_lines` writes (default
//! 16,384), then clean reads fill the rest; then `misses` reads of new lines (default 100,000)
//! each need a clean victim. Prints, per eviction policy, the misses handled per second (wall
//! clock: the runs are too short for the scheduler's CPU-time ticks) and the hit/bypass counts (the same whatever the speed). Where dirty lines sit at the
//! policy's evict-next end, a victim search that walks past them costs `dirty_lines` steps per
//! miss; with dirty lines held out of the policy it costs one.

use std::time::Instant;
use tiercache_core::Request;
use tiercache_policy::{
    Cache, CacheConfig, CleaningConfig, DirtyFullPolicy, EvictionKind, WritePolicy,
};

fn main() {
    let mut args = std::env::args().skip(1);
    let dirty: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(16_384);
    let misses: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    const LINES: u64 = 65_536;
    const LINE: u64 = 4096;
    assert!(dirty < LINES, "dirty_lines must be below {LINES}");
    for kind in EvictionKind::ALL {
        let mut cache = Cache::new(&CacheConfig {
            capacity: LINES * LINE,
            line_size: LINE,
            eviction: kind,
            write_policy: WritePolicy::WriteBack,
            cleaning: CleaningConfig::None,
            dirty_full: DirtyFullPolicy::Bypass,
            ..Default::default()
        })
        .expect("valid cache");
        for i in 0..dirty {
            cache
                .access(&Request::write(i * LINE, LINE), None)
                .expect("write");
        }
        for i in dirty..LINES {
            cache
                .access(&Request::read(i * LINE, LINE), None)
                .expect("read");
        }
        let t0 = Instant::now();
        for i in 0..misses {
            cache
                .access(&Request::read((LINES + i) * LINE, LINE), None)
                .expect("read");
        }
        let secs = t0.elapsed().as_secs_f64();
        let s = cache.stats();
        println!(
            "{:8} {:>10.3} M misses/s ({misses} misses past {dirty} dirty lines in {secs:.4} s; evictions {}, dirty lines {})",
            kind.as_str(),
            misses as f64 / secs / 1e6,
            s.evictions,
            cache.dirty_lines(),
        );
    }
}
