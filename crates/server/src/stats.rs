//! The stats file of a served cache: its live counters as JSON, rewritten while serving and
//! once more at the end (written beside, then renamed over: readers never see half a file).

use anyhow::{Context, Result};
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use tiercache_engine::{Engine, TwoLevel};
use tiercache_nbd::ServerStats;

use crate::exports::ExportConfig;

/// What a server runs: the engine, and the RAM level and demote tracking when configured.
pub(crate) struct Served {
    pub(crate) engine: Arc<Engine>,
    pub(crate) two: Option<Arc<TwoLevel>>,
    pub(crate) tracker: Option<Arc<tiercache_nbd::DemoteTracker>>,
}

impl Served {
    /// Why the cache stopped serving (fail-stop), if it did.
    pub(crate) fn halted(&self) -> Option<&str> {
        match &self.two {
            Some(t) => t.halted(),
            None => self.engine.halted(),
        }
    }

    /// Stops the RAM level (if any) and the engine, making everything durable.
    pub(crate) fn shutdown(&self) -> std::io::Result<()> {
        if let Some(t) = &self.two {
            t.ram().shutdown()?;
        }
        self.engine.shutdown()
    }
}

/// The counters written to the stats file.
#[derive(Serialize)]
struct Live<'a> {
    elapsed_s: f64,
    /// The engine over the cache device (the level below the RAM level, if there is one).
    engine: tiercache_engine::EngineStats,
    /// The RAM level, if configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    ram_level: Option<tiercache_engine::EngineStats>,
    server: &'a ServerStats,
    /// Per export (several exports only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    exports: Vec<ExportLive>,
    /// The tenancy mode's last decision (`cache.tenancy`).
    #[serde(skip_serializing_if = "Option::is_none")]
    tenancy: Option<tiercache_policy::TenancyReport>,
    /// Demotes received from tiercache peers above, if offered.
    #[serde(skip_serializing_if = "Option::is_none")]
    demote_server: Option<&'a tiercache_nbd::demote::DemoteServerStats>,
}

/// One export's counters in the stats file.
#[derive(Serialize)]
struct ExportLive {
    name: String,
    read_hit_ratio: f64,
    #[serde(flatten)]
    stats: tiercache_engine::VolumeStats,
}

/// Writes the live counters to `path`.
pub(crate) fn write_stats(
    path: &Path,
    served: &Served,
    server: &ServerStats,
    started: Instant,
    exports: &[ExportConfig],
) -> Result<()> {
    let engine = &served.engine;
    let vols = if exports.is_empty() {
        Vec::new()
    } else {
        engine.volume_stats()
    };
    let live = Live {
        elapsed_s: started.elapsed().as_secs_f64(),
        engine: served.engine.stats(),
        ram_level: served.two.as_ref().map(|t| t.ram().stats()),
        server,
        exports: vols
            .into_iter()
            .map(|stats| ExportLive {
                name: exports
                    .iter()
                    .find(|e| e.volume == stats.volume)
                    .map_or_else(String::new, |e| e.name.clone()),
                read_hit_ratio: stats.read_hit_ratio(),
                stats,
            })
            .collect(),
        tenancy: engine.tenancy_report(),
        demote_server: served.tracker.as_ref().map(|t| &t.stats),
    };
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&live)?)?;
    std::fs::rename(&tmp, path).with_context(|| format!("stats file {}", path.display()))?;
    Ok(())
}
