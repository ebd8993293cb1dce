//! The docs/design.md §8 findings, reproduced as directions with margins on modelled devices.
//!
//! Each test builds configs in the same language users write, runs them through the same code
//! as `tiercache sim`, and checks the direction of an effect the literature reports — not exact
//! figures. Margins are generous so a better model does not break them, but each would fail if
//! the mechanism behind the finding were broken (e.g. promotion ignoring nhit, flushes not
//! stalling writes, locks not contending).

use tiercache_metrics::RunMetrics;
use tiercache_run::experiment::load_str;
use tiercache_run::sim::run_experiment;

/// RAM-disk cache over a RAID-5 of six SATA SSDs, 8 × QD16 4 KiB requests.
const RAM_OVER_SSD: &str = r#"
name = "ram-over-ssd"
[run]
seed = 11
requests = 150000
warmup_requests = 100000
[workload]
jobs = 8
iodepth = 16
read_fraction = 0.8
footprint = "4GiB"
distribution = { type = "zipf", theta = 0.9 }
[cache]
capacity = "256MiB"
line_size = "4KiB"
promotion = { policy = "always" }
[devices]
cache = "ram-disk"
backend = { raid = "raid5", members = 6, member = "sata-ssd-5100" }
[host]
cores = 16
lookup = "ht-fg"
"#;

fn run(base: &str, sets: &[&str]) -> RunMetrics {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let runs = load_str(base, "test", &sets).expect("config");
    assert_eq!(runs.len(), 1);
    run_experiment(&runs[0]).expect("run").record.metrics
}

const HIGH_LOCALITY: &str = "workload.distribution = { type = 'zoned', zones = [{ access_fraction = 0.95, size_fraction = 0.05 }] }";

#[test]
fn nhit2_beats_always_in_iops_at_medium_locality() {
    let always = run(RAM_OVER_SSD, &[]);
    let nhit = run(
        RAM_OVER_SSD,
        &["cache.promotion = { policy = 'nhit', n = 2 }"],
    );
    // Fewer promotions leave the RAM disk's bandwidth to hits and send misses to the fast array.
    assert!(
        nhit.promotions < always.promotions / 2,
        "nhit promotes less: {} vs {}",
        nhit.promotions,
        always.promotions
    );
    assert!(
        nhit.iops > 1.3 * always.iops,
        "nhit-2 {:.0} IOPS vs always {:.0}",
        nhit.iops,
        always.iops
    );
    // ... even though its hit ratio is no higher.
    assert!(nhit.hit_ratio <= always.hit_ratio + 0.02);
}

#[test]
fn large_lines_hurt_always_but_not_nhit_at_high_locality() {
    let a4 = run(RAM_OVER_SSD, &[HIGH_LOCALITY]);
    let a32 = run(RAM_OVER_SSD, &[HIGH_LOCALITY, "cache.line_size = '32KiB'"]);
    let n4 = run(
        RAM_OVER_SSD,
        &[
            HIGH_LOCALITY,
            "cache.promotion = { policy = 'nhit', n = 2 }",
        ],
    );
    let n32 = run(
        RAM_OVER_SSD,
        &[
            HIGH_LOCALITY,
            "cache.promotion = { policy = 'nhit', n = 2 }",
            "cache.line_size = '32KiB'",
        ],
    );
    assert!(
        a32.iops < 0.85 * a4.iops,
        "always: 32K {:.0} vs 4K {:.0} IOPS",
        a32.iops,
        a4.iops
    );
    assert!(
        n32.hit_ratio > n4.hit_ratio + 0.03,
        "nhit gains hit ratio with 32K lines: {} vs {}",
        n32.hit_ratio,
        n4.hit_ratio
    );
    assert!(
        n32.iops > 0.9 * n4.iops,
        "nhit holds its IOPS with 32K lines: {:.0} vs {:.0}",
        n32.iops,
        n4.iops
    );
    assert!(
        n32.iops > 1.2 * a32.iops,
        "with 32K lines nhit beats always: {:.0} vs {:.0}",
        n32.iops,
        a32.iops
    );
}

const WRITE_BURST: &str = r#"
name = "write-burst"
[run]
seed = 7
requests = 100000
warmup_requests = 20000
[workload]
jobs = 8
iodepth = 16
read_fraction = 0.0
footprint = "4GiB"
distribution = { type = "uniform" }
[cache]
capacity = "64MiB"
line_size = "4KiB"
write_policy = "write-back"
[devices]
cache = "ram-disk"
backend = { raid = "raid5", members = 6, member = "sata-ssd-5100" }
"#;

#[test]
fn lazy_flushing_with_bypass_beats_aggressive_in_write_tail_latency() {
    let lazy = run(
        WRITE_BURST,
        &[
            "cache.cleaning = { policy = 'lazy', idle_ns = '1ms' }",
            "cache.dirty_full = 'bypass'",
        ],
    );
    let aggr128 = run(
        WRITE_BURST,
        &["cache.cleaning = { policy = 'aggressive', period_ns = '1ms', batch = 128 }"],
    );
    let aggr1024 = run(
        WRITE_BURST,
        &["cache.cleaning = { policy = 'aggressive', period_ns = '1ms', batch = 1024 }"],
    );
    let p = |m: &RunMetrics| m.latency_us.write.p9999;
    assert!(
        lazy.bypasses.values().sum::<u64>() > 0,
        "the cache filled with dirty data and writes went around it"
    );
    assert!(
        p(&lazy) * 5.0 < p(&aggr128),
        "p99.99 write: lazy+bypass {} us vs aggressive-128 {} us",
        p(&lazy),
        p(&aggr128)
    );
    assert!(p(&lazy) * 5.0 < p(&aggr1024));
}

#[test]
fn fine_grained_locks_scale_where_coarse_and_few_threads_saturate() {
    let iops = |arch: &str, jobs: u32| {
        run(
            RAM_OVER_SSD,
            &[
                &format!("host.lookup = '{arch}'"),
                &format!("workload.jobs = {jobs}"),
                "workload.iodepth = 4",
                "run.requests = 60000",
                "run.warmup_requests = 20000",
                "workload.distribution = { type = 'zoned', zones = [{ access_fraction = 0.95, size_fraction = 0.02 }] }",
            ],
        )
        .iops
    };
    let fg = [iops("ht-fg", 1), iops("ht-fg", 16)];
    let cg = [iops("ht-cg", 4), iops("ht-cg", 16), iops("ht-cg", 64)];
    let lt = [iops("lt", 16), iops("lt", 64)];
    assert!(fg[1] > 4.0 * fg[0], "HT+FG scales with submitters: {fg:?}");
    assert!(cg[2] <= cg[0] * 1.05, "HT+CG saturates (or falls): {cg:?}");
    assert!(lt[1] <= lt[0] * 1.05, "LT saturates: {lt:?}");
    assert!(
        fg[1] > 1.5 * lt[0].max(cg[1]),
        "at 16 submitters HT+FG leads: fg {fg:?} lt {lt:?} cg {cg:?}"
    );
}

#[test]
fn on_an_hdd_backend_architectures_come_out_close() {
    let hdd = [
        "devices.cache = 'sata-ssd-5100'",
        "devices.backend = { raid = 'raid5', members = 6, member = 'hdd-7200' }",
        "run.requests = 20000",
        "run.warmup_requests = 5000",
    ];
    let with = |extra: &str| {
        let mut s: Vec<&str> = hdd.to_vec();
        s.push(extra);
        run(RAM_OVER_SSD, &s).iops
    };
    let archs = [
        with("host.lookup = 'lt'"),
        with("host.lookup = 'ht-cg'"),
        with("host.lookup = 'ht-fg'"),
    ];
    let promos = [
        with("cache.promotion = { policy = 'always' }"),
        with("cache.promotion = { policy = 'nhit', n = 2 }"),
        with("cache.promotion = { policy = 'smq' }"),
    ];
    let spread = |v: &[f64]| {
        v.iter().cloned().fold(f64::MIN, f64::max) / v.iter().cloned().fold(f64::MAX, f64::min)
    };
    assert!(
        spread(&archs) < 1.15,
        "lookup architectures on HDDs: {archs:?}"
    );
    assert!(
        spread(&promos) < 1.35,
        "promotion policies on HDDs: {promos:?}"
    );
    // The same architectures differ several-fold on the fast backend.
    let fast = [
        run(RAM_OVER_SSD, &["host.lookup = 'ht-cg'"]).iops,
        run(RAM_OVER_SSD, &["host.lookup = 'ht-fg'"]).iops,
    ];
    assert!(
        spread(&fast) > 2.0,
        "on RAM over SSDs they differ: {fast:?}"
    );
}

/// On/off bursts in a closed loop: submitters go quiet during off periods, so the same number
/// of requests takes about (on + off) / on times as long in virtual time.
#[test]
fn closed_loop_bursts_idle_the_submitters() {
    let steady = run(
        RAM_OVER_SSD,
        &["run.requests = 40000", "run.warmup_requests = 0"],
    );
    let bursty = run(
        RAM_OVER_SSD,
        &[
            "run.requests = 40000",
            "run.warmup_requests = 0",
            "workload.bursts = { on = '1ms', off = '3ms' }",
        ],
    );
    let ratio = bursty.duration_ns as f64 / steady.duration_ns as f64;
    assert!(ratio > 2.5, "bursty run took {ratio:.2}x the steady one");
    assert!(bursty.iops < steady.iops / 2.5);
}
