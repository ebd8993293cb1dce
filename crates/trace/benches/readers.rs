//! Criterion benchmarks of the native and MSR CSV readers on generated 1M-record files.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tiercache_trace::synth::{write_synthetic_msr, write_synthetic_native};
use tiercache_trace::{bench_read, Format};

const N: u64 = 1_000_000;

fn readers(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let native = dir
        .path()
        .join("b.tctrace")
        .to_str()
        .expect("utf-8")
        .to_string();
    let csv = dir
        .path()
        .join("b.csv")
        .to_str()
        .expect("utf-8")
        .to_string();
    write_synthetic_native(&native, N).expect("native");
    write_synthetic_msr(&csv, N).expect("csv");
    let mut g = c.benchmark_group("read");
    g.throughput(Throughput::Elements(N));
    g.sample_size(10);
    g.bench_function("native", |b| {
        b.iter(|| bench_read(&native, Some(Format::Native)).expect("read"))
    });
    g.bench_function("msr-csv", |b| {
        b.iter(|| bench_read(&csv, Some(Format::Msr)).expect("read"))
    });
    g.finish();
}

criterion_group!(benches, readers);
criterion_main!(benches);
