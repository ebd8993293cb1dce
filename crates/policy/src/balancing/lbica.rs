//! LBICA (docs/design.md §4.8): when the cache device is the bottleneck, characterise what is
//! queued at it and change how the cache is used by the group the queue falls in.
//!
//! | group | queue mostly | policy |
//! | --- | --- | --- |
//! | 1 | R + P (random reads) | WO: stop promoting read misses |
//! | 2 | R + W (mixed) | RO: writes go to the backend |
//! | 3 | W + E (writes) | WB, the tail of the queue to the backend |
//! | 4 | P alone (sequential reads) | WB |
//!
//! docs/design.md §4.8 defines LBICA over a write-back cache ("keep WB", "return to WB"). Over
//! another configured policy it never makes the cache hold data the configured policy would not:
//! groups 3 and 4 keep the configured policy (group 3 still sends its tail around the
//! cache), and group 1 stops promotions with RO instead of WO when the configured policy
//! keeps no dirty data (write-through, write-around, read-only): WO absorbs writes as dirty
//! lines, which a write-through cache must never hold.
//!
//! A burst is when the cache device's queue takes longer to drain than a request sent to the
//! backend now would wait: the backend's queue time plus one op's *latency*
//! ([`DeviceLoad::wait_ns`](crate::DeviceLoad::wait_ns)). Drain times use each device's
//! service time (device time per op, the inverse of its throughput), the wait at the backend
//! its latency: for a parallel device the two differ by its parallelism, and comparing a
//! cache queue against the backend's per-op *throughput* called a lightly loaded NVMe cache
//! over a RAID-5 array a burst and sent its reads to the array (22× the latency of plain
//! write-back in the first full-size run of `experiments/load-balancing`). docs/design.md §4.8
//! compares the two queue times alone; with an idle backend that calls any queue at the cache a
//! burst.
//!
//! A burst must be seen at `confirm_polls` consecutive polls (default 2) before the policy
//! changes: a cache that keeps up with its load (an NVMe cache at 90 % of its write IOPS under
//! OLTP bursts) still shows a long queue at some polls, and acting on one moves a whole
//! interval's writes (RO) to the backend.
//!
//! The tail of group 3 is the part of the cache queue that would wait longer than a request
//! sent to the backend: a share `1 − backend_wait / cache_qtime` of the writes goes
//! around the cache (write-around: a cached copy is kept up to date), at most the backend's
//! share of the two devices' service rates (the decision holds for an interval). When the
//! burst ends the configured policy returns.

use super::{capacity_share, observe, BalanceDecision, BalanceReport, Balancer};
use crate::config::WritePolicy;
use crate::executor::ExecutorState;
use tiercache_core::Nanos;

/// LBICA's characterisation of a burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbicaGroup {
    /// Mostly application reads and promotions: random reads.
    RandomRead = 1,
    /// Mostly application reads and writes.
    Mixed = 2,
    /// Mostly writes and evictions.
    WriteIntensive = 3,
    /// Mostly promotions: sequential reads.
    SequentialRead = 4,
}

impl LbicaGroup {
    /// The group of a queue with R, W, P, E shares `s`: promotions alone past `sequential`
    /// make group 4; otherwise the pair of classes with the largest share, if it reaches
    /// `dominance` (ties go to the lower group); `None` when no pair dominates.
    pub fn classify(s: [f64; 4], dominance: f64, sequential: f64) -> Option<LbicaGroup> {
        let [r, w, p, e] = s;
        if p >= sequential {
            return Some(LbicaGroup::SequentialRead);
        }
        let pairs = [
            (r + p, LbicaGroup::RandomRead),
            (r + w, LbicaGroup::Mixed),
            (w + e, LbicaGroup::WriteIntensive),
        ];
        let mut best = pairs[0];
        for c in &pairs[1..] {
            if c.0 > best.0 + 1e-12 {
                best = *c;
            }
        }
        (best.0 >= dominance).then_some(best.1)
    }
}

/// The LBICA balancer.
#[derive(Debug, Clone)]
pub struct Lbica {
    interval_ns: Nanos,
    dominance: f64,
    sequential: f64,
    confirm_polls: u32,
    /// Consecutive polls so far that saw the cache as the bottleneck.
    streak: u32,
    last: Option<BalanceReport>,
}

impl Lbica {
    /// LBICA polled every `interval_ns`, with the group thresholds, acting on the first poll
    /// that sees a burst.
    pub fn new(interval_ns: Nanos, dominance: f64, sequential: f64) -> Self {
        Self {
            interval_ns,
            dominance,
            sequential,
            confirm_polls: 1,
            streak: 0,
            last: None,
        }
    }

    /// The same, acting only once `polls` consecutive polls (at least 1) saw the burst.
    pub fn confirmed_after(mut self, polls: u32) -> Self {
        self.confirm_polls = polls.max(1);
        self
    }
}

/// Whether `mode` lets writes leave dirty data in the cache (then WO may replace it).
fn keeps_dirty(mode: WritePolicy) -> bool {
    let r = mode.rules();
    r.write_hit == crate::engine::WriteHit::CacheDirty
        || r.write_miss == crate::engine::WriteMiss::AllocateDirty
}

impl Balancer for Lbica {
    fn name(&self) -> &'static str {
        "lbica"
    }

    fn interval_ns(&self) -> Option<Nanos> {
        Some(self.interval_ns)
    }

    fn poll(&mut self, state: &ExecutorState, configured: WritePolicy) -> BalanceDecision {
        let (c, b, shares) = observe(state);
        // The cache is the bottleneck when its queue takes longer to drain than a request sent
        // to the backend now would wait (the backend's queue plus one op's latency): with an
        // idle backend, any queue at the cache would otherwise count as a burst.
        let at_backend = state.backend.wait_ns();
        let burst = c > at_backend;
        self.streak = if burst {
            self.streak.saturating_add(1)
        } else {
            0
        };
        let group = if self.streak >= self.confirm_polls {
            LbicaGroup::classify(shares, self.dominance, self.sequential)
        } else {
            None
        };
        let decision = match group {
            None | Some(LbicaGroup::SequentialRead) => BalanceDecision::KEEP,
            Some(LbicaGroup::RandomRead) => BalanceDecision::policy(if keeps_dirty(configured) {
                WritePolicy::WriteOnly
            } else {
                WritePolicy::ReadOnly
            }),
            Some(LbicaGroup::Mixed) => BalanceDecision::policy(WritePolicy::ReadOnly),
            Some(LbicaGroup::WriteIntensive) => BalanceDecision {
                write_policy: Some(configured),
                bypass_writes: (1.0 - at_backend as f64 / c as f64).min(capacity_share(state)),
                bypass_writes_as: WritePolicy::WriteAround,
                ..BalanceDecision::KEEP
            },
        };
        self.last = Some(BalanceReport {
            burst,
            cache_qtime_ns: c,
            backend_qtime_ns: b,
            shares,
            group: group.map_or(0, |g| g as u8),
            bypass_reads: decision.bypass_reads,
            bypass_writes: decision.bypass_writes,
        });
        decision
    }

    fn report(&self) -> Option<BalanceReport> {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::DeviceLoad;

    /// A state whose cache queue holds `r, w, p, e` ops of 100 µs each (one at a time) and
    /// whose backend holds one op of `backend_ns` (one at a time, so its latency is its
    /// service time).
    pub(crate) fn state(r: u32, w: u32, p: u32, e: u32, backend_ns: Nanos) -> ExecutorState {
        ExecutorState {
            cache: DeviceLoad {
                queued: r + w + p + e,
                by_origin: [r, w, p, e],
                service_ns: 100_000,
                latency_ns: 100_000,
            },
            backend: DeviceLoad {
                queued: 1,
                by_origin: [1, 0, 0, 0],
                service_ns: backend_ns,
                latency_ns: backend_ns,
            },
            ..ExecutorState::default()
        }
    }

    /// A cache device and a backend that serve many ops at once: `queued` ops of each, with
    /// their device time per op (inverse throughput) and latency per op.
    fn parallel(cache: (u32, Nanos, Nanos), backend: (u32, Nanos, Nanos)) -> ExecutorState {
        let load = |(queued, service_ns, latency_ns): (u32, Nanos, Nanos), origin: usize| {
            let mut by_origin = [0; 4];
            by_origin[origin] = queued;
            DeviceLoad {
                queued,
                by_origin,
                service_ns,
                latency_ns,
            }
        };
        ExecutorState {
            cache: load(cache, 0),
            backend: load(backend, 0),
            ..ExecutorState::default()
        }
    }

    #[test]
    fn a_lightly_loaded_parallel_cache_over_a_slow_array_is_no_burst() {
        // The OLTP point of the experiment: an NVMe cache (1.3 µs of device time per op,
        // 80 µs latency) with 14 reads queued, over a RAID-5 array (1.2 µs of device time per
        // op across its members, 5 ms latency) with 12 queued. The cache drains in 18 µs; the
        // array's queue drains in 14 µs but a read sent there waits 5 ms: no burst.
        let mut l = Lbica::new(1_000_000, 0.6, 0.6);
        let wb = WritePolicy::WriteBack;
        let light = parallel((14, 1_300, 80_000), (12, 1_200, 5_000_000));
        assert!(light.cache.queue_time_ns() > light.backend.queue_time_ns());
        assert_eq!(l.poll(&light, wb), BalanceDecision::KEEP);
        assert!(!l.report().unwrap().burst);
        // 5000 reads queued at the same cache drain in 6.5 ms, past the array's 5 ms wait: a
        // burst of random reads, so read misses stop being promoted.
        let heavy = parallel((5_000, 1_300, 80_000), (12, 1_200, 5_000_000));
        assert_eq!(
            l.poll(&heavy, wb).write_policy,
            Some(WritePolicy::WriteOnly)
        );
        assert!(l.report().unwrap().burst);
        assert_eq!(l.report().unwrap().group, 1);
    }

    #[test]
    fn the_write_tail_is_what_waits_longer_than_the_backend_latency() {
        let mut l = Lbica::new(1_000_000, 0.6, 0.6);
        // 1000 writes and evictions of 10 µs device time queued at the cache (10 ms to
        // drain); the backend has 2 queued of 100 µs device time each and 6 ms latency: a
        // request sent there waits 6.2 ms, so the writes past 6.2 ms of the cache's queue,
        // 38 %, would finish sooner there. The backend's share of the service rates,
        // 10 / (10 + 100), caps it.
        let mut s = parallel((1_000, 10_000, 50_000), (2, 100_000, 6_000_000));
        s.cache.by_origin = [0, 600, 0, 400];
        let d = l.poll(&s, WritePolicy::WriteBack);
        assert_eq!(l.report().unwrap().group, 3);
        assert!(
            (d.bypass_writes - 10.0 / 110.0).abs() < 1e-9,
            "{}",
            d.bypass_writes
        );
        // A backend as fast per op as the cache (cap 0.5): the tail itself, 1 − 6.02 ms / 10 ms.
        s.backend.service_ns = 10_000;
        let d = l.poll(&s, WritePolicy::WriteBack);
        assert!(
            (d.bypass_writes - (1.0 - 6_020_000.0 / 10_000_000.0)).abs() < 1e-9,
            "{}",
            d.bypass_writes
        );
        // A backend latency past the cache's drain time: no burst, nothing sent.
        s.backend.latency_ns = 10_000_000;
        assert_eq!(l.poll(&s, WritePolicy::WriteBack), BalanceDecision::KEEP);
    }

    #[test]
    fn each_group_is_recognised_from_a_mix_built_for_it_and_gets_its_policy() {
        let mut l = Lbica::new(1_000_000, 0.6, 0.6);
        let wb = WritePolicy::WriteBack;
        // A long cache queue (2 ms to drain) against a 100 µs backend queue: a burst.
        for (mix, group, policy) in [
            ([10, 0, 8, 2], 1, Some(WritePolicy::WriteOnly)),
            ([9, 9, 1, 1], 2, Some(WritePolicy::ReadOnly)),
            ([1, 11, 0, 8], 3, Some(WritePolicy::WriteBack)),
            ([2, 1, 15, 2], 4, None),
        ] {
            let d = l.poll(&state(mix[0], mix[1], mix[2], mix[3], 100_000), wb);
            let rep = l.report().unwrap();
            assert!(rep.burst);
            assert_eq!(rep.group, group, "{mix:?}");
            assert_eq!(d.write_policy, policy, "{mix:?}");
            if group == 3 {
                // The tail beyond the backend's wait, 1 − 0.2 ms / 2 ms of the writes,
                // capped at the backend's share of the service rates, 100 / (100 + 100).
                assert!((d.bypass_writes - 0.5).abs() < 1e-9, "{}", d.bypass_writes);
                assert_eq!(d.bypass_writes_as, WritePolicy::WriteAround);
            } else {
                assert_eq!(d.bypass_writes, 0.0);
            }
            assert_eq!(d.bypass_reads, 0.0);
        }
    }

    #[test]
    fn without_a_burst_the_configured_policy_returns() {
        let mut l = Lbica::new(1_000_000, 0.6, 0.6);
        let wb = WritePolicy::WriteBack;
        assert_eq!(
            l.poll(&state(10, 0, 8, 2, 100_000), wb).write_policy,
            Some(WritePolicy::WriteOnly)
        );
        // A request sent to the backend now waits longer (3 ms queued + 3 ms) than the
        // cache's queue takes to drain (2 ms): no burst.
        let d = l.poll(&state(10, 0, 8, 2, 3_000_000), wb);
        assert_eq!(d, BalanceDecision::KEEP);
        assert!(!l.report().unwrap().burst);
        assert_eq!(l.report().unwrap().group, 0);
        // An idle backend whose one op takes longer than the cache's queue: no burst either.
        let mut idle = state(10, 0, 8, 2, 3_000_000);
        idle.backend.queued = 0;
        assert_eq!(l.poll(&idle, wb), BalanceDecision::KEEP);
        // The same backend, idle, with ops of 1 ms: the 2 ms cache queue is a burst.
        idle.backend.service_ns = 1_000_000;
        idle.backend.latency_ns = 1_000_000;
        assert_eq!(l.poll(&idle, wb).write_policy, Some(WritePolicy::WriteOnly));
    }

    #[test]
    fn a_burst_acts_only_once_seen_at_consecutive_polls() {
        let mut l = Lbica::new(1_000_000, 0.6, 0.6).confirmed_after(2);
        let wb = WritePolicy::WriteBack;
        let burst = state(9, 9, 1, 1, 100_000);
        let calm = state(9, 9, 1, 1, 3_000_000);
        // One poll sees it: reported, not acted on.
        assert_eq!(l.poll(&burst, wb), BalanceDecision::KEEP);
        assert!(l.report().unwrap().burst);
        assert_eq!(l.report().unwrap().group, 0);
        // A calm poll in between starts the count again.
        assert_eq!(l.poll(&calm, wb), BalanceDecision::KEEP);
        assert_eq!(l.poll(&burst, wb), BalanceDecision::KEEP);
        // The second in a row acts, and so does every further one.
        for _ in 0..3 {
            assert_eq!(l.poll(&burst, wb).write_policy, Some(WritePolicy::ReadOnly));
            assert_eq!(l.report().unwrap().group, 2);
        }
        // The burst ends: the configured policy at once.
        assert_eq!(l.poll(&calm, wb), BalanceDecision::KEEP);
    }

    #[test]
    fn no_dominant_pair_keeps_the_configured_policy() {
        assert_eq!(LbicaGroup::classify([0.3, 0.2, 0.2, 0.3], 0.6, 0.6), None);
        assert_eq!(
            LbicaGroup::classify([0.25, 0.25, 0.25, 0.25], 0.5, 0.6),
            Some(LbicaGroup::RandomRead),
            "ties go to the lower group"
        );
    }

    #[test]
    fn a_cache_that_keeps_no_dirty_data_gets_none_from_lbica() {
        use crate::{Cache, CacheConfig};
        use tiercache_core::Request;
        for configured in [
            WritePolicy::WriteThrough,
            WritePolicy::WriteAround,
            WritePolicy::ReadOnly,
        ] {
            // The policies each group gets over this configured one.
            let mut l = Lbica::new(1_000_000, 0.6, 0.6).confirmed_after(1);
            let d1 = l.poll(&state(10, 0, 8, 2, 100_000), configured);
            assert_eq!(l.report().unwrap().group, 1);
            assert_eq!(d1.write_policy, Some(WritePolicy::ReadOnly));
            let d3 = l.poll(&state(1, 11, 0, 8, 100_000), configured);
            assert_eq!(l.report().unwrap().group, 3);
            assert_eq!(d3.write_policy, Some(configured));
            // Through a cache: every poll a burst of group 1, then of group 3, with writes
            // (hits and misses) in between.
            let mut c = Cache::new(&CacheConfig {
                capacity: 64 * 4096,
                line_size: 4096,
                write_policy: configured,
                ..CacheConfig::default()
            })
            .unwrap();
            c.set_balancer(Box::new(Lbica::new(1_000, 0.6, 0.6).confirmed_after(1)));
            let mut now = 0;
            for mix in [[10, 0, 8, 2], [1, 11, 0, 8]] {
                let mut s = state(mix[0], mix[1], mix[2], mix[3], 100_000);
                for _ in 0..2 {
                    s.now = now;
                    c.balance(&s);
                    now += 1_000;
                }
                assert!(
                    c.balanced_write_policy().is_some(),
                    "{configured:?} {mix:?}"
                );
                for i in 0..200u64 {
                    let off = (i * 13 % 96) * 4096;
                    c.access(&Request::read(off, 4096), None).unwrap();
                    c.access(&Request::write(off, 4096), None).unwrap();
                }
                assert_eq!(c.dirty_lines(), 0, "{configured:?} {mix:?}");
                c.audit();
            }
        }
        // Over write-back, group 3 keeps write-back (as docs/design.md §4.8 says) and group 1 is
        // WO.
        let mut l = Lbica::new(1_000_000, 0.6, 0.6).confirmed_after(1);
        let wb = WritePolicy::WriteBack;
        assert_eq!(
            l.poll(&state(10, 0, 8, 2, 100_000), wb).write_policy,
            Some(WritePolicy::WriteOnly)
        );
        assert_eq!(
            l.poll(&state(1, 11, 0, 8, 100_000), wb).write_policy,
            Some(wb)
        );
    }
}
