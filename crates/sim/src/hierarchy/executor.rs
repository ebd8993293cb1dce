//! The hierarchy run: every level a policy core in the simulator's one event loop
//! (`crate::exec`), as a single-level `simulate` runs its one.
//!
//! A request enters its client's top level (after the client's link, if the client has no
//! level of its own); the level's core plans it, and the plan's stages run as in a
//! single-level run. A cache op goes to the level's device model; a backend op crosses the
//! level's link down and is an event there: a request at the level below (`access`), or for a
//! demote (a backend write marked [`tiercache_core::OpCause::Demote`]) an offer to it
//! ([`accept_demote`](tiercache_policy::Decide::accept_demote)), whose writes run on that
//! level's device. The lowest level's backend ops go to the backend device model. A request
//! from above is answered when its critical ops are done, and its answer crosses the link back
//! up (a read's data) before the op above completes. Devices and links queue: requests of every
//! level and client meet at the shared levels' devices and on the links.
//!
//! A link is one FIFO serialiser at its bandwidth plus its latency, shared by both
//! directions: a request crosses it down as a command (no payload, or a write's data) and back
//! up with a read's data; a demote crosses it down with its line. So demotes delay the reads
//! queued behind them on the link, which is what makes demotion stop paying on slow links
//! (docs/design.md §4.7).
//!
//! Every level has what a single-level run has: its cleaner (its `cache` section's cleaning
//! settings; its write-backs are writes at the level below), its load balancer and tenancy
//! mode, and a host CPU model when the level sets `host`. A one-level hierarchy with one
//! client is exactly a single-level `simulate` of the same settings (the test
//! `one_level_hierarchy_is_sim` holds them byte-identical).
//!
//! Where the data of a measured client request came from is the deepest level (or the
//! backend) a critical op of it reached, through the levels below that answered it.

use super::config::{DemoteCost, HierarchyConfig};
use super::results::HierarchyResult;
use crate::config::RunLimits;
use crate::exec::{simulate_levels, ClientSetup, LevelSetup, LevelsOutput};
use crate::SimError;
use tiercache_core::RequestSource;
use tiercache_devices::{DeviceConfig, DeviceModel, LinkConfig};
use tiercache_policy::{Cache, PolicyCore, PolicyError, ShardedCache};

/// One cache level as built.
pub(crate) struct Node {
    pub name: String,
    pub client: Option<usize>,
    /// Order along a client's path down: a client's own levels count from 0, shared ones
    /// from [`SHARED_DEPTH`] (below every client's own, however many a client has).
    pub depth: u32,
    pub core: Box<dyn PolicyCore>,
    pub device: DeviceConfig,
    pub host: Option<crate::host::HostConfig>,
    /// The link down from this level, if any.
    pub link: Option<LinkConfig>,
    pub below: Option<usize>,
    /// The cache config it runs with.
    pub cache: tiercache_policy::CacheConfig,
}

/// Depth of the first shared level (see [`Node::depth`]).
const SHARED_DEPTH: u32 = 1 << 16;

/// One client as built.
struct ClientNode {
    top: usize,
    /// Link from a client without levels of its own to the shared levels.
    link: Option<LinkConfig>,
    offset: u64,
}

/// The run of a hierarchy (see the module docs).
pub struct HierarchySim {
    cfg: HierarchyConfig,
    /// Clients' own levels first (client by client, top to bottom), then the shared ones,
    /// top to bottom: the order of the results and of the final flush.
    pub(crate) nodes: Vec<Node>,
    clients: Vec<ClientNode>,
}

/// The level's policy core; an error names the level's `cache` field (`path.cache.field`).
fn build_core(
    cfg: &tiercache_policy::CacheConfig,
    path: &str,
) -> Result<Box<dyn PolicyCore>, SimError> {
    let core: Result<Box<dyn PolicyCore>, _> = if cfg.shards > 1 {
        ShardedCache::new(cfg).map(|c| Box::new(c) as Box<dyn PolicyCore>)
    } else {
        Cache::new(cfg).map(|c| Box::new(c) as Box<dyn PolicyCore>)
    };
    core.map_err(|e| match e {
        PolicyError::Config { field, reason } => SimError::Config {
            field: format!("{path}.cache.{field}"),
            reason,
        },
        other => SimError::Config {
            field: format!("{path}.cache"),
            reason: other.to_string(),
        },
    })
}

/// The model of the link `owner` (a level's or a client's path) has; its errors name
/// `owner.link.…`.
fn link_model(owner: &str, l: &LinkConfig) -> Result<DeviceModel, SimError> {
    Ok(DeviceModel::new(
        owner,
        &DeviceConfig {
            link: Some(l.clone()),
            ..DeviceConfig::default()
        },
    )?)
}

impl HierarchySim {
    /// Builds every level (validating the config; errors name the field, e.g.
    /// `hierarchy.levels[0].cache.capacity`).
    pub fn new(cfg: &HierarchyConfig) -> Result<Self, SimError> {
        cfg.validate("hierarchy")?;
        let mut nodes = Vec::new();
        let mut add = |name: String,
                       client: Option<usize>,
                       depth: u32,
                       l: &super::config::LevelConfig,
                       path: String,
                       has_below: bool|
         -> Result<usize, SimError> {
            let cache = cfg.effective_cache(l, has_below);
            let core = build_core(&cache, &path)?;
            l.device.resolve(&format!("{path}.device"))?;
            if let Some(h) = &l.host {
                h.validate(&format!("{path}.host"))?;
            }
            if let Some(lc) = &l.link {
                link_model(&path, lc)?;
            }
            nodes.push(Node {
                name,
                client,
                depth,
                core,
                device: l.device.clone(),
                host: l.host.clone(),
                link: l.link.clone(),
                below: None,
                cache,
            });
            Ok(nodes.len() - 1)
        };
        let mut own = Vec::new();
        for (i, c) in cfg.clients.iter().enumerate() {
            let mut ids = Vec::new();
            for (j, l) in c.levels.iter().enumerate() {
                let has_below = j + 1 < c.levels.len() || !cfg.levels.is_empty();
                ids.push(add(
                    format!("{}.{}", c.name, l.name),
                    Some(i),
                    j as u32,
                    l,
                    format!("hierarchy.clients[{i}].levels[{j}]"),
                    has_below,
                )?);
            }
            own.push(ids);
        }
        let mut shared = Vec::new();
        for (j, l) in cfg.levels.iter().enumerate() {
            let has_below = j + 1 < cfg.levels.len();
            shared.push(add(
                l.name.clone(),
                None,
                SHARED_DEPTH + j as u32,
                l,
                format!("hierarchy.levels[{j}]"),
                has_below,
            )?);
        }
        for w in shared.windows(2) {
            nodes[w[0]].below = Some(w[1]);
        }
        let first_shared = shared.first().copied();
        let mut clients = Vec::new();
        for (i, c) in cfg.clients.iter().enumerate() {
            let ids = &own[i];
            for w in ids.windows(2) {
                nodes[w[0]].below = Some(w[1]);
            }
            let path = format!("hierarchy.clients[{i}]");
            let mut client_link = None;
            if let Some(lc) = &c.link {
                link_model(&path, lc)?;
            }
            if let Some(&last) = ids.last() {
                nodes[last].below = first_shared;
                if let Some(lc) = &c.link {
                    // The client's link leads down from its lowest level, which must not
                    // have its own (one would silently replace the other).
                    if nodes[last].link.is_some() {
                        return Err(SimError::Config {
                            field: format!("{path}.link"),
                            reason: "the client's lowest level has its own link: keep one".into(),
                        });
                    }
                    nodes[last].link = Some(lc.clone());
                }
            } else {
                client_link = c.link.clone();
            }
            clients.push(ClientNode {
                top: ids
                    .first()
                    .copied()
                    .or(first_shared)
                    .expect("validated: every client has a level above the backend"),
                link: client_link,
                offset: c.offset,
            });
        }
        cfg.backend.resolve("hierarchy.backend")?;
        Ok(Self {
            cfg: cfg.clone(),
            nodes,
            clients,
        })
    }

    /// Runs the clients' sources (one per client, in config order) to their end.
    pub fn run(
        mut self,
        sources: &mut [Box<dyn RequestSource + '_>],
    ) -> Result<HierarchyResult, SimError> {
        let out = self.run_levels(sources)?;
        Ok(super::results::collect(&self, &out))
    }

    fn run_levels(
        &mut self,
        sources: &mut [Box<dyn RequestSource + '_>],
    ) -> Result<LevelsOutput, SimError> {
        if sources.len() != self.clients.len() {
            return Err(SimError::Config {
                field: "hierarchy.clients".into(),
                reason: format!(
                    "{} clients but {} workloads",
                    self.clients.len(),
                    sources.len()
                ),
            });
        }
        let run = RunLimits {
            warmup_requests: self.cfg.warmup_requests,
            warmup_ns: self.cfg.warmup_ns,
            duration_ns: self.cfg.duration_ns,
            timeline_interval_ns: self.cfg.timeline_interval_ns,
            final_flush: self.cfg.final_flush,
            requests: None,
            ..Default::default()
        };
        let backend = &self.cfg.backend;
        let mut levels = Vec::new();
        for (i, n) in self.nodes.iter_mut().enumerate() {
            let path = match n.client {
                Some(c) => format!("hierarchy.clients[{c}].levels[{i}]"),
                None => format!("hierarchy.levels[{i}]"),
            };
            levels.push(LevelSetup {
                cache: &mut *n.core,
                cache_device: &n.device,
                // A level's devices are named as a single-level run's: its metrics read alike.
                cache_device_name: "cache",
                backend: n.below.is_none().then_some((backend, &[][..])),
                host: n.host.as_ref(),
                link: match &n.link {
                    Some(l) => Some(link_model(&path, l)?),
                    None => None,
                },
                below: n.below.map(|b| b as u16),
                depth: n.depth,
                sync_demotes: self.cfg.demote_cost == DemoteCost::Synchronous,
            });
        }
        let mut clients = Vec::new();
        for (c, s) in self.clients.iter().zip(sources.iter_mut()) {
            clients.push(ClientSetup {
                source: &mut **s,
                top: c.top as u16,
                offset: c.offset,
                link: match &c.link {
                    Some(l) => Some(link_model("hierarchy.clients", l)?),
                    None => None,
                },
            });
        }
        simulate_levels(levels, clients, &run)
    }

    pub(crate) fn config(&self) -> &HierarchyConfig {
        &self.cfg
    }
}
