//! Several NBD exports in one `tiercache serve`: `[[serve.exports]]` gives each export a
//! name, a volume id and its own backend; all share the one cache device, partitioned per
//! volume. A config without exports serves `engine.backend_path` as the one export.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tiercache_core::units::de_opt_bytes;
use tiercache_engine::VolumeConfig;

/// One `[[serve.exports]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportConfig {
    /// The export name clients ask for (`nbd+unix:///NAME?socket=...`).
    pub name: String,
    /// The volume's backend: a file (created when missing) or a block device.
    pub backend_path: PathBuf,
    /// Size of a backend file created or extended here (default 1 GiB).
    #[serde(
        default,
        deserialize_with = "de_opt_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub backend_size: Option<u64>,
    /// The volume id the cache files its lines under (unique per export; it keeps them
    /// apart on the cache device, so keep it across restarts).
    pub volume: u32,
    /// A partition of this many bytes of cache from the start (rounded down to whole lines);
    /// without one the volume shares the cache with the other volumes without one (until a
    /// resize gives it one).
    #[serde(
        default,
        deserialize_with = "de_opt_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub partition: Option<u64>,
}

/// Checks the exports (the error names the entry and field) against a cache of `capacity`
/// bytes.
pub fn validate(exports: &[ExportConfig], capacity: u64) -> Result<()> {
    let mut partitions = 0u64;
    for (i, e) in exports.iter().enumerate() {
        if e.name.is_empty() {
            bail!("serve.exports[{i}].name: empty (several exports are told apart by name)");
        }
        if e.name.len() > 4096 {
            bail!(
                "serve.exports[{i}].name: {} bytes, at most 4096",
                e.name.len()
            );
        }
        if let Some(j) = exports[..i].iter().position(|o| o.name == e.name) {
            bail!(
                "serve.exports[{i}].name: {:?} is also serve.exports[{j}]'s",
                e.name
            );
        }
        if e.volume >= tiercache_core::MAX_VOLUMES {
            bail!(
                "serve.exports[{i}].volume: {} is past the limit of {} volumes",
                e.volume,
                tiercache_core::MAX_VOLUMES
            );
        }
        if let Some(j) = exports[..i].iter().position(|o| o.volume == e.volume) {
            bail!(
                "serve.exports[{i}].volume: {} is also serve.exports[{j}]'s",
                e.volume
            );
        }
        if let Some(j) = exports[..i]
            .iter()
            .position(|o| o.backend_path == e.backend_path)
        {
            bail!(
                "serve.exports[{i}].backend_path: {} is also serve.exports[{j}]'s",
                e.backend_path.display()
            );
        }
        partitions = partitions.saturating_add(e.partition.unwrap_or(0));
    }
    if partitions > capacity {
        bail!(
            "serve.exports.partition: {partitions} bytes in all, more than cache.capacity ({capacity} bytes)"
        );
    }
    Ok(())
}

/// Makes relative backend paths relative to `base`.
pub fn resolve_paths(exports: &mut [ExportConfig], base: &Path) {
    for e in exports {
        if e.backend_path.is_relative() {
            e.backend_path = base.join(&e.backend_path);
        }
    }
}

/// The engine's volumes.
pub fn volume_configs(exports: &[ExportConfig]) -> Vec<VolumeConfig> {
    exports
        .iter()
        .map(|e| VolumeConfig {
            volume: e.volume,
            backend_path: e.backend_path.clone(),
            backend_size: e.backend_size,
        })
        .collect()
}

/// The partitions configured from the start, in lines of `line_size` bytes.
pub fn initial_partitions(exports: &[ExportConfig], line_size: u64) -> Vec<(u32, u64)> {
    exports
        .iter()
        .filter_map(|e| e.partition.map(|b| (e.volume, b / line_size.max(1))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export(name: &str, volume: u32, path: &str) -> ExportConfig {
        ExportConfig {
            name: name.into(),
            backend_path: path.into(),
            backend_size: None,
            volume,
            partition: Some(1 << 20),
        }
    }

    #[test]
    fn errors_name_the_entry_and_field() {
        let ok = [export("a", 1, "a.img"), export("b", 2, "b.img")];
        validate(&ok, 4 << 20).unwrap();
        for (list, needle) in [
            (vec![export("", 1, "a")], "serve.exports[0].name"),
            (
                vec![export("a", 1, "a"), export("a", 2, "b")],
                "serve.exports[1].name",
            ),
            (
                vec![export("a", 1, "a"), export("b", 1, "b")],
                "serve.exports[1].volume",
            ),
            (
                vec![export("a", 1, "a"), export("b", 2, "a")],
                "serve.exports[1].backend_path",
            ),
            (vec![export("a", 1, "a")], "partition"),
        ] {
            let cap = if needle == "partition" { 1000 } else { 4 << 20 };
            let e = validate(&list, cap).unwrap_err().to_string();
            assert!(e.contains(needle), "{needle}: {e}");
        }
        assert_eq!(initial_partitions(&ok, 4096), vec![(1, 256), (2, 256)]);
    }
}
