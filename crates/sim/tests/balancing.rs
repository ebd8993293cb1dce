//! The load-balancing seam in the simulator: the cache's balancer is polled at the end of
//! every interval of virtual time while requests run, with the executor's state, and the
//! write policy it answers is in force until the next poll.

use std::sync::{Arc, Mutex};
use tiercache_core::Nanos;
use tiercache_policy::{
    BalanceDecision, Balancer, Cache, CacheConfig, CleaningConfig, ExecutorState, PolicyCore,
    ShardedCache, WritePolicy,
};
use tiercache_sim::testing::UniformSource;
use tiercache_sim::{simulate, DeviceConfig, RunLimits, SimConfig};

/// Records every poll; answers `answer` at the polls numbered in `during` (from 1), and
/// `None` (the configured policy) at the others.
#[derive(Debug)]
struct Recorder {
    interval: Nanos,
    polls: Arc<Mutex<Vec<ExecutorState>>>,
    during: std::ops::Range<usize>,
    answer: Option<WritePolicy>,
}

impl Balancer for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn interval_ns(&self) -> Option<Nanos> {
        Some(self.interval)
    }
    fn poll(&mut self, state: &ExecutorState, configured: WritePolicy) -> BalanceDecision {
        assert_eq!(configured, WritePolicy::WriteBack);
        let mut p = self.polls.lock().unwrap();
        p.push(*state);
        BalanceDecision {
            write_policy: self
                .during
                .contains(&p.len())
                .then_some(self.answer)
                .flatten(),
            ..BalanceDecision::KEEP
        }
    }
}

fn config() -> SimConfig {
    SimConfig {
        cache_device: DeviceConfig::preset("nvme-ssd"),
        backend: DeviceConfig::preset("sata-ssd-5100"),
        run: RunLimits {
            final_flush: false,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn cache_cfg(shards: u32) -> CacheConfig {
    CacheConfig {
        capacity: 64 << 20,
        line_size: 4096,
        cleaning: CleaningConfig::None,
        shards,
        ..Default::default()
    }
}

/// Writes only, uniform over 256 MiB: every write misses a 64 MiB cache at first.
fn writes() -> UniformSource {
    UniformSource::closed(7, 4, 8, 5000, 256 << 20, 4096, 0.0)
}

fn run(core: &mut dyn PolicyCore) -> tiercache_sim::SimOutput {
    simulate(core, &mut writes(), &config()).unwrap()
}

#[test]
fn the_balancer_is_polled_once_per_interval_with_the_device_state() {
    let polls = Arc::new(Mutex::new(Vec::new()));
    let mut c = Cache::new(&cache_cfg(1)).unwrap();
    c.set_balancer(Box::new(Recorder {
        interval: 100_000,
        polls: polls.clone(),
        during: 0..0,
        answer: None,
    }));
    let out = run(&mut c);
    let polls = polls.lock().unwrap();
    let end = out.end_ns;
    assert!(polls.len() >= 10, "{} polls over {end} ns", polls.len());
    for (i, p) in polls.iter().enumerate() {
        // At the end of each interval, in virtual time, none skipped while requests ran.
        assert_eq!(p.now, (i as u64 + 1) * 100_000, "poll {i}");
    }
    // The state is the devices' own: writes queued at the cache device, classed as W.
    assert!(polls
        .iter()
        .any(|p| p.cache.queued > 0 && p.cache.of(tiercache_core::Origin::Write) > 0));
    assert!(polls
        .iter()
        .all(|p| p.cache.by_origin.iter().sum::<u32>() <= p.cache.queued));
    // Service times once ops completed: the cache's from the first interval, the backend's
    // once evictions write dirty lines back.
    assert!(polls.iter().skip(1).all(|p| p.cache.service_ns > 0));
    assert!(polls
        .iter()
        .any(|p| p.backend.service_ns > 0 && p.backend.queued > 0));
    assert_eq!(out.final_stats.balancer_polls, polls.len() as u64);
}

#[test]
fn the_answer_is_in_force_until_the_next_poll_and_none_restores_the_configured_policy() {
    let baseline = run(&mut Cache::new(&cache_cfg(1)).unwrap()).final_stats;
    assert_eq!(
        baseline.write_allocations,
        baseline.write_line_accesses - baseline.write_line_hits
    );
    for shards in [1, 4] {
        for (during, restored) in [(3..usize::MAX, false), (3..6, true)] {
            let polls = Arc::new(Mutex::new(Vec::new()));
            let recorder = Box::new(Recorder {
                interval: 100_000,
                polls: polls.clone(),
                during: during.clone(),
                answer: Some(WritePolicy::WriteAround),
            });
            let mut c = ShardedCache::new(&cache_cfg(shards)).unwrap();
            c.set_balancer(recorder);
            let s = run(&mut c).final_stats;
            let n = polls.lock().unwrap().len();
            assert!(n > 10, "{n} polls");
            assert_eq!(
                s.balancer_polls, n as u64,
                "shard 0's balancer alone was polled"
            );
            // Write misses allocate only while write-back is in force.
            assert!(s.write_allocations > 0);
            if restored {
                assert!(
                    s.write_allocations * 2 > baseline.write_allocations,
                    "{during:?}"
                );
                assert!(
                    s.write_allocations < baseline.write_allocations,
                    "{during:?}"
                );
            } else {
                assert!(
                    s.write_allocations * 4 < baseline.write_allocations,
                    "{} allocations with write-around from poll 3, {} without",
                    s.write_allocations,
                    baseline.write_allocations
                );
            }
            // Every shard follows shard 0's balancer.
            let want = (!restored).then_some(WritePolicy::WriteAround);
            for sh in c.shards() {
                assert_eq!(
                    sh.balanced_write_policy(),
                    want,
                    "{shards} shards {during:?}"
                );
            }
        }
    }
}
