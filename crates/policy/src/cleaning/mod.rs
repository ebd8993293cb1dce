//! Cleaning (flushing) policies, docs/design.md §4.6: when to write dirty data back and how much.
//!
//! One small file per policy behind [`CleaningPolicy`]. A policy only decides *how many* lines
//! to flush now, and when it wants to be asked again; the cache picks the lines (least recently
//! written first, or as [`CleaningOrder`] says) and builds the flush jobs. Adding a policy is a file here, a
//! [`CleaningConfig`] variant and a line in [`build`].

mod aggressive;
mod lazy;
mod never;
mod order;
mod threshold;

pub use aggressive::Aggressive;
pub use lazy::Lazy;
pub use never::Never;
pub use order::{sort_by_address, sweep_batch, CleaningOrder};
pub use threshold::Threshold;

use crate::cache::ExecutorState;
use crate::config::CleaningConfig;
use tiercache_core::Nanos;

/// What a cleaner sees besides the executor state.
#[derive(Debug, Clone, Copy)]
pub struct DirtyState {
    /// Dirty lines now.
    pub dirty_lines: u64,
    /// Lines in the cache.
    pub capacity_lines: u64,
    /// Flush jobs issued and not yet done.
    pub jobs_in_flight: u32,
}

/// A cleaning policy. The executor polls it (through the cache) after events that may change
/// its answer and at the time [`next_poll`](CleaningPolicy::next_poll) asks for.
pub trait CleaningPolicy: std::fmt::Debug + Send {
    /// Lines to flush now (0 for none). With no dirty line there is nothing to do: every
    /// policy answers 0 then (and may reset its state).
    fn poll(&mut self, exec: &ExecutorState, d: DirtyState) -> u32;

    /// When to be polled again if nothing else happens (`None`: only after the next event).
    fn next_poll(&self, exec: &ExecutorState, d: DirtyState) -> Option<Nanos>;

    /// Whether this policy acts only on an idle cache device. A `true` is a promise, for some
    /// `k ≥ 1` fixed for the policy's life: while the cache device serves foreground I/O,
    /// `poll` answers 0 and changes no state, and `next_poll` answers `None` or `now + k`; at
    /// any other time `next_poll` answers no later than `now + k`. So a poll while the device
    /// is busy, with a poll already scheduled (no later than `now + k`, by the promise), can
    /// change nothing, and an executor may skip it. Default: `false` (poll after every
    /// event).
    fn acts_only_on_idle_cache(&self) -> bool {
        false
    }
}

/// The policy a configuration names.
pub fn build(cfg: &CleaningConfig) -> Box<dyn CleaningPolicy> {
    match *cfg {
        CleaningConfig::Lazy { idle_ns, batch } => Box::new(Lazy { idle_ns, batch }),
        CleaningConfig::Aggressive { period_ns, batch } => {
            Box::new(Aggressive::new(period_ns, batch))
        }
        CleaningConfig::Threshold { high, low, batch } => {
            Box::new(Threshold::new(high, low, batch))
        }
        CleaningConfig::None => Box::new(Never),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn exec(now: Nanos, idle: Nanos, qd: u32) -> ExecutorState {
        ExecutorState {
            now,
            cache_idle_ns: idle,
            cache: crate::DeviceLoad {
                queued: qd,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    pub(crate) fn dirty(n: u64) -> DirtyState {
        DirtyState {
            dirty_lines: n,
            capacity_lines: 100,
            jobs_in_flight: 0,
        }
    }

    #[test]
    fn nothing_dirty_means_nothing_to_do_for_every_policy() {
        for cfg in [
            CleaningConfig::Lazy {
                idle_ns: 0,
                batch: 8,
            },
            CleaningConfig::Aggressive {
                period_ns: 1,
                batch: 8,
            },
            CleaningConfig::Threshold {
                high: 0.0,
                low: 0.0,
                batch: 8,
            },
            CleaningConfig::None,
        ] {
            let mut p = build(&cfg);
            assert_eq!(p.poll(&exec(5, 1000, 0), dirty(0)), 0, "{cfg:?}");
            assert_eq!(p.next_poll(&exec(5, 1000, 0), dirty(0)), None, "{cfg:?}");
        }
    }
}
