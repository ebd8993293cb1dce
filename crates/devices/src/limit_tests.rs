//! Tests of the models at the edges of their ranges: times that reach the end of `Nanos`, and
//! configuration values out of all proportion.

use super::*;

/// `text` is a TOML table `d = ...`; its device resolved under the name `d` (the device
/// tests' one way of reading a device from text).
pub(crate) fn resolve(text: &str) -> Result<ResolvedDevice, DeviceError> {
    let cfg: DeviceConfig = toml::from_str::<toml::Value>(text)
        .unwrap()
        .get("d")
        .unwrap()
        .clone()
        .try_into()
        .unwrap();
    cfg.resolve("d")
}

/// The error of resolving `text`, which must fail.
fn error(text: &str) -> String {
    resolve(text).unwrap_err().to_string()
}

/// Completion times of `n` 4 KiB reads submitted at 0 to `d`.
fn ends(d: &mut Disk, n: u64) -> Vec<Nanos> {
    (0..n)
        .map(|i| d.submit(0, IoKind::Read, i * 1_000_000, 4096))
        .collect()
}

/// The times never decrease (no wrap), and the last ones are exactly `Nanos::MAX`.
fn saturates(ends: &[Nanos]) {
    assert!(ends.windows(2).all(|w| w[0] <= w[1]), "{ends:?}");
    assert_eq!(*ends.last().unwrap(), Nanos::MAX, "{ends:?}");
}

#[test]
fn a_tiny_iops_ceiling_saturates_instead_of_wrapping() {
    // One read per 10^18 ns: the 19th starts past 2^64 ns.
    let mut d = Disk::new(DiskParams {
        read_base_ns: 1000,
        read_iops: 1e-9,
        channels: 64,
        ..DiskParams::default()
    });
    let e = ends(&mut d, 40);
    assert_eq!(e[1], 1_000_000_000_000_000_000 + 1000);
    saturates(&e);
}

#[test]
fn a_huge_base_time_saturates_instead_of_wrapping() {
    // 2·10^18 ns per read on one channel: the 10th ends past 2^64 ns.
    let mut d = Disk::new(DiskParams {
        read_base_ns: 2_000_000_000_000_000_000,
        ..DiskParams::default()
    });
    let e = ends(&mut d, 12);
    assert_eq!(e[8], 18_000_000_000_000_000_000);
    saturates(&e);
    // Later ops on the saturated device stay at the end of time.
    assert_eq!(d.submit(Nanos::MAX, IoKind::Read, 0, 4096), Nanos::MAX);
}

#[test]
fn huge_per_byte_times_and_tiny_bandwidths_saturate() {
    // 10^300 ns per byte: the per-byte time in ps saturates to u128::MAX, times the length.
    let mut d = Disk::new(DiskParams {
        read_ns_per_byte: 1e300,
        write_bandwidth: 1,
        ..DiskParams::default()
    });
    assert_eq!(d.submit(0, IoKind::Read, 0, 4096), Nanos::MAX);
    let mut d = Disk::new(DiskParams {
        write_bandwidth: 1,
        ..DiskParams::default()
    });
    // 1 B/s: 2^40 bytes keep the gate closed for 2^40 s, past 2^64 ns for the next op.
    assert_eq!(d.submit(0, IoKind::Write, 0, 1 << 40), 0);
    assert_eq!(d.submit(0, IoKind::Write, 0, 1), Nanos::MAX);
    // The load counters survive it.
    let mut m = DeviceModel::from_resolved(
        "d",
        &ResolvedDevice {
            kind: ResolvedKind::Disk(DiskParams {
                read_ns_per_byte: 1e300,
                ..DiskParams::default()
            }),
            link: None,
        },
    );
    m.op_started(0, OpCause::ReadMiss);
    let end = m.submit_phase(0, IoKind::Read, 0, 4096, 0);
    assert_eq!(end, Nanos::MAX);
    m.op_finished(end, 0, IoKind::Read, 4096, OpCause::ReadMiss);
    assert_eq!(m.counters(end).cost_ps, u128::MAX);
}

#[test]
fn constant_devices_links_and_arrays_saturate() {
    let model = |kind, link| DeviceModel::from_resolved("d", &ResolvedDevice { kind, link });
    let mut c = model(
        ResolvedKind::Constant {
            latency_ns: Nanos::MAX - 10,
        },
        None,
    );
    assert_eq!(c.run_op(100, IoKind::Read, 0, 4096), Nanos::MAX);
    // A link's latency, and its serialisation at 1 B/s of 2^60 bytes (2^60 s).
    let mut l = model(
        ResolvedKind::None,
        Some(LinkParams {
            bandwidth: 1,
            latency_ns: Nanos::MAX - 10,
        }),
    );
    assert_eq!(l.run_op(100, IoKind::Write, 0, 4096), Nanos::MAX);
    let mut l = model(
        ResolvedKind::None,
        Some(LinkParams {
            bandwidth: 1,
            latency_ns: 0,
        }),
    );
    assert_eq!(l.run_op(0, IoKind::Write, 0, 1 << 60), Nanos::MAX);
    assert_eq!(l.run_op(0, IoKind::Write, 0, 1), Nanos::MAX);
    // RAID-5 small writes: two phases, each on members at the end of time.
    let mut a = model(
        ResolvedKind::Array {
            level: RaidLevel::Raid5,
            members: 4,
            member: DiskParams {
                read_base_ns: Nanos::MAX / 2 + 1,
                write_base_ns: Nanos::MAX / 2 + 1,
                ..DiskParams::default()
            },
            stripe_unit: 65536,
        },
        None,
    );
    assert_eq!(a.run_op(0, IoKind::Write, 0, 4096), Nanos::MAX);
}

#[test]
fn absurd_times_and_rates_are_refused_naming_the_field() {
    let cases = [
        ("d = { preset = 'sata-ssd-5100', read_iops = 1e-9 }", "d.read_iops"),
        ("d = { preset = 'sata-ssd-5100', write_iops = 1e-4 }", "d.write_iops"),
        ("d = { preset = 'sata-ssd-5100', read_base_ns = '2000000000s' }", "d.read_base_ns"),
        ("d = { preset = 'hdd-7200', seq_base_ns = '121min' }", "d.seq_base_ns"),
        ("d = { preset = 'hdd-7200', flush_ns = '61min' }", "d.flush_ns"),
        ("d = { preset = 'nvme-ssd', read_ns_per_byte = 1e300 }", "d.read_ns_per_byte"),
        ("d = { preset = 'nvme-ssd', write_bandwidth = 999 }", "d.write_bandwidth"),
        ("d = { model = 'constant', latency_ns = '60000min' }", "d.latency_ns"),
        ("d = { preset = 'nvme-ssd', link = { preset = 'net-1g', latency_ns = '121min' } }", "d.link.latency_ns"),
        ("d = { preset = 'nvme-ssd', link = { preset = 'net-1g', bandwidth = 10 } }", "d.link.bandwidth"),
        (
            "d = { raid = 'raid0', members = 2, member = { preset = 'nvme-ssd', trim_ns = '121min' } }",
            "d.member.trim_ns",
        ),
    ];
    for (text, field) in cases {
        let e = error(text);
        assert!(e.starts_with(field), "{text}: {e}");
    }
    // The limits themselves, and "no ceiling", are fine.
    for ok in [
        "d = { preset = 'sata-ssd-5100', read_iops = 0.0, write_bandwidth = 0, read_base_ns = '60min' }",
        "d = { preset = 'sata-ssd-5100', read_iops = 0.0003, read_bandwidth = 1000, read_ns_per_byte = 1e6 }",
        "d = { model = 'constant', latency_ns = '60min' }",
    ] {
        resolve(ok).unwrap();
    }
}

#[test]
fn an_oversized_stripe_unit_is_refused_naming_the_field() {
    let array = |unit: &str| {
        format!(
            "d = {{ raid = 'raid0', members = 4, member = 'sata-ssd-5100', stripe_unit = {unit} }}"
        )
    };
    // 4 × 2^62 overflowed the stripe size; 2 GiB is a power of two but no real stripe unit.
    for unit in ["4611686018427387904", "'2GiB'"] {
        let e = error(&array(unit));
        assert!(e.starts_with("d.stripe_unit") && e.contains("1 GiB"), "{e}");
    }
    // The cap itself, with the most members, models ops anywhere in the byte range.
    let r = resolve(&format!(
        "d = {{ raid = 'raid5', members = {MAX_MEMBERS}, member = 'nvme-ssd', stripe_unit = '1GiB' }}"
    ))
    .unwrap();
    let mut d = DeviceModel::from_resolved("d", &r);
    for offset in [0, 1 << 40, u64::MAX - (1 << 21)] {
        assert!(d.run_op(0, IoKind::Write, offset, 1 << 20) > 0);
    }
}

#[test]
fn member_and_channel_counts_are_bounded_naming_the_field() {
    let e = error("d = { raid = 'raid0', members = 1024, member = 'nvme-ssd' }");
    assert!(e.starts_with("d.members") && e.contains("1..=256"), "{e}");
    let e = error(
        "d = { raid = 'raid0', members = 4, member = { preset = 'nvme-ssd', channels = 65536 } }",
    );
    assert!(
        e.starts_with("d.member.channels") && e.contains("1..=4096"),
        "{e}"
    );
    let e = error("d = { preset = 'nvme-ssd', channels = 4097 }");
    assert!(e.starts_with("d.channels"), "{e}");
    resolve(
        "d = { raid = 'raid5', members = 256, member = { preset = 'nvme-ssd', channels = 4096 } }",
    )
    .unwrap();
}

#[test]
fn channel_state_grows_with_the_ops_not_the_channel_count() {
    let mut d = Disk::new(DiskParams {
        read_base_ns: 100,
        channels: MAX_CHANNELS,
        ..DiskParams::default()
    });
    assert_eq!(d.channels.len(), 0);
    let e = ends(&mut d, 3);
    assert_eq!(e, vec![100, 100, 100], "three channels in parallel");
    assert_eq!(d.channels.len(), 3);
    // Once every channel is in use, ops queue behind the earliest free one.
    let mut d = Disk::new(DiskParams {
        read_base_ns: 100,
        channels: 2,
        ..DiskParams::default()
    });
    assert_eq!(ends(&mut d, 5), vec![100, 100, 200, 200, 300]);
    assert_eq!(d.channels.len(), 2);
}
