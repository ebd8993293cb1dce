//! Multi-tenant caches (docs/design.md §4.10): tenancy modes driving partitions and write policies.
//!
//! - the URD example of docs/design.md §4.10 gives a demand of 5 lines through the cache;
//! - a volume whose reuses are all writes over writes gets cache writes off (read-only), and
//!   its writes then leave the cache device alone;
//! - property: on random multi-volume traces, ECI's demand never exceeds TRD's for a volume
//!   in the same interval, nor its allocation while TRD's demands fit the cache; every mode's
//!   allocations sum to at most the cache;
//! - property: random reads, writes and trims with interval boundaries resizing partitions
//!   (static, eci, trd), every plan and flush job run on real bytes: reads return the newest
//!   data and after a final flush the backend holds every byte last written (no resize lost
//!   dirty data); whenever the cache says a cleaner poll on a busy cache device may be
//!   skipped, such a poll indeed starts nothing and changes nothing;
//! - one volume's scan cannot evict another's partition under `eci` or `static` (it does under
//!   `shared`, so the check can fail).

use proptest::prelude::*;
use std::collections::VecDeque;
use tiercache_core::{Op, Plan, Request, VolumeId};
use tiercache_policy::{
    Cache, CacheConfig, CleaningConfig, ExecutorState, FlushJob, TenancyConfig, TenancyModeKind,
    TenancyReport, WritePolicy,
};

mod common;
use common::{Bytes, VOLUMES, VOLUME_BYTES};

const INTERVAL: u64 = 1_000;

fn config(lines: u64, line_size: u64, tenancy: TenancyConfig) -> CacheConfig {
    CacheConfig {
        capacity: lines * line_size,
        line_size,
        cleaning: CleaningConfig::None,
        tenancy,
        ..CacheConfig::default()
    }
}

fn mode(mode: TenancyModeKind) -> TenancyConfig {
    TenancyConfig {
        mode,
        interval_ns: INTERVAL,
        ..TenancyConfig::default()
    }
}

fn at(now: u64) -> ExecutorState {
    ExecutorState {
        now,
        cache_idle_ns: u64::MAX / 2,
        ..ExecutorState::default()
    }
}

/// Checks the promise behind skipping cleaner polls (`Cache::cleaning_waits_for_idle_cache`,
/// here with lazy cleaning of `idle_ns = 0`): when it is made, a poll at `now` with foreground
/// I/O on the cache device starts no job, changes no state, and asks to be polled at `now + 1`
/// at the latest.
fn check_busy_poll_changes_nothing(cache: &mut Cache, now: u64) -> Result<(), TestCaseError> {
    if !cache.cleaning_waits_for_idle_cache() {
        return Ok(());
    }
    let busy = ExecutorState {
        now,
        cache_idle_ns: 0,
        cache: tiercache_policy::DeviceLoad {
            queued: 1,
            ..Default::default()
        },
        ..ExecutorState::default()
    };
    let before = (
        cache.stats().clone(),
        cache.partition_stats(),
        cache.dirty_lines(),
    );
    let mut jobs = Vec::new();
    cache.clean(&busy, &mut jobs);
    prop_assert!(
        jobs.is_empty(),
        "a skippable poll started {} jobs",
        jobs.len()
    );
    let after = (
        cache.stats().clone(),
        cache.partition_stats(),
        cache.dirty_lines(),
    );
    prop_assert_eq!(before, after);
    let next = cache.next_clean_poll(&busy);
    prop_assert!(next.is_none() || next == Some(now + 1), "{next:?} at {now}");
    Ok(())
}

fn line_req(op: Op, volume: u32, line: u64) -> Request {
    let r = match op {
        Op::Read => Request::read(line * 4096, 4096),
        _ => Request::write(line * 4096, 4096),
    };
    r.on_volume(VolumeId(volume))
}

/// Polls at the end of interval `k` (the schedule started at 0) and completes every resize
/// job at once; returns the report.
fn boundary(cache: &mut Cache, k: u64) -> TenancyReport {
    assert_eq!(
        cache.repartition(&at(k * INTERVAL)),
        Some((k + 1) * INTERVAL)
    );
    let mut jobs = Vec::new();
    cache.take_resize_jobs(&mut jobs);
    for j in jobs {
        cache.flush_done(j);
    }
    cache.audit();
    cache.tenancy_report().expect("a decision was made")
}

#[test]
fn the_spec_urd_example_gives_a_demand_of_five_lines() {
    let mut cache = Cache::new(&config(64, 4096, mode(TenancyModeKind::Eci))).unwrap();
    assert_eq!(cache.repartition(&at(0)), Some(INTERVAL));
    assert!(cache.tenancy_report().is_none(), "eci learns first");
    // W1 W2 R1 R3 R5 R6 R2
    for (op, line) in [
        (Op::Write, 1),
        (Op::Write, 2),
        (Op::Read, 1),
        (Op::Read, 3),
        (Op::Read, 5),
        (Op::Read, 6),
        (Op::Read, 2),
    ] {
        cache.access(&line_req(op, 0, line), None).unwrap();
    }
    let r = boundary(&mut cache, 1);
    assert_eq!(r.volumes.len(), 1);
    let v = r.volumes[0];
    assert_eq!((v.volume, v.demand_lines, v.allocation_lines), (0, 5, 5));
    assert_eq!(v.write_policy, WritePolicy::WriteBack, "reads after writes");
    assert_eq!(v.interval_hits, 2, "R1 and R2 hit in a 64-line cache");
    let p = cache.partition_of(VolumeId(0));
    assert_eq!(cache.partition_info(p).unwrap().capacity_lines, 5);
    // The traditional sizing of the same trace is the same here (no write reuse).
    let mut trd = Cache::new(&config(64, 4096, mode(TenancyModeKind::Trd))).unwrap();
    trd.repartition(&at(0));
    for (op, line) in [(Op::Write, 1), (Op::Write, 2), (Op::Read, 1), (Op::Read, 2)] {
        trd.access(&line_req(op, 0, line), None).unwrap();
    }
    assert_eq!(boundary(&mut trd, 1).volumes[0].demand_lines, 2);
}

#[test]
fn a_volume_whose_reuses_are_all_rewrites_gets_cache_writes_off() {
    let mut cache = Cache::new(&config(256, 4096, mode(TenancyModeKind::Eci))).unwrap();
    cache.repartition(&at(0));
    for _ in 0..4 {
        for line in 0..16 {
            // Volume 0 reads its lines again and again, volume 1 overwrites its own.
            cache.access(&line_req(Op::Read, 0, line), None).unwrap();
            cache.access(&line_req(Op::Write, 1, line), None).unwrap();
        }
    }
    let r = boundary(&mut cache, 1);
    let by_vol = |v: u32| *r.volumes.iter().find(|x| x.volume == v).unwrap();
    assert_eq!(by_vol(0).write_policy, WritePolicy::WriteBack);
    assert_eq!(by_vol(0).demand_lines, 16);
    assert_eq!(by_vol(1).write_policy, WritePolicy::ReadOnly);
    assert_eq!(
        by_vol(1).demand_lines,
        0,
        "no read ever reuses a line of volume 1"
    );
    assert_eq!(cache.write_policy(VolumeId(1)), WritePolicy::ReadOnly);
    // Its writes no longer touch the cache device; volume 0's reads still hit.
    let before = cache.volume_stats()[1].cache_bytes_written;
    let mut plan = Plan::new();
    for line in 0..16 {
        cache
            .access(&line_req(Op::Write, 1, line), Some(&mut plan))
            .unwrap();
        assert!(plan
            .ops
            .iter()
            .all(|o| o.device != tiercache_core::Device::Cache || o.len == 0));
        assert!(
            cache
                .access(&line_req(Op::Read, 0, line), None)
                .unwrap()
                .full_hit
        );
    }
    assert_eq!(cache.volume_stats()[1].cache_bytes_written, before);
    // A TRD cache sizes volume 1 for its rewrites and keeps writing them to the cache.
    let mut trd = Cache::new(&config(256, 4096, mode(TenancyModeKind::Trd))).unwrap();
    trd.repartition(&at(0));
    for _ in 0..4 {
        for line in 0..16 {
            trd.access(&line_req(Op::Write, 1, line), None).unwrap();
        }
    }
    let r = boundary(&mut trd, 1);
    assert_eq!(r.volumes[0].demand_lines, 16);
    assert_eq!(r.volumes[0].write_policy, WritePolicy::WriteBack);
}

/// A scan of volume 1 leaves volume 0's hot lines in place under `eci` and `static`; under
/// `shared` the same scan evicts them.
#[test]
fn a_scan_on_one_volume_cannot_evict_another_volumes_partition() {
    for kind in [
        TenancyModeKind::Eci,
        TenancyModeKind::Static,
        TenancyModeKind::Shared,
    ] {
        let t = TenancyConfig {
            shares: vec![1.0, 1.0],
            ..mode(kind)
        };
        let mut cache = Cache::new(&config(64, 4096, t)).unwrap();
        cache.repartition(&at(0));
        let mut scanned = 0;
        let mut scan = |cache: &mut Cache, n: u64| {
            for _ in 0..n {
                cache.access(&line_req(Op::Read, 1, scanned), None).unwrap();
                scanned += 1;
            }
        };
        // Interval 1: volume 0 loops over 24 lines, volume 1 scans.
        for _ in 0..3 {
            for line in 0..24 {
                cache.access(&line_req(Op::Read, 0, line), None).unwrap();
            }
            scan(&mut cache, 100);
        }
        if kind != TenancyModeKind::Shared {
            let r = boundary(&mut cache, 1);
            let v0 = r.volumes.iter().find(|v| v.volume == 0).unwrap();
            assert!(v0.allocation_lines >= 24, "{kind:?}: {r:?}");
        }
        // Interval 2: warm volume 0, a long scan, and volume 0 again.
        for line in 0..24 {
            cache.access(&line_req(Op::Read, 0, line), None).unwrap();
        }
        scan(&mut cache, 5_000);
        cache.audit();
        let hits = (0..24)
            .filter(|&l| {
                cache
                    .access(&line_req(Op::Read, 0, l), None)
                    .unwrap()
                    .full_hit
            })
            .count();
        if kind == TenancyModeKind::Shared {
            assert_eq!(hits, 0, "the shared check is meaningless");
        } else {
            assert_eq!(hits, 24, "{kind:?}: volume 0 lost lines to volume 1's scan");
        }
    }
}

/// A random multi-volume trace: volume `v` reads or writes lines of its own pattern.
fn trace_strategy() -> impl Strategy<Value = Vec<Vec<(u32, bool, u64)>>> {
    let access = (0u32..VOLUMES, 0u8..10, 0u64..48)
        .prop_map(|(v, kind, line)| (v, kind < 4 + v as u8, line % (12 + 12 * v as u64)));
    proptest::collection::vec(proptest::collection::vec(access, 0..200), 1..6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn eci_never_allocates_more_than_trd_and_no_mode_overcommits(
        intervals in trace_strategy(),
        lines in 8u64..96,
    ) {
        let kinds = [TenancyModeKind::Eci, TenancyModeKind::Trd, TenancyModeKind::Static];
        let mut caches: Vec<Cache> = kinds
            .iter()
            .map(|&k| Cache::new(&config(lines, 4096, mode(k))).unwrap())
            .collect();
        for c in &mut caches {
            c.repartition(&at(0));
        }
        for (k, accesses) in intervals.iter().enumerate() {
            for &(v, read, line) in accesses {
                let op = if read { Op::Read } else { Op::Write };
                for c in &mut caches {
                    c.access(&line_req(op, v, line), None).unwrap();
                }
            }
            let reports: Vec<TenancyReport> =
                caches.iter_mut().map(|c| boundary(c, k as u64 + 1)).collect();
            for (r, c) in reports.iter().zip(&caches) {
                let sum: u64 = r.volumes.iter().map(|v| v.allocation_lines).sum();
                prop_assert_eq!(sum, r.allocated_lines);
                prop_assert!(sum <= lines, "{}: {} lines allocated of {}", r.mode, sum, lines);
                let caps: u64 = c.partition_stats().iter().map(|p| p.capacity_lines).sum();
                prop_assert!(caps <= lines);
                for v in &r.volumes {
                    prop_assert!(v.allocation_lines <= v.demand_lines.max(v.allocation_lines));
                    prop_assert!(v.demand_lines <= lines);
                }
            }
            let (eci, trd) = (&reports[0], &reports[1]);
            prop_assert_eq!(eci.volumes.len(), trd.volumes.len());
            let trd_fits = trd.volumes.iter().map(|v| v.demand_lines).sum::<u64>() <= lines;
            for (e, t) in eci.volumes.iter().zip(&trd.volumes) {
                prop_assert_eq!(e.volume, t.volume);
                prop_assert!(e.demand_lines <= t.demand_lines, "interval {}: {:?} {:?}", k, e, t);
                prop_assert!(e.allocation_lines <= e.demand_lines);
                if trd_fits {
                    prop_assert!(e.allocation_lines <= t.allocation_lines, "interval {}: {:?} {:?}", k, e, t);
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Step {
    Req(Request),
    /// An interval boundary: the mode decides and partitions are resized.
    Boundary,
    /// Complete the oldest flush job in flight.
    Complete,
    Clean,
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let req = (0..VOLUMES, 0u8..10, 0u64..VOLUME_BYTES / 512, 1u64..24).prop_map(
        |(vol, kind, sector, sectors)| {
            let op = match kind {
                0..=4 => Op::Read,
                5..=8 => Op::Write,
                _ => Op::Trim,
            };
            Request {
                time_ns: 0,
                volume: VolumeId(vol),
                op,
                offset: sector * 512,
                len: sectors * 512 - if sectors % 5 == 2 { 37 } else { 0 },
            }
        },
    );
    prop_oneof![
        30 => req.prop_map(Step::Req),
        3 => Just(Step::Boundary),
        4 => Just(Step::Complete),
        1 => Just(Step::Clean),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn resizing_at_boundaries_loses_no_dirty_data(
        kind in proptest::sample::select(vec![TenancyModeKind::Eci, TenancyModeKind::Trd, TenancyModeKind::Static]),
        line_size in prop_oneof![Just(512u64), Just(4096)],
        lines in 4u64..40,
        steps in proptest::collection::vec(step_strategy(), 1..200),
        seed in any::<u8>(),
    ) {
        let t = TenancyConfig { waw_war_threshold: 0.3, ..mode(kind) };
        let mut cache = Cache::new(&CacheConfig {
            cleaning: CleaningConfig::Lazy { idle_ns: 0, batch: 3 },
            ..config(lines, line_size, t)
        }).unwrap();
        let mut bytes = Bytes::new(lines * line_size);
        let mut inflight: VecDeque<FlushJob> = VecDeque::new();
        let mut plan = Plan::new();
        let mut now = 0;
        cache.repartition(&at(now));
        let run_jobs = |jobs: Vec<FlushJob>, bytes: &mut Bytes, inflight: &mut VecDeque<FlushJob>| {
            for j in jobs {
                bytes.run(&j.plan, None);
                inflight.push_back(j);
            }
        };
        for (n, step) in steps.into_iter().enumerate() {
            match step {
                Step::Req(req) => {
                    let data: Vec<u8> = (0..req.len)
                        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(n as u8 ^ seed))
                        .collect();
                    cache.access(&req, Some(&mut plan)).unwrap();
                    let got = bytes.run(&plan, Some((&req, &data)));
                    if let Err(e) = bytes.check_and_record(&req, &got, &data) {
                        return Err(TestCaseError::fail(format!("step {n}: {e}")));
                    }
                }
                Step::Boundary => {
                    now += INTERVAL;
                    cache.repartition(&at(now));
                    // The resize's jobs wait to be taken: no poll may be skipped now.
                    check_busy_poll_changes_nothing(&mut cache, now)?;
                    let mut jobs = Vec::new();
                    cache.take_resize_jobs(&mut jobs);
                    run_jobs(jobs, &mut bytes, &mut inflight);
                    let caps: u64 = cache.partition_stats().iter().map(|p| p.capacity_lines).sum();
                    prop_assert!(caps <= lines);
                }
                Step::Complete => {
                    if let Some(j) = inflight.pop_front() {
                        cache.flush_done(j);
                    }
                }
                Step::Clean => {
                    let mut jobs = Vec::new();
                    cache.clean(&at(now), &mut jobs);
                    run_jobs(jobs, &mut bytes, &mut inflight);
                }
            }
            check_busy_poll_changes_nothing(&mut cache, now)?;
            cache.audit();
        }
        while let Some(j) = inflight.pop_front() {
            cache.flush_done(j);
        }
        let mut jobs = Vec::new();
        cache.take_resize_jobs(&mut jobs);
        cache.settle_partitions(&mut jobs);
        cache.flush_all(&mut jobs);
        for j in jobs {
            bytes.run(&j.plan, None);
            cache.flush_done(j);
        }
        prop_assert_eq!(cache.dirty_lines(), 0);
        cache.audit();
        prop_assert_eq!(bytes.first_lost_byte(), None);
        // Per-volume counters add up to the cache's.
        let vs = cache.volume_stats();
        let s = cache.stats();
        prop_assert_eq!(vs.iter().map(|v| v.line_hits).sum::<u64>(), s.line_hits);
        prop_assert_eq!(vs.iter().map(|v| v.cache_bytes_written).sum::<u64>(), s.cache_bytes_written);
    }
}

/// A volume with fixed settings keeps them whatever the mode finds: its size is taken off the
/// top, its write policy stays; the others share the rest.
#[test]
fn fixed_volume_settings_override_the_mode() {
    let t = TenancyConfig {
        fixed: vec![tiercache_policy::FixedVolume {
            volume: 2,
            bytes: Some(8 * 4096),
            write_policy: Some(WritePolicy::WriteThrough),
        }],
        ..mode(TenancyModeKind::Eci)
    };
    let mut cache = Cache::new(&config(32, 4096, t)).unwrap();
    assert_eq!(cache.write_policy(VolumeId(2)), WritePolicy::WriteThrough);
    cache.repartition(&at(0));
    for _ in 0..3 {
        for line in 0..40 {
            cache.access(&line_req(Op::Read, 0, line), None).unwrap();
        }
        for line in 0..4 {
            cache.access(&line_req(Op::Write, 2, line), None).unwrap();
        }
    }
    let r = boundary(&mut cache, 1);
    let v = |id: u32| *r.volumes.iter().find(|x| x.volume == id).unwrap();
    assert_eq!(v(2).allocation_lines, 8);
    assert_eq!(
        v(2).write_policy,
        WritePolicy::WriteThrough,
        "not read-only"
    );
    assert_eq!(
        v(0).demand_lines,
        24,
        "40 lines looped, capped at the 24 left"
    );
    assert_eq!(r.allocated_lines, 32);
    // A fixed size in shared mode is refused, naming the field.
    let bad = TenancyConfig {
        fixed: vec![tiercache_policy::FixedVolume {
            volume: 0,
            bytes: Some(4096),
            write_policy: None,
        }],
        ..TenancyConfig::default()
    };
    let e = Cache::new(&config(32, 4096, bad)).unwrap_err().to_string();
    assert!(e.contains("cache.tenancy.fixed"), "{e}");
}
