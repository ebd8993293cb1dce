//! The write policy in force for each request: per-volume overrides, the load balancer's
//! decision and its share of requests sent past the cache.

use super::*;

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

    /// Write policy in force for a volume: its own override, else the balancer's choice,
    /// else the configured one.
    pub fn write_policy(&self, volume: VolumeId) -> WritePolicy {
        self.volume_modes
            .get(volume.0 as usize)
            .copied()
            .flatten()
            .or(self.balance.write_policy)
            .unwrap_or(self.default_mode)
    }

    /// Replaces the load balancer (the configured one is built with the cache); executors and
    /// tests may supply their own.
    pub fn set_balancer(&mut self, b: Box<dyn crate::balancing::Balancer>) {
        self.balancer = b;
        self.next_balance = None;
    }

    /// Polls the balancer if an interval ended by `state.now` and applies its answer; returns
    /// when it wants the next poll (`None`: never). Executors call it at that time (the
    /// first call, at any time, starts the schedule).
    pub fn balance(&mut self, state: &ExecutorState) -> Option<Nanos> {
        let interval = self.balancer.interval_ns()?.max(1);
        match self.next_balance {
            None => self.next_balance = Some(state.now.saturating_add(interval)),
            Some(at) if state.now >= at => {
                let d = self.balancer.poll(state, self.default_mode);
                self.stats.balancer_changes += u64::from(d != self.balance);
                self.follow_balancing(d);
                self.stats.balancer_polls += 1;
                // Intervals with no poll in them (an idle executor) are skipped, not replayed.
                self.next_balance = Some(next_on_grid(at, state.now, interval));
            }
            Some(_) => {}
        }
        self.next_balance
    }

    /// The write policy the balancer has in force (`None`: the configured one).
    pub fn balanced_write_policy(&self) -> Option<WritePolicy> {
        self.balance.write_policy
    }

    /// The balancer's decision in force.
    pub fn balance_decision(&self) -> crate::balancing::BalanceDecision {
        self.balance
    }

    /// What the balancer saw and decided at its last poll.
    pub fn balance_report(&self) -> Option<crate::balancing::BalanceReport> {
        self.balancer.report()
    }

    /// Puts a balancing decision in force here: the cache's own balancer's, or, for a cache
    /// of several shards, shard 0's, which every shard follows.
    pub fn follow_balancing(&mut self, d: crate::balancing::BalanceDecision) {
        debug_assert!(
            (0.0..=1.0).contains(&d.bypass_reads) && (0.0..=1.0).contains(&d.bypass_writes)
        );
        self.balance = d;
    }

    /// The write policy for `req`: the volume's, unless the balancer sends this request past
    /// the cache (its share of reads or writes, picked by a running sum so the choice is
    /// deterministic).
    pub(super) fn mode_for(&mut self, req: &Request) -> WritePolicy {
        let mode = self.write_policy(req.volume);
        let d = self.balance;
        let (i, share, past) = match req.op {
            Op::Read => (0, d.bypass_reads, WritePolicy::PassThrough),
            Op::Write => (1, d.bypass_writes, d.bypass_writes_as),
            _ => return mode,
        };
        if share <= 0.0 {
            return mode;
        }
        self.bypass_sums[i] += share;
        if self.bypass_sums[i] >= 1.0 {
            self.bypass_sums[i] -= 1.0;
            self.stats.balancer_bypassed += 1;
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
