//! Configuration of a simulation: devices, host and run limits.

use serde::{Deserialize, Serialize};
use tiercache_core::units::{de_nanos, de_opt_nanos};
use tiercache_core::Nanos;

use crate::device::DeviceConfig;
use crate::host::HostConfig;

/// A backend device of its own for one volume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeBackend {
    /// Volume id.
    pub volume: u32,
    /// Its backend device.
    pub device: DeviceConfig,
}

/// What the cache's write-back of dirty lines does before the lines count as clean (the
/// flush job is done and its lines may be evicted), docs/design.md §5.1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteBackBarrier {
    /// Nothing: the lines count as clean once the backend acknowledged the writes, which a
    /// disk with a volatile write cache does before they are durable.
    #[default]
    None,
    /// A FLUSH to each backend device with a volatile write cache that the job wrote to, and
    /// the lines count as clean once it completes, as the kernel caches do before they commit
    /// a write-back (a device without a volatile cache is sent none: the Linux block layer
    /// completes a FLUSH at once there).
    Flush,
}

/// When a run starts measuring and when it stops.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunLimits {
    /// Requests to measure after the warm-up (None: until the source ends).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Virtual time to measure after the warm-up (None: no limit). Requests arriving later are
    /// not issued; those in flight complete.
    #[serde(
        deserialize_with = "de_opt_nanos",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_ns: Option<Nanos>,
    /// Requests processed before measuring starts (they warm the cache).
    pub warmup_requests: u64,
    /// Virtual time before measuring starts; both warm-up conditions must be met.
    #[serde(deserialize_with = "de_nanos")]
    pub warmup_ns: Nanos,
    /// After the measured window, write every dirty line back and run that to completion
    /// (reported as `final_flush_ns`).
    pub final_flush: bool,
    /// Timeline interval (None: no timeline). Rows cover the time from 0 to the end of the
    /// measured window without gaps, one per interval, except that a run of intervals in which
    /// no event happened is one row spanning them (so an idle gap of a trace costs one row).
    #[serde(
        deserialize_with = "de_opt_nanos",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeline_interval_ns: Option<Nanos>,
    /// What the cache's write-back does before its lines count as clean.
    #[serde(skip_serializing_if = "is_default")]
    pub write_back_barrier: WriteBackBarrier,
    /// A power cut at this virtual time (None: none): the run stops there, every backend
    /// disk loses what its volatile write cache held, and the output's `power_cut` reports
    /// the write-backs the cache counted as clean whose data the disks lost.
    #[serde(
        deserialize_with = "de_opt_nanos",
        skip_serializing_if = "Option::is_none"
    )]
    pub power_cut_ns: Option<Nanos>,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// Everything the simulator needs besides the cache and the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimConfig {
    /// The cache device.
    pub cache_device: DeviceConfig,
    /// The backend shared by every volume without its own.
    pub backend: DeviceConfig,
    /// Volumes with a backend device of their own.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volume_backends: Vec<VolumeBackend>,
    /// Host CPU model (None: CPU costs nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<HostConfig>,
    /// Warm-up, stop conditions, final flush, timeline.
    pub run: RunLimits,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            cache_device: DeviceConfig::preset("nvme-ssd"),
            backend: DeviceConfig::preset("hdd-7200"),
            volume_backends: Vec::new(),
            host: None,
            run: RunLimits::default(),
        }
    }
}

impl SimConfig {
    /// Checks every device, the host and the run limits without running anything; errors name
    /// the offending field by its dotted path.
    pub fn validate(&self) -> Result<(), crate::SimError> {
        self.cache_device.resolve("cache_device")?;
        self.backend.resolve("backend")?;
        let mut seen = std::collections::BTreeSet::new();
        for (i, vb) in self.volume_backends.iter().enumerate() {
            vb.device.resolve(&format!("volume_backends[{i}].device"))?;
            if vb.volume > u16::MAX as u32 || !seen.insert(vb.volume) {
                return Err(crate::SimError::Config {
                    field: format!("volume_backends[{i}].volume"),
                    reason: format!("volume {} is listed twice or beyond 65535", vb.volume),
                });
            }
        }
        if let Some(h) = &self.host {
            h.validate("host")?;
        }
        if self.run.timeline_interval_ns == Some(0) {
            return Err(crate::SimError::Config {
                field: "run.timeline_interval_ns".into(),
                reason: "must be > 0".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_names_the_bad_field() {
        assert!(SimConfig::default().validate().is_ok());
        let mut c = SimConfig::default();
        c.volume_backends.push(VolumeBackend {
            volume: 2,
            device: DeviceConfig::preset("hdd"),
        });
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("volume_backends[0].device.preset"));
        c.volume_backends[0].device = DeviceConfig::preset("hdd-10k");
        c.volume_backends.push(c.volume_backends[0].clone());
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("volume_backends[1].volume"));
        let c = SimConfig {
            run: RunLimits {
                timeline_interval_ns: Some(0),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("run.timeline_interval_ns"));
        for shards in [0, (1 << 16) + 1] {
            let c = SimConfig {
                host: Some(HostConfig {
                    fg_lock_shards: shards,
                    ..Default::default()
                }),
                ..Default::default()
            };
            assert!(c
                .validate()
                .unwrap_err()
                .to_string()
                .starts_with("host.fg_lock_shards"));
        }
    }
}
