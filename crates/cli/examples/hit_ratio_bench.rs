//! Times tiercache's hit-ratio-only LRU over a trace file, reading included (as libCacheSim's
//! `cachesim` does), and prints records per second, for a side-by-side comparison with
//! `python3 scripts/compare_libcachesim.py --time FILE --sizes LINES --policies lru`.
//!
//! `cargo run --release -p tiercache --example hit_ratio_bench -- FILE CACHE_LINES [FORMAT] [EVICTION]`
//! (FORMAT defaults to `oracle-general`, EVICTION to `lru`).
//!
//! A 20M-record zipf oracleGeneral file:
//! `cargo run --release -p tiercache --example zipf_oracle -- /tmp/zipf20m.oracleGeneral`.

use std::time::Instant;

use tiercache_run::experiment::load_str;
use tiercache_run::sim::run_experiment;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(file), Some(lines)) = (args.first(), args.get(1)) else {
        anyhow::bail!("usage: hit_ratio_bench FILE CACHE_LINES [FORMAT] [EVICTION]");
    };
    let lines: u64 = lines.parse()?;
    let format = args.get(2).map_or("oracle-general", String::as_str);
    let eviction = args.get(3).map_or("lru", String::as_str);
    let cfg = format!(
        "[run]\nmode = 'hit-ratio'\n[workload]\ntrace = '{file}'\nformat = '{format}'\nreplay = 'fast'\n\
         [cache]\ncapacity = {}\nline_size = 4096\neviction = '{eviction}'\npromotion = {{ policy = 'always' }}\n",
        lines * 4096
    );
    let runs = load_str(&cfg, "hit_ratio_bench", &[])?;
    let started = Instant::now();
    let outcome = run_experiment(&runs[0])?;
    let seconds = started.elapsed().as_secs_f64();
    let m = &outcome.record.metrics;
    let records = m.requests;
    println!(
        "{{\"records\": {records}, \"seconds\": {seconds:.3}, \"records_per_s\": {:.0}, \"miss_ratio\": {}}}",
        records as f64 / seconds,
        1.0 - m.hit_ratio
    );
    Ok(())
}
