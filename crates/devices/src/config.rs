//! Device configuration: what a config file says about a device, an array or a link, and
//! its resolution into model parameters.

use crate::*;

/// Most members an array may have: more than any real array, and each member is a model
/// kept in memory.
pub const MAX_MEMBERS: u32 = 256;

/// Most channels (ops in service at once) a device may have: above the internal parallelism
/// of any real device (NVMe SSDs have tens to a few hundred).
pub const MAX_CHANNELS: u32 = 4096;

/// Largest stripe unit of an array, bytes (1 GiB): real arrays use KiB to a few MiB, and the
/// stripe size (members × unit) must stay far from the end of the 64-bit byte range.
pub const MAX_STRIPE_UNIT: u64 = 1 << 30;

/// Longest fixed time of one op (base times, trim, flush, a constant device's or a link's
/// latency), ns: one hour. Longer is a unit mistake, and a few million such ops would run
/// simulated time past the 584 years a `Nanos` holds.
pub const MAX_OP_NS: Nanos = 3_600_000_000_000;

/// Slowest transfer a device or link may be given, bytes/s (an IOPS ceiling may not be
/// below one op per [`MAX_OP_NS`] either); 0 still means "no ceiling" where it does.
pub const MIN_BYTES_PER_S: u64 = 1000;

/// Most commands a disk may queue (SAS drives take up to 256 tagged commands).
pub const MAX_QUEUE_DEPTH: u32 = 256;

/// Largest write cache of a disk, bytes (16 GiB: drives carry tens to hundreds of MiB).
pub const MAX_WRITE_CACHE: u64 = 16 << 30;

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
    /// Rated endurance in drive writes per day over the warranty (0: no wear limit, or not
    /// rated), for projected-lifetime reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dwpd: Option<f64>,
    /// Warranty period the endurance rating covers, years.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warranty_years: Option<f64>,
    /// Commands a positional disk (a preset with a geometry, e.g. `hdd-c2-sas`) queues and
    /// serves shortest positioning time first; 1 serves them in arrival order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<u32>,
    /// Volatile write cache of a positional disk in bytes (accepts `"64MiB"`; 0 turns it off:
    /// writes reach the media before they are acknowledged).
    #[serde(
        default,
        deserialize_with = "de_opt_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub write_cache: Option<u64>,
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
    /// Device model: `queueing` (the default: channels, ceilings, FIFO queue) or `constant`
    /// (every op takes `latency_ns`, however many are in flight: the analytical setting of
    /// docs/design.md §4.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelKind>,
    /// Time of every op of a `constant` device (reads, writes, trims and flushes alike).
    #[serde(
        default,
        deserialize_with = "de_opt_nanos",
        skip_serializing_if = "Option::is_none"
    )]
    pub latency_ns: Option<Nanos>,
}

/// Which model a device follows (`model` in a device table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// Channels behind a FIFO queue with IOPS and bandwidth ceilings.
    #[default]
    Queueing,
    /// A fixed time per op, no queueing and no capacity limit.
    Constant,
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

    pub(crate) fn has_disk_fields(&self) -> Option<&'static str> {
        let fields: [(&'static str, bool); 15] = [
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
            ("queue_depth", self.queue_depth.is_some()),
            ("write_cache", self.write_cache.is_some()),
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
        if self.model == Some(ModelKind::Constant) {
            if let Some(f) = self.has_disk_fields() {
                return Err(err(
                    f,
                    "not allowed on a constant-latency device (it has `latency_ns` only)".into(),
                ));
            }
            if self.raid.is_some() {
                return Err(err(
                    "raid",
                    "a constant-latency device is not an array".into(),
                ));
            }
            let latency_ns = self
                .latency_ns
                .ok_or_else(|| err("latency_ns", "required by `model = \"constant\"`".into()))?;
            check_op_ns(path, "latency_ns", latency_ns)?;
            return Ok(ResolvedDevice {
                kind: ResolvedKind::Constant { latency_ns },
                link,
            });
        }
        if self.latency_ns.is_some() {
            return Err(err(
                "latency_ns",
                "only for `model = \"constant\"` (a link's latency goes in `link`)".into(),
            ));
        }
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
            if members < min || members > MAX_MEMBERS {
                return Err(err(
                    "members",
                    format!("{members} members: {level:?} needs {min}..={MAX_MEMBERS}"),
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
            if m.geometry.is_some() {
                // docs/design.md §5.1: RAID-0 only (RAID-5's read-before-write phases are not
                // modelled over queueing members), and no link in front yet.
                if level != RaidLevel::Raid0 {
                    return Err(err(
                        "member",
                        "a positional (queueing) disk can be a member of a raid0 array only \
                         yet: use a FIFO preset such as `hdd-7200-sas` for raid5"
                            .into(),
                    ));
                }
                if link.is_some() {
                    return Err(err(
                        "link",
                        "an array of positional (queueing) disks cannot sit behind a link yet"
                            .into(),
                    ));
                }
            }
            let stripe_unit = self.stripe_unit.unwrap_or(64 * 1024);
            if !(512..=MAX_STRIPE_UNIT).contains(&stripe_unit) || !stripe_unit.is_power_of_two() {
                return Err(err(
                    "stripe_unit",
                    format!(
                        "{stripe_unit} must be a power of two in 512..={MAX_STRIPE_UNIT} (1 GiB)"
                    ),
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
        over!(dwpd);
        over!(warranty_years);
        over!(queue_depth);
        over!(write_cache);
        if p.geometry.is_none() {
            for (f, set) in [
                ("queue_depth", p.queue_depth != 1),
                ("write_cache", p.write_cache != 0),
            ] {
                if set {
                    return Err(err(
                        f,
                        "only on a positional disk (a preset with a geometry: hdd-c2-sas)".into(),
                    ));
                }
            }
        } else {
            if !(1..=MAX_QUEUE_DEPTH).contains(&p.queue_depth) {
                return Err(err(
                    "queue_depth",
                    format!("{} must be in 1..={MAX_QUEUE_DEPTH}", p.queue_depth),
                ));
            }
            if p.write_cache > MAX_WRITE_CACHE {
                return Err(err(
                    "write_cache",
                    format!("{} B is over {MAX_WRITE_CACHE} B (16 GiB)", p.write_cache),
                ));
            }
            if link.is_some() {
                return Err(err(
                    "link",
                    "a positional (queueing) disk cannot sit behind a link yet".into(),
                ));
            }
        }
        if self.seq_base_ns.is_some() {
            p.seq_base_ns = self.seq_base_ns;
        }
        for (f, v) in [
            ("read_ns_per_byte", p.read_ns_per_byte),
            ("write_ns_per_byte", p.write_ns_per_byte),
            ("read_iops", p.read_iops),
            ("write_iops", p.write_iops),
            ("price_per_tb", p.price_per_tb),
            ("dwpd", p.dwpd),
            ("warranty_years", p.warranty_years),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(err(f, format!("{v} must be a finite number >= 0")));
            }
        }
        if p.channels == 0 || p.channels > MAX_CHANNELS {
            return Err(err(
                "channels",
                format!("{} must be in 1..={MAX_CHANNELS}", p.channels),
            ));
        }
        check_disk_times(path, &p)?;
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

    pub(crate) fn resolve(&self, path: &str) -> Result<LinkParams, DeviceError> {
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
        if p.bandwidth < MIN_BYTES_PER_S {
            return Err(err(
                "bandwidth",
                format!("{} B/s must be >= {MIN_BYTES_PER_S}", p.bandwidth),
            ));
        }
        check_op_ns(path, "latency_ns", p.latency_ns)?;
        Ok(p)
    }
}

/// Refuses a fixed op time over [`MAX_OP_NS`].
fn check_op_ns(path: &str, field: &str, ns: Nanos) -> Result<(), DeviceError> {
    if ns > MAX_OP_NS {
        return Err(DeviceError::Config {
            field: format!("{path}.{field}"),
            reason: format!("{ns} ns is over an hour per op (at most {MAX_OP_NS} ns)"),
        });
    }
    Ok(())
}

/// Refuses device times and rates out of all proportion (see [`MAX_OP_NS`] and
/// [`MIN_BYTES_PER_S`]): they are unit mistakes, and would run simulated time out of range.
/// Non-negative finiteness is checked before.
fn check_disk_times(path: &str, p: &DiskParams) -> Result<(), DeviceError> {
    let err = |field: &str, reason: String| DeviceError::Config {
        field: format!("{path}.{field}"),
        reason,
    };
    for (f, ns) in [
        ("read_base_ns", Some(p.read_base_ns)),
        ("write_base_ns", Some(p.write_base_ns)),
        ("seq_base_ns", p.seq_base_ns),
        ("trim_ns", Some(p.trim_ns)),
        ("flush_ns", Some(p.flush_ns)),
    ] {
        if let Some(ns) = ns {
            check_op_ns(path, f, ns)?;
        }
    }
    let max_ns_per_byte = 1e9 / MIN_BYTES_PER_S as f64;
    for (f, v) in [
        ("read_ns_per_byte", p.read_ns_per_byte),
        ("write_ns_per_byte", p.write_ns_per_byte),
    ] {
        if v > max_ns_per_byte {
            return Err(err(
                f,
                format!("{v} is slower than {MIN_BYTES_PER_S} B/s (at most {max_ns_per_byte})"),
            ));
        }
    }
    let min_iops = 1e9 / MAX_OP_NS as f64;
    for (f, v) in [("read_iops", p.read_iops), ("write_iops", p.write_iops)] {
        if v > 0.0 && v < min_iops {
            return Err(err(
                f,
                format!("{v} is below one op an hour (at least {min_iops:.6}; 0 means no ceiling)"),
            ));
        }
    }
    for (f, v) in [
        ("read_bandwidth", p.read_bandwidth),
        ("write_bandwidth", p.write_bandwidth),
    ] {
        if v > 0 && v < MIN_BYTES_PER_S {
            return Err(err(
                f,
                format!("{v} B/s is below {MIN_BYTES_PER_S} B/s (0 means no ceiling)"),
            ));
        }
    }
    Ok(())
}
