//! Writes a synthetic zipf trace in libCacheSim's oracleGeneral format, for benchmarks against
//! object-cache simulators on the same file.
//!
//! `cargo run --release -p tiercache --example zipf_oracle -- OUT [records] [blocks] [theta]`
//! (defaults: 20M records over 2M distinct 4 KiB blocks, θ = 0.99).

use rand::SeedableRng;
use rand_distr::{Distribution, Zipf};
use tiercache_core::Request;
use tiercache_trace::{OutputFormat, VolumeMap};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = args
        .first()
        .ok_or_else(|| anyhow::anyhow!("usage: zipf_oracle OUT [records] [blocks] [theta]"))?;
    let records: u64 = args.get(1).map_or(Ok(20_000_000), |s| s.parse())?;
    let blocks: u64 = args.get(2).map_or(Ok(2_000_000), |s| s.parse())?;
    let theta: f64 = args.get(3).map_or(Ok(0.99), |s| s.parse())?;
    let mut w = tiercache_trace::create_writer(out, OutputFormat::OracleGeneral, 4096)?;
    let volumes = VolumeMap::default();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(42);
    let zipf = Zipf::new(blocks, theta)?;
    for i in 0..records {
        // Scatter ranks so hot blocks are not neighbours.
        let block = (zipf.sample(&mut rng) as u64 - 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) % blocks;
        w.write(&Request::read(block * 4096, 4096).at(i * 1000), &volumes)?;
    }
    let summary = w.finish(&volumes, None)?;
    eprintln!("{out}: {summary:?}");
    Ok(())
}
