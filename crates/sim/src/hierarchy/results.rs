//! What a hierarchy run reports: per level (hit fractions of all requests, demotes, link
//! traffic and utilisation), per client and overall (latency), as one serialisable record and
//! a table.

use super::executor::HierarchySim;
use crate::exec::LevelsOutput;
use serde::{Deserialize, Serialize};
use tiercache_metrics::{ratio, LatencyRecorder, LatencySummary, RunMetrics, TimelineRow};
use tiercache_policy::VictimConfig;

/// The result of one hierarchy run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HierarchyResult {
    /// Measured requests (after the warm-up), every client together.
    pub requests: u64,
    /// Virtual time from the first measured issue to the last measured completion, ns.
    pub elapsed_ns: u64,
    /// Latency of every measured request, µs.
    pub latency_us: LatencySummary,
    /// Every cache level (clients' own first, in client order, then the shared ones, top
    /// to bottom), then the backend as the last row.
    pub levels: Vec<LevelResult>,
    /// Per client.
    pub clients: Vec<ClientResult>,
}

/// One level's figures over the measured window.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LevelResult {
    /// `client.level` for a client's own level, the level's name for a shared one,
    /// `backend` for the backend.
    pub name: String,
    /// Whether every client's misses reach it.
    pub shared: bool,
    /// Cache capacity in bytes (0 for the backend).
    pub capacity: u64,
    /// Replacement policy (`-` for the backend).
    pub eviction: String,
    /// Whether it demotes its clean victims.
    pub demotes: bool,
    /// Measured requests whose data came from this level, as a fraction of all measured
    /// requests: the fractions of every level and the backend sum to 1.
    pub hit_fraction: f64,
    /// Measured requests whose data came from this level.
    pub served: u64,
    /// Requests that reached this level (from clients or from the level above).
    pub requests_in: u64,
    /// Line hit ratio of the requests it saw (its policy's own counter).
    pub line_hit_ratio: f64,
    /// Demotes it sent down, and what the level below did with them.
    pub demotes_sent: u64,
    /// Of `demotes_sent`: taken.
    pub demotes_accepted: u64,
    /// Of `demotes_sent`: already held there.
    pub demotes_already_held: u64,
    /// Of `demotes_sent`: refused.
    pub demotes_rejected: u64,
    /// Demotes it received from the levels above (its policy's counters).
    pub demotes_received: u64,
    /// The link down from this level, if it has one.
    pub link: Option<LinkResult>,
    /// The level's own figures over the measured window, as a single-level run reports its
    /// cache (docs/design.md §9's `metrics`): the requests that reached it and their latency
    /// there, its policy's counters, its devices (`cache`, and `backend` for the lowest
    /// level). A one-level hierarchy's equal `sim`'s. None for the backend row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<RunMetrics>,
    /// The level's timeline with `hierarchy.timeline_interval_ns`, as a single-level run's
    /// (empty, and not written, without).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<TimelineRow>,
}

/// Traffic of one link over the measured window.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkResult {
    /// Bytes sent down (write data and demotes).
    pub bytes_down: u64,
    /// Bytes sent up (read data).
    pub bytes_up: u64,
    /// Of `bytes_down`: demoted lines.
    pub demote_bytes: u64,
    /// Share of the window the link was transferring (both directions share it).
    pub utilisation: f64,
}

/// One client's figures over the measured window.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientResult {
    /// Client name.
    pub name: String,
    /// Its measured requests.
    pub requests: u64,
    /// Their latency, µs.
    pub latency_us: LatencySummary,
    /// Fraction of its requests served by each level that served any (names as in
    /// [`HierarchyResult::levels`]), the backend last.
    pub served_by: Vec<(String, f64)>,
    /// Its link to the shared levels when it has no level of its own (a client's own
    /// lowest level reports its link in its row).
    pub link: Option<LinkResult>,
}

pub(crate) fn collect(sim: &HierarchySim, out: &LevelsOutput) -> HierarchyResult {
    let (start, end) = out.window;
    let elapsed = end - start;
    let requests: u64 = out.clients.iter().map(|c| c.requests).sum();
    let util = |busy_ps: u128| {
        if elapsed == 0 {
            0.0
        } else {
            (busy_ps as f64 / (elapsed as f64 * 1000.0)).clamp(0.0, 1.0)
        }
    };
    let mut levels = Vec::new();
    // Clients' own levels first, then the shared ones, top to bottom: the nodes' order.
    for (n, o) in sim.nodes.iter().zip(&out.levels) {
        let s = crate::stats_diff(&o.stats.0, &o.stats.1);
        let c = &o.counters;
        levels.push(LevelResult {
            name: n.name.clone(),
            shared: n.client.is_none(),
            capacity: n.core.capacity_lines() * n.core.geometry().line_size(),
            eviction: format!("{:?}", n.cache.eviction).to_lowercase(),
            demotes: n.cache.victim == VictimConfig::Demote,
            hit_fraction: ratio(c.served, requests),
            served: c.served,
            requests_in: c.requests_in,
            line_hit_ratio: ratio(s.line_hits, s.line_accesses),
            demotes_sent: c.demotes_sent,
            demotes_accepted: c.demotes_accepted,
            demotes_already_held: c.demotes_already_held,
            demotes_rejected: c.demotes_rejected,
            demotes_received: s.demotes_received,
            link: n.link.as_ref().map(|_| LinkResult {
                bytes_down: c.link_bytes_down,
                bytes_up: c.link_bytes_up,
                demote_bytes: c.demote_bytes,
                utilisation: util(c.link_busy_ps),
            }),
            metrics: Some(o.metrics.clone()),
            timeline: o.timeline.clone(),
        });
    }
    levels.push(LevelResult {
        name: "backend".into(),
        shared: true,
        capacity: 0,
        eviction: "-".into(),
        demotes: false,
        hit_fraction: ratio(out.backend_served, requests),
        served: out.backend_served,
        requests_in: 0,
        line_hit_ratio: 0.0,
        demotes_sent: 0,
        demotes_accepted: 0,
        demotes_already_held: 0,
        demotes_rejected: 0,
        demotes_received: 0,
        link: None,
        metrics: None,
        timeline: Vec::new(),
    });
    let mut overall = LatencyRecorder::new();
    let clients = sim
        .config()
        .clients
        .iter()
        .zip(&out.clients)
        .map(|(cfg, c)| {
            overall.merge(&c.latency);
            let mut served_by: Vec<(String, f64)> = c
                .served
                .iter()
                .enumerate()
                .filter(|(_, &k)| k > 0)
                .map(|(i, &k)| (sim.nodes[i].name.clone(), ratio(k, c.requests)))
                .collect();
            served_by.push(("backend".into(), ratio(c.served_backend, c.requests)));
            ClientResult {
                name: cfg.name.clone(),
                requests: c.requests,
                latency_us: c.latency.summary(),
                served_by,
                link: c.link.map(|(down, up, busy)| LinkResult {
                    bytes_down: down,
                    bytes_up: up,
                    demote_bytes: 0,
                    utilisation: util(busy),
                }),
            }
        })
        .collect();
    HierarchyResult {
        requests,
        elapsed_ns: elapsed,
        latency_us: overall.summary(),
        levels,
        clients,
    }
}

impl HierarchyResult {
    /// The human table: one row per level (the backend last), then one per client.
    pub fn table(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "{:<18} {:>9} {:<6} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6}\n",
            "level",
            "capacity",
            "evict",
            "hits",
            "demotes",
            "accepted",
            "held",
            "rejected",
            "received",
            "link MiB",
            "util"
        ));
        for l in &self.levels {
            let (mib, util) = match &l.link {
                Some(k) => (
                    format!(
                        "{:.1}",
                        (k.bytes_down + k.bytes_up) as f64 / (1 << 20) as f64
                    ),
                    format!("{:.2}", k.utilisation),
                ),
                None => ("-".into(), "-".into()),
            };
            out.push_str(&format!(
                "{:<18} {:>9} {:<6} {:>6.3} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6}\n",
                l.name,
                if l.capacity == 0 {
                    "-".to_string()
                } else {
                    format!("{}K", l.capacity >> 10)
                },
                l.eviction,
                l.hit_fraction,
                l.demotes_sent,
                l.demotes_accepted,
                l.demotes_already_held,
                l.demotes_rejected,
                l.demotes_received,
                mib,
                util
            ));
        }
        out.push_str(&format!(
            "\n{:<18} {:>9} {:>10} {:>10} {:>10}  served by\n",
            "client", "requests", "mean µs", "p99 µs", "p99.9 µs"
        ));
        let mut rows: Vec<(&str, u64, &LatencySummary, String)> = self
            .clients
            .iter()
            .map(|c| {
                let by = c
                    .served_by
                    .iter()
                    .map(|(n, f)| format!("{n} {f:.3}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                (c.name.as_str(), c.requests, &c.latency_us, by)
            })
            .collect();
        if self.clients.len() > 1 {
            rows.push(("overall", self.requests, &self.latency_us, String::new()));
        }
        for (name, n, lat, by) in rows {
            out.push_str(&format!(
                "{:<18} {:>9} {:>10.1} {:>10.1} {:>10.1}  {}\n",
                name, n, lat.mean, lat.p99, lat.p999, by
            ));
        }
        out
    }
}
