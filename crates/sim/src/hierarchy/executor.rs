//! The hierarchy executor: one policy core per level, a miss at one level a request to the
//! next after the link, a demote an `accept_demote` at the next level after the link.
//!
//! Timing is booked, not queued event by event: requests are issued in time order (closed
//! loop per client job slot, or open loop at their arrival time) and each is carried through
//! the levels at once. Its plan's stages run in order (a stage starts when every op of the
//! previous one has completed, as the plan defines); an op on a level's device or on a link
//! is booked on that model at the time its stage starts, and an op for the level below
//! becomes a request there at that time, recursively. Device models take ops in submission
//! order (FIFO), so an op booked ahead of an earlier-issued one simply queues behind it: exact
//! for the constant-latency model (no queues) and a close approximation for the queueing
//! ones, as the engine's emulated devices are (`DeviceModel::run_op`).
//!
//! A link is one FIFO serialiser at its bandwidth plus its latency each way, shared by both
//! directions: a request crosses it down as a command (no payload, or a write's data) and
//! back up with a read's data; a demote crosses it down with its line. So demotes delay the
//! reads queued behind them on the link, which is what makes demotion stop paying on slow
//! links (docs/design.md §4.7).
//!
//! Not modelled in hierarchies: the host CPU, cleaners (dirty lines are written down when
//! they are evicted; nothing is flushed at the end) and load balancing.

use super::config::HierarchyConfig;
use super::results::HierarchyResult;
use crate::SimError;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use tiercache_core::{Arrival, Device, IoKind, Nanos, Op, OpCause, Plan, Request, RequestSource};
use tiercache_devices::{DeviceConfig, DeviceModel, LinkConfig};
use tiercache_metrics::LatencyRecorder;
use tiercache_policy::{Cache, CacheStats, DemoteOutcome, PolicyCore, PolicyError, ShardedCache};

/// Counters the executor keeps for one level (the policy's own are in its `CacheStats`).
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeCounters {
    /// Measured client requests whose data came from this level (the deepest level a
    /// critical op of theirs reached).
    pub served: u64,
    /// Requests that reached this level (from clients or the level above).
    pub requests_in: u64,
    /// Demotes this level sent down, and what became of them.
    pub demotes_sent: u64,
    pub demotes_accepted: u64,
    pub demotes_already_held: u64,
    pub demotes_rejected: u64,
    /// Bytes this level's link carried down (commands carry none; writes and demotes do) and
    /// up (read data).
    pub link_bytes_down: u64,
    pub link_bytes_up: u64,
    /// Demoted bytes sent over the link.
    pub demote_bytes: u64,
}

/// One cache level at run time.
pub(crate) struct Node {
    pub name: String,
    pub client: Option<usize>,
    /// Order along a client's path down: a client's own levels count from 0, shared ones
    /// from [`SHARED_DEPTH`] (below every client's own, however many a client has).
    pub depth: u32,
    pub core: Box<dyn PolicyCore>,
    pub device: DeviceModel,
    /// The link down from this level, if any.
    pub link: Option<DeviceModel>,
    pub below: Option<usize>,
    pub c: NodeCounters,
    pub stats_at_warmup: CacheStats,
    /// The link's busy time when the warm-up ended, ps.
    pub link_cost_at_warmup: u128,
}

/// Depth of the first shared level (see [`Node::depth`]).
const SHARED_DEPTH: u32 = 1 << 16;

/// Where a request's data came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Served {
    Level(usize),
    Backend,
}

struct ClientState {
    name: String,
    top: Option<usize>,
    /// Link from a client without levels of its own to the shared levels.
    link: Option<DeviceModel>,
    link_bytes: (u64, u64),
    link_cost_at_warmup: u128,
    offset: u64,
    latency: LatencyRecorder,
    requests: u64,
    served_backend: u64,
    served: Vec<u64>,
}

/// The run of a hierarchy (see the module docs).
pub struct HierarchySim {
    cfg: HierarchyConfig,
    pub(crate) nodes: Vec<Node>,
    backend: DeviceModel,
    backend_served: u64,
    clients: Vec<ClientState>,
    issued: u64,
    measuring: bool,
    measure_start: Nanos,
    end: Nanos,
    latency: LatencyRecorder,
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

/// A policy error on request `req` (a request a client or a level above made).
fn request_error(issued: u64, req: &Request, e: PolicyError) -> SimError {
    SimError::Request {
        index: issued.saturating_sub(1),
        request: *req,
        source: e,
    }
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
            let device = DeviceModel::new(&format!("{path}.device"), &l.device)?;
            let link = match &l.link {
                Some(lc) => Some(link_model(&path, lc)?),
                None => None,
            };
            nodes.push(Node {
                name,
                client,
                depth,
                core,
                device,
                link,
                below: None,
                c: NodeCounters::default(),
                stats_at_warmup: CacheStats::default(),
                link_cost_at_warmup: 0,
            });
            Ok(nodes.len() - 1)
        };
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
        let mut tops = Vec::new();
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
            tops.push(ids);
        }
        for w in shared.windows(2) {
            nodes[w[0]].below = Some(w[1]);
        }
        let first_shared = shared.first().copied();
        let mut clients = Vec::new();
        for (i, c) in cfg.clients.iter().enumerate() {
            let ids = &tops[i];
            for w in ids.windows(2) {
                nodes[w[0]].below = Some(w[1]);
            }
            let path = format!("hierarchy.clients[{i}]");
            let mut client_link = None;
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
                    nodes[last].link = Some(link_model(&path, lc)?);
                }
            } else if let Some(lc) = &c.link {
                client_link = Some(link_model(&path, lc)?);
            }
            clients.push(ClientState {
                name: c.name.clone(),
                top: ids.first().copied().or(first_shared),
                link: client_link,
                link_bytes: (0, 0),
                link_cost_at_warmup: 0,
                offset: c.offset,
                latency: LatencyRecorder::new(),
                requests: 0,
                served_backend: 0,
                served: Vec::new(),
            });
        }
        let backend = DeviceModel::new("hierarchy.backend", &cfg.backend)?;
        let n = nodes.len();
        for c in &mut clients {
            c.served = vec![0; n];
        }
        Ok(Self {
            cfg: cfg.clone(),
            nodes,
            backend,
            backend_served: 0,
            clients,
            issued: 0,
            measuring: cfg.warmup_requests == 0,
            measure_start: 0,
            end: 0,
            latency: LatencyRecorder::new(),
        })
    }

    /// Runs the clients' sources (one per client, in config order) to their end.
    pub fn run(
        mut self,
        sources: &mut [Box<dyn RequestSource + '_>],
    ) -> Result<HierarchyResult, SimError> {
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
        // Issue events: (time, sequence, client, job). The sequence breaks ties in a fixed
        // order, so the run is deterministic.
        let mut heap: BinaryHeap<Reverse<(Nanos, u64, usize, u32)>> = BinaryHeap::new();
        let mut seq = 0u64;
        for (i, s) in sources.iter().enumerate() {
            match s.arrival() {
                Arrival::Closed { jobs, iodepth } => {
                    for _ in 0..iodepth {
                        for job in 0..jobs {
                            heap.push(Reverse((0, seq, i, job)));
                            seq += 1;
                        }
                    }
                }
                Arrival::Open => {
                    heap.push(Reverse((0, seq, i, 0)));
                    seq += 1;
                }
            }
        }
        while let Some(Reverse((t, _, i, job))) = heap.pop() {
            let open = sources[i].arrival() == Arrival::Open;
            let Some(mut req) = sources[i].next_request_at(job, t) else {
                continue;
            };
            // A closed-loop request may come later than its slot frees up (a burst's off
            // period): its time says when.
            let issue = req.time_ns.max(t);
            // The client's place on the backend, added: a request past 2^64 is an error of
            // that request (as the cache's own range check reports it).
            let Some(offset) = req.offset.checked_add(self.clients[i].offset) else {
                return Err(SimError::Request {
                    index: self.issued,
                    request: req,
                    source: tiercache_core::GeometryError::Range {
                        offset: req.offset,
                        len: req.len,
                    }
                    .into(),
                });
            };
            req.offset = offset;
            req.time_ns = issue;
            let done = self.issue(i, &req, issue)?;
            // Closed loop: the slot issues again when this request completes. Open loop: the
            // next arrival is fetched now and issued at its own time.
            let next = if open { issue } else { done };
            heap.push(Reverse((next, seq, i, job)));
            seq += 1;
        }
        for (i, s) in sources.iter_mut().enumerate() {
            if let Some(e) = s.take_error() {
                return Err(SimError::Config {
                    field: format!("hierarchy.clients[{i}].workload"),
                    reason: e.to_string(),
                });
            }
        }
        Ok(super::results::collect(&self))
    }

    /// One client request, from issue to completion.
    fn issue(&mut self, client: usize, req: &Request, t: Nanos) -> Result<Nanos, SimError> {
        self.issued += 1;
        if !self.measuring && self.issued > self.cfg.warmup_requests {
            self.start_measuring(t);
        }
        let Some(top) = self.clients[client].top else {
            unreachable!("validated: every client has a cache level above the backend")
        };
        // A client without levels of its own crosses its link to the shared ones first.
        let (down, up) = payload(req);
        let start = match self.clients[client].link.as_mut() {
            Some(l) => l.run_op(t, IoKind::Write, 0, down),
            None => t,
        };
        let (done, served) = self.serve(Some(top), req, start)?;
        let c = &mut self.clients[client];
        let done = match c.link.as_mut() {
            Some(l) => {
                c.link_bytes.0 += down;
                c.link_bytes.1 += up;
                l.run_op(done, IoKind::Write, 0, up)
            }
            None => done,
        };
        if self.measuring {
            let c = &mut self.clients[client];
            c.requests += 1;
            c.latency.record(done - t);
            self.latency.record(done - t);
            match served {
                Served::Level(n) => {
                    c.served[n] += 1;
                    self.nodes[n].c.served += 1;
                }
                Served::Backend => {
                    c.served_backend += 1;
                    self.backend_served += 1;
                }
            }
            self.end = self.end.max(done);
        }
        Ok(done)
    }

    fn start_measuring(&mut self, t: Nanos) {
        self.measuring = true;
        self.measure_start = t;
        for n in &mut self.nodes {
            n.stats_at_warmup = n.core.stats_snapshot();
            n.c = NodeCounters::default();
            n.link_cost_at_warmup = n.link.as_ref().map_or(0, |l| l.counters(t).cost_ps);
        }
        for c in &mut self.clients {
            c.link_bytes = (0, 0);
            c.link_cost_at_warmup = c.link.as_ref().map_or(0, |l| l.counters(t).cost_ps);
        }
    }

    /// Serves `req` at `node` (the backend when `None`) from time `t`: returns when its
    /// critical ops are done and where its data came from.
    fn serve(
        &mut self,
        node: Option<usize>,
        req: &Request,
        t: Nanos,
    ) -> Result<(Nanos, Served), SimError> {
        let Some(n) = node else {
            let done = self.backend.run_op(t, io_kind(req.op), req.offset, req.len);
            return Ok((done, Served::Backend));
        };
        self.nodes[n].c.requests_in += 1;
        let mut plan = Plan::new();
        let issued = self.issued;
        self.nodes[n]
            .core
            .access(req, Some(&mut plan))
            .map_err(|e| request_error(issued, req, e))?;
        let mut served = Served::Level(n);
        let (mut stage, mut stage_start, mut stage_end, mut done) = (0, t, t, t);
        for op in &plan.ops {
            if op.stage != stage {
                stage = op.stage;
                stage_start = stage_end;
            }
            let end = match (op.device, op.cause) {
                (Device::Cache, _) => {
                    self.nodes[n]
                        .device
                        .run_op(stage_start, op.kind, op.offset, op.len)
                }
                (Device::Backend, OpCause::Demote) => self.demote(n, op, stage_start)?,
                (Device::Backend, _) => {
                    let sub = Request {
                        time_ns: stage_start,
                        volume: op.volume,
                        offset: op.offset,
                        len: op.len,
                        op: match op.kind {
                            IoKind::Read => Op::Read,
                            IoKind::Write => Op::Write,
                            IoKind::Trim => Op::Trim,
                            IoKind::Flush => Op::Flush,
                        },
                    };
                    let (end, from) = self.below(n, &sub, stage_start)?;
                    if op.critical && self.deeper(from, served) {
                        served = from;
                    }
                    end
                }
            };
            stage_end = stage_end.max(end);
            if op.critical {
                done = done.max(end);
            }
        }
        Ok((done, served))
    }

    fn deeper(&self, a: Served, than: Served) -> bool {
        match (a, than) {
            (Served::Backend, Served::Backend) => false,
            (Served::Backend, _) => true,
            (Served::Level(_), Served::Backend) => false,
            (Served::Level(x), Served::Level(y)) => self.nodes[x].depth > self.nodes[y].depth,
        }
    }

    /// A request from level `n` to the level below it, across `n`'s link.
    fn below(&mut self, n: usize, req: &Request, t: Nanos) -> Result<(Nanos, Served), SimError> {
        let (down, up) = payload(req);
        let t1 = self.cross(n, t, down, true);
        let below = self.nodes[n].below;
        let (t2, from) = self.serve(below, req, t1)?;
        Ok((self.cross(n, t2, up, false), from))
    }

    /// Books `bytes` on level `n`'s link at `t` (no link: no cost).
    fn cross(&mut self, n: usize, t: Nanos, bytes: u64, down: bool) -> Nanos {
        let node = &mut self.nodes[n];
        let Some(l) = node.link.as_mut() else {
            return t;
        };
        if down {
            node.c.link_bytes_down += bytes;
        } else {
            node.c.link_bytes_up += bytes;
        }
        l.run_op(t, IoKind::Write, 0, bytes)
    }

    /// A demote op of level `n`: across the link, then offered to the level below.
    fn demote(
        &mut self,
        n: usize,
        op: &tiercache_core::DevOp,
        t: Nanos,
    ) -> Result<Nanos, SimError> {
        let Some(b) = self.nodes[n].below else {
            // Validated away: only levels with a cache below demote.
            return Ok(t);
        };
        self.nodes[n].c.demotes_sent += 1;
        self.nodes[n].c.demote_bytes += op.len;
        let t1 = self.cross(n, t, op.len, true);
        let req = Request {
            time_ns: t1,
            volume: op.volume,
            offset: op.offset,
            len: op.len,
            op: Op::Write,
        };
        let mut plan = Plan::new();
        let issued = self.issued;
        let out = self.nodes[b]
            .core
            .accept_demote(&req, Some(&mut plan))
            .map_err(|e| request_error(issued, &req, e))?;
        let c = &mut self.nodes[n].c;
        match out {
            DemoteOutcome::Accepted => c.demotes_accepted += 1,
            DemoteOutcome::AlreadyHeld => c.demotes_already_held += 1,
            DemoteOutcome::Rejected => c.demotes_rejected += 1,
        }
        let mut end = t1;
        for w in &plan.ops {
            debug_assert_eq!(w.device, Device::Cache);
            end = end.max(self.nodes[b].device.run_op(t1, w.kind, w.offset, w.len));
        }
        Ok(end)
    }

    pub(crate) fn measured_window(&self) -> (Nanos, Nanos) {
        (self.measure_start, self.end.max(self.measure_start))
    }

    pub(crate) fn clients_view(&self) -> impl Iterator<Item = ClientResultParts<'_>> {
        self.clients.iter().map(|c| ClientResultParts {
            name: &c.name,
            requests: c.requests,
            latency: &c.latency,
            served: &c.served,
            served_backend: c.served_backend,
            link_bytes: c.link_bytes,
            link_cost_ps: c
                .link
                .as_ref()
                .map(|l| (l.counters(self.end).cost_ps, c.link_cost_at_warmup)),
        })
    }

    pub(crate) fn overall_latency(&self) -> &LatencyRecorder {
        &self.latency
    }

    pub(crate) fn backend_served(&self) -> u64 {
        self.backend_served
    }

    pub(crate) fn config(&self) -> &HierarchyConfig {
        &self.cfg
    }
}

/// One client's figures, as [`super::results`] reads them.
pub(crate) struct ClientResultParts<'a> {
    pub name: &'a str,
    pub requests: u64,
    pub latency: &'a LatencyRecorder,
    pub served: &'a [u64],
    pub served_backend: u64,
    pub link_bytes: (u64, u64),
    /// The link's busy time at the end and at the warm-up's end, ps.
    pub link_cost_ps: Option<(u128, u128)>,
}

fn io_kind(op: Op) -> IoKind {
    match op {
        Op::Read => IoKind::Read,
        Op::Write => IoKind::Write,
        Op::Trim => IoKind::Trim,
        Op::Flush => IoKind::Flush,
    }
}

/// Bytes a request carries down (a write's data) and up (a read's data).
fn payload(req: &Request) -> (u64, u64) {
    match req.op {
        Op::Read => (0, req.len),
        Op::Write => (req.len, 0),
        Op::Trim | Op::Flush => (0, 0),
    }
}
