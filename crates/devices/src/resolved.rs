//! Resolved device parameters: what a [`DeviceConfig`] or [`LinkConfig`] becomes once its
//! preset and overrides are merged and checked, as the models take it.

use crate::*;

/// Parameters of one single device, every field resolved.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DiskParams {
    /// Read base time.
    pub read_base_ns: Nanos,
    /// Write base time.
    pub write_base_ns: Nanos,
    /// Base time of an op continuing the previous one (None: as random).
    pub seq_base_ns: Option<Nanos>,
    /// Read transfer time per byte.
    pub read_ns_per_byte: f64,
    /// Write transfer time per byte.
    pub write_ns_per_byte: f64,
    /// Internal parallelism.
    pub channels: u32,
    /// Read IOPS ceiling (0 = none).
    pub read_iops: f64,
    /// Write IOPS ceiling (0 = none).
    pub write_iops: f64,
    /// Read bandwidth ceiling, bytes/s (0 = none).
    pub read_bandwidth: u64,
    /// Write bandwidth ceiling, bytes/s (0 = none).
    pub write_bandwidth: u64,
    /// Trim service time.
    pub trim_ns: Nanos,
    /// Flush service time.
    pub flush_ns: Nanos,
    /// $ per TB.
    pub price_per_tb: f64,
    /// Rated drive writes per day over the warranty (0: no wear limit, or not rated).
    pub dwpd: f64,
    /// Warranty period of the rating, years.
    pub warranty_years: f64,
    /// Commands the drive queues and reorders (1: served in arrival order); only with a
    /// `geometry` (docs/design.md §5.1).
    pub queue_depth: u32,
    /// Volatile write cache, bytes (0: writes go to the media before they are acknowledged);
    /// only with a `geometry`.
    pub write_cache: u64,
    /// The positional model's mechanics: set, the device is a [`QueuedDisk`] (seek and
    /// rotation per op, shortest positioning time first) rather than a FIFO of base times.
    pub geometry: Option<Geometry>,
}

impl Default for DiskParams {
    fn default() -> Self {
        Self {
            read_base_ns: 0,
            write_base_ns: 0,
            seq_base_ns: None,
            read_ns_per_byte: 0.0,
            write_ns_per_byte: 0.0,
            channels: 1,
            read_iops: 0.0,
            write_iops: 0.0,
            read_bandwidth: 0,
            write_bandwidth: 0,
            trim_ns: 0,
            flush_ns: 0,
            price_per_tb: 0.0,
            dwpd: 0.0,
            warranty_years: 5.0,
            queue_depth: 1,
            write_cache: 0,
            geometry: None,
        }
    }
}

/// Parameters of a network link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LinkParams {
    /// Bytes per second.
    pub bandwidth: u64,
    /// One-way latency.
    pub latency_ns: Nanos,
}

/// A validated device configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResolvedDevice {
    /// What sits behind the (optional) link.
    pub kind: ResolvedKind,
    /// Network link in front of it.
    pub link: Option<LinkParams>,
}

impl ResolvedDevice {
    /// Price in $ per TB of raw capacity (an array's members' price; 0 for a link-only path),
    /// for performance-per-cost reports.
    pub fn price_per_tb(&self) -> f64 {
        match &self.kind {
            ResolvedKind::None => 0.0,
            ResolvedKind::Disk(p) => p.price_per_tb,
            ResolvedKind::Array { member, .. } => member.price_per_tb,
            ResolvedKind::Constant { .. } => 0.0,
        }
    }

    /// Rated endurance: drive writes per day and the warranty years they hold for (an array's
    /// members'; `None` without a wear rating: RAM, disks, links).
    pub fn endurance(&self) -> Option<(f64, f64)> {
        let p = match &self.kind {
            ResolvedKind::None | ResolvedKind::Constant { .. } => return None,
            ResolvedKind::Disk(p) => p,
            ResolvedKind::Array { member, .. } => member,
        };
        (p.dwpd > 0.0 && p.warranty_years > 0.0).then_some((p.dwpd, p.warranty_years))
    }

    /// Projected days until a device of `capacity_bytes` wears out when `bytes_per_day` are
    /// written to it: its rated writes (DWPD × capacity × 365 × warranty years) over the
    /// rate. `None` without a rating or without writes.
    pub fn projected_lifetime_days(&self, capacity_bytes: u64, bytes_per_day: f64) -> Option<f64> {
        let (dwpd, years) = self.endurance()?;
        (bytes_per_day > 0.0).then(|| dwpd * capacity_bytes as f64 * 365.0 * years / bytes_per_day)
    }
}

/// The storage part of a [`ResolvedDevice`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum ResolvedKind {
    /// Nothing: a link-only path to an infinitely fast target.
    None,
    /// One device.
    Disk(DiskParams),
    /// A device whose every op takes the same time, with no queueing.
    Constant {
        /// Time of every op.
        latency_ns: Nanos,
    },
    /// An array of identical members.
    Array {
        /// RAID level.
        level: RaidLevel,
        /// Member count.
        members: u32,
        /// Member parameters.
        member: DiskParams,
        /// Stripe unit in bytes.
        stripe_unit: u64,
    },
}
