//! The lookup architecture (docs/design.md §4.1): how requests take the policy core's lock. One
//! enum for both executors: the engine runs it (threads and locks), the simulator models it (host
//! cores as servers, locks as resources with hold times).

use serde::{Deserialize, Serialize};

/// How requests take the policy core's lock (docs/design.md §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Lookup {
    /// Low multi-threaded, locked table: one lock held for a whole request, its I/O included
    /// (requests run one at a time; the simulator models a few fixed workers).
    Lt,
    /// Highly multi-threaded, coarse-grained: one lock, held only while the core decides; data
    /// moves concurrently, ordered per location.
    HtCg,
    /// Highly multi-threaded, fine-grained: many locks. The engine puts one on each of the
    /// policy's shards (`cache.shards`: independent policy cores, each over its own slots,
    /// owning the lines whose 64 KiB chunk hashes to it), which the simulator runs too; the
    /// simulator's host model adds the locks' contention.
    #[default]
    HtFg,
}
