//! Agreement with libCacheSim, the reference cache simulator (PyPI package `libcachesim`).
//!
//! Block traces (every fixture) and a synthetic zipf trace are converted to oracleGeneral, one
//! record per 4 KiB line, then simulated by tiercache's hit-ratio-only mode and by libCacheSim
//! (scripts/compare_libcachesim.py) at several cache sizes. LRU, FIFO, SLRU, 2Q, LFU and LRU-K
//! must give the same miss ratio exactly, CLOCK, ARC, S3-FIFO and SIEVE within 1e-3, and Belady the same miss
//! count (libCacheSim reads the next access times the converter wrote; tiercache computes its
//! own from the trace, docs/design.md §12).
//!
//! CAR, CLOCK-Pro, W-TinyLFU and LeCaR are defined differently from libCacheSim's (each policy
//! file in crates/eviction says how), so their miss ratios are bounded, not matched: CAR within
//! 0.04 of libCacheSim's ARC (the package has no CAR), LeCaR within 0.01 of libCacheSim's LeCaR,
//! W-TinyLFU within 0.06 of libCacheSim's WTinyLFU from 100 lines (below, libCacheSim's caches
//! nothing), CLOCK-Pro below libCacheSim's ClockPro (which loses returning test keys). Measured
//! on these fixtures: 0.030, 0.004, 0.053 (cloudphysics, 50000 lines) and 0.005–0.15 below.
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
/// Policies bounded against a libCacheSim policy: (tiercache policy, libCacheSim policy, bound on
/// the miss-ratio difference; `None`: tiercache's must be lower), see the module docs.
const BOUNDED: [(&str, &str, Option<f64>); 4] = [
    ("car", "arc", Some(0.04)),
    ("lecar", "lecar", Some(0.01)),
    ("w-tinylfu", "w-tinylfu", Some(0.06)),
    ("clock-pro", "clock-pro", None),
];
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
            &POLICIES
                .iter()
                .chain(["clock-pro", "w-tinylfu", "lecar"].iter())
                .copied()
                .collect::<Vec<_>>()
                .join(","),
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

/// Compares every policy of [`POLICIES`] and, when `bounded`, those of [`BOUNDED`].
fn compare(trace: &Path, sizes: &[u64], bounded: bool) {
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
    if !bounded {
        return;
    }
    for (policy, lcs_policy, bound) in BOUNDED {
        for &lines in sizes {
            let theirs = reference_miss_ratio(&reference, lcs_policy, lines);
            let (ours, _) = tiercache_miss_ratio(trace, policy, lines);
            let ok = match bound {
                Some(_) if policy == "w-tinylfu" && lines < 100 => theirs == 1.0,
                Some(b) => (ours - theirs).abs() <= b,
                None => ours < theirs,
            };
            assert!(
                ok,
                "{} {policy} {lines} lines: tiercache {ours} vs libCacheSim {lcs_policy} {theirs} (bound {bound:?})",
                trace.display()
            );
        }
    }
}

fn reference_miss_ratio(reference: &serde_json::Value, policy: &str, lines: u64) -> f64 {
    reference["policies"][policy][lines.to_string()]["miss_ratio"]
        .as_f64()
        .unwrap()
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
        compare(&to_oracle(dir.path(), fixture), sizes, true);
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
    compare(&path, &[100, 1000, 10000], false);
}
