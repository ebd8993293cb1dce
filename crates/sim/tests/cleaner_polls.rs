//! The executor skips a cleaner poll when the cache device is busy with foreground I/O, a poll
//! is already scheduled and the policy core says such a poll can change nothing
//! (`Background::cleaning_waits_for_idle_cache`). These tests run every configuration twice,
//! once through a wrapper that forbids the skip (every event polls, as before the skip
//! existed), and require the same results to the byte.

use proptest::prelude::*;
use tiercache_core::{LineGeometry, Nanos, Plan, Request, VolumeId};
use tiercache_policy::{
    AccessOutcome, Background, CacheConfig, CacheStats, CleaningConfig, Decide, DemoteOutcome,
    EvictionKind, ExecutorState, FlushJob, PolicyCore, PolicyError, Report, ShardedCache,
    TenancyConfig, TenancyModeKind, WritePolicy,
};
use tiercache_sim::testing::UniformSource;
use tiercache_sim::{simulate, DeviceConfig, RunLimits, SimConfig, SimOutput};

/// Forwards every call to the cache, counting cleaner polls; with `skip` false it answers that
/// no poll may be skipped.
struct Polls<'a> {
    inner: &'a mut dyn PolicyCore,
    skip: bool,
    cleans: u64,
}

impl Decide for Polls<'_> {
    fn access(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<AccessOutcome, PolicyError> {
        self.inner.access(req, plan)
    }
    fn access_piece(
        &mut self,
        piece: &Request,
        plan: Option<&mut Plan>,
        first: bool,
    ) -> Result<AccessOutcome, PolicyError> {
        self.inner.access_piece(piece, plan, first)
    }
    fn accept_demote(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<DemoteOutcome, PolicyError> {
        self.inner.accept_demote(req, plan)
    }
    fn accept_demote_piece(
        &mut self,
        piece: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<DemoteOutcome, PolicyError> {
        self.inner.accept_demote_piece(piece, plan)
    }
    fn would_hit(&self, req: &Request) -> bool {
        self.inner.would_hit(req)
    }
    fn would_absorb(&self, req: &Request) -> bool {
        self.inner.would_absorb(req)
    }
    fn prefetch(&self, req: &Request, stage: u8) {
        self.inner.prefetch(req, stage)
    }
}

impl Background for Polls<'_> {
    fn clean(&mut self, state: &ExecutorState, jobs: &mut Vec<FlushJob>) {
        self.cleans += 1;
        self.inner.clean(state, jobs)
    }
    fn next_clean_poll(&self, state: &ExecutorState) -> Option<Nanos> {
        self.inner.next_clean_poll(state)
    }
    fn cleaning_waits_for_idle_cache(&self) -> bool {
        self.skip && self.inner.cleaning_waits_for_idle_cache()
    }
    fn flush_done(&mut self, job: FlushJob) {
        self.inner.flush_done(job)
    }
    fn flush_all(&mut self, jobs: &mut Vec<FlushJob>) {
        self.inner.flush_all(jobs)
    }
    fn balance(&mut self, state: &ExecutorState) -> Option<Nanos> {
        self.inner.balance(state)
    }
    fn balance_decision(&self) -> tiercache_policy::BalanceDecision {
        self.inner.balance_decision()
    }
    fn follow_balancing(&mut self, d: tiercache_policy::BalanceDecision) {
        self.inner.follow_balancing(d)
    }
    fn set_balancer(&mut self, b: Box<dyn tiercache_policy::Balancer>) {
        self.inner.set_balancer(b)
    }
    fn repartition(&mut self, state: &ExecutorState) -> Option<Nanos> {
        self.inner.repartition(state)
    }
    fn take_resize_jobs(&mut self, jobs: &mut Vec<FlushJob>) {
        self.inner.take_resize_jobs(jobs)
    }
    fn set_write_policy(&mut self, volume: Option<VolumeId>, policy: WritePolicy) {
        self.inner.set_write_policy(volume, policy)
    }
}

impl Report for Polls<'_> {
    fn stats_snapshot(&self) -> CacheStats {
        self.inner.stats_snapshot()
    }
    fn volume_stats(&self) -> Vec<tiercache_policy::tenancy::VolumeStats> {
        self.inner.volume_stats()
    }
    fn resident_lines(&self) -> u64 {
        self.inner.resident_lines()
    }
    fn dirty_lines(&self) -> u64 {
        self.inner.dirty_lines()
    }
    fn capacity_lines(&self) -> u64 {
        self.inner.capacity_lines()
    }
    fn jobs_in_flight(&self) -> u32 {
        self.inner.jobs_in_flight()
    }
    fn metadata_bytes(&self) -> usize {
        self.inner.metadata_bytes()
    }
    fn geometry(&self) -> LineGeometry {
        self.inner.geometry()
    }
    fn write_policy(&self, volume: VolumeId) -> WritePolicy {
        self.inner.write_policy(volume)
    }
    fn balance_report(&self) -> Option<tiercache_policy::balancing::BalanceReport> {
        self.inner.balance_report()
    }
    fn balanced_write_policy(&self) -> Option<WritePolicy> {
        self.inner.balanced_write_policy()
    }
    fn tenancy_report(&self) -> Option<tiercache_policy::tenancy::TenancyReport> {
        self.inner.tenancy_report()
    }
    fn audit(&self) {
        self.inner.audit()
    }
}

/// Everything a run reports, in a comparable form, and the cleaner polls it made.
fn run(cfg: &CacheConfig, src: &UniformSource, sim: &SimConfig, skip: bool) -> (String, u64) {
    let mut cache = ShardedCache::new(cfg).unwrap();
    let mut polls = Polls {
        inner: &mut cache,
        skip,
        cleans: 0,
    };
    let out: SimOutput = simulate(&mut polls, &mut src.clone(), sim).unwrap();
    let cleans = polls.cleans;
    let shown = format!(
        "{}\n{:?}\n{:?}\n{:?}\n{}\n{:?}",
        serde_json::to_string(&out.metrics).unwrap(),
        out.timeline,
        out.final_stats,
        out.devices,
        out.end_ns,
        (
            out.latency.count(),
            out.read_latency.count(),
            out.write_latency.count()
        ),
    );
    (shown, cleans)
}

fn sim_config(cache_device: &str, backend: &str) -> SimConfig {
    SimConfig {
        cache_device: DeviceConfig::preset(cache_device),
        backend: DeviceConfig::preset(backend),
        run: RunLimits {
            final_flush: true,
            timeline_interval_ns: Some(200_000),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A write-back cache under lazy cleaning whose workload leaves the cache device idle at
/// times (open loop): the cleaner writes lines back between bursts, and most polls, made with
/// the device busy, are skipped.
#[test]
fn skipped_polls_change_nothing_under_lazy_cleaning() {
    let cfg = CacheConfig {
        capacity: 256 * 4096,
        line_size: 4096,
        write_policy: WritePolicy::WriteBack,
        cleaning: CleaningConfig::Lazy {
            idle_ns: 20_000,
            batch: 8,
        },
        ..CacheConfig::default()
    };
    let src = UniformSource::open(11, 6_000, 4_000, 4 << 20, 4096, 0.5).with_hot_set(0.7, 1 << 20);
    let sim = sim_config("nvme-ssd", "sata-ssd-5100");
    let (with_skips, polls_skipping) = run(&cfg, &src, &sim, true);
    let (every_poll, polls_all) = run(&cfg, &src, &sim, false);
    assert_eq!(with_skips, every_poll);
    // Not vacuous: the cleaner did write lines back, and most polls were skipped.
    let mut cache = ShardedCache::new(&cfg).unwrap();
    let out = simulate(&mut cache, &mut src.clone(), &sim).unwrap();
    assert!(out.final_stats.cleaned_lines > 100, "{:?}", out.final_stats);
    assert!(
        polls_skipping * 2 < polls_all,
        "{polls_skipping} polls with skips, {polls_all} without"
    );
}

/// Cleaners that do not promise to wait for an idle device are polled after every event.
#[test]
fn cleaners_that_act_on_a_busy_device_are_never_skipped() {
    for cleaning in [
        CleaningConfig::Aggressive {
            period_ns: 50_000,
            batch: 4,
        },
        CleaningConfig::Threshold {
            high: 0.3,
            low: 0.1,
            batch: 4,
        },
    ] {
        let cfg = CacheConfig {
            capacity: 128 * 4096,
            line_size: 4096,
            cleaning,
            ..CacheConfig::default()
        };
        let src = UniformSource::closed(5, 4, 4, 300, 4 << 20, 4096, 0.3);
        let sim = sim_config("nvme-ssd", "sata-ssd-5100");
        let (a, polls_a) = run(&cfg, &src, &sim, true);
        let (b, polls_b) = run(&cfg, &src, &sim, false);
        assert_eq!(a, b);
        assert_eq!(polls_a, polls_b);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random caches (shards, partitions made by a tenancy mode that resizes them, every
    /// eviction policy and write policy) under lazy cleaning, open or closed loop: skipping
    /// polls changes no result.
    #[test]
    fn skipping_polls_changes_no_result(
        seed in any::<u64>(),
        lines in 32u64..512,
        idle_ns in 1u64..100_000,
        batch in 1u32..32,
        eviction in prop::sample::select(EvictionKind::ALL.to_vec()),
        wp in prop::sample::select(vec![WritePolicy::WriteBack, WritePolicy::WriteThrough, WritePolicy::WriteOnly]),
        shards in prop::sample::select(vec![1u32, 3]),
        tenancy in prop::sample::select(vec![TenancyModeKind::Shared, TenancyModeKind::Static, TenancyModeKind::Trd]),
        open in any::<bool>(),
        read_fraction in 0.0f64..1.0,
        devices in prop::sample::select(vec![("nvme-ssd", "sata-ssd-5100"), ("ram-disk", "nvme-ssd"), ("sata-ssd-5100", "ram-disk")]),
    ) {
        let line = 4096u64;
        let cfg = CacheConfig {
            capacity: lines * line,
            line_size: line,
            eviction,
            write_policy: wp,
            cleaning: CleaningConfig::Lazy { idle_ns, batch },
            shards,
            tenancy: TenancyConfig {
                mode: tenancy,
                interval_ns: 300_000,
                ..TenancyConfig::default()
            },
            ..CacheConfig::default()
        };
        let span = lines * line * 4;
        let src = if open {
            UniformSource::open(seed, 1_500, 3_000, span, line, read_fraction)
        } else {
            UniformSource::closed(seed, 3, 4, 125, span, line, read_fraction)
        }
        .with_hot_set(0.6, lines * line / 2)
        .with_volumes(3);
        let sim = sim_config(devices.0, devices.1);
        // Every tenancy mode loads on shards (shard 0 leads, docs/design.md §4.10).
        prop_assert!(ShardedCache::new(&cfg).is_ok());
        let (a, polls_a) = run(&cfg, &src, &sim, true);
        let (b, polls_b) = run(&cfg, &src, &sim, false);
        prop_assert_eq!(a, b);
        prop_assert!(polls_a <= polls_b);
    }
}
