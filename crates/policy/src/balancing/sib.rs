//! SIB, selective I/O bypass (the baseline of docs/design.md §4.8, for a write-through cache):
//! while the cache device is the bottleneck, the requests that would finish sooner at the backend
//! go there.
//!
//! The k-th op queued at the cache completes after about `k × cache_service` (device time per
//! op, the inverse of the cache's throughput); one sent to the backend now completes after
//! `backend_qtime + backend_latency` ([`DeviceLoad::wait_ns`](crate::DeviceLoad::wait_ns)).
//! Ops beyond position `x = backend_wait / cache_service` finish sooner at the backend, so a
//! share `(queued − x) / queued` of the requests goes there (at most the backend's share of the
//! two devices' service rates, as the decision holds for an interval): reads served from the backend,
//! writes written to the backend with any cached copy dropped (nothing is dirty in a
//! write-through cache, so nothing is lost).

use super::{capacity_share, observe, BalanceDecision, BalanceReport, Balancer};
use crate::config::WritePolicy;
use crate::executor::ExecutorState;
use tiercache_core::Nanos;

/// The SIB balancer.
#[derive(Debug, Clone)]
pub struct Sib {
    interval_ns: Nanos,
    last: Option<BalanceReport>,
}

impl Sib {
    /// SIB polled every `interval_ns`.
    pub fn new(interval_ns: Nanos) -> Self {
        Self {
            interval_ns,
            last: None,
        }
    }
}

impl Balancer for Sib {
    fn name(&self) -> &'static str {
        "sib"
    }

    fn interval_ns(&self) -> Option<Nanos> {
        Some(self.interval_ns)
    }

    fn poll(&mut self, state: &ExecutorState, _configured: WritePolicy) -> BalanceDecision {
        let (c, b, shares) = observe(state);
        // The cache is the bottleneck when the tail of its queue would finish sooner at the
        // backend: its drain time exceeds a backend request's wait (queue plus latency).
        let at_backend = state.backend.wait_ns();
        let burst = c > at_backend;
        let share = if burst && state.cache.queued > 0 {
            let x = (at_backend / state.cache.service_ns.max(1)).min(u64::from(state.cache.queued));
            let tail = (u64::from(state.cache.queued) - x) as f64 / f64::from(state.cache.queued);
            tail.min(capacity_share(state))
        } else {
            0.0
        };
        let decision = if share > 0.0 {
            BalanceDecision {
                bypass_reads: share,
                bypass_writes: share,
                bypass_writes_as: WritePolicy::ReadOnly,
                ..BalanceDecision::KEEP
            }
        } else {
            BalanceDecision::KEEP
        };
        self.last = Some(BalanceReport {
            burst,
            cache_qtime_ns: c,
            backend_qtime_ns: b,
            shares,
            group: 0,
            bypass_reads: share,
            bypass_writes: share,
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

    fn state(cache_queued: u32, backend_qtime: Nanos) -> ExecutorState {
        ExecutorState {
            cache: DeviceLoad {
                queued: cache_queued,
                by_origin: [cache_queued, 0, 0, 0],
                service_ns: 100_000,
                latency_ns: 100_000,
            },
            backend: DeviceLoad {
                queued: 1,
                by_origin: [1, 0, 0, 0],
                service_ns: backend_qtime,
                latency_ns: backend_qtime,
            },
            ..ExecutorState::default()
        }
    }

    #[test]
    fn the_tail_that_finishes_sooner_at_the_backend_goes_there() {
        let mut s = Sib::new(1_000_000);
        // 20 ops of 100 µs at the cache; the backend drains in 400 µs and serves one in
        // 400 µs more: positions past 8 finish sooner there, 12 of 20; but a backend 4 times
        // slower per op takes at most 100 / (100 + 400) of the load.
        let d = s.poll(&state(20, 400_000), WritePolicy::WriteThrough);
        assert!((d.bypass_reads - 0.2).abs() < 1e-9, "{}", d.bypass_reads);
        // A backend as fast per op: the tail decides.
        let mut st = state(20, 400_000);
        st.backend.service_ns = 100_000;
        st.backend.latency_ns = 100_000;
        st.backend.queued = 4;
        let d = s.poll(&st, WritePolicy::WriteThrough);
        // Backend drains in 400 µs + 100 µs: positions past 5 go, 15 of 20, capped at 0.5.
        assert!((d.bypass_reads - 0.5).abs() < 1e-9, "{}", d.bypass_reads);
        assert_eq!(d.bypass_writes, d.bypass_reads);
        assert_eq!(d.bypass_writes_as, WritePolicy::ReadOnly);
        assert_eq!(d.write_policy, None);
        // No burst: nothing goes past.
        assert_eq!(
            s.poll(&state(2, 400_000), WritePolicy::WriteThrough),
            BalanceDecision::KEEP
        );
    }

    #[test]
    fn a_backend_that_serves_many_ops_at_once_is_judged_by_its_latency() {
        let mut s = Sib::new(1_000_000);
        // 20 ops of 100 µs at the cache (2 ms to drain); an array with 4 queued at 50 µs of
        // device time per op but 3 ms per op from submission to completion: every queued op
        // finishes sooner at the cache, so none is sent (its throughput alone, 0.25 ms to
        // drain, would send most of them).
        let mut st = state(20, 50_000);
        st.backend.queued = 4;
        st.backend.latency_ns = 3_000_000;
        assert_eq!(
            s.poll(&st, WritePolicy::WriteThrough),
            BalanceDecision::KEEP
        );
        assert!(!s.report().unwrap().burst);
        // A 1 ms latency: positions past (0.2 + 1) ms / 0.1 ms = 12 go, 8 of 20.
        st.backend.latency_ns = 1_000_000;
        let d = s.poll(&st, WritePolicy::WriteThrough);
        assert!((d.bypass_reads - 0.4).abs() < 1e-9, "{}", d.bypass_reads);
    }
}
