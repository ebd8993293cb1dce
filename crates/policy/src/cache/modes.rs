//! The write policy in force for each request: per-volume overrides, the load balancer's
//! decision and its share of requests sent past the cache.

use super::counters::Event;
use super::{Cache, ExecutorState};
use crate::balancing::{BalanceDecision, BalanceReport, Balancer};
use crate::config::WritePolicy;
use tiercache_core::{Nanos, Op, Request, VolumeId};

/// The load balancer of one cache, its decision in force and its schedule (see
/// [`crate::balancing`]).
pub(super) struct Balancing {
    /// The balancer polled (the configured one, or one set by the executor).
    balancer: Box<dyn Balancer>,
    /// When the balancer is polled next (`None`: not yet scheduled).
    next_poll: Option<Nanos>,
    /// The decision in force: this cache's balancer's, or the one it follows.
    decision: BalanceDecision,
    /// Whether `decision` may send a read or a write past the cache (a share not `<= 0`):
    /// when not, [`Cache::mode_for`] skips the shares. Set with `decision`.
    may_bypass: bool,
    /// Running sums of the read and write shares that pick the requests sent past the cache.
    bypass_sums: [f64; 2],
}

impl Balancing {
    /// `balancer`'s state before its first poll: the configured write policy in force.
    pub(super) fn new(balancer: Box<dyn Balancer>) -> Self {
        Self {
            balancer,
            next_poll: None,
            decision: BalanceDecision::KEEP,
            may_bypass: BalanceDecision::KEEP.may_bypass(),
            bypass_sums: [0.0; 2],
        }
    }
}

impl Cache {
    /// Changes the write policy of one volume, or of all volumes (clearing per-volume ones).
    pub fn set_write_policy(&mut self, volume: Option<VolumeId>, policy: WritePolicy) {
        match volume {
            None => {
                self.default_mode = policy;
                self.volume_modes.clear();
            }
            Some(v) => {
                let v = v.0 as usize;
                if self.volume_modes.len() <= v {
                    self.volume_modes.resize(v + 1, None);
                }
                self.volume_modes[v] = Some(policy);
            }
        }
    }

    /// Puts `policy` over every volume's and the balancer's (`None`: lifts it), keeping them
    /// for when it is lifted: an executor serving past a failing cache device
    /// (docs/design.md §11) forces pass-through.
    pub fn force_write_policy(&mut self, policy: Option<WritePolicy>) {
        self.forced_mode = policy;
    }

    /// The write policy `volume` was given of its own ([`Cache::set_write_policy`]), if any.
    pub fn volume_write_policy(&self, volume: VolumeId) -> Option<WritePolicy> {
        self.volume_modes.get(volume.0 as usize).copied().flatten()
    }

    /// The write policy forced over the others, if any.
    pub fn forced_write_policy(&self) -> Option<WritePolicy> {
        self.forced_mode
    }

    /// Write policy in force for a volume: a forced one, else its own override, else the
    /// balancer's choice, else the configured one.
    pub fn write_policy(&self, volume: VolumeId) -> WritePolicy {
        if let Some(f) = self.forced_mode {
            return f;
        }
        self.volume_modes
            .get(volume.0 as usize)
            .copied()
            .flatten()
            .or(self.balancing.decision.write_policy)
            .unwrap_or(self.default_mode)
    }

    /// Replaces the load balancer (the configured one is built with the cache); executors and
    /// tests may supply their own.
    pub fn set_balancer(&mut self, b: Box<dyn Balancer>) {
        self.balancing.balancer = b;
        self.balancing.next_poll = None;
    }

    /// Polls the balancer if an interval ended by `state.now` and applies its answer; returns
    /// when it wants the next poll (`None`: never). Executors call it at that time (the
    /// first call, at any time, starts the schedule).
    pub fn balance(&mut self, state: &ExecutorState) -> Option<Nanos> {
        let interval = self.balancing.balancer.interval_ns()?.max(1);
        match self.balancing.next_poll {
            None => self.balancing.next_poll = Some(state.now.saturating_add(interval)),
            Some(at) if state.now >= at => {
                let d = self.balancing.balancer.poll(state, self.default_mode);
                let changed = d != self.balancing.decision;
                self.follow_balancing(d);
                self.record(Event::BalancerPoll { changed });
                // Intervals with no poll in them (an idle executor) are skipped, not replayed.
                self.balancing.next_poll = Some(next_on_grid(at, state.now, interval));
            }
            Some(_) => {}
        }
        self.balancing.next_poll
    }

    /// The write policy the balancer has in force (`None`: the configured one).
    pub fn balanced_write_policy(&self) -> Option<WritePolicy> {
        self.balancing.decision.write_policy
    }

    /// The balancer's decision in force.
    pub fn balance_decision(&self) -> BalanceDecision {
        self.balancing.decision
    }

    /// What the balancer saw and decided at its last poll.
    pub fn balance_report(&self) -> Option<BalanceReport> {
        self.balancing.balancer.report()
    }

    /// Puts a balancing decision in force here: the cache's own balancer's, or, for a cache
    /// of several shards, shard 0's, which every shard follows.
    pub fn follow_balancing(&mut self, d: BalanceDecision) {
        debug_assert!(
            (0.0..=1.0).contains(&d.bypass_reads) && (0.0..=1.0).contains(&d.bypass_writes)
        );
        self.balancing.decision = d;
        self.balancing.may_bypass = d.may_bypass();
    }

    /// The write policy for `req`: the volume's, unless the balancer sends this request past
    /// the cache (its share of reads or writes, picked by a running sum so the choice is
    /// deterministic).
    pub(super) fn mode_for(&mut self, req: &Request) -> WritePolicy {
        let mode = self.write_policy(req.volume);
        if !self.balancing.may_bypass || self.forced_mode.is_some() {
            // Both shares are `<= 0`: the test below would return `mode` for every op.
            return mode;
        }
        let d = self.balancing.decision;
        let (i, share, past) = match req.op {
            Op::Read => (0, d.bypass_reads, WritePolicy::PassThrough),
            Op::Write => (1, d.bypass_writes, d.bypass_writes_as),
            _ => return mode,
        };
        if share <= 0.0 {
            return mode;
        }
        let sum = &mut self.balancing.bypass_sums[i];
        *sum += share;
        if *sum >= 1.0 {
            *sum -= 1.0;
            self.record(Event::BalancerBypass);
            past
        } else {
            mode
        }
    }
}

/// The first time after `now` on the grid of `interval`s from `at` (`at <= now`): intervals
/// with no poll in them are skipped, not replayed. Saturating, so an interval near u64::MAX
/// (a policy built without config validation) ends at the end of time, never in the past.
pub(super) fn next_on_grid(at: Nanos, now: Nanos, interval: Nanos) -> Nanos {
    at.saturating_add(((now - at) / interval).saturating_mul(interval))
        .saturating_add(interval)
}

#[cfg(test)]
mod tests {
    use super::{BalanceDecision, Cache};
    use crate::config::{CacheConfig, WritePolicy};
    use proptest::prelude::*;
    use tiercache_core::{Op, Request};

    fn share() -> impl Strategy<Value = f64> {
        prop_oneof![
            Just(0.0),
            Just(-0.0),
            Just(-0.5),
            Just(f64::NAN),
            Just(1.0),
            0.0..=1.0f64,
        ]
    }

    proptest! {
        /// `mode_for` with the `may_bypass` shortcut answers as the general path (the
        /// flag forced on), request after request, with the same running sums and counter.
        #[test]
        fn shortcut_matches_the_general_path(
            decisions in prop::collection::vec((share(), share(), any::<bool>()), 1..4),
            ops in prop::collection::vec(0u8..4, 1..40),
        ) {
            let cfg = CacheConfig { capacity: 64 * 4096, ..CacheConfig::default() };
            let mut fast = Cache::new(&cfg).unwrap();
            let mut general = Cache::new(&cfg).unwrap();
            for (reads, writes, around) in decisions {
                let d = BalanceDecision {
                    bypass_reads: reads,
                    bypass_writes: writes,
                    bypass_writes_as: if around {
                        WritePolicy::WriteAround
                    } else {
                        WritePolicy::ReadOnly
                    },
                    ..BalanceDecision::KEEP
                };
                if (0.0..=1.0).contains(&reads) && (0.0..=1.0).contains(&writes) {
                    fast.follow_balancing(d);
                } else {
                    // Set as `follow_balancing` does, past its debug check of the shares'
                    // range: a NaN or negative share must not make the shortcut differ either.
                    fast.balancing.decision = d;
                    fast.balancing.may_bypass = d.may_bypass();
                }
                general.balancing.decision = d;
                general.balancing.may_bypass = true;
                for &op in &ops {
                    let mut req = Request::read(0, 4096);
                    req.op = [Op::Read, Op::Write, Op::Trim, Op::Flush][op as usize];
                    prop_assert_eq!(fast.mode_for(&req), general.mode_for(&req));
                }
                prop_assert_eq!(
                    fast.balancing.bypass_sums.map(f64::to_bits),
                    general.balancing.bypass_sums.map(f64::to_bits)
                );
                prop_assert_eq!(
                    fast.stats().balancer_bypassed,
                    general.stats().balancer_bypassed
                );
            }
        }
    }
}
