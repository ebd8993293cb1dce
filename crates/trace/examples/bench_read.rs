//! Reading throughput of the native, oracleGeneral and MSR CSV readers on generated files.
//!
//! `cargo run --release -p tiercache-trace --example bench_read -- [RECORDS] [DIR] [native|oracle|msr]`
//! (default 5,000,000 records in /tmp, every format). Reading is batched
//! (`TraceReader::next_batch`), as the simulator, `analyze` and `trace stats` read. The files are generated, measured and
//! removed. Prints the best of three wall-clock rates and, because the machine may be shared,
//! the rate per CPU second of this thread (from /proc, 10 ms resolution).

use tiercache_trace::synth::{write_synthetic_msr, write_synthetic_native};
use tiercache_trace::{bench_read, Format};

/// User + system CPU seconds of the calling thread, if /proc provides them.
fn thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// `n` oracleGeneral records (24 bytes: u32 time, u64 obj_id, u32 obj_size, i64 next access)
/// over a million scattered 4 KiB objects of volume 0, a thousand per second.
fn write_oracle(path: &str, n: u64) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for i in 0..n {
        let obj = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000;
        std::io::Write::write_all(&mut out, &((i / 1000) as u32).to_le_bytes())?;
        std::io::Write::write_all(&mut out, &obj.to_le_bytes())?;
        std::io::Write::write_all(&mut out, &4096u32.to_le_bytes())?;
        std::io::Write::write_all(&mut out, &(-1i64).to_le_bytes())?;
    }
    std::io::Write::flush(&mut out)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(5_000_000);
    let dir = args.next().unwrap_or_else(|| "/tmp".into());
    let only = args.next();
    let native = format!("{dir}/tiercache-bench-{}.tctrace", std::process::id());
    let csv = format!("{dir}/tiercache-bench-{}.csv", std::process::id());
    let oracle = format!("{dir}/tiercache-bench-{}.oracleGeneral", std::process::id());
    write_synthetic_native(&native, n)?;
    write_synthetic_msr(&csv, n)?;
    write_oracle(&oracle, n)?;
    for (name, path, format) in [
        ("native", &native, Format::Native),
        ("oracle", &oracle, Format::OracleGeneral),
        ("msr", &csv, Format::Msr),
    ] {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        // First pass warms the page cache.
        bench_read(path, Some(format))?;
        let cpu0 = thread_cpu_seconds();
        let mut best: f64 = 0.0;
        for _ in 0..3 {
            best = best.max(bench_read(path, Some(format))?.records_per_sec);
        }
        let per_cpu = match (cpu0, thread_cpu_seconds()) {
            (Some(a), Some(b)) if b > a => format!(
                "{:.1} M records per CPU second",
                3.0 * n as f64 / (b - a) / 1e6
            ),
            _ => "CPU time unavailable".to_string(),
        };
        let size = std::fs::metadata(path)?.len();
        println!(
            "{name:8} {n} records, {:.1} MB: {:.1} M records/s wall (best of 3), {per_cpu}",
            size as f64 / 1e6,
            best / 1e6
        );
    }
    std::fs::remove_file(native)?;
    std::fs::remove_file(oracle)?;
    std::fs::remove_file(csv)?;
    Ok(())
}
