//! The file-level experiment (SPEC §4.9) in the simulator: the four variants on the three file
//! workloads, then file-level against block-level caching (without and with TRIM) at several
//! cache sizes. Prints Markdown tables; deterministic (fixed seeds).
//!
//! `cargo run --release -p tiercache-filecache --example file_level [-- --quick] [--json FILE]`

use std::io::Write;

use tiercache_filecache::sim::{simulate, Level, SimConfig, SimResult};
use tiercache_filecache::workload::{generate, summarize, WorkloadKind, WorkloadSpec};
use tiercache_filecache::Variant;

const BLOCK: u64 = 4096;

fn spec(kind: WorkloadKind, quick: bool) -> WorkloadSpec {
    let (files, transactions) = match (kind, quick) {
        (WorkloadKind::Mail, false) => (2000, 20000),
        (WorkloadKind::Mail, true) => (500, 4000),
        (WorkloadKind::FileServer, false) => (50, 600),
        (WorkloadKind::FileServer, true) => (20, 150),
        (WorkloadKind::WebServer, false) => (1000, 3000),
        (WorkloadKind::WebServer, true) => (300, 600),
    };
    WorkloadSpec {
        kind,
        files,
        transactions,
        seed: 42,
    }
}

fn mib(blocks: u64) -> f64 {
    (blocks * BLOCK) as f64 / (1024.0 * 1024.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let json_path = args
        .iter()
        .position(|a| a == "--json")
        .map(|i| args.get(i + 1).cloned().ok_or("--json needs a file name"))
        .transpose()?;
    for a in &args {
        if a.starts_with("--") && a != "--quick" && a != "--json" {
            return Err(format!("unknown option {a}: expected --quick or --json FILE").into());
        }
    }
    let mut records: Vec<serde_json::Value> = Vec::new();
    let out = std::io::stdout();
    let mut out = out.lock();

    writeln!(out, "## Workloads\n")?;
    writeln!(out, "| workload | files created | deleted | whole-file reads | appends | MiB written | MiB read |")?;
    writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")?;
    let streams: Vec<_> = WorkloadKind::ALL
        .iter()
        .map(|&k| (k, generate(&spec(k, quick))))
        .collect();
    for (kind, ops) in &streams {
        let s = summarize(ops);
        writeln!(
            out,
            "| {kind} | {} | {} | {} | {} | {:.1} | {:.1} |",
            s.files_created,
            s.files_deleted,
            s.reads,
            s.appends,
            s.bytes_written as f64 / 1048576.0,
            s.bytes_read as f64 / 1048576.0
        )?;
    }

    // 1. The four variants, file level, one cache size per workload (a quarter of what it writes).
    writeln!(
        out,
        "\n## Four variants, file-level cache (4 KiB blocks, LRU)\n"
    )?;
    writeln!(out, "| workload | cache MiB | variant | read hit ratio | store MiB written | store MiB read | write-backs | blocks freed by deletes | write-backs cancelled |")?;
    writeln!(
        out,
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    )?;
    for (kind, ops) in &streams {
        let written = summarize(ops).bytes_written;
        let capacity = ((written / BLOCK) / 4).max(64) as u32;
        for variant in Variant::ALL {
            let r = simulate(
                ops,
                SimConfig {
                    level: Level::File,
                    variant,
                    capacity_blocks: capacity,
                    block_size: BLOCK,
                },
            );
            writeln!(
                out,
                "| {kind} | {:.0} | {variant} | {:.3} | {:.1} | {:.1} | {} | {} | {} |",
                mib(capacity as u64),
                r.hit_ratio(),
                mib(r.store_blocks_written),
                mib(r.store_blocks_read),
                r.write_backs,
                r.freed_by_delete,
                r.write_backs_cancelled
            )?;
            records.push(record("variants", *kind, &r));
        }
    }

    // 2. File level against block level (write-back), several cache sizes.
    writeln!(
        out,
        "\n## File-level vs block-level write-back cache, without and with TRIM\n"
    )?;
    writeln!(out, "| workload | cache MiB | level | read hit ratio | store MiB written | dead blocks written back | blocks freed by deletes | files created / deleted |")?;
    writeln!(
        out,
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"
    )?;
    for (kind, ops) in &streams {
        let written_blocks = summarize(ops).bytes_written / BLOCK;
        for fraction in [32, 8, 2] {
            let capacity = (written_blocks / fraction).max(64) as u32;
            for level in [
                Level::File,
                Level::Block { trim: false },
                Level::Block { trim: true },
            ] {
                let r = simulate(
                    ops,
                    SimConfig {
                        level,
                        variant: Variant::WB,
                        capacity_blocks: capacity,
                        block_size: BLOCK,
                    },
                );
                writeln!(
                    out,
                    "| {kind} | {:.0} | {} | {:.3} | {:.1} | {} | {} | {} / {} |",
                    mib(capacity as u64),
                    level.name(),
                    r.hit_ratio(),
                    mib(r.store_blocks_written),
                    r.dead_write_backs,
                    r.freed_by_delete,
                    r.files_created,
                    r.files_deleted
                )?;
                records.push(record("levels", *kind, &r));
            }
        }
    }
    if let Some(path) = json_path {
        let mut f = std::fs::File::create(&path)?;
        for r in records {
            writeln!(f, "{r}")?;
        }
        eprintln!("wrote {path}");
    }
    Ok(())
}

fn record(table: &str, kind: WorkloadKind, r: &SimResult) -> serde_json::Value {
    let mut v = serde_json::to_value(r).expect("results serialise");
    v["table"] = table.into();
    v["workload"] = kind.name().into();
    v["read_hit_ratio"] = r.hit_ratio().into();
    v
}
