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
//!
//! `client_count = N` (with `client_sharing = "disjoint"`, the default, or `"shared"`) makes
//! the one `[[hierarchy.clients]]` entry a template replicated N times when the document is
//! read ([`HierarchyConfig::clients`] holds the replicas): replica `i` is named `{name}{i}`,
//! gets the template's requests split evenly (the remainder to replica 0) and, when disjoint,
//! the offset `offset + (i << 40)`; an explicit seed becomes `seed + i` (without one, replica
//! `i` is seeded as the `i`-th client of a hand-written list would be).

use crate::SimError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use tiercache_core::Nanos;
use tiercache_devices::{DeviceConfig, LinkConfig};
use tiercache_policy::{CacheConfig, VictimConfig};
use tiercache_workload::{Archetype, WorkloadSpec};

/// `[hierarchy]`: the whole tree of caches.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "HierarchyDocument")]
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
    /// Virtual time before measuring starts; both warm-up conditions must be met (as
    /// `run.warmup_ns` in a single-level run).
    #[serde(default)]
    pub warmup_ns: Nanos,
    /// Virtual time to measure after the warm-up (None: until every client's workload ends).
    /// Requests arriving later are not issued; those in flight complete (as `run.duration_ns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<Nanos>,
    /// Timeline interval (None: no timeline): each level's record then has one row per
    /// interval, as a single-level run's (`run.timeline_interval_ns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline_interval_ns: Option<Nanos>,
    /// After the measured window, write every level's dirty lines back, level by level from
    /// the top (a level's write-backs are writes at the level below, flushed in its turn), as
    /// `run.final_flush` does in a single-level run.
    #[serde(default)]
    pub final_flush: bool,
    /// Where a demote's time goes (docs/design.md §4.7).
    #[serde(default)]
    pub demote_cost: DemoteCost,
}

/// Where a demote's time goes (`hierarchy.demote_cost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DemoteCost {
    /// In the background: the request that evicts the victim is acknowledged when its own
    /// data is served; the demote's read, link transfer and write at the level below queue
    /// like any other op but add nothing to its latency.
    #[default]
    Background,
    /// On the requesting path, as Wong and Wilkes account it: the request is acknowledged
    /// only once the level below has taken the block (the victim's read here, the link, and
    /// the write at the receiving level, about its hit time under the constant model).
    Synchronous,
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

/// The most replicas `client_count` may ask for: each is a full client with its own levels, so
/// an input field must not size memory without bound.
const MAX_CLIENT_COUNT: u64 = 1024;

/// Whether the replicas of a `client_count` template address disjoint ranges or the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ClientSharing {
    /// Replica `i` adds `i << 40` to the template's offset: no block is shared.
    #[default]
    Disjoint,
    /// Every replica keeps the template's offset: they request the same blocks.
    Shared,
}

/// `[hierarchy]` as written: [`HierarchyConfig`] plus the client template fields, expanded
/// away on reading so that every consumer sees plain clients.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HierarchyDocument {
    #[serde(default)]
    exclusive: bool,
    #[serde(default)]
    levels: Vec<LevelConfig>,
    clients: Vec<ClientConfig>,
    backend: DeviceConfig,
    #[serde(default)]
    warmup_requests: u64,
    #[serde(default, deserialize_with = "tiercache_core::units::de_nanos")]
    warmup_ns: Nanos,
    #[serde(default, deserialize_with = "tiercache_core::units::de_opt_nanos")]
    duration_ns: Option<Nanos>,
    #[serde(default, deserialize_with = "tiercache_core::units::de_opt_nanos")]
    timeline_interval_ns: Option<Nanos>,
    #[serde(default)]
    final_flush: bool,
    #[serde(default)]
    demote_cost: DemoteCost,
    #[serde(default)]
    client_count: Option<u64>,
    #[serde(default)]
    client_sharing: Option<ClientSharing>,
}

impl TryFrom<HierarchyDocument> for HierarchyConfig {
    type Error = String;

    fn try_from(d: HierarchyDocument) -> Result<Self, String> {
        let clients = match d.client_count {
            None if d.client_sharing.is_some() => {
                return Err("client_sharing: goes with client_count (which is not given)".into())
            }
            None => d.clients,
            Some(n) => replicate_clients(d.clients, n, d.client_sharing.unwrap_or_default())?,
        };
        Ok(HierarchyConfig {
            exclusive: d.exclusive,
            levels: d.levels,
            clients,
            backend: d.backend,
            warmup_requests: d.warmup_requests,
            warmup_ns: d.warmup_ns,
            duration_ns: d.duration_ns,
            timeline_interval_ns: d.timeline_interval_ns,
            final_flush: d.final_flush,
            demote_cost: d.demote_cost,
        })
    }
}

/// The `n` replicas of the single client in `template` (module docs).
fn replicate_clients(
    template: Vec<ClientConfig>,
    n: u64,
    sharing: ClientSharing,
) -> Result<Vec<ClientConfig>, String> {
    if n == 0 || n > MAX_CLIENT_COUNT {
        return Err(format!(
            "client_count: {n} is out of range (1 to {MAX_CLIENT_COUNT})"
        ));
    }
    let [t]: [ClientConfig; 1] = template.try_into().map_err(|c: Vec<ClientConfig>| {
        format!(
            "client_count: replicates one [[hierarchy.clients]] entry, the template, but {} are given",
            c.len()
        )
    })?;
    if t.workload.trace.is_some() {
        return Err(
            "client_count: a trace client cannot be replicated (its requests cannot be split)"
                .into(),
        );
    }
    // The split of `total` requests: even, the remainder to replica 0.
    let share = |total: u64, i: u64| total / n + if i == 0 { total % n } else { 0 };
    let archetype_total = t.workload.requests.unwrap_or(100_000);
    if t.workload.archetype.is_some() && archetype_total < n {
        return Err(format!(
            "client_count: {n} clients cannot split {archetype_total} requests (each needs one)"
        ));
    }
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n {
        let mut c = t.clone();
        c.name = format!("{}{i}", t.name);
        if sharing == ClientSharing::Disjoint {
            c.offset = t
                .offset
                .checked_add(i << 40)
                .ok_or_else(|| format!("client_count: replica {i}'s offset overflows"))?;
        }
        let w = &mut c.workload;
        if w.archetype.is_some() {
            w.requests = Some(share(archetype_total, i));
            w.seed = t.workload.seed.map(|s| s.wrapping_add(i));
        } else if let Some(spec) = w.synthetic.as_mut() {
            if let Some(total) = spec.requests {
                if total < n {
                    return Err(format!(
                        "client_count: {n} clients cannot split {total} requests (each needs one)"
                    ));
                }
                spec.requests = Some(share(total, i));
            }
            spec.seed = spec.seed.wrapping_add(i);
        }
        out.push(c);
    }
    Ok(out)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(hierarchy: &str, clients: &str) -> Result<HierarchyConfig, String> {
        let text = format!(
            r#"{hierarchy}
backend = {{ model = "constant", latency_ns = 1000 }}
[[levels]]
name = "array"
cache = {{ capacity = 65536 }}
device = {{ model = "constant", latency_ns = 10 }}
{clients}"#
        );
        toml::from_str::<HierarchyConfig>(&text).map_err(|e| e.to_string())
    }

    const ONE: &str = r#"[[clients]]
name = "c"
offset = 4096
workload = { archetype = "zipf", requests = 1003 }
[[clients.levels]]
name = "client"
cache = { capacity = 16384 }
device = { model = "constant", latency_ns = 1 }
"#;

    #[test]
    fn client_count_replicates_the_template_disjoint() {
        let cfg = parse("client_count = 4", ONE).unwrap();
        let names: Vec<_> = cfg.clients.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["c0", "c1", "c2", "c3"]);
        let requests: Vec<_> = cfg.clients.iter().map(|c| c.workload.requests).collect();
        assert_eq!(requests, [Some(253), Some(250), Some(250), Some(250)]);
        let offsets: Vec<_> = cfg.clients.iter().map(|c| c.offset).collect();
        assert_eq!(
            offsets,
            [4096, 4096 + (1 << 40), 4096 + (2 << 40), 4096 + (3 << 40)]
        );
        // No seed in the template: each replica is seeded by its index, as a written list is.
        assert!(cfg.clients.iter().all(|c| c.workload.seed.is_none()));
        assert_eq!(cfg.synthetic_spec(1).unwrap().seed, 2);
        cfg.validate("hierarchy").unwrap();
    }

    #[test]
    fn shared_replicas_keep_the_offset_and_explicit_seeds_step() {
        let one = ONE.replace("requests = 1003", "requests = 1003, seed = 7");
        let cfg = parse("client_count = 3\nclient_sharing = \"shared\"", &one).unwrap();
        assert!(cfg.clients.iter().all(|c| c.offset == 4096));
        let seeds: Vec<_> = cfg.clients.iter().map(|c| c.workload.seed).collect();
        assert_eq!(seeds, [Some(7), Some(8), Some(9)]);
    }

    #[test]
    fn a_count_of_one_renames_and_keeps_everything_else() {
        let cfg = parse("client_count = 1", ONE).unwrap();
        assert_eq!(cfg.clients.len(), 1);
        assert_eq!(cfg.clients[0].name, "c0");
        assert_eq!(cfg.clients[0].workload.requests, Some(1003));
        assert_eq!(cfg.clients[0].offset, 4096);
    }

    #[test]
    fn bad_client_counts_are_refused_by_name() {
        for (head, clients, says) in [
            ("client_count = 0", ONE.to_string(), "out of range"),
            ("client_count = 1025", ONE.to_string(), "out of range"),
            (
                "client_count = 2",
                format!("{ONE}{}", ONE.replace("\"c\"", "\"d\"")),
                "2 are given",
            ),
            ("client_count = 2000", ONE.to_string(), "out of range"),
            ("client_count = 1004", ONE.to_string(), "cannot split"),
            (
                "client_sharing = \"shared\"",
                ONE.to_string(),
                "goes with client_count",
            ),
            (
                "client_count = 2\nclient_sharing = \"both\"",
                ONE.to_string(),
                "unknown variant",
            ),
        ] {
            let err = parse(head, &clients).unwrap_err();
            assert!(err.contains(says), "{head}: {err}");
            if says != "unknown variant" {
                assert!(err.contains("client_"), "{head}: {err}");
            }
        }
        let trace = ONE.replace(
            r#"{ archetype = "zipf", requests = 1003 }"#,
            r#"{ trace = "t.csv" }"#,
        );
        assert!(parse("client_count = 2", &trace)
            .unwrap_err()
            .contains("trace"));
    }

    #[test]
    fn serialized_replicas_read_back_as_the_same_clients() {
        let cfg = parse("client_count = 2", ONE).unwrap();
        let text = toml::to_string(&cfg).unwrap();
        let back: HierarchyConfig = toml::from_str(&text).unwrap();
        assert_eq!(back.clients.len(), 2);
        assert_eq!(back.clients[1].offset, cfg.clients[1].offset);
    }
}
