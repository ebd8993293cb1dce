//! SIB, selective I/O bypass (the baseline of SPEC §4.8, for a write-through cache): while
//! the cache device is the bottleneck, the requests that would finish sooner at the backend
//! go there.
//!
//! The k-th op queued at the cache completes after about `k × cache_service`; one sent to the
//! backend now completes after `backend_qtime + backend_service`. Ops beyond position
//! `x = (backend_qtime + backend_service) / cache_service` finish sooner at the backend, so a
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
        let burst = c > b;
        let share = if burst && state.cache.queued > 0 {
            let at_backend = b.saturating_add(state.backend.service_ns);
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
            },
            backend: DeviceLoad {
                queued: 1,
                by_origin: [1, 0, 0, 0],
                service_ns: backend_qtime,
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
}
