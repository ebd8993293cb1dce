//! `[[volumes]]`: several volumes sharing one cache (docs/design.md §4.10), each with its own
//! workload — a synthetic spec, or volumes of the `[workload]` trace — and optional fixed settings
//! (its own backend device, a fixed partition size, a fixed write policy).
//!
//! ```toml
//! [workload]                    # only when volumes take their requests from a trace
//! trace = "tencent.csv.bz2"
//!
//! [[volumes]]
//! name = "db"
//! workload = { iodepth = 4, footprint = "256MiB", distribution = { type = "zipf", theta = 1.0 } }
//!
//! [[volumes]]
//! name = "logs"
//! workload = { iodepth = 4, read_fraction = 0.1, footprint = "64MiB" }
//! write_policy = "read-only"     # fixed: no tenancy mode changes it
//! backend = { preset = "hdd-7200" }
//!
//! [[volumes]]
//! trace_volumes = ["#0", "#3"]   # these trace volumes, as one volume here
//! bytes = "32MiB"                # fixed partition size (with a partitioning mode)
//! ```
//!
//! Volume `i` has id `i` unless `id` says otherwise; a synthetic volume's workload is seeded
//! with `run.seed + id`, so volumes draw independent streams.

use crate::experiment::TraceWorkload;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tiercache_config::{ConfigError, Document};
use tiercache_core::VolumeId;
use tiercache_policy::{CacheConfig, FixedVolume, WritePolicy};
use tiercache_sim::{DeviceConfig, VolumeBackend};
use tiercache_workload::mix::BoxedSource;
use tiercache_workload::{SyntheticWorkload, VolumeMix, WorkloadSpec};

/// One `[[volumes]]` entry.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeEntry {
    /// Label in results (default: the id).
    #[serde(default)]
    pub name: Option<String>,
    /// Volume id (default: the entry's index).
    #[serde(default)]
    pub id: Option<u32>,
    /// Synthetic workload of the volume.
    #[serde(default)]
    pub workload: Option<WorkloadSpec>,
    /// Volumes of the `[workload]` trace (by name, or dense id written `"#3"`) whose requests
    /// this volume replays.
    #[serde(default)]
    pub trace_volumes: Vec<String>,
    /// Its own backend device (default: the shared backend).
    #[serde(default)]
    pub backend: Option<DeviceConfig>,
    /// Fixed write policy.
    #[serde(default)]
    pub write_policy: Option<WritePolicy>,
    /// Fixed partition size in bytes.
    #[serde(default, deserialize_with = "tiercache_core::units::de_opt_bytes")]
    pub bytes: Option<u64>,
}

/// Where one volume's requests come from.
#[derive(Debug, Clone)]
pub enum VolumeWorkload {
    /// A synthetic workload (seeded).
    Synthetic(Box<WorkloadSpec>),
    /// The requests of these trace volumes.
    Trace(Box<TraceWorkload>),
}

/// One resolved volume.
#[derive(Debug, Clone)]
pub struct VolumePart {
    /// Volume id its requests carry.
    pub id: u32,
    /// Label.
    pub name: String,
    /// Its requests.
    pub workload: VolumeWorkload,
}

/// Resolves `[[volumes]]` (absent: `None`): each entry's workload, with its fixed settings
/// moved into `cache.tenancy.fixed` and `volume_backends`. `trace` is the document's trace
/// workload, if any (the source of `trace_volumes`).
pub fn resolve(
    doc: &Document,
    seed: u64,
    trace: Option<&TraceWorkload>,
    cache: &mut CacheConfig,
    volume_backends: &mut Vec<VolumeBackend>,
) -> Result<Option<Vec<VolumePart>>, ConfigError> {
    if doc.value.get("volumes").is_none() {
        return Ok(None);
    }
    let entries: Vec<VolumeEntry> = doc.typed(Some("volumes"))?;
    let err = |i: usize, m: String| ConfigError::Value {
        context: doc.context(),
        path: format!("volumes[{i}]"),
        message: m,
    };
    if entries.is_empty() {
        return Err(err(0, "needs at least one volume".into()));
    }
    let mut parts = Vec::new();
    let mut ids = std::collections::BTreeSet::new();
    for (i, e) in entries.into_iter().enumerate() {
        let id = e.id.unwrap_or(i as u32);
        if id >= tiercache_core::MAX_VOLUMES || !ids.insert(id) {
            return Err(err(
                i,
                format!("id {id} is used twice or beyond the volume limit"),
            ));
        }
        let workload = match (e.workload, e.trace_volumes.is_empty()) {
            (Some(mut spec), true) => {
                // Seeded from run.seed and the volume's id: a seed of its own would be recorded
                // yet replaced (two "different" seeds, identical runs).
                if doc
                    .value
                    .get("volumes")
                    .and_then(|v| v.get(i))
                    .and_then(|v| v.get("workload"))
                    .and_then(|w| w.get("seed"))
                    .is_some()
                {
                    return Err(err(
                        i,
                        "workload.seed: not used: a volume's workload is seeded by run.seed and its id; set run.seed instead".into(),
                    ));
                }
                spec.seed = seed.wrapping_add(u64::from(id));
                spec.validate()
                    .map_err(|x| err(i, format!("workload: {x}")))?;
                VolumeWorkload::Synthetic(Box::new(spec))
            }
            (None, false) => {
                let t = trace.ok_or_else(|| {
                    err(
                        i,
                        "trace_volumes needs a trace in [workload] (workload.trace)".into(),
                    )
                })?;
                VolumeWorkload::Trace(Box::new(TraceWorkload {
                    volumes: e.trace_volumes,
                    ..t.clone()
                }))
            }
            _ => {
                return Err(err(
                    i,
                    "give exactly one of `workload` (synthetic) and `trace_volumes`".into(),
                ))
            }
        };
        if let Some(device) = e.backend {
            if volume_backends.iter().any(|b| b.volume == id) {
                return Err(err(
                    i,
                    format!("volume {id} also has a devices.volume_backends entry"),
                ));
            }
            volume_backends.push(VolumeBackend { volume: id, device });
        }
        if e.write_policy.is_some() || e.bytes.is_some() {
            cache.tenancy.fixed.push(FixedVolume {
                volume: id,
                bytes: e.bytes,
                write_policy: e.write_policy,
            });
        }
        parts.push(VolumePart {
            id,
            name: e.name.unwrap_or_else(|| id.to_string()),
            workload,
        });
    }
    Ok(Some(parts))
}

/// Whether no volume's workload bounds itself (synthetic without `requests` or
/// `duration_ns`; a trace ends by itself).
pub fn unbounded(parts: &[VolumePart]) -> bool {
    parts.iter().any(|p| match &p.workload {
        VolumeWorkload::Synthetic(s) => s.requests.is_none() && s.duration_ns.is_none(),
        VolumeWorkload::Trace(_) => false,
    })
}

/// The source running every volume side by side.
pub fn source(parts: &[VolumePart]) -> Result<Box<dyn tiercache_core::RequestSource + Send>> {
    let mut sources: Vec<(VolumeId, BoxedSource)> = Vec::new();
    for p in parts {
        let s: BoxedSource = match &p.workload {
            VolumeWorkload::Synthetic(spec) => Box::new(
                SyntheticWorkload::new(spec).with_context(|| format!("volume {}", p.name))?,
            ),
            VolumeWorkload::Trace(t) => {
                trace_source(t).with_context(|| format!("volume {}: workload.trace", p.name))?
            }
        };
        sources.push((VolumeId(p.id), s));
    }
    Ok(Box::new(VolumeMix::new(sources).context("volumes")?))
}

/// The replay of `t`'s chosen volumes.
fn trace_source(t: &TraceWorkload) -> Result<BoxedSource> {
    Ok(crate::experiment::filtered(
        t.replay("")?,
        t.volumes.clone(),
    ))
}

#[cfg(test)]
mod tests {
    use crate::experiment::{load_str, Workload};

    const BASE: &str = r#"
[run]
requests = 100
[cache]
tenancy = { mode = "eci" }
[[volumes]]
name = "a"
workload = { iodepth = 2, requests = 50 }
[[volumes]]
id = 7
workload = { iodepth = 1, read_fraction = 0.0 }
write_policy = "read-only"
bytes = "1MiB"
backend = "hdd-7200"
"#;

    #[test]
    fn volumes_resolve_with_their_fixed_settings_and_bad_entries_are_named() {
        let runs = load_str(BASE, "t", &[]).unwrap();
        let e = &runs[0];
        let Workload::Volumes(parts) = &e.workload else {
            panic!("not volumes");
        };
        assert_eq!(parts.iter().map(|p| p.id).collect::<Vec<_>>(), vec![0, 7]);
        assert_eq!(parts[0].name, "a");
        assert_eq!(e.cache.tenancy.fixed.len(), 1);
        assert_eq!(e.cache.tenancy.fixed[0].volume, 7);
        assert_eq!(e.cache.tenancy.fixed[0].bytes, Some(1 << 20));
        assert_eq!(e.sim.volume_backends[0].volume, 7);
        let mut src = e.source().unwrap();
        let r = src.next_request(2).unwrap();
        assert_eq!(r.volume.0, 7, "slot 2 belongs to the second volume");
        for (bad, want) in [
            (
                "[[volumes]]\nworkload = {}\ntrace_volumes = [\"#1\"]\n",
                "volumes[0]",
            ),
            ("[[volumes]]\ntrace_volumes = [\"#1\"]\n", "workload.trace"),
            (
                "[[volumes]]\nworkload = {}\n[[volumes]]\nid = 0\nworkload = {}\n",
                "volumes[1]",
            ),
            (
                "[workload]\niodepth = 1\n[[volumes]]\nworkload = {}\n",
                "[workload] may only name the trace",
            ),
            (
                "[[volumes]]\nworkload = { read_fraction = 2.0 }\n",
                "read_fraction",
            ),
        ] {
            let err = format!("{:#}", load_str(bad, "t", &[]).unwrap_err());
            assert!(err.contains(want), "{bad}: {err}");
        }
    }
}
