//! Generation throughput: `cargo bench -p tiercache-workload --bench generate`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use tiercache_workload::{AddressDist, BlockSize, SyntheticWorkload, WorkloadSpec};

const BATCH: u64 = 1_000_000;

fn spec(distribution: AddressDist) -> WorkloadSpec {
    WorkloadSpec {
        footprint: 64 << 30,
        read_fraction: 0.7,
        distribution,
        ..WorkloadSpec::default()
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("generate");
    g.throughput(Throughput::Elements(BATCH));
    // Each iteration is a million requests: few samples give a stable rate and a short run.
    g.sample_size(10);
    let cases = [
        ("uniform", spec(AddressDist::Uniform)),
        (
            "zipf-0.9",
            spec(AddressDist::Zipf {
                theta: 0.9,
                scramble: true,
            }),
        ),
        (
            "zipf-1.2",
            spec(AddressDist::Zipf {
                theta: 1.2,
                scramble: true,
            }),
        ),
        (
            "pareto-0.5",
            spec(AddressDist::Pareto {
                shape: 0.5,
                scramble: true,
            }),
        ),
        ("sequential", spec(AddressDist::Sequential)),
        (
            "uniform-mixed-sizes",
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
                ..spec(AddressDist::Uniform)
            },
        ),
    ];
    for (name, s) in cases {
        let mut stream = SyntheticWorkload::new(&s).unwrap().into_stream();
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut acc = 0u64;
                for _ in 0..BATCH {
                    let r = stream.next().unwrap();
                    acc = acc.wrapping_add(r.offset ^ r.len);
                }
                black_box(acc)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
