//! Load balancing between the cache device and the backend (SPEC §4.8): policies that watch
//! the executor's queues and change how the cache is used while it is the bottleneck.
//!
//! One small file per policy behind [`Balancer`]. Both executors poll the cache's balancer
//! once per [`Balancer::interval_ns`] with their [`ExecutorState`] (the simulator from its
//! device models at virtual-time interval boundaries, the engine from its flusher thread), so
//! one config runs one balancing policy in both. A balancer answers with the write policy to
//! have in force until the next poll; the cache applies it to every volume without a
//! per-volume override and returns to the configured policy when the balancer says `None`.
//! Adding a policy is a file here, a [`BalancingConfig`] variant and a line in [`build`].

mod none;

pub use none::NoBalancing;

use crate::config::WritePolicy;
use crate::executor::ExecutorState;
use serde::{Deserialize, Serialize};
use tiercache_core::Nanos;

/// A load-balancing policy.
pub trait Balancer: std::fmt::Debug + Send {
    /// Name as written in configs.
    fn name(&self) -> &'static str;

    /// Time between polls, ns; `None`: never polled (no balancing).
    fn interval_ns(&self) -> Option<Nanos>;

    /// One interval ended: given the executor's state now and the configured write policy,
    /// the write policy to use until the next poll (`None`: the configured one).
    fn poll(&mut self, state: &ExecutorState, configured: WritePolicy) -> Option<WritePolicy>;
}

/// Load-balancing policy, SPEC §4.8 (`cache.balancing`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "policy", rename_all = "kebab-case", deny_unknown_fields)]
pub enum BalancingConfig {
    /// No balancing: the configured write policy always (plain WB when that is configured).
    #[default]
    None,
}

/// The policy a configuration names.
pub fn build(cfg: &BalancingConfig) -> Box<dyn Balancer> {
    match cfg {
        BalancingConfig::None => Box::new(NoBalancing),
    }
}
