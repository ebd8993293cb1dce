//! The load-balancing seam in the engine: the flusher thread polls the cache's balancer (shard
//! 0's, which every shard follows) once per interval of real time with the engine's measured
//! device state, and the write policy it answers is in force until the next poll.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tiercache_blockdev::MemDevice;
use tiercache_core::Nanos;
use tiercache_engine::{Engine, EngineConfig};
use tiercache_policy::{
    BalanceDecision, Balancer, CacheConfig, CleaningConfig, ExecutorState, WritePolicy,
};

#[derive(Debug)]
struct Recorder {
    polls: Arc<Mutex<Vec<ExecutorState>>>,
    answer: Arc<Mutex<Option<WritePolicy>>>,
}

impl Balancer for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn interval_ns(&self) -> Option<Nanos> {
        Some(2_000_000)
    }
    fn poll(&mut self, state: &ExecutorState, _configured: WritePolicy) -> BalanceDecision {
        self.polls.lock().unwrap().push(*state);
        BalanceDecision {
            write_policy: *self.answer.lock().unwrap(),
            ..BalanceDecision::KEEP
        }
    }
}

fn wait_for_polls(polls: &Mutex<Vec<ExecutorState>>, n: usize) {
    let start = Instant::now();
    let have = polls.lock().unwrap().len();
    while polls.lock().unwrap().len() < have + n {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the balancer is not polled"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn the_flusher_polls_the_balancer_and_every_shard_follows_its_answer() {
    let cfg = CacheConfig {
        capacity: 4 << 20,
        line_size: 4096,
        cleaning: CleaningConfig::None,
        shards: 4,
        ..CacheConfig::default()
    };
    let engine = Engine::with_devices(
        &cfg,
        &EngineConfig::default(),
        Arc::new(MemDevice::new(8 << 20)),
        Arc::new(MemDevice::new(64 << 20)),
    )
    .unwrap();
    let polls = Arc::new(Mutex::new(Vec::new()));
    let answer = Arc::new(Mutex::new(None));
    engine.set_balancer(Box::new(Recorder {
        polls: polls.clone(),
        answer: answer.clone(),
    }));
    // Write-back in force: write misses allocate.
    wait_for_polls(&polls, 2);
    for i in 0..64u64 {
        engine.write(&[1; 4096], i * 65536, false).unwrap();
    }
    let allocated = engine.stats().cache.write_allocations;
    assert_eq!(allocated, 64);
    // Write-around from the next poll: write misses (on every shard) go to the backend only.
    *answer.lock().unwrap() = Some(WritePolicy::WriteAround);
    wait_for_polls(&polls, 2);
    for i in 64..128u64 {
        engine.write(&[2; 4096], i * 65536, false).unwrap();
    }
    assert_eq!(engine.stats().cache.write_allocations, allocated);
    // Back to the configured policy.
    *answer.lock().unwrap() = None;
    wait_for_polls(&polls, 2);
    for i in 128..192u64 {
        engine.write(&[3; 4096], i * 65536, false).unwrap();
    }
    assert_eq!(engine.stats().cache.write_allocations, allocated + 64);
    let polls = polls.lock().unwrap().clone();
    assert_eq!(engine.stats().cache.balancer_polls, polls.len() as u64);
    for (j, p) in polls.iter().enumerate() {
        // Once per interval of a fixed grid at most: the j-th poll after the first comes at
        // least j - 1 whole intervals after it (the flusher may wake late, never early).
        let since = p.now - polls[0].now;
        assert!(
            since >= (j as u64).saturating_sub(1) * 2_000_000,
            "poll {j} {since} ns after the first"
        );
    }
    // The engine measured its devices: ops it ran have a service time.
    let last = polls.last().unwrap();
    assert!(
        last.cache.service_ns > 0 && last.backend.service_ns > 0,
        "{last:?}"
    );
    // Ops in flight by origin never exceed those queued (trims and flushes have none).
    for p in &polls {
        assert!(
            p.cache.by_origin.iter().sum::<u32>() <= p.cache.queued,
            "{p:?}"
        );
        assert!(
            p.backend.by_origin.iter().sum::<u32>() <= p.backend.queued,
            "{p:?}"
        );
    }
    let mut b = vec![0u8; 4096];
    for (i, want) in [(0u64, 1u8), (100, 2), (150, 3)] {
        engine.read(&mut b, i * 65536).unwrap();
        assert_eq!(b[0], want);
    }
    engine.shutdown().unwrap();
    engine.audit();
}

/// Sends fixed shares of reads and writes past the cache from its first poll on.
#[derive(Debug)]
struct Forced(BalanceDecision);

impl Balancer for Forced {
    fn name(&self) -> &'static str {
        "forced"
    }
    fn interval_ns(&self) -> Option<Nanos> {
        Some(100_000)
    }
    fn poll(&mut self, _state: &ExecutorState, _configured: WritePolicy) -> BalanceDecision {
        self.0
    }
}

mod stale {
    use super::*;
    use proptest::prelude::*;

    const VOLUME: u64 = 4 << 20;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]

        /// Whatever share of requests the balancer sends past a write-back cache (reads as
        /// pass-through, writes around or read-only), every read returns the bytes last
        /// written: dirty data is never read from the backend's stale copy, and a write sent
        /// past the cache never leaves an older cached copy to be read.
        #[test]
        fn no_bypass_ever_returns_stale_data(
            reads in 0.0f64..=1.0,
            writes in 0.0f64..=1.0,
            read_only in any::<bool>(),
            ops in proptest::collection::vec((0u8..10, 0u64..(VOLUME / 512 - 16), 1u64..=16), 1..300),
        ) {
            let cfg = CacheConfig {
                capacity: 256 << 10,
                line_size: 4096,
                cleaning: CleaningConfig::None,
                shards: 4,
                ..CacheConfig::default()
            };
            let engine = Engine::with_devices(
                &cfg,
                &EngineConfig::default(),
                Arc::new(MemDevice::new(1 << 20)),
                Arc::new(MemDevice::new(VOLUME as usize)),
            )
            .unwrap();
            engine.set_balancer(Box::new(Forced(BalanceDecision {
                write_policy: None,
                bypass_reads: reads,
                bypass_writes: writes,
                bypass_writes_as: if read_only { WritePolicy::ReadOnly } else { WritePolicy::WriteAround },
            })));
            let start = Instant::now();
            while engine.stats().cache.balancer_polls == 0 {
                prop_assert!(start.elapsed() < Duration::from_secs(30), "never polled");
                std::thread::sleep(Duration::from_millis(1));
            }
            let mut model = vec![0u8; VOLUME as usize];
            let (mut n_reads, mut n_writes) = (0u64, 0u64);
            for (i, (kind, sector, sectors)) in ops.into_iter().enumerate() {
                let (off, len) = (sector * 512, sectors * 512);
                let r = off as usize..(off + len) as usize;
                match kind {
                    0..=4 => {
                        let mut b = vec![0u8; len as usize];
                        engine.read(&mut b, off).unwrap();
                        n_reads += 1;
                        prop_assert!(b == model[r.clone()], "op {}: stale read at {}+{}", i, off, len);
                    }
                    5..=8 => {
                        let b: Vec<u8> = (0..len).map(|j| (i as u64 * 7 + j / 512) as u8 | 1).collect();
                        engine.write(&b, off, false).unwrap();
                        n_writes += 1;
                        model[r].copy_from_slice(&b);
                    }
                    _ => engine.flush().unwrap(),
                }
            }
            // The shares were applied: each of the 4 shards keeps a running sum per kind, so
            // at most one request of each kind per shard falls short of its share.
            let s = engine.stats().cache;
            let want = reads * n_reads as f64 + writes * n_writes as f64 - 8.0;
            prop_assert!(
                s.balancer_bypassed as f64 >= want,
                "{} requests sent past the cache, {} expected at least", s.balancer_bypassed, want
            );
            engine.shutdown().unwrap();
            engine.audit();
        }
    }
}
