//! The configuration of a cache hierarchy (docs/design.md §4.7): clients, each with its own cache
//! level(s), over shared levels over one backend, joined by links.
//!
//! ```toml
//! [hierarchy]
//! exclusive = true                     # every level but the lowest demotes its clean victims
//! backend = { model = "constant", latency_ns = "5ms" }
//!
//! [[hierarchy.levels]]                 # shared levels, top to bottom
//! name = "array"
//! cache = { capacity = "64MiB", eviction = "mru" }
//! device = { model = "constant", latency_ns = "100us" }
//! link = "net-10g"                     # from this level down (to the backend here)
//!
//! [[hierarchy.clients]]
//! name = "host"
//! workload = { archetype = "zipf", requests = 100000 }
//! link = { bandwidth = "125MB", latency_ns = "50us" }   # from the client down
//! [[hierarchy.clients.levels]]
//! name = "ram"
//! cache = { capacity = "32MiB" }
//! device = { model = "constant", latency_ns = "1us" }
//! ```
//!
//! Each level's `cache` is a whole `[cache]` section (capacity, line size, eviction,
//! promotion, write policy, cleaning, load balancing, tenancy, shards, `victim`) and runs as a
//! single-level cache with it does, cleaner and balancer included; a level may add `host` (a
//! `[host]` CPU model); `victim = "demote"` on one level makes just that
//! level exclusive with the next, `exclusive = true` every level that has a level below. A
//! `link` always leads *down* from where it is written: a client's from its lowest own level to
//! the first shared level (or the backend), a level's to the next level (or the backend).
//! Without a link the hop costs nothing.

use crate::SimError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use tiercache_devices::{DeviceConfig, LinkConfig};
use tiercache_policy::{CacheConfig, VictimConfig};
use tiercache_workload::{Archetype, WorkloadSpec};

/// `[hierarchy]`: the whole tree of caches.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HierarchyConfig {
    /// Every level with a level below it demotes its clean victims (exclusive caching);
    /// levels may also set `cache.victim = "demote"` one by one.
    #[serde(default)]
    pub exclusive: bool,
    /// Levels shared by every client, top to bottom.
    #[serde(default)]
    pub levels: Vec<LevelConfig>,
    /// The clients (at least one).
    pub clients: Vec<ClientConfig>,
    /// The backend under the lowest level.
    pub backend: DeviceConfig,
    /// Requests of the whole run not measured at its start (caches warm up), counted in issue
    /// order over every client.
    #[serde(default)]
    pub warmup_requests: u64,
    /// After the measured window, write every level's dirty lines back, level by level from
    /// the top (a level's write-backs are writes at the level below, flushed in its turn), as
    /// `run.final_flush` does in a single-level run.
    #[serde(default)]
    pub final_flush: bool,
}

/// One cache level: a policy core and its device.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelConfig {
    /// Name in reports (unique in the hierarchy; a client's levels are reported as
    /// `client.level`).
    pub name: String,
    /// The level's `[cache]` settings.
    pub cache: CacheConfig,
    /// The device holding its lines.
    pub device: DeviceConfig,
    /// Link from this level down to the next (or the backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkConfig>,
    /// The level's host CPU model, as a single-level run's `[host]` (None: CPU costs
    /// nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::host::HostConfig>,
}

/// One client: its workload and its own cache levels above the shared ones.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    /// Name in reports (unique).
    pub name: String,
    /// What it requests.
    pub workload: ClientWorkload,
    /// Its own levels, top to bottom (usually one: the client cache). May be empty.
    #[serde(default)]
    pub levels: Vec<LevelConfig>,
    /// Link from the client's lowest level down to the shared levels (or the backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkConfig>,
    /// Added to every offset the workload produces: clients with different offsets address
    /// disjoint ranges, clients with the same one share blocks. Default 0.
    #[serde(default, deserialize_with = "tiercache_core::units::de_bytes")]
    pub offset: u64,
}

/// A client's workload: a §4.7 archetype scaled to the hierarchy, a synthetic spec, or a
/// trace (resolved by the caller, which owns trace reading).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientWorkload {
    /// A §4.7 archetype over the aggregate capacity this client sees (its own levels plus the
    /// shared ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archetype: Option<Archetype>,
    /// Requests of an archetype (default 100 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Seed of an archetype (default: the client's index + 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// A synthetic workload (the `[workload]` section's fields).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthetic: Option<WorkloadSpec>,
    /// A trace file, replayed as fast as possible (one request in flight); relative paths
    /// are relative to the config file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<PathBuf>,
}

fn config_error(field: String, reason: impl Into<String>) -> SimError {
    SimError::Config {
        field,
        reason: reason.into(),
    }
}

impl HierarchyConfig {
    /// Checks what the types cannot: names, counts, where demotes can go. `path` names the
    /// section in errors (`"hierarchy"`).
    pub fn validate(&self, path: &str) -> Result<(), SimError> {
        if self.clients.is_empty() {
            return Err(config_error(
                format!("{path}.clients"),
                "a hierarchy needs at least one client",
            ));
        }
        let mut names = std::collections::HashSet::new();
        for (i, c) in self.clients.iter().enumerate() {
            let cp = format!("{path}.clients[{i}]");
            if !names.insert(c.name.clone()) {
                return Err(config_error(
                    format!("{cp}.name"),
                    format!("`{}` is used twice", c.name),
                ));
            }
            let w = &c.workload;
            let given = usize::from(w.archetype.is_some())
                + usize::from(w.synthetic.is_some())
                + usize::from(w.trace.is_some());
            if given != 1 {
                return Err(config_error(
                    format!("{cp}.workload"),
                    "give exactly one of `archetype`, `synthetic` or `trace`",
                ));
            }
            if w.archetype.is_none() && (w.requests.is_some() || w.seed.is_some()) {
                return Err(config_error(
                    format!("{cp}.workload.requests"),
                    "`requests` and `seed` go with `archetype` (a synthetic spec has its own)",
                ));
            }
            if w.requests == Some(0) {
                return Err(config_error(
                    format!("{cp}.workload.requests"),
                    "must be at least 1",
                ));
            }
            if c.levels.is_empty() && self.levels.is_empty() {
                return Err(config_error(
                    format!("{cp}.levels"),
                    "no cache level above the backend (a client's own or a shared one)",
                ));
            }
            for (j, l) in c.levels.iter().enumerate() {
                if !names.insert(format!("{}.{}", c.name, l.name)) {
                    return Err(config_error(
                        format!("{cp}.levels[{j}].name"),
                        format!("`{}` is used twice in client `{}`", l.name, c.name),
                    ));
                }
            }
        }
        for (j, l) in self.levels.iter().enumerate() {
            if !names.insert(l.name.clone()) {
                return Err(config_error(
                    format!("{path}.levels[{j}].name"),
                    format!("`{}` is used twice", l.name),
                ));
            }
        }
        if let Some(j) = self.levels.len().checked_sub(1) {
            if self.levels[j].cache.victim == VictimConfig::Demote {
                return Err(config_error(
                    format!("{path}.levels[{j}].cache.victim"),
                    "the lowest level has no cache below it to demote to",
                ));
            }
        } else {
            for (i, c) in self.clients.iter().enumerate() {
                if let Some(j) = c.levels.len().checked_sub(1) {
                    if c.levels[j].cache.victim == VictimConfig::Demote {
                        return Err(config_error(
                            format!("{path}.clients[{i}].levels[{j}].cache.victim"),
                            "the lowest level has no cache below it to demote to",
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Cache bytes client `i` sees: its own levels plus the shared ones (what its archetype
    /// is scaled to).
    pub fn aggregate_bytes(&self, client: usize) -> u64 {
        self.clients[client]
            .levels
            .iter()
            .chain(&self.levels)
            .map(|l| l.cache.capacity)
            .sum()
    }

    /// The line size of client `i`'s top level (the block its archetype reads).
    pub fn top_line_size(&self, client: usize) -> u64 {
        self.clients[client]
            .levels
            .first()
            .or(self.levels.first())
            .map_or(4096, |l| l.cache.line_size)
    }

    /// The synthetic spec of client `i`'s workload when it is an archetype or a spec; `None`
    /// for a trace.
    pub fn synthetic_spec(&self, client: usize) -> Option<WorkloadSpec> {
        let w = &self.clients[client].workload;
        if let Some(a) = w.archetype {
            return Some(a.spec(
                self.aggregate_bytes(client),
                self.top_line_size(client),
                w.requests.unwrap_or(100_000),
                w.seed.unwrap_or(client as u64 + 1),
            ));
        }
        w.synthetic.clone()
    }

    /// The cache config a level runs with: its own, with `victim = "demote"` when the
    /// hierarchy is exclusive and the level has a level below.
    pub(crate) fn effective_cache(&self, level: &LevelConfig, has_below: bool) -> CacheConfig {
        let mut c = level.cache.clone();
        if self.exclusive && has_below {
            c.victim = VictimConfig::Demote;
        }
        c
    }
}
