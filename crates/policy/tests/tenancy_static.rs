//! Tenancy modes over static partitions (`cache.partitions`) and fixed sizes
//! (`cache.tenancy.fixed`): the configuration is checked up front, static partitions of
//! volumes a mode does not plan keep their lines, and a decision that cannot be applied is
//! refused visibly, never dropped in silence.

use tiercache_core::{Nanos, Request, VolumeId};
use tiercache_policy::tenancy::{FixedVolume, TenancyMode, VolumePlan};
use tiercache_policy::{
    Cache, CacheConfig, CleaningConfig, ExecutorState, PartitionConfig, PolicyError, TenancyConfig,
    TenancyModeKind,
};

const LINE: u64 = 4096;

/// 64 lines; volume `static_volume` has a static partition of 48 lines.
fn config(static_volume: u32, tenancy: TenancyConfig) -> CacheConfig {
    CacheConfig {
        capacity: 64 * LINE,
        line_size: LINE,
        cleaning: CleaningConfig::None,
        partitions: vec![PartitionConfig {
            volume: static_volume,
            bytes: 48 * LINE,
        }],
        tenancy,
        ..CacheConfig::default()
    }
}

fn tenancy(mode: TenancyModeKind) -> TenancyConfig {
    TenancyConfig {
        mode,
        interval_ns: 1_000,
        ..TenancyConfig::default()
    }
}

fn at(now: u64) -> ExecutorState {
    ExecutorState {
        now,
        ..ExecutorState::default()
    }
}

/// Capacity of each volume's own partition.
fn capacities(c: &Cache) -> Vec<(u32, u64)> {
    let mut v: Vec<(u32, u64)> = c
        .partition_stats()
        .iter()
        .filter_map(|p| p.volume.map(|v| (v.0, p.capacity_lines)))
        .collect();
    v.sort();
    v
}

/// Traffic on volumes 0 and 1, boundaries every 1000 ns; checks after each one that the
/// decision took effect and that the partitions fit the cache.
fn run_intervals(c: &mut Cache) {
    let mut jobs = Vec::new();
    for i in 0..4u64 {
        c.repartition(&at(i * 1_000));
        for k in 0..200u64 {
            let vol = VolumeId((k % 2) as u32);
            let off = (k * 7 % 40) * LINE;
            let r = if k % 3 == 0 {
                Request::write(off, LINE)
            } else {
                Request::read(off, LINE)
            };
            c.access(&Request { volume: vol, ..r }, None).unwrap();
        }
        c.take_resize_jobs(&mut jobs);
        let total: u64 = c.partition_stats().iter().map(|p| p.capacity_lines).sum();
        assert!(total <= 64, "partitions hold {total} lines of 64");
        c.audit();
    }
    c.repartition(&at(10_000));
    let r = c.tenancy_report().expect("a decision was made");
    assert_eq!(r.refused_decisions, 0, "{:?}", r.last_refusal);
    assert!(r.decisions > 0);
}

#[test]
fn static_partitions_and_fixed_sizes_must_fit_the_cache() {
    let mut t = tenancy(TenancyModeKind::Static);
    t.shares = vec![0.0, 1.0];
    t.fixed = vec![FixedVolume {
        volume: 1,
        bytes: Some(48 * LINE),
        write_policy: None,
    }];
    match Cache::new(&config(0, t.clone())) {
        Err(PolicyError::Config { field, reason }) => {
            assert_eq!(field, "tenancy.fixed");
            assert!(reason.contains("cache.partitions"), "{reason}");
        }
        other => panic!("expected a config error, got {other:?}"),
    }
    // A fixed size replacing the volume's own static partition fits.
    t.fixed[0].volume = 0;
    let mut c = Cache::new(&config(0, t)).unwrap();
    run_intervals(&mut c);
    assert_eq!(capacities(&c), vec![(0, 48), (1, 16)]);
}

#[test]
fn a_static_partition_of_a_volume_without_a_share_keeps_its_lines() {
    // Volume 0 has share 0: the mode plans volume 1 alone.
    let mut t = tenancy(TenancyModeKind::Static);
    t.shares = vec![0.0, 1.0];
    let mut c = Cache::new(&config(0, t)).unwrap();
    run_intervals(&mut c);
    assert_eq!(capacities(&c), vec![(0, 48), (1, 16)]);
}

#[test]
fn a_static_partition_outside_the_modes_volumes_keeps_its_lines() {
    for mode in [
        TenancyModeKind::Static,
        TenancyModeKind::Eci,
        TenancyModeKind::Trd,
    ] {
        let mut t = tenancy(mode);
        t.volumes = 2;
        // Volume 2 has a static partition and no traffic: no mode plans it.
        let mut c = Cache::new(&config(2, t)).unwrap();
        run_intervals(&mut c);
        let caps = capacities(&c);
        assert!(caps.contains(&(2, 48)), "{mode:?}: {caps:?}");
    }
}

#[test]
fn a_static_partition_the_mode_plans_is_resized_by_it() {
    let mut t = tenancy(TenancyModeKind::Static);
    t.volumes = 2;
    let mut c = Cache::new(&config(0, t)).unwrap();
    run_intervals(&mut c);
    assert_eq!(capacities(&c), vec![(0, 32), (1, 32)]);
}

/// A mode that plans more lines than it is given.
#[derive(Debug)]
struct Greedy;

impl TenancyMode for Greedy {
    fn name(&self) -> &'static str {
        "greedy"
    }
    fn interval_ns(&self) -> Option<Nanos> {
        Some(1_000)
    }
    fn decides_at_start(&self) -> bool {
        true
    }
    fn observes(&self) -> bool {
        false
    }
    fn observe(&mut self, _: VolumeId, _: u64, _: u64, _: bool) {}
    fn decide(&mut self, capacity_lines: u64) -> Option<Vec<VolumePlan>> {
        Some(vec![VolumePlan {
            volume: VolumeId(1),
            demand_lines: capacity_lines,
            allocation_lines: capacity_lines,
            write_policy: None,
        }])
    }
}

#[test]
fn a_decision_that_does_not_fit_is_refused_and_reported() {
    let mut c = Cache::new(&config(0, tenancy(TenancyModeKind::Static))).unwrap();
    c.set_tenancy(Box::new(Greedy));
    c.repartition(&at(0));
    let r = c.tenancy_report().unwrap();
    assert_eq!((r.decisions, r.refused_decisions), (0, 1));
    assert!(r.last_refusal.unwrap().contains("exceed"));
    assert_eq!(capacities(&c), vec![(0, 48)]);
    c.audit();
}
