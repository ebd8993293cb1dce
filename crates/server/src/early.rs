//! Serving before the scan ends (docs/design.md §13, "Serving before the scan ends", the
//! server's part): `tiercache serve` listens as soon as the engine's open has opened the
//! devices, with the [`OpeningEngine`] as the export's device (reads of restored shards
//! answered at once, anything else waiting for the whole open), and starts what needs the
//! engine itself (its log, the control socket, the stats file) when the open ends.
//! Configurations that need the engine before the first request keep opening it first.

use anyhow::{anyhow, Context, Result};
use std::sync::Arc;
use tiercache_blockdev::BlockDevice;
use tiercache_engine::{Engine, OpeningEngine};

use crate::config::ServeSetup;
use crate::server::Log;

/// A cache device and a backend an embedder (or a test) serves over, instead of the
/// config's paths.
pub(crate) type Devices = (Arc<dyn BlockDevice>, Arc<dyn BlockDevice>);

/// How the engine came up: open, or still opening while its reads are served.
pub(crate) enum Opened {
    /// The whole open ended before serving (as always before this mode existed).
    Whole(Arc<Engine>),
    /// The scan goes on; the NBD export serves through the opening engine meanwhile.
    Early(Arc<OpeningEngine>),
}

/// Why `setup` needs the engine before the first request (so it opens first), if it does:
/// each of these is set up from the open engine before the listener starts.
fn needs_engine_first(setup: &ServeSetup) -> Option<&'static str> {
    let s = &setup.serve;
    if setup.ram_level.is_some() {
        Some("a RAM level is built over the open engine")
    } else if !s.exports.is_empty() {
        Some("several exports (serve.exports) are served through the open engine's volumes")
    } else if s.metrics_listen.is_some() {
        Some("the metrics listener (serve.metrics_listen) starts with the open engine")
    } else {
        None
    }
}

/// Opens the engine from `setup` (or over `devices`): early where the configuration allows,
/// returning once the open has opened the devices and begun the scan, so a bad device or
/// config fails here as an ordinary open does; else the whole open, said once in the log.
pub(crate) fn open(setup: &ServeSetup, devices: Option<Devices>, log: &Log) -> Result<Opened> {
    let volumes = crate::exports::volume_configs(&setup.serve.exports);
    let (cache, cfg) = (&setup.cache, &setup.engine);
    if let Some(why) = needs_engine_first(setup) {
        log(&format!(
            "opening the whole cache before serving ({why}): clients wait for the scan"
        ));
        let engine = match devices {
            Some((c, b)) => Engine::with_devices(cache, cfg, c, b),
            None => Engine::open_volumes(cache, cfg, &volumes),
        };
        return Ok(Opened::Whole(Arc::new(
            engine.context("starting the engine")?,
        )));
    }
    let opening = Arc::new(match devices {
        Some((c, b)) => Engine::with_devices_early(cache, cfg, c, b),
        None => Engine::open_early(cache, cfg, &volumes),
    });
    if opening.wait_begun().is_err() {
        // The open failed before serving: its error as an ordinary open's (owned, so its type
        // reaches the caller, which tells bad settings from failures by it).
        let err = Arc::try_unwrap(opening)
            .ok()
            .and_then(|o| o.into_engine().err())
            .map_or_else(|| anyhow!("the open failed"), anyhow::Error::from);
        return Err(err.context("starting the engine"));
    }
    Ok(match opening.engine() {
        // Done already (a blank device, or one that does not serve early): nothing to swap.
        Some(engine) => Opened::Whole(engine),
        None => {
            let s = opening.early_stats();
            log(&format!(
                "serving before the scan ends: reads of restored lines are answered now \
                 ({} of {} shards ready), writes, flushes and trims once the whole open ends; \
                 the control socket and stats start then",
                s.shards_ready, s.shards
            ));
            Opened::Early(opening)
        }
    })
}

/// Waits for the whole open behind a listener already serving; says in the log when it
/// ended and what was served before. The open's error if it failed (every request since
/// got it: the engine halted).
pub(crate) fn finish(opening: &OpeningEngine, log: &Log) -> Result<Arc<Engine>> {
    let began = std::time::Instant::now();
    let failed = opening.wait().err().map(|e| e.to_string());
    let s = opening.early_stats();
    match (failed, opening.engine()) {
        (None, Some(engine)) => {
            log(&format!(
                "the open ended {} ms after serving began: {} reads answered before it ({} \
                 waited for their shard, {} lines from the cache device); every request now \
                 served in full",
                began.elapsed().as_millis(),
                s.early_reads,
                s.reads_waited,
                s.early_hit_lines
            ));
            Ok(engine)
        }
        (why, _) => {
            let why = why.unwrap_or_else(|| "no engine".into());
            log(&format!(
                "the open failed after serving began, {} reads served: {why}",
                s.early_reads
            ));
            Err(anyhow!("the cache engine halted: its open failed: {why}"))
        }
    }
}
