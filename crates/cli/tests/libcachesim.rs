//! Agreement with libCacheSim, the reference cache simulator (PyPI package `libcachesim`).
//!
//! Block traces (every fixture) and a synthetic zipf trace are converted to oracleGeneral, one
//! record per 4 KiB line, then simulated by tiercache's hit-ratio-only mode and by libCacheSim
//! (scripts/compare_libcachesim.py) at several cache sizes. LRU, FIFO, SLRU, 2Q, LFU and LRU-K
//! must give the same miss ratio exactly, CLOCK, ARC, S3-FIFO and SIEVE within 1e-3, and Belady the same miss
//! count (libCacheSim reads the next access times the converter wrote; tiercache computes its
//! own from the trace, docs/design.md §12).
//!
//! Known differences, excluded by choosing sizes: libCacheSim's S3-FIFO caches nothing below 20
//! objects (its small queue would be empty), its 2Q nothing below 4; tiercache's admit lines at
//! any size. Every size is a multiple of 4, where SLRU's four segments fill the cache exactly
//! (eviction/src/slru.rs).

use rand::SeedableRng;
use rand_distr::{Distribution, Zipf};
use std::path::{Path, PathBuf};
use std::process::Command;
use tiercache_core::Request;
use tiercache_run::experiment::load_str;
use tiercache_run::sim::run_experiment;
use tiercache_trace::{OutputFormat, ReadOptions, VolumeMap};

const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/traces");
const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../scripts/compare_libcachesim.py"
);
const POLICIES: [&str; 11] = [
    "lru", "fifo", "clock", "arc", "s3-fifo", "sieve", "belady",
    // Policies researchers compare against (issue 35), exact like LRU and FIFO. LFUDA is left
    // out: tiercache's is the published one, libCacheSim's a variant (eviction/src/lfuda.rs;
    // the difference is pinned in eviction/tests/libcachesim_golden.rs).
    "slru", "2q", "lfu", "lru-k",
];

/// Runs libCacheSim; `None` (test skipped) when the package is missing outside CI.
fn libcachesim(trace: &Path, sizes: &[u64]) -> Option<serde_json::Value> {
    let sizes: Vec<String> = sizes.iter().map(u64::to_string).collect();
    let out = Command::new("python3")
        .args([
            SCRIPT,
            trace.to_str().unwrap(),
            "--sizes",
            &sizes.join(","),
            "--policies",
            &POLICIES.join(","),
        ])
        .output()
        .expect("python3");
    if out.status.code() == Some(3) {
        tiercache_testsupport::require(
            "libcachesim",
            "the libcachesim Python package",
            Some("`import libcachesim` failed".into()),
        );
        return None;
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// tiercache's miss ratio and line accesses for one policy and size on an oracleGeneral trace.
fn tiercache_miss_ratio(trace: &Path, policy: &str, lines: u64) -> (f64, u64) {
    let cfg = format!(
        "[run]\nmode = 'hit-ratio'\n[workload]\ntrace = '{}'\nformat = 'oracle-general'\nreplay = 'fast'\n\
         [cache]\ncapacity = {}\nline_size = 4096\neviction = '{policy}'\npromotion = {{ policy = 'always' }}\n",
        trace.display(),
        lines * 4096
    );
    let runs = load_str(&cfg, "libcachesim-test", &[]).unwrap();
    let m = run_experiment(&runs[0]).unwrap().record.metrics;
    // Every oracleGeneral record is one line.
    (1.0 - m.hit_ratio, m.requests)
}

fn compare(trace: &Path, sizes: &[u64]) {
    let Some(reference) = libcachesim(trace, sizes) else {
        return;
    };
    for policy in POLICIES {
        for &lines in sizes {
            let theirs = reference["policies"][policy][lines.to_string()]["miss_ratio"]
                .as_f64()
                .unwrap();
            let (ours, accesses) = tiercache_miss_ratio(trace, policy, lines);
            if policy == "belady" {
                let misses = |ratio: f64| (ratio * accesses as f64).round() as u64;
                assert_eq!(
                    misses(ours),
                    misses(theirs),
                    "{} belady {lines} lines: tiercache {ours} vs libCacheSim {theirs} of {accesses}",
                    trace.display()
                );
                continue;
            }
            let tolerance = if matches!(policy, "lru" | "fifo" | "slru" | "2q" | "lfu" | "lru-k") {
                1e-12
            } else {
                1e-3
            };
            assert!(
                (ours - theirs).abs() <= tolerance,
                "{} {policy} {lines} lines: tiercache {ours} vs libCacheSim {theirs}",
                trace.display()
            );
        }
    }
}

fn to_oracle(dir: &Path, fixture: &str) -> PathBuf {
    let out = dir.join(format!("{fixture}.oracleGeneral"));
    tiercache_trace::convert(
        &format!("{TRACES}/{fixture}"),
        None,
        out.to_str().unwrap(),
        OutputFormat::OracleGeneral,
        4096,
        &ReadOptions::default(),
    )
    .unwrap();
    out
}

#[test]
fn fixtures_agree_with_libcachesim() {
    let dir = tempfile::tempdir().unwrap();
    for (fixture, sizes) in [
        ("msr-hm0-sample.csv", &[20u64, 100, 500, 1500][..]),
        ("systor17-sample.csv.gz", &[20, 200, 2000][..]),
        ("tencent-cbs-sample.csv.bz2", &[100, 1000, 10000][..]),
        ("cloudphysics-w.vscsi", &[1000, 10000, 50000][..]),
    ] {
        compare(&to_oracle(dir.path(), fixture), sizes);
    }
}

#[test]
fn synthetic_zipf_agrees_with_libcachesim() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zipf.oracleGeneral");
    let mut w =
        tiercache_trace::create_writer(path.to_str().unwrap(), OutputFormat::OracleGeneral, 4096)
            .unwrap();
    let volumes = VolumeMap::default();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
    let zipf = Zipf::new(50_000, 0.9).unwrap();
    for i in 0..200_000u64 {
        let block =
            (zipf.sample(&mut rng) as u64 - 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000;
        w.write(
            &Request::read(block * 4096, 4096).at(i * 1_000_000),
            &volumes,
        )
        .unwrap();
    }
    w.finish(&volumes, None).unwrap();
    compare(&path, &[100, 1000, 10000]);
}
