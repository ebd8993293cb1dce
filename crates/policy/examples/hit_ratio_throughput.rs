//! Throughput of the policy core in hit-ratio-only mode (no plans, no timing).
//!
//! `cargo run --release -p tiercache-policy --example hit_ratio_throughput -- [requests] [blocks] [cache_lines] [policy]`
//!
//! Defaults: 20M requests, zipf(0.99) over 2M distinct 4 KiB blocks, a 200K-line LRU cache.
//! The stream is generated before timing so only the cache is measured. Prints requests/s,
//! the hit ratio and the metadata bytes per line.

use rand::SeedableRng;
use rand_distr::{Distribution, Zipf};
use std::time::Instant;
use tiercache_core::Request;
use tiercache_policy::{Cache, CacheConfig, CleaningConfig, EvictionKind, PromotionConfig};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let requests: usize = args
        .get(1)
        .map_or(20_000_000, |s| s.parse().expect("requests"));
    let blocks: u64 = args
        .get(2)
        .map_or(2_000_000, |s| s.parse().expect("blocks"));
    let lines: u64 = args
        .get(3)
        .map_or(200_000, |s| s.parse().expect("cache_lines"));
    let policy: EvictionKind = args.get(4).map_or(EvictionKind::Lru, |s| {
        serde_json::from_str(&format!("\"{s}\"")).expect("policy name")
    });

    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(42);
    let zipf = Zipf::new(blocks, 0.99).expect("zipf");
    // Scatter ranks over the address space so hot blocks are not neighbours.
    let stream: Vec<Request> = (0..requests)
        .map(|_| {
            let rank = zipf.sample(&mut rng) as u64 - 1;
            let block = rank.wrapping_mul(0x9E37_79B9_7F4A_7C15) % blocks;
            Request::read(block * 4096, 4096)
        })
        .collect();

    let cfg = CacheConfig {
        capacity: lines * 4096,
        line_size: 4096,
        eviction: policy,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::None,
        ..CacheConfig::default()
    };
    let mut cache = Cache::new(&cfg).expect("config");
    let t = Instant::now();
    for r in &stream {
        cache.access(r, None).expect("request");
    }
    let secs = t.elapsed().as_secs_f64();
    let s = cache.stats();
    println!(
        "policy={:?} requests={} blocks={} cache_lines={} seconds={:.3} requests_per_s={:.0} hit_ratio={:.4} line_metadata_bytes_per_line={:.1} metadata_bytes_per_line_with_promotion={:.1}",
        policy,
        requests,
        blocks,
        lines,
        secs,
        requests as f64 / secs,
        s.hit_ratio(),
        cache.line_metadata_bytes() as f64 / lines as f64,
        cache.metadata_bytes() as f64 / lines as f64,
    );
}
