//! Victim handling: what happens to a clean line the replacement policy evicts
//! (docs/design.md §4.7).
//!
//! One small file per policy behind [`VictimPolicy`]. A dirty victim is always written back
//! first (that is the write policy's business, not this family's); a clean one is either
//! dropped (the usual cache) or demoted: handed to the level below, which in a cache
//! hierarchy (exclusive caching) keeps it instead of this level. A demote is a plan of two
//! ops: read the line's valid bytes from this cache device, then send them below
//! ([`OpCause::Demote`](tiercache_core::OpCause::Demote), a write that never carries dirty
//! data and that the level below may refuse). Adding a policy is a file here, a
//! [`VictimConfig`] variant and a line in [`build`].

mod demote;
mod drop;

pub use demote::DemoteClean;
pub use drop::DropClean;

use serde::{Deserialize, Serialize};
use tiercache_core::LineKey;

/// What to do with a clean victim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VictimAction {
    /// Drop it: the level below already has the data.
    Drop,
    /// Send its valid bytes to the level below, which may keep it.
    Demote,
}

/// A victim-handling policy.
pub trait VictimPolicy: std::fmt::Debug + Send {
    /// Name as written in configs.
    fn name(&self) -> &'static str;

    /// The clean line `key`, with `valid` sub-blocks, is being evicted.
    fn on_clean_victim(&mut self, key: LineKey, valid: u64) -> VictimAction;
}

/// Victim-handling policy (`cache.victim`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum VictimConfig {
    /// Clean victims are dropped.
    #[default]
    Drop,
    /// Clean victims are demoted to the level below (exclusive caching).
    Demote,
}

/// The policy a configuration names.
pub fn build(cfg: VictimConfig) -> Box<dyn VictimPolicy> {
    match cfg {
        VictimConfig::Drop => Box::new(DropClean),
        VictimConfig::Demote => Box::new(DemoteClean),
    }
}
