//! A power cut under a write-back cache over a disk with a volatile write cache
//! (docs/design.md §5.1): the disk acknowledges the cleaner's write-backs into its cache, so
//! without a FLUSH before the lines count as clean a cut loses write-backs the cache will
//! never redo; with `run.write_back_barrier = "flush"` it loses none of them.

use tiercache_core::Nanos;
use tiercache_policy::{Cache, CacheConfig, CleaningConfig, WritePolicy};
use tiercache_sim::testing::UniformSource;
use tiercache_sim::{
    simulate, DeviceConfig, PowerCutReport, RunLimits, SimConfig, WriteBackBarrier,
};

const CUT: Nanos = 400_000_000;

/// 8 jobs of random 4 KiB writes over 16 MiB through a 64 MiB write-back cache (no line is
/// evicted: every write-back is the cleaner's) to one `hdd-c2-sas` with its 64 MiB write
/// cache, cut at 0.4 s. Returns the cut's report and the backend's flush ops.
fn run(barrier: WriteBackBarrier, write_cache: u64) -> (PowerCutReport, u64) {
    let cleaning = CleaningConfig::Aggressive {
        period_ns: 1_000_000,
        batch: 32,
    };
    run_with(barrier, write_cache, 64 << 20, cleaning)
}

/// As `run`, with a cache of `capacity` bytes cleaned by `cleaning`.
fn run_with(
    barrier: WriteBackBarrier,
    write_cache: u64,
    capacity: u64,
    cleaning: CleaningConfig,
) -> (PowerCutReport, u64) {
    let mut c = Cache::new(&CacheConfig {
        capacity,
        line_size: 4096,
        write_policy: WritePolicy::WriteBack,
        cleaning,
        ..Default::default()
    })
    .unwrap();
    let mut src = UniformSource::closed(7, 8, 1, 1_000_000, 16 << 20, 4096, 0.0);
    let cfg = SimConfig {
        cache_device: DeviceConfig::preset("sata-ssd-863a"),
        backend: DeviceConfig {
            write_cache: Some(write_cache),
            ..DeviceConfig::preset("hdd-c2-sas")
        },
        run: RunLimits {
            write_back_barrier: barrier,
            power_cut_ns: Some(CUT),
            ..Default::default()
        },
        ..Default::default()
    };
    let out = simulate(&mut c, &mut src, &cfg).unwrap();
    let flushes = out.devices["backend"].by_cause
        [tiercache_sim::device::cause_index(tiercache_core::OpCause::Flush)];
    // The record carries the same report.
    assert_eq!(out.metrics.power_cut, out.power_cut);
    (out.power_cut.expect("a cut was configured"), flushes)
}

#[test]
fn without_a_flush_a_power_cut_loses_acknowledged_write_backs_and_with_it_none() {
    let (none, none_flushes) = run(WriteBackBarrier::None, 64 << 20);
    let (flush, flushes) = run(WriteBackBarrier::Flush, 64 << 20);
    eprintln!("no barrier: {none:?}, {none_flushes} flushes\nflush: {flush:?}, {flushes} flushes");
    assert_eq!(none.at_ns, CUT);
    assert_eq!(none_flushes, 0);
    assert!(none.write_backs_done > 100, "{none:?}");
    assert!(
        none.lost_clean_lines > 0 && none.lost_acknowledged_writes > 0,
        "without the flush, acknowledged write-backs counted clean are lost: {none:?}"
    );
    // Fewer jobs finish: each waits for its FLUSH, which waits for the drive's cache to
    // destage what it held (random 4 KiB runs at a few ms each).
    assert!(flush.write_backs_done > 0, "{flush:?}");
    assert!(flushes > 0);
    assert_eq!(
        flush.lost_clean_lines, 0,
        "with the flush, no line counted clean was lost: {flush:?}"
    );
    // The disk still loses acknowledged writes of jobs not yet finished: their lines are
    // not counted clean, so the cache writes them back again after the restart.
    // Without a volatile cache nothing is lost either way, and no flush is sent.
    for barrier in [WriteBackBarrier::None, WriteBackBarrier::Flush] {
        let (r, f) = run(barrier, 0);
        assert_eq!(r.lost_clean_lines, 0, "{barrier:?}: {r:?}");
        assert_eq!(r.lost_acknowledged_writes, 0, "{barrier:?}: {r:?}");
        assert_eq!(f, 0, "{barrier:?}");
    }
}

/// Eviction write-backs (a 1 MiB cache over the 16 MiB written, no cleaner: every dirty
/// victim is written back on the request's path): without the barrier a cut loses evicted
/// lines' data the drive had acknowledged; with it the slot's new data waits for a FLUSH, and
/// none is lost.
#[test]
fn eviction_write_backs_wait_for_the_flush_too() {
    let (none, none_flushes) = run_with(
        WriteBackBarrier::None,
        64 << 20,
        1 << 20,
        CleaningConfig::None,
    );
    let (flush, flushes) = run_with(
        WriteBackBarrier::Flush,
        64 << 20,
        1 << 20,
        CleaningConfig::None,
    );
    eprintln!("no barrier: {none:?}, {none_flushes} flushes\nflush: {flush:?}, {flushes} flushes");
    assert_eq!(none_flushes, 0);
    assert!(
        none.write_backs_done > 0 && none.lost_clean_lines > 0,
        "{none:?}"
    );
    assert!(flushes > 0);
    assert!(flush.write_backs_done > 0, "{flush:?}");
    assert_eq!(flush.lost_clean_lines, 0, "{flush:?}");
}

/// The settings load from TOML by their names.
#[test]
fn the_settings_load() {
    let run: RunLimits =
        toml::from_str("write_back_barrier = 'flush'\npower_cut_ns = '2s'").unwrap();
    assert_eq!(run.write_back_barrier, WriteBackBarrier::Flush);
    assert_eq!(run.power_cut_ns, Some(2_000_000_000));
    assert!(toml::from_str::<RunLimits>("write_back_barrier = 'fua'").is_err());
}
