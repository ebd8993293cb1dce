//! Load balancing between the cache device and the backend (docs/design.md §4.8): policies that
//! watch the executor's queues and change how the cache is used while it is the bottleneck.
//!
//! One small file per policy behind [`Balancer`]. Both executors poll the cache's balancer
//! once per [`Balancer::interval_ns`] with their [`ExecutorState`] (the simulator from its
//! device models at virtual-time interval boundaries, the engine from its flusher thread), so
//! one config runs one balancing policy in both. A balancer answers with a
//! [`BalanceDecision`] in force until the next poll: a write policy for every volume without a
//! per-volume override (`None`: the configured one), and shares of reads and writes to send
//! past the cache. The cache picks which requests those are deterministically (an
//! accumulator per kind: every request adds the share, a request that carries it past 1 is
//! sent past), so a simulated run stays reproducible. A read sent past is served as under
//! pass-through (dirty data still comes from the cache: a bypass never serves stale data); a
//! write sent past as under [`BalanceDecision::bypass_writes_as`] (write-around keeps a
//! cached copy up to date, read-only drops it). Because a share holds for a whole interval,
//! the balancers cap it at the backend's share of the two devices' service rates (see
//! `capacity_share`): the literal per-request rules, applied for 10 ms at once, would send
//! the whole burst to a backend whose queue merely looked empty at the poll. Adding a policy is a file here, a
//! [`BalancingConfig`] variant and a line in [`build`].

mod lbica;
mod none;
mod sib;

pub use lbica::{Lbica, LbicaGroup};
pub use none::NoBalancing;
pub use sib::Sib;

use crate::config::WritePolicy;
use crate::executor::ExecutorState;
use serde::{Deserialize, Serialize};
use tiercache_core::units::de_nanos;
use tiercache_core::Nanos;

/// A load-balancing policy.
pub trait Balancer: std::fmt::Debug + Send {
    /// Name as written in configs.
    fn name(&self) -> &'static str;

    /// Time between polls, ns; `None`: never polled (no balancing).
    fn interval_ns(&self) -> Option<Nanos>;

    /// One interval ended: given the executor's state now and the configured write policy,
    /// what to do until the next poll.
    fn poll(&mut self, state: &ExecutorState, configured: WritePolicy) -> BalanceDecision;

    /// What the last poll saw and decided, for the per-interval record (`None` before any).
    fn report(&self) -> Option<BalanceReport> {
        None
    }
}

/// A balancer's answer for one interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BalanceDecision {
    /// Write policy for every volume without its own (`None`: the configured one).
    pub write_policy: Option<WritePolicy>,
    /// Share of reads to serve from the backend (0 to 1).
    pub bypass_reads: f64,
    /// Share of writes to send past the cache (0 to 1).
    pub bypass_writes: f64,
    /// How a write sent past the cache is handled: [`WritePolicy::WriteAround`] (a cached copy
    /// is updated, nothing allocated) or [`WritePolicy::ReadOnly`] (a cached copy is dropped).
    pub bypass_writes_as: WritePolicy,
}

impl BalanceDecision {
    /// The configured policy, nothing sent past the cache.
    pub const KEEP: BalanceDecision = BalanceDecision {
        write_policy: None,
        bypass_reads: 0.0,
        bypass_writes: 0.0,
        bypass_writes_as: WritePolicy::WriteAround,
    };

    /// Whether this decision may send a read or a write past the cache: a share that is not
    /// `<= 0` (a NaN share counts, as the running sums would see it).
    pub fn may_bypass(&self) -> bool {
        !(self.bypass_reads <= 0.0 && self.bypass_writes <= 0.0)
    }

    /// Another write policy, nothing sent past the cache.
    pub fn policy(p: WritePolicy) -> Self {
        BalanceDecision {
            write_policy: Some(p),
            ..Self::KEEP
        }
    }
}

/// What a balancer saw and decided at its last poll (docs/design.md §4.8's per-interval report).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct BalanceReport {
    /// The cache device was the bottleneck (its queue time exceeded the backend's).
    pub burst: bool,
    /// Estimated time to drain the cache device's queue, ns.
    pub cache_qtime_ns: Nanos,
    /// Estimated time to drain the backend's queue, ns.
    pub backend_qtime_ns: Nanos,
    /// Shares of R, W, P, E among the ops queued at the cache device.
    pub shares: [f64; 4],
    /// LBICA's group (1 to 4) while in a burst, 0 otherwise.
    pub group: u8,
    /// Share of reads sent to the backend.
    pub bypass_reads: f64,
    /// Share of writes sent past the cache.
    pub bypass_writes: f64,
}

/// Load-balancing policy, docs/design.md §4.8 (`cache.balancing`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "policy", rename_all = "kebab-case", deny_unknown_fields)]
pub enum BalancingConfig {
    /// No balancing: the configured write policy always (plain WB when that is configured).
    #[default]
    #[serde(deserialize_with = "crate::config::no_fields")]
    None,
    /// LBICA: in a burst, characterise the cache device's queue (R, W, P, E) and switch the
    /// write policy by group (docs/design.md §4.8).
    Lbica {
        /// Interval between polls.
        #[serde(default = "default_interval_ns", deserialize_with = "de_nanos")]
        interval_ns: Nanos,
        /// Share of the queue two classes must reach together to name a group.
        #[serde(default = "default_dominance")]
        dominance: f64,
        /// Share of promotions alone that makes a burst a sequential read (group 4).
        #[serde(default = "default_sequential")]
        sequential: f64,
        /// Consecutive polls that must see the cache as the bottleneck before the policy
        /// changes (1: act on the first). A cache that keeps up with a burst still has
        /// moments when its queue looks long at a poll; acting on one sends a whole
        /// interval's writes or reads to the backend.
        #[serde(default = "default_confirm_polls")]
        confirm_polls: u32,
    },
    /// SIB: selective I/O bypass for a write-through cache: while the cache device is the
    /// bottleneck, the requests at the tail of its queue go to the backend (docs/design.md §4.8).
    Sib {
        /// Interval between polls.
        #[serde(default = "default_interval_ns", deserialize_with = "de_nanos")]
        interval_ns: Nanos,
    },
}

fn default_interval_ns() -> Nanos {
    10_000_000
}

fn default_dominance() -> f64 {
    0.6
}

fn default_sequential() -> f64 {
    0.6
}

fn default_confirm_polls() -> u32 {
    2
}

impl BalancingConfig {
    /// Checks the settings; the error names the field (relative to `cache.balancing`).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        match *self {
            BalancingConfig::None => Ok(()),
            BalancingConfig::Lbica {
                interval_ns,
                dominance,
                sequential,
                confirm_polls,
            } => {
                if interval_ns == 0 {
                    return Err(("balancing.interval_ns", "must be positive".into()));
                }
                if let Some(reason) = crate::config::duration_too_long(interval_ns) {
                    return Err(("balancing.interval_ns", reason));
                }
                if confirm_polls == 0 {
                    return Err(("balancing.confirm_polls", "must be at least 1".into()));
                }
                for (f, v) in [
                    ("balancing.dominance", dominance),
                    ("balancing.sequential", sequential),
                ] {
                    if !(v > 0.0 && v <= 1.0) {
                        return Err((f, format!("{v} must be in (0, 1]")));
                    }
                }
                Ok(())
            }
            BalancingConfig::Sib { interval_ns } => {
                if interval_ns == 0 {
                    return Err(("balancing.interval_ns", "must be positive".into()));
                }
                if let Some(reason) = crate::config::duration_too_long(interval_ns) {
                    return Err(("balancing.interval_ns", reason));
                }
                Ok(())
            }
        }
    }
}

/// The policy a configuration names.
pub fn build(cfg: &BalancingConfig) -> Box<dyn Balancer> {
    match *cfg {
        BalancingConfig::None => Box::new(NoBalancing),
        BalancingConfig::Lbica {
            interval_ns,
            dominance,
            sequential,
            confirm_polls,
        } => {
            Box::new(Lbica::new(interval_ns, dominance, sequential).confirmed_after(confirm_polls))
        }
        BalancingConfig::Sib { interval_ns } => Box::new(Sib::new(interval_ns)),
    }
}

/// The most a decision held for a whole interval may send past the cache: the backend's
/// share of the two devices' combined service rate, `s_cache / (s_cache + s_backend)` (the
/// split at which both would be equally busy). A share computed from the queues at one
/// instant and applied for an interval would otherwise overshoot: a queue seen empty at the
/// backend says nothing of how much more it can take.
pub(crate) fn capacity_share(state: &ExecutorState) -> f64 {
    let (c, b) = (
        state.cache.service_ns as f64,
        state.backend.service_ns as f64,
    );
    if c + b <= 0.0 {
        0.0
    } else {
        c / (c + b)
    }
}

/// Drain times of both queues and the R/W/P/E shares of the cache device's queue.
pub(crate) fn observe(state: &ExecutorState) -> (Nanos, Nanos, [f64; 4]) {
    let c = state.cache.queue_time_ns();
    let b = state.backend.queue_time_ns();
    let total: u32 = state.cache.by_origin.iter().sum();
    let shares = if total == 0 {
        [0.0; 4]
    } else {
        state
            .cache
            .by_origin
            .map(|n| f64::from(n) / f64::from(total))
    };
    (c, b, shares)
}
