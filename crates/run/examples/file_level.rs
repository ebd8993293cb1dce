//! The file-level experiment (docs/design.md §4.9) in the simulator: the four variants on the three
//! file workloads, then file-level against block-level caching (without and with TRIM) at several
//! cache sizes. Prints Markdown tables; deterministic (fixed seeds). The runs are
//! [`tiercache_run::file_level::run_file_level`]; this prints them.
//!
//! `cargo run --release -p tiercache-run --example file_level [-- --quick] [--json FILE]`

use std::io::Write;

use tiercache_run::file_level::{run_file_level, BLOCK};

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
    let results = run_file_level(quick);
    let out = std::io::stdout();
    let mut out = out.lock();

    writeln!(out, "## Workloads\n")?;
    writeln!(out, "| workload | files created | deleted | whole-file reads | appends | MiB written | MiB read |")?;
    writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")?;
    for (kind, s) in &results.workloads {
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
    for run in &results.variants {
        let (kind, r) = (run.workload, &run.result);
        writeln!(
            out,
            "| {kind} | {:.0} | {} | {:.3} | {:.1} | {:.1} | {} | {} | {} |",
            mib(r.capacity_blocks as u64),
            r.variant,
            r.hit_ratio(),
            mib(r.store_blocks_written),
            mib(r.store_blocks_read),
            r.write_backs,
            r.freed_by_delete,
            r.write_backs_cancelled
        )?;
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
    for run in &results.levels {
        let (kind, r) = (run.workload, &run.result);
        writeln!(
            out,
            "| {kind} | {:.0} | {} | {:.3} | {:.1} | {} | {} | {} / {} |",
            mib(r.capacity_blocks as u64),
            r.level,
            r.hit_ratio(),
            mib(r.store_blocks_written),
            r.dead_write_backs,
            r.freed_by_delete,
            r.files_created,
            r.files_deleted
        )?;
    }
    if let Some(path) = json_path {
        let mut f = std::fs::File::create(&path)?;
        for r in results.records() {
            writeln!(f, "{r}")?;
        }
        eprintln!("wrote {path}");
    }
    Ok(())
}
