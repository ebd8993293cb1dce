//! Device models (SPEC §5): single devices, RAID arrays and network links, their configuration
//! and presets.
//!
//! A single device is a FIFO queue in front of `channels` identical servers (its internal
//! parallelism). An op of `len` bytes takes `base + len × ns_per_byte` once it holds a channel,
//! where `base` is the read or write base time (a HDD uses `seq_base_ns` instead when the op
//! starts where the previous one ended). IOPS and bandwidth ceilings are enforced as a minimum
//! spacing between op starts: an op may start no earlier than `1/iops` (of its kind) and
//! `len/bandwidth` after the previous op's start. Because the queue is FIFO and every quantity is
//! known when an op is submitted, its completion time is computed at submission: one event per op.
//!
//! An array maps each logical op onto member ops (RAID-0 striping, RAID-5 with rotating parity and
//! the small-write penalty) and runs in phases: a RAID-5 write that does not cover whole stripes
//! first reads old data and old parity, then writes new data and new parity. A link (network
//! path) is a FIFO serialiser at its bandwidth plus a fixed propagation latency; it wraps a
//! device (writes cross it before the device, reads after).

#![warn(missing_docs)]

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use tiercache_core::units::{de_opt_bytes, de_opt_nanos};
use tiercache_core::{IoKind, Nanos, OpCause};

/// A device configuration that cannot be modelled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeviceError {
    /// A configuration value is invalid; `field` is its dotted path (e.g. `backend.member.channels`).
    #[error("{field}: {reason}")]
    Config {
        /// Dotted path of the field.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

/// RAID level of an array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RaidLevel {
    /// Striping without redundancy.
    Raid0,
    /// Striping with one rotating parity unit per stripe.
    Raid5,
}

/// Configuration of a network link: a preset name or a table; fields override the preset.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct LinkConfig {
    /// Preset: `net-10g`, `net-1g`, `net-100m`, `net-10m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Bandwidth in bytes per second (accepts `"1.25GB"`).
    #[serde(
        default,
        deserialize_with = "de_opt_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub bandwidth: Option<u64>,
    /// One-way latency added to every op crossing the link.
    #[serde(
        default,
        deserialize_with = "de_opt_nanos",
        skip_serializing_if = "Option::is_none"
    )]
    pub latency_ns: Option<Nanos>,
}

/// Configuration of a device, an array or a link-only path.
///
/// Accepted forms (TOML): a preset name `"sata-ssd-5100"`; a table
/// `{ preset = "sata-ssd-5100", read_base_ns = 100000 }` whose fields override the preset; a table
/// of every field for a custom device (`read_base_ns` and `write_base_ns` required); an array
/// `{ raid = "raid5", members = 8, member = { preset = "sata-ssd-850pro" }, stripe_unit = 65536 }`;
/// any of these with `link = "net-10g"` (or a link table) to put the device behind a network link.
/// Unknown keys are errors naming the key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct DeviceConfig {
    /// Preset name (see [`PRESETS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Fixed part of a read's service time.
    #[serde(
        default,
        deserialize_with = "de_opt_nanos",
        skip_serializing_if = "Option::is_none"
    )]
    pub read_base_ns: Option<Nanos>,
    /// Fixed part of a write's service time.
    #[serde(
        default,
        deserialize_with = "de_opt_nanos",
        skip_serializing_if = "Option::is_none"
    )]
    pub write_base_ns: Option<Nanos>,
    /// Fixed part of an op that starts where the previous op on the device ended (HDD: no seek,
    /// no rotational wait); unset means the same as random.
    #[serde(
        default,
        deserialize_with = "de_opt_nanos",
        skip_serializing_if = "Option::is_none"
    )]
    pub seq_base_ns: Option<Nanos>,
    /// Transfer time per byte read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_ns_per_byte: Option<f64>,
    /// Transfer time per byte written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_ns_per_byte: Option<f64>,
    /// Ops in service at once (internal parallelism).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channels: Option<u32>,
    /// Read IOPS ceiling (0 = none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_iops: Option<f64>,
    /// Write IOPS ceiling (0 = none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_iops: Option<f64>,
    /// Read bandwidth ceiling in bytes/s (0 = none).
    #[serde(
        default,
        deserialize_with = "de_opt_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub read_bandwidth: Option<u64>,
    /// Write bandwidth ceiling in bytes/s (0 = none).
    #[serde(
        default,
        deserialize_with = "de_opt_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub write_bandwidth: Option<u64>,
    /// Service time of a trim (discard) op.
    #[serde(
        default,
        deserialize_with = "de_opt_nanos",
        skip_serializing_if = "Option::is_none"
    )]
    pub trim_ns: Option<Nanos>,
    /// Service time of a flush (cache barrier) op.
    #[serde(
        default,
        deserialize_with = "de_opt_nanos",
        skip_serializing_if = "Option::is_none"
    )]
    pub flush_ns: Option<Nanos>,
    /// Price in $ per TB (for performance-per-cost reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_tb: Option<f64>,
    /// Makes this an array of `members` copies of `member`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raid: Option<RaidLevel>,
    /// Member devices of an array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<u32>,
    /// Member device of an array (a single device, not an array).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<Box<DeviceConfig>>,
    /// Stripe unit of an array in bytes (default 64 KiB).
    #[serde(
        default,
        deserialize_with = "de_opt_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub stripe_unit: Option<u64>,
    /// Network link in front of the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkConfig>,
}

macro_rules! string_or_table {
    ($ty:ident, $what:literal) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str(concat!(
                            "a ",
                            $what,
                            " preset name or a table of ",
                            $what,
                            " fields"
                        ))
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$ty, E> {
                        Ok($ty {
                            preset: Some(v.to_string()),
                            ..Default::default()
                        })
                    }
                    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<$ty, A::Error> {
                        $ty::deserialize(de::value::MapAccessDeserializer::new(map))
                    }
                }
                d.deserialize_any(V)
            }
        }
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                $ty::serialize(self, s)
            }
        }
    };
}
string_or_table!(DeviceConfig, "device");
string_or_table!(LinkConfig, "link");

impl DeviceConfig {
    /// A preset by name (checked when the model is built).
    pub fn preset(name: &str) -> Self {
        Self {
            preset: Some(name.to_string()),
            ..Default::default()
        }
    }

    /// A RAID array of `members` copies of `member`.
    pub fn array(level: RaidLevel, members: u32, member: DeviceConfig, stripe_unit: u64) -> Self {
        Self {
            raid: Some(level),
            members: Some(members),
            member: Some(Box::new(member)),
            stripe_unit: Some(stripe_unit),
            ..Default::default()
        }
    }

    fn has_disk_fields(&self) -> Option<&'static str> {
        let fields: [(&'static str, bool); 13] = [
            ("read_base_ns", self.read_base_ns.is_some()),
            ("write_base_ns", self.write_base_ns.is_some()),
            ("seq_base_ns", self.seq_base_ns.is_some()),
            ("read_ns_per_byte", self.read_ns_per_byte.is_some()),
            ("write_ns_per_byte", self.write_ns_per_byte.is_some()),
            ("channels", self.channels.is_some()),
            ("read_iops", self.read_iops.is_some()),
            ("write_iops", self.write_iops.is_some()),
            ("read_bandwidth", self.read_bandwidth.is_some()),
            ("write_bandwidth", self.write_bandwidth.is_some()),
            ("trim_ns", self.trim_ns.is_some()),
            ("flush_ns", self.flush_ns.is_some()),
            ("preset", self.preset.is_some()),
        ];
        fields.iter().find(|f| f.1).map(|f| f.0)
    }

    /// Validates the configuration and resolves presets into the parameters of a model.
    /// `path` names the config section in errors (e.g. `"backend"`).
    pub fn resolve(&self, path: &str) -> Result<ResolvedDevice, DeviceError> {
        let err = |field: &str, reason: String| DeviceError::Config {
            field: format!("{path}.{field}"),
            reason,
        };
        let link = match &self.link {
            Some(l) => Some(l.resolve(&format!("{path}.link"))?),
            None => None,
        };
        if let Some(level) = self.raid {
            if let Some(f) = self.has_disk_fields() {
                return Err(err(f, "not allowed on an array: set it on `member`".into()));
            }
            let members = self
                .members
                .ok_or_else(|| err("members", "an array needs `members`".into()))?;
            let min = match level {
                RaidLevel::Raid0 => 1,
                RaidLevel::Raid5 => 3,
            };
            if members < min || members > 1024 {
                return Err(err(
                    "members",
                    format!("{members} members: {level:?} needs {min}..=1024"),
                ));
            }
            let member = self
                .member
                .as_ref()
                .ok_or_else(|| err("member", "an array needs `member`".into()))?;
            if member.raid.is_some() || member.link.is_some() {
                return Err(err(
                    "member",
                    "a member must be a single device (no nested raid or link)".into(),
                ));
            }
            let ResolvedDevice {
                kind: ResolvedKind::Disk(m),
                ..
            } = member.resolve(&format!("{path}.member"))?
            else {
                return Err(err("member", "a member must be a single device".into()));
            };
            let stripe_unit = self.stripe_unit.unwrap_or(64 * 1024);
            if stripe_unit < 512 || !stripe_unit.is_power_of_two() {
                return Err(err(
                    "stripe_unit",
                    format!("{stripe_unit} must be a power of two >= 512"),
                ));
            }
            return Ok(ResolvedDevice {
                kind: ResolvedKind::Array {
                    level,
                    members,
                    member: m,
                    stripe_unit,
                },
                link,
            });
        }
        for (f, set) in [
            ("members", self.members.is_some()),
            ("member", self.member.is_some()),
            ("stripe_unit", self.stripe_unit.is_some()),
        ] {
            if set {
                return Err(err(f, "only allowed on an array (set `raid`)".into()));
            }
        }
        let base = match self.preset.as_deref() {
            Some(name) => match preset(name) {
                Some(Preset::Disk(p)) => Some(p),
                Some(Preset::Link(l)) => {
                    if let Some(f) = self.has_disk_fields().filter(|f| *f != "preset") {
                        return Err(err(
                            f,
                            format!("`{name}` is a link preset; it has no `{f}`"),
                        ));
                    }
                    if self.link.is_some() {
                        return Err(err("link", format!("`{name}` is already a link")));
                    }
                    return Ok(ResolvedDevice {
                        kind: ResolvedKind::None,
                        link: Some(l),
                    });
                }
                None => {
                    return Err(err(
                        "preset",
                        format!("unknown preset `{name}`; known: {}", PRESETS.join(", ")),
                    ))
                }
            },
            None => None,
        };
        if base.is_none() && self.has_disk_fields().is_none() {
            if link.is_some() {
                return Ok(ResolvedDevice {
                    kind: ResolvedKind::None,
                    link,
                });
            }
            return Err(err("preset", "give a preset or the device's fields".into()));
        }
        let mut p = base.unwrap_or_default();
        if base.is_none() {
            p.read_base_ns = self
                .read_base_ns
                .ok_or_else(|| err("read_base_ns", "required without a preset".into()))?;
            p.write_base_ns = self
                .write_base_ns
                .ok_or_else(|| err("write_base_ns", "required without a preset".into()))?;
        }
        macro_rules! over {
            ($f:ident) => {
                if let Some(v) = self.$f {
                    p.$f = v;
                }
            };
        }
        over!(read_base_ns);
        over!(write_base_ns);
        over!(read_ns_per_byte);
        over!(write_ns_per_byte);
        over!(channels);
        over!(read_iops);
        over!(write_iops);
        over!(read_bandwidth);
        over!(write_bandwidth);
        over!(trim_ns);
        over!(flush_ns);
        over!(price_per_tb);
        if self.seq_base_ns.is_some() {
            p.seq_base_ns = self.seq_base_ns;
        }
        for (f, v) in [
            ("read_ns_per_byte", p.read_ns_per_byte),
            ("write_ns_per_byte", p.write_ns_per_byte),
            ("read_iops", p.read_iops),
            ("write_iops", p.write_iops),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(err(f, format!("{v} must be a finite number >= 0")));
            }
        }
        if p.channels == 0 || p.channels > 65_536 {
            return Err(err(
                "channels",
                format!("{} must be in 1..=65536", p.channels),
            ));
        }
        Ok(ResolvedDevice {
            kind: ResolvedKind::Disk(p),
            link,
        })
    }
}

impl LinkConfig {
    /// A link preset by name.
    pub fn preset(name: &str) -> Self {
        Self {
            preset: Some(name.to_string()),
            ..Default::default()
        }
    }

    fn resolve(&self, path: &str) -> Result<LinkParams, DeviceError> {
        let err = |field: &str, reason: String| DeviceError::Config {
            field: format!("{path}.{field}"),
            reason,
        };
        let mut p = match self.preset.as_deref() {
            Some(name) => match preset(name) {
                Some(Preset::Link(l)) => l,
                _ => {
                    let links: Vec<&str> = PRESETS
                        .iter()
                        .copied()
                        .filter(|n| n.starts_with("net-"))
                        .collect();
                    return Err(err(
                        "preset",
                        format!("unknown link preset `{name}`; known: {}", links.join(", ")),
                    ));
                }
            },
            None => LinkParams {
                bandwidth: self
                    .bandwidth
                    .ok_or_else(|| err("bandwidth", "required without a preset".into()))?,
                latency_ns: self
                    .latency_ns
                    .ok_or_else(|| err("latency_ns", "required without a preset".into()))?,
            },
        };
        if let Some(b) = self.bandwidth {
            p.bandwidth = b;
        }
        if let Some(l) = self.latency_ns {
            p.latency_ns = l;
        }
        if p.bandwidth == 0 {
            return Err(err("bandwidth", "must be > 0".into()));
        }
        Ok(p)
    }
}

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
        }
    }
}

/// The storage part of a [`ResolvedDevice`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum ResolvedKind {
    /// Nothing: a link-only path to an infinitely fast target.
    None,
    /// One device.
    Disk(DiskParams),
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

enum Preset {
    Disk(DiskParams),
    Link(LinkParams),
}

/// Names of the shipped presets.
pub const PRESETS: [&str; 13] = [
    "sata-ssd-5100",
    "optane-p5800x",
    "pmem-dimm",
    "ram-disk",
    "sata-ssd-850pro",
    "hdd-7200",
    "hdd-10k",
    "nvme-ssd",
    "net-10g",
    "net-1g",
    "net-100m",
    "net-10m",
    "null",
];

/// Transfer time per byte at a bandwidth in bytes/s.
fn per_byte(bw: f64) -> f64 {
    1e9 / bw
}

/// Preset parameters. Derivations (SPEC §5 table, 4 KiB ops): the per-byte time is the
/// interface transfer time at the sequential bandwidth; `base = latency − 4096 × per_byte`;
/// `channels ≈ IOPS × latency` (Little's law: that many ops must be in service at once to reach
/// the rated IOPS at the rated latency); the IOPS and bandwidth ceilings are the rated figures.
fn preset(name: &str) -> Option<Preset> {
    let d = DiskParams::default();
    Some(Preset::Disk(match name {
        // Micron 5100-class SATA SSD: 93K/30K IOPS, 150 µs read, 540/520 MB/s.
        // read: 1.85 ns/B → 4 KiB 7.6 µs → base 142.4 µs; channels = 93K × 150 µs ≈ 14.
        // Write latency is not in the table: 50 µs (DRAM-buffered writes); the 30K write IOPS
        // ceiling, not the channels, limits random writes.
        "sata-ssd-5100" => DiskParams {
            read_base_ns: 142_400,
            write_base_ns: 42_100,
            read_ns_per_byte: per_byte(540e6),
            write_ns_per_byte: per_byte(520e6),
            channels: 14,
            read_iops: 93_000.0,
            write_iops: 30_000.0,
            read_bandwidth: 540_000_000,
            write_bandwidth: 520_000_000,
            trim_ns: 50_000,
            flush_ns: 20_000,
            price_per_tb: 143.0,
            ..d
        },
        // Optane P5800X-class: 1.5M/1.6M IOPS, 6 µs, 7.2/6.2 GB/s.
        // read: 0.139 ns/B → 0.57 µs → base 5.43 µs; channels = 1.5M × 6 µs = 9;
        // write: 9 channels / 1.6M = 5.6 µs → base 4.94 µs.
        "optane-p5800x" => DiskParams {
            read_base_ns: 5_430,
            write_base_ns: 4_940,
            read_ns_per_byte: per_byte(7.2e9),
            write_ns_per_byte: per_byte(6.2e9),
            channels: 9,
            read_iops: 1_500_000.0,
            write_iops: 1_600_000.0,
            read_bandwidth: 7_200_000_000,
            write_bandwidth: 6_200_000_000,
            trim_ns: 5_000,
            flush_ns: 1_000,
            price_per_tb: 2_500.0,
            ..d
        },
        // Persistent-memory DIMM: 1.9M/560K IOPS, < 1 µs, 6.6/2.3 GB/s.
        // read: 0.152 ns/B → 0.62 µs → base 0.38 µs (1 µs total); channels = 1.9M × 1 µs ≈ 2;
        // writes are bandwidth-bound: 2.3 GB/s / 4 KiB = 560K.
        "pmem-dimm" => DiskParams {
            read_base_ns: 380,
            write_base_ns: 100,
            read_ns_per_byte: per_byte(6.6e9),
            write_ns_per_byte: per_byte(2.3e9),
            channels: 2,
            read_iops: 1_900_000.0,
            write_iops: 560_000.0,
            read_bandwidth: 6_600_000_000,
            write_bandwidth: 2_300_000_000,
            trim_ns: 100,
            flush_ns: 100,
            price_per_tb: 12_150.0,
            ..d
        },
        // RAM disk on one DDR4 DIMM: 1.8M/1.4M IOPS, < 3 µs; copy at ~10 GB/s per stream
        // (0.1 ns/B → 0.41 µs per 4 KiB); read 2.2 µs → channels = 1.8M × 2.2 µs ≈ 4;
        // write: 4 / 1.4M = 2.86 µs → base 2.45 µs; 20 GB/s aggregate.
        "ram-disk" => DiskParams {
            read_base_ns: 1_790,
            write_base_ns: 2_450,
            read_ns_per_byte: 0.1,
            write_ns_per_byte: 0.1,
            channels: 4,
            read_iops: 1_800_000.0,
            write_iops: 1_400_000.0,
            read_bandwidth: 20_000_000_000,
            write_bandwidth: 20_000_000_000,
            price_per_tb: 6_400.0,
            ..d
        },
        // Samsung 850 Pro-class SATA SSD: the table gives > 50K IOPS and 550 MB/s; the datasheet
        // rates 100K/90K at QD32. Latency assumed 100 µs read / 60 µs write (not in the table):
        // channels = 100K × 100 µs = 10; 1.82 ns/B → base 92.6 µs read, 52.1 µs write.
        "sata-ssd-850pro" => DiskParams {
            read_base_ns: 92_600,
            write_base_ns: 52_100,
            read_ns_per_byte: per_byte(550e6),
            write_ns_per_byte: per_byte(520e6),
            channels: 10,
            read_iops: 100_000.0,
            write_iops: 90_000.0,
            read_bandwidth: 550_000_000,
            write_bandwidth: 520_000_000,
            trim_ns: 50_000,
            flush_ns: 20_000,
            price_per_tb: 100.0,
            ..d
        },
        // 7.2K rpm HDD: ~140 random IOPS → 7.1 ms per random op (seek + 4.17 ms mean
        // rotation); 180 MB/s sequential (5.56 ns/B) with a 20 µs base when an op continues the
        // previous one (no seek, no rotational wait). One actuator: one channel.
        "hdd-7200" => DiskParams {
            read_base_ns: 7_100_000,
            write_base_ns: 7_100_000,
            seq_base_ns: Some(20_000),
            read_ns_per_byte: per_byte(180e6),
            write_ns_per_byte: per_byte(180e6),
            channels: 1,
            trim_ns: 100_000,
            flush_ns: 100_000,
            price_per_tb: 60.0,
            ..d
        },
        // 10K rpm HDD: rotation 3 ms mean instead of 4.17 → 5.9 ms per random op (~170 IOPS,
        // the table's "~140" class); 180 MB/s sequential.
        "hdd-10k" => DiskParams {
            read_base_ns: 5_900_000,
            write_base_ns: 5_900_000,
            seq_base_ns: Some(20_000),
            read_ns_per_byte: per_byte(180e6),
            write_ns_per_byte: per_byte(180e6),
            channels: 1,
            trim_ns: 100_000,
            flush_ns: 100_000,
            price_per_tb: 60.0,
            ..d
        },
        // Generic datacenter NVMe TLC SSD (PCIe 4): 750K/200K IOPS, 80 µs read, 20 µs write,
        // 6.5/3.5 GB/s: channels = 750K × 80 µs = 60.
        "nvme-ssd" => DiskParams {
            read_base_ns: 79_370,
            write_base_ns: 18_830,
            read_ns_per_byte: per_byte(6.5e9),
            write_ns_per_byte: per_byte(3.5e9),
            channels: 60,
            read_iops: 750_000.0,
            write_iops: 200_000.0,
            read_bandwidth: 6_500_000_000,
            write_bandwidth: 3_500_000_000,
            trim_ns: 10_000,
            flush_ns: 5_000,
            price_per_tb: 150.0,
            ..d
        },
        // Zero-cost device (tests, and "infinitely fast" targets).
        "null" => DiskParams {
            channels: 1024,
            ..d
        },
        // Links: 10 Gbit/s = 1.25 GB/s, 25 µs one way (switch + stack); slower links for
        // DEMOTE bandwidth sweeps (SPEC §4.7).
        "net-10g" => {
            return Some(Preset::Link(LinkParams {
                bandwidth: 1_250_000_000,
                latency_ns: 25_000,
            }))
        }
        "net-1g" => {
            return Some(Preset::Link(LinkParams {
                bandwidth: 125_000_000,
                latency_ns: 50_000,
            }))
        }
        "net-100m" => {
            return Some(Preset::Link(LinkParams {
                bandwidth: 12_500_000,
                latency_ns: 100_000,
            }))
        }
        "net-10m" => {
            return Some(Preset::Link(LinkParams {
                bandwidth: 1_250_000,
                latency_ns: 500_000,
            }))
        }
        _ => return None,
    }))
}

const PS_PER_NS: u128 = 1000;

/// Runtime state of one single device.
#[derive(Debug, Clone)]
pub struct Disk {
    p: DiskParams,
    /// Picoseconds per op and per byte for the ceilings and transfer, precomputed.
    read_spacing_ps: u128,
    write_spacing_ps: u128,
    read_bw_ps_per_byte: u128,
    write_bw_ps_per_byte: u128,
    read_xfer_ps_per_byte: u128,
    write_xfer_ps_per_byte: u128,
    /// Free times of the channels (min-heap); a lone channel skips the heap.
    channels: BinaryHeap<Reverse<Nanos>>,
    single_free: Nanos,
    /// Earliest start allowed by the IOPS and bandwidth ceilings, ps.
    gate_ps: u128,
    /// Byte after the last op, for sequential detection.
    last_end: u64,
    /// Capacity consumed, ps: per op the largest of its channel share, IOPS spacing and
    /// bandwidth time.
    cost_ps: u128,
    /// Ops submitted.
    pub ops: u64,
    /// Reads submitted.
    pub reads: u64,
    /// Writes submitted.
    pub writes: u64,
}

fn spacing_ps(iops: f64) -> u128 {
    if iops > 0.0 {
        (1e12 / iops).round() as u128
    } else {
        0
    }
}

fn bw_ps(bw: u64) -> u128 {
    if bw > 0 {
        (1e12 / bw as f64).round() as u128
    } else {
        0
    }
}

impl Disk {
    /// A device at rest.
    pub fn new(p: DiskParams) -> Self {
        let channels = if p.channels > 1 {
            (0..p.channels).map(|_| Reverse(0)).collect()
        } else {
            BinaryHeap::new()
        };
        Self {
            read_spacing_ps: spacing_ps(p.read_iops),
            write_spacing_ps: spacing_ps(p.write_iops),
            read_bw_ps_per_byte: bw_ps(p.read_bandwidth),
            write_bw_ps_per_byte: bw_ps(p.write_bandwidth),
            read_xfer_ps_per_byte: (p.read_ns_per_byte * 1000.0).round() as u128,
            write_xfer_ps_per_byte: (p.write_ns_per_byte * 1000.0).round() as u128,
            p,
            channels,
            single_free: 0,
            gate_ps: 0,
            last_end: u64::MAX,
            cost_ps: 0,
            ops: 0,
            reads: 0,
            writes: 0,
        }
    }

    /// Parameters.
    pub fn params(&self) -> &DiskParams {
        &self.p
    }

    /// Service time of an op once it holds a channel, ps.
    fn service_ps(&self, kind: IoKind, offset: u64, len: u64) -> u128 {
        let seq = offset == self.last_end;
        let base = |b: Nanos| match (seq, self.p.seq_base_ns) {
            (true, Some(s)) => s,
            _ => b,
        };
        match kind {
            IoKind::Read => {
                base(self.p.read_base_ns) as u128 * PS_PER_NS
                    + len as u128 * self.read_xfer_ps_per_byte
            }
            IoKind::Write => {
                base(self.p.write_base_ns) as u128 * PS_PER_NS
                    + len as u128 * self.write_xfer_ps_per_byte
            }
            IoKind::Trim => self.p.trim_ns as u128 * PS_PER_NS,
            IoKind::Flush => self.p.flush_ns as u128 * PS_PER_NS,
        }
    }

    /// Submits an op at `now` (calls must come in non-decreasing `now`); returns its completion
    /// time.
    pub fn submit(&mut self, now: Nanos, kind: IoKind, offset: u64, len: u64) -> Nanos {
        let service = self.service_ps(kind, offset, len);
        let (spacing, bw) = match kind {
            IoKind::Read => (self.read_spacing_ps, len as u128 * self.read_bw_ps_per_byte),
            IoKind::Write => (
                self.write_spacing_ps,
                len as u128 * self.write_bw_ps_per_byte,
            ),
            IoKind::Trim | IoKind::Flush => (0, 0),
        };
        let gap = spacing.max(bw);
        let chan_free = if self.p.channels > 1 {
            self.channels.pop().map_or(0, |r| r.0)
        } else {
            self.single_free
        };
        let start_ps = (now.max(chan_free) as u128 * PS_PER_NS).max(self.gate_ps);
        self.gate_ps = start_ps + gap;
        let end_ps = start_ps + service;
        // Round up so an op never completes before its modelled time.
        let end = end_ps.div_ceil(PS_PER_NS) as Nanos;
        if self.p.channels > 1 {
            self.channels.push(Reverse(end));
        } else {
            self.single_free = end;
        }
        self.cost_ps += (service / self.p.channels as u128).max(gap);
        self.last_end = offset.saturating_add(len);
        self.ops += 1;
        match kind {
            IoKind::Read => self.reads += 1,
            IoKind::Write => self.writes += 1,
            _ => {}
        }
        end
    }
}

/// Runtime state of a network link.
#[derive(Debug, Clone)]
struct Link {
    p: LinkParams,
    ps_per_byte: u128,
    free_ps: u128,
    cost_ps: u128,
}

impl Link {
    fn new(p: LinkParams) -> Self {
        Self {
            ps_per_byte: bw_ps(p.bandwidth),
            p,
            free_ps: 0,
            cost_ps: 0,
        }
    }

    fn submit(&mut self, now: Nanos, len: u64) -> Nanos {
        let start = (now as u128 * PS_PER_NS).max(self.free_ps);
        let xfer = len as u128 * self.ps_per_byte;
        self.free_ps = start + xfer;
        self.cost_ps += xfer;
        ((start + xfer).div_ceil(PS_PER_NS) as Nanos) + self.p.latency_ns
    }
}

/// The storage behind a link.
// One per device and matched on every op: keep the disk inline rather than boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
enum Store {
    None,
    Disk(Disk),
    Array(Array),
}

/// Runtime state of an array.
#[derive(Debug, Clone)]
struct Array {
    level: RaidLevel,
    members: Vec<Disk>,
    unit: u64,
}

impl Array {
    fn n(&self) -> u64 {
        self.members.len() as u64
    }

    fn data_per_stripe(&self) -> u64 {
        match self.level {
            RaidLevel::Raid0 => self.n() * self.unit,
            RaidLevel::Raid5 => (self.n() - 1) * self.unit,
        }
    }

    /// Member holding data chunk `d` of `stripe`, and the parity member.
    fn place(&self, stripe: u64, d: u64) -> (usize, usize) {
        match self.level {
            RaidLevel::Raid0 => (d as usize, usize::MAX),
            RaidLevel::Raid5 => {
                // Left-symmetric layout: parity rotates backwards, data follows it.
                let n = self.n();
                let parity = (n - 1 - stripe % n) as usize;
                (((parity as u64 + 1 + d) % n) as usize, parity)
            }
        }
    }

    /// Whether a write needs a read phase (some stripe only partly written, RAID-5).
    fn needs_reads(&self, offset: u64, len: u64) -> bool {
        if self.level != RaidLevel::Raid5 || len == 0 {
            return false;
        }
        let dps = self.data_per_stripe();
        offset % dps + len % dps != 0
    }

    fn phases(&self, kind: IoKind, offset: u64, len: u64) -> u8 {
        if kind == IoKind::Write && self.needs_reads(offset, len) {
            2
        } else {
            1
        }
    }

    /// Runs phase `phase` of a logical op; returns when its last member op completes.
    fn submit_phase(
        &mut self,
        now: Nanos,
        kind: IoKind,
        offset: u64,
        len: u64,
        phase: u8,
    ) -> Nanos {
        let mut done = now;
        if matches!(kind, IoKind::Trim | IoKind::Flush) || len == 0 {
            // Barriers and discards go to every member.
            for m in &mut self.members {
                done = done.max(m.submit(now, kind, 0, 0));
            }
            return done;
        }
        let dps = self.data_per_stripe();
        let unit = self.unit;
        let rmw = kind == IoKind::Write && self.needs_reads(offset, len);
        let reading_phase = rmw && phase == 0;
        let mut pos = offset;
        let end = offset + len;
        while pos < end {
            let stripe = pos / dps;
            let stripe_start = stripe * dps;
            let stripe_end = (stripe_start + dps).min(end);
            let full = pos == stripe_start && stripe_end == stripe_start + dps;
            // Union of the in-chunk byte ranges touched in this stripe (the parity range).
            let (mut plo, mut phi) = (u64::MAX, 0);
            while pos < stripe_end {
                let d = (pos - stripe_start) / unit;
                let within = (pos - stripe_start) % unit;
                let n = (unit - within).min(stripe_end - pos);
                let (member, _) = self.place(stripe, d);
                let moff = stripe * unit + within;
                plo = plo.min(within);
                phi = phi.max(within + n);
                let write_now = kind == IoKind::Write && !reading_phase;
                if kind == IoKind::Read || write_now || (reading_phase && !full) {
                    let k = if write_now {
                        IoKind::Write
                    } else {
                        IoKind::Read
                    };
                    done = done.max(self.members[member].submit(now, k, moff, n));
                }
                pos += n;
            }
            if self.level == RaidLevel::Raid5 && kind == IoKind::Write && (!reading_phase || !full)
            {
                let (_, parity) = self.place(stripe, 0);
                let k = if reading_phase {
                    IoKind::Read
                } else {
                    IoKind::Write
                };
                done =
                    done.max(self.members[parity].submit(now, k, stripe * unit + plo, phi - plo));
            }
        }
        done
    }
}

/// Counters of one device, cumulative since the start of the run; the difference of two
/// snapshots describes a window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DeviceCounters {
    /// Time of the snapshot.
    pub at: Nanos,
    /// ∫ ops in flight dt, op·ns.
    pub depth_area: u128,
    /// Capacity consumed, ps (largest over link and storage; arrays: mean over members).
    pub cost_ps: u128,
    /// Ops completed.
    pub ops: u64,
    /// Bytes read by completed ops.
    pub bytes_read: u64,
    /// Bytes written by completed ops.
    pub bytes_written: u64,
    /// Sum of op latencies (submission to completion), ns.
    pub latency_ns: u128,
    /// Completed ops by cause (indexed by [`cause_index`]).
    pub by_cause: [u64; 9],
    /// Bytes written by completed ops, by cause.
    pub written_by_cause: [u64; 9],
}

/// Index of a cause in [`DeviceCounters::by_cause`].
pub fn cause_index(c: OpCause) -> usize {
    match c {
        OpCause::ReadHit => 0,
        OpCause::ReadMiss => 1,
        OpCause::Write => 2,
        OpCause::Promotion => 3,
        OpCause::Fill => 4,
        OpCause::Clean => 5,
        OpCause::EvictFlush => 6,
        OpCause::Trim => 7,
        OpCause::Flush => 8,
    }
}

/// Cause names in [`cause_index`] order, as reported.
pub const CAUSE_NAMES: [&str; 9] = [
    "read-hit",
    "read-miss",
    "write",
    "promotion",
    "fill",
    "clean",
    "evict-flush",
    "trim",
    "flush",
];

/// A device as the executor sees it: storage, optional link, and load accounting.
#[derive(Debug, Clone)]
pub struct DeviceModel {
    name: String,
    store: Store,
    link: Option<Link>,
    inflight: u32,
    inflight_by_cause: [u32; 9],
    max_inflight: u32,
    last_change: Nanos,
    c: DeviceCounters,
}

impl DeviceModel {
    /// Builds the model of a configuration (validating it).
    pub fn new(name: &str, cfg: &DeviceConfig) -> Result<Self, DeviceError> {
        Ok(Self::from_resolved(name, &cfg.resolve(name)?))
    }

    /// Builds the model of resolved parameters.
    pub fn from_resolved(name: &str, r: &ResolvedDevice) -> Self {
        let store = match &r.kind {
            ResolvedKind::None => Store::None,
            ResolvedKind::Disk(p) => Store::Disk(Disk::new(*p)),
            ResolvedKind::Array {
                level,
                members,
                member,
                stripe_unit,
            } => Store::Array(Array {
                level: *level,
                members: (0..*members).map(|_| Disk::new(*member)).collect(),
                unit: *stripe_unit,
            }),
        };
        Self {
            name: name.to_string(),
            store,
            link: r.link.map(Link::new),
            inflight: 0,
            inflight_by_cause: [0; 9],
            max_inflight: 0,
            last_change: 0,
            c: DeviceCounters::default(),
        }
    }

    /// Name used in reports.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Ops queued or in service.
    pub fn inflight(&self) -> u32 {
        self.inflight
    }

    /// Most ops in flight at once so far.
    pub fn max_inflight(&self) -> u32 {
        self.max_inflight
    }

    /// Member ops submitted so far (reads, writes) over every member (or the device itself).
    pub fn member_ops(&self) -> (u64, u64) {
        match &self.store {
            Store::None => (0, 0),
            Store::Disk(d) => (d.reads, d.writes),
            Store::Array(a) => a
                .members
                .iter()
                .fold((0, 0), |(r, w), m| (r + m.reads, w + m.writes)),
        }
    }

    /// Phases a logical op goes through (link crossings and array read/write phases).
    #[inline]
    pub fn phases(&self, kind: IoKind, offset: u64, len: u64) -> u8 {
        let store = match &self.store {
            Store::Array(a) => a.phases(kind, offset, len),
            Store::None => 0,
            Store::Disk(_) => 1,
        };
        store + self.link.is_some() as u8
    }

    /// Submits phase `phase` of an op at `now`; returns when the phase completes. Calls must come
    /// in non-decreasing `now` (the executor's event order).
    #[inline]
    pub fn submit_phase(
        &mut self,
        now: Nanos,
        kind: IoKind,
        offset: u64,
        len: u64,
        phase: u8,
    ) -> Nanos {
        let store_phase = match &self.link {
            None => phase,
            Some(_) => {
                // Data crosses the link before a write and after a read.
                let link_phase = if kind == IoKind::Read {
                    self.phases(kind, offset, len) - 1
                } else {
                    0
                };
                if phase == link_phase {
                    let l = self.link.as_mut().expect("checked");
                    let bytes = if matches!(kind, IoKind::Read | IoKind::Write) {
                        len
                    } else {
                        0
                    };
                    return l.submit(now, bytes);
                }
                if kind == IoKind::Read {
                    phase
                } else {
                    phase - 1
                }
            }
        };
        match &mut self.store {
            Store::None => now,
            Store::Disk(d) => d.submit(now, kind, offset, len),
            Store::Array(a) => a.submit_phase(now, kind, offset, len, store_phase),
        }
    }

    /// Runs every phase of an op back to back, each starting when the previous one completes,
    /// and returns the completion time; no load accounting. Meant for wrapping a real file with
    /// a model (the engine's emulated slow backend): exact for single-phase devices (a device
    /// without link or RAID-5 read phase); for multi-phase ops later phases are booked ahead,
    /// which is a close approximation under FIFO. Calls should come in non-decreasing `now`.
    pub fn run_op(&mut self, now: Nanos, kind: IoKind, offset: u64, len: u64) -> Nanos {
        let mut t = now;
        for phase in 0..self.phases(kind, offset, len) {
            t = self.submit_phase(t, kind, offset, len, phase);
        }
        t
    }

    fn advance(&mut self, now: Nanos) {
        debug_assert!(now >= self.last_change);
        self.c.depth_area += self.inflight as u128 * (now - self.last_change) as u128;
        self.last_change = now;
    }

    /// Ops queued or in service by cause (indexed by [`cause_index`]).
    pub fn inflight_by_cause(&self) -> &[u32; 9] {
        &self.inflight_by_cause
    }

    /// An op entered the device (before its first phase).
    #[inline]
    pub fn op_started(&mut self, now: Nanos, cause: OpCause) {
        self.advance(now);
        self.inflight += 1;
        self.inflight_by_cause[cause_index(cause)] += 1;
        self.max_inflight = self.max_inflight.max(self.inflight);
    }

    /// An op left the device (after its last phase); `started` is when it entered.
    #[inline]
    pub fn op_finished(
        &mut self,
        now: Nanos,
        started: Nanos,
        kind: IoKind,
        len: u64,
        cause: OpCause,
    ) {
        self.advance(now);
        self.inflight -= 1;
        self.inflight_by_cause[cause_index(cause)] -= 1;
        self.c.ops += 1;
        self.c.latency_ns += (now - started) as u128;
        let ci = cause_index(cause);
        self.c.by_cause[ci] += 1;
        match kind {
            IoKind::Read => self.c.bytes_read += len,
            IoKind::Write => {
                self.c.bytes_written += len;
                self.c.written_by_cause[ci] += len;
            }
            _ => {}
        }
    }

    /// Snapshot of the counters at `now` (not before the last change).
    pub fn counters(&self, now: Nanos) -> DeviceCounters {
        let mut c = self.c;
        let now = now.max(self.last_change);
        c.at = now;
        c.depth_area += self.inflight as u128 * (now - self.last_change) as u128;
        let store_cost = match &self.store {
            Store::None => 0,
            Store::Disk(d) => d.cost_ps,
            Store::Array(a) => {
                a.members.iter().map(|m| m.cost_ps).sum::<u128>() / a.members.len() as u128
            }
        };
        c.cost_ps = store_cost.max(self.link.as_ref().map_or(0, |l| l.cost_ps));
        c
    }
}

/// Load of a device over the window between two snapshots.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WindowLoad {
    /// Capacity share used, clamped to 0..=1.
    pub utilisation: f64,
    /// Time-weighted mean ops in flight.
    pub mean_queue_depth: f64,
}

impl DeviceCounters {
    /// Load between `earlier` and `self`.
    pub fn load_since(&self, earlier: &DeviceCounters) -> WindowLoad {
        let dt = self.at.saturating_sub(earlier.at);
        if dt == 0 {
            return WindowLoad::default();
        }
        let util = (self.cost_ps - earlier.cost_ps.min(self.cost_ps)) as f64 / (dt as f64 * 1000.0);
        WindowLoad {
            utilisation: util.clamp(0.0, 1.0),
            mean_queue_depth: (self.depth_area - earlier.depth_area) as f64 / dt as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(cfg: DeviceConfig) -> DeviceModel {
        DeviceModel::new("d", &cfg).unwrap()
    }

    fn custom(read: Nanos, channels: u32) -> DeviceConfig {
        DeviceConfig {
            read_base_ns: Some(read),
            write_base_ns: Some(read),
            channels: Some(channels),
            ..Default::default()
        }
    }

    #[test]
    fn service_time_is_base_plus_per_byte() {
        let mut d = dev(DeviceConfig {
            read_ns_per_byte: Some(0.5),
            ..custom(1000, 1)
        });
        assert_eq!(d.submit_phase(0, IoKind::Read, 0, 4096, 0), 1000 + 2048);
        // A second op queues behind the first on the lone channel.
        assert_eq!(d.submit_phase(0, IoKind::Read, 1 << 20, 0, 0), 3048 + 1000);
    }

    #[test]
    fn channels_serve_in_parallel_fifo() {
        let mut d = dev(custom(100, 4));
        let ends: Vec<Nanos> = (0..9)
            .map(|i| d.submit_phase(0, IoKind::Read, i * 8192, 4096, 0))
            .collect();
        assert_eq!(ends, vec![100, 100, 100, 100, 200, 200, 200, 200, 300]);
    }

    #[test]
    fn iops_ceiling_is_respected() {
        // 1000 ops at once on a 1M-channel-like device capped at 50K IOPS take >= 1000/50K s.
        let mut d = dev(DeviceConfig {
            read_iops: Some(50_000.0),
            ..custom(10, 64)
        });
        let n = 1000;
        let last = (0..n)
            .map(|i| d.submit_phase(0, IoKind::Read, i * 4096, 4096, 0))
            .max()
            .unwrap();
        let floor = (n - 1) * 1_000_000_000 / 50_000;
        assert!(last >= floor, "{last} < {floor}");
        assert!(last <= floor + 10 + 1);
    }

    #[test]
    fn bandwidth_ceiling_is_respected() {
        let mut d = dev(DeviceConfig {
            write_bandwidth: Some(1_000_000_000),
            ..custom(0, 1024)
        });
        let last = (0..100)
            .map(|i| d.submit_phase(0, IoKind::Write, i << 20, 1 << 20, 0))
            .max()
            .unwrap();
        // 99 MiB must have left before the last op may start: >= 99 × 1.048576 ms.
        assert!(last >= 99 * 1_048_576, "{last}");
    }

    #[test]
    fn hdd_sequential_ops_skip_the_seek() {
        let mut d = dev(DeviceConfig::preset("hdd-7200"));
        let a = d.submit_phase(0, IoKind::Read, 0, 4096, 0);
        let b = d.submit_phase(a, IoKind::Read, 4096, 4096, 0) - a;
        let c = d.submit_phase(a + b, IoKind::Read, 1 << 30, 4096, 0) - a - b;
        assert!(b < 100_000 && c > 7_000_000, "seq {b} random {c}");
    }

    fn raid5(members: u32) -> DeviceModel {
        dev(DeviceConfig::array(
            RaidLevel::Raid5,
            members,
            custom(100, 1),
            65536,
        ))
    }

    fn run_op(d: &mut DeviceModel, kind: IoKind, offset: u64, len: u64) -> Nanos {
        d.run_op(0, kind, offset, len)
    }

    #[test]
    fn raid5_small_write_costs_four_member_ops() {
        let mut d = raid5(4);
        assert_eq!(d.phases(IoKind::Write, 4096, 4096), 2);
        let t = run_op(&mut d, IoKind::Write, 4096, 4096);
        assert_eq!(
            d.member_ops(),
            (2, 2),
            "read old data + parity, write data + parity"
        );
        assert_eq!(t, 200, "two phases of one member op time each");
    }

    #[test]
    fn raid5_full_stripe_write_skips_the_reads() {
        let mut d = raid5(4);
        let stripe = 3 * 65536;
        assert_eq!(d.phases(IoKind::Write, stripe, stripe), 1);
        run_op(&mut d, IoKind::Write, stripe, 2 * stripe);
        assert_eq!(
            d.member_ops(),
            (0, 8),
            "2 stripes × (3 data + 1 parity) writes, no reads"
        );
    }

    #[test]
    fn raid5_reads_touch_only_data_and_layout_spreads_parity() {
        let mut d = raid5(4);
        run_op(&mut d, IoKind::Read, 0, 3 * 65536);
        assert_eq!(d.member_ops(), (3, 0));
        let a = Array {
            level: RaidLevel::Raid5,
            members: vec![],
            unit: 1,
        };
        let a = Array {
            members: (0..4).map(|_| Disk::new(DiskParams::default())).collect(),
            ..a
        };
        let mut parity: Vec<usize> = (0..4).map(|s| a.place(s, 0).1).collect();
        parity.sort();
        assert_eq!(parity, vec![0, 1, 2, 3]);
        for s in 0..4 {
            let (p, mut data) = (
                a.place(s, 0).1,
                (0..3).map(|d| a.place(s, d).0).collect::<Vec<_>>(),
            );
            data.push(p);
            data.sort();
            assert_eq!(data, vec![0, 1, 2, 3], "stripe {s} uses every member once");
        }
    }

    #[test]
    fn link_adds_latency_and_serialisation() {
        let cfg = DeviceConfig {
            link: Some(LinkConfig {
                bandwidth: Some(1_000_000_000),
                latency_ns: Some(5000),
                preset: None,
            }),
            ..custom(100, 1)
        };
        let mut d = dev(cfg);
        assert_eq!(d.phases(IoKind::Write, 0, 1000), 2);
        // write: 1000 B at 1 GB/s = 1 µs + 5 µs latency, then 100 ns device.
        assert_eq!(run_op(&mut d, IoKind::Write, 0, 1000), 6000 + 100);
        let d = dev(DeviceConfig::preset("net-10g"));
        assert_eq!(d.phases(IoKind::Read, 0, 4096), 1);
    }

    #[test]
    fn presets_resolve_and_match_their_ratings() {
        for name in PRESETS {
            dev(DeviceConfig::preset(name));
        }
        // 4 KiB random reads at high queue depth reach about the rated IOPS.
        for (name, iops) in [
            ("sata-ssd-5100", 93e3),
            ("optane-p5800x", 1.5e6),
            ("ram-disk", 1.8e6),
            ("nvme-ssd", 750e3),
        ] {
            let mut d = dev(DeviceConfig::preset(name));
            let n = 10_000u64;
            let last = (0..n)
                .map(|i| d.submit_phase(0, IoKind::Read, i * 8192, 4096, 0))
                .max()
                .unwrap();
            let got = n as f64 / (last as f64 / 1e9);
            assert!((got / iops - 1.0).abs() < 0.1, "{name}: {got} vs {iops}");
        }
        // A lone 4 KiB read takes the rated latency.
        let mut d = dev(DeviceConfig::preset("sata-ssd-5100"));
        let t = d.submit_phase(0, IoKind::Read, 0, 4096, 0);
        assert!((t as f64 - 150_000.0).abs() < 1000.0, "{t}");
    }

    #[test]
    fn config_errors_name_the_field() {
        let e = |s: &str| -> String {
            match toml::from_str::<std::collections::BTreeMap<String, DeviceConfig>>(s) {
                Err(e) => e.to_string(),
                Ok(m) => m["d"].resolve("d").unwrap_err().to_string(),
            }
        };
        assert!(e("d = { preset = \"sata-ssd-5100\", read_bse_ns = 3 }").contains("read_bse_ns"));
        assert!(e("d = \"floppy\"").contains("unknown preset `floppy`"));
        assert!(
            e("d = { raid = \"raid5\", members = 2, member = \"hdd-7200\" }").contains("d.members")
        );
        assert!(
            e("d = { raid = \"raid5\", members = 4, member = \"hdd-7200\", channels = 3 }")
                .contains("d.channels")
        );
        assert!(e("d = { read_base_ns = 5 }").contains("d.write_base_ns"));
        assert!(e("d = { preset = \"hdd-7200\", stripe_unit = 4096 }").contains("d.stripe_unit"));
        assert!(
            e("d = { preset = \"hdd-7200\", link = { preset = \"net-10g\", mtu = 9000 } }")
                .contains("mtu")
        );
    }

    #[test]
    fn config_forms_parse_and_override() {
        let m: std::collections::BTreeMap<String, DeviceConfig> = toml::from_str(
            r#"
            a = "ram-disk"
            b = { preset = "sata-ssd-5100", read_base_ns = "100us", channels = 8 }
            c = { raid = "raid5", members = 8, member = { preset = "sata-ssd-850pro" }, stripe_unit = "64KiB" }
            d = { preset = "hdd-7200", link = "net-1g" }
            "#,
        )
        .unwrap();
        let ResolvedKind::Disk(b) = m["b"].resolve("b").unwrap().kind else {
            panic!()
        };
        assert_eq!(
            (b.read_base_ns, b.channels, b.write_iops),
            (100_000, 8, 30_000.0)
        );
        let c = m["c"].resolve("c").unwrap();
        assert!(matches!(
            c.kind,
            ResolvedKind::Array {
                members: 8,
                stripe_unit: 65536,
                ..
            }
        ));
        assert_eq!(
            m["d"].resolve("d").unwrap().link.unwrap().bandwidth,
            125_000_000
        );
        // Serialising and parsing back gives the same configuration.
        for v in m.values() {
            let json = serde_json::to_string(v).unwrap();
            assert_eq!(&serde_json::from_str::<DeviceConfig>(&json).unwrap(), v);
        }
        assert_eq!(m["a"].resolve("a").unwrap().price_per_tb(), 6400.0);
        assert_eq!(c.price_per_tb(), 100.0);
    }

    /// Reference model of a multi-channel FIFO device with an IOPS gate: a plain list of
    /// channel free times, the earliest taken each time, in floating point; completions are
    /// whole nanoseconds (rounded up), as the executor sees them.
    fn reference(
        ops: &[(Nanos, u64)],
        channels: usize,
        base: Nanos,
        per_byte: f64,
        iops: f64,
    ) -> Vec<f64> {
        let mut free = vec![0f64; channels];
        let mut gate = 0f64;
        let spacing = if iops > 0.0 { 1e9 / iops } else { 0.0 };
        ops.iter()
            .map(|&(t, len)| {
                let (i, f) = free
                    .iter()
                    .copied()
                    .enumerate()
                    .min_by(|a, b| a.1.total_cmp(&b.1))
                    .unwrap();
                let start = (t as f64).max(f).max(gate);
                gate = start + spacing;
                let end = (start + base as f64 + len as f64 * per_byte - 1e-6).ceil();
                free[i] = end;
                end
            })
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn disk_matches_reference_model(
            gaps in proptest::collection::vec((0u64..5000, 1u64..64), 1..200),
            channels in 1u32..8,
            base in 0u64..3000,
            per_byte_milli in 0u32..2000,
            iops in proptest::sample::select(vec![0.0, 1e5, 1e6, 3e6]),
        ) {
            let per_byte = per_byte_milli as f64 / 1000.0;
            let mut t = 0;
            let ops: Vec<(Nanos, u64)> = gaps.iter().map(|&(g, sectors)| { t += g; (t, sectors * 512) }).collect();
            let mut d = Disk::new(DiskParams {
                read_base_ns: base,
                write_base_ns: base,
                read_ns_per_byte: per_byte,
                channels,
                read_iops: iops,
                ..DiskParams::default()
            });
            let want = reference(&ops, channels as usize, base, per_byte, iops);
            for (i, &(t, len)) in ops.iter().enumerate() {
                let got = d.submit(t, IoKind::Read, i as u64 * 1_000_000, len);
                proptest::prop_assert!((got as f64 - want[i]).abs() <= 1.0, "op {}: {} vs {}", i, got, want[i]);
                proptest::prop_assert!(got >= t);
            }
        }

        #[test]
        fn raid5_member_ops_follow_the_write_rule(
            start_unit in 0u64..40, units in 1u64..40, members in 3u32..8,
        ) {
            // Unit-aligned writes: a full stripe costs (n−1) data + 1 parity writes; a partial
            // stripe with k chunks costs k + 1 reads and k + 1 writes.
            let unit = 4096u64;
            let mut d = dev(DeviceConfig::array(RaidLevel::Raid5, members, custom(100, 1), unit));
            let (offset, len) = (start_unit * unit, units * unit);
            run_op(&mut d, IoKind::Write, offset, len);
            let per = (members - 1) as u64;
            let (mut reads, mut writes) = (0, 0);
            let mut u = start_unit;
            while u < start_unit + units {
                let stripe_end = (u / per + 1) * per;
                let k = stripe_end.min(start_unit + units) - u;
                if k == per {
                    writes += per + 1;
                } else {
                    reads += k + 1;
                    writes += k + 1;
                }
                u += k;
            }
            proptest::prop_assert_eq!(d.member_ops(), (reads, writes));
        }
    }
}
