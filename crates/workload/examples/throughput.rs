//! Measures generation rate on one core:
//! `cargo run --release -p tiercache-workload --example throughput [-- <requests>]`.
//!
//! Prints the rate per second of this thread's CPU time (what one core sustains, independent of
//! other load on the machine) and per second of wall time.

use std::time::Instant;

/// CPU time consumed by this thread, in seconds.
fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
use tiercache_workload::{AddressDist, BlockSize, SyntheticWorkload, WorkloadSpec};

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000_000);
    let base = WorkloadSpec {
        footprint: 64 << 30,
        read_fraction: 0.7,
        ..WorkloadSpec::default()
    };
    let cases = [
        (
            "uniform",
            WorkloadSpec {
                distribution: AddressDist::Uniform,
                ..base.clone()
            },
        ),
        (
            "zipf theta=0.9",
            WorkloadSpec {
                distribution: AddressDist::Zipf {
                    theta: 0.9,
                    scramble: true,
                },
                ..base.clone()
            },
        ),
        (
            "zipf theta=1.2",
            WorkloadSpec {
                distribution: AddressDist::Zipf {
                    theta: 1.2,
                    scramble: true,
                },
                ..base.clone()
            },
        ),
        (
            "pareto shape=0.5",
            WorkloadSpec {
                distribution: AddressDist::Pareto {
                    shape: 0.5,
                    scramble: true,
                },
                ..base.clone()
            },
        ),
        (
            "normal",
            WorkloadSpec {
                distribution: AddressDist::Normal {
                    mean_fraction: 0.5,
                    stddev_fraction: 0.1,
                },
                ..base.clone()
            },
        ),
        (
            "sequential",
            WorkloadSpec {
                distribution: AddressDist::Sequential,
                ..base.clone()
            },
        ),
        (
            "uniform 4K:3/64K:1",
            WorkloadSpec {
                block_sizes: vec![
                    BlockSize {
                        size: 4096,
                        weight: 3.0,
                    },
                    BlockSize {
                        size: 65536,
                        weight: 1.0,
                    },
                ],
                ..base.clone()
            },
        ),
        (
            "open-loop poisson zipf 0.9",
            WorkloadSpec {
                rate_iops: Some(1e6),
                distribution: AddressDist::Zipf {
                    theta: 0.9,
                    scramble: true,
                },
                ..base.clone()
            },
        ),
    ];
    for (name, spec) in cases {
        let stream = SyntheticWorkload::new(&spec)
            .expect("valid spec")
            .into_stream();
        let start = Instant::now();
        let cpu_start = thread_cpu_seconds();
        let mut acc = 0u64;
        for r in stream.take(n as usize) {
            acc = acc.wrapping_add(r.offset ^ r.len ^ r.time_ns);
        }
        let cpu = thread_cpu_seconds() - cpu_start;
        let wall = start.elapsed().as_secs_f64();
        println!(
            "{name:28} {:6.1} M req/s per CPU second  {:6.1} M req/s wall  ({n} requests, checksum {acc:x})",
            n as f64 / cpu / 1e6,
            n as f64 / wall / 1e6
        );
    }
}
