//! Detaching a stopped cache (`tiercache flush`): open it (recovering it), write every dirty
//! line back and sync the backends, so the backends alone are complete.

use anyhow::{bail, Context, Result};
use tiercache_engine::Engine;

use crate::config::ServeSetup;

/// What a flush did.
#[derive(Debug, Clone, Copy)]
pub struct FlushReport {
    /// Dirty lines the cache held when opened.
    pub dirty_lines: u64,
    /// Lines written back.
    pub flushed_lines: u64,
}

/// Opens the cache `setup` serves, writes every dirty line back and stops it. Creates
/// nothing: a missing cache device or backend means the wrong config, not an empty cache.
pub fn flush(setup: &ServeSetup) -> Result<FlushReport> {
    if !setup.engine.cache_path.exists() {
        bail!(
            "engine.cache_path {}: no such cache device: nothing to flush (is this the config the cache was served with?)",
            setup.engine.cache_path.display()
        );
    }
    for (i, e) in setup.serve.exports.iter().enumerate() {
        if !e.backend_path.exists() {
            bail!(
                "serve.exports[{i}].backend_path {}: no such backend: flush writes dirty lines back to an existing backend",
                e.backend_path.display()
            );
        }
    }
    let backend = setup.engine.backend_path.to_str().unwrap_or("");
    if setup.serve.exports.is_empty()
        && !tiercache_nbd::NbdUri::is_uri(backend)
        && !setup.engine.backend_path.exists()
    {
        bail!(
            "engine.backend_path {}: no such backend: flush writes dirty lines back to an existing backend",
            setup.engine.backend_path.display()
        );
    }
    let volumes = crate::exports::volume_configs(&setup.serve.exports);
    let engine =
        Engine::open_volumes(&setup.cache, &setup.engine, &volumes).context("opening the cache")?;
    let dirty_lines = engine.stats().dirty_lines;
    engine.flush_all().context("writing dirty lines back")?;
    engine.shutdown()?;
    Ok(FlushReport {
        dirty_lines,
        flushed_lines: engine.stats().flushed_lines,
    })
}
