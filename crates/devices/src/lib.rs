//! Device models (docs/design.md §5): single devices, RAID arrays and network links, their
//! configuration and presets.
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
use tiercache_core::{service_ewma, IoKind, Nanos, OpCause};

mod config;
mod disk;
#[cfg(test)]
mod limit_tests;
mod link;
mod model;
mod presets;
mod queued;
mod queued_array;
mod raid;
mod resolved;

pub use config::*;
pub use disk::*;
pub(crate) use link::*;
pub use model::*;
pub use presets::*;
pub use queued::*;
pub use queued_array::*;
pub(crate) use raid::*;
pub use resolved::*;

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
    fn latency_and_service_estimates_differ_by_the_parallelism() {
        // Four ops at a time on a 4-channel device of 100 ns per op, round after round: each
        // op takes 100 ns from submission to completion, but the device consumes 25 ns of its
        // time per op (it completes 4 per 100 ns).
        let mut d = dev(custom(100, 4));
        assert_eq!((d.service_ns(), d.latency_ns()), (0, 0));
        for round in 0..100u64 {
            let t = round * 100;
            let ends: Vec<Nanos> = (0..4)
                .map(|i| {
                    d.op_started(t, OpCause::ReadHit);
                    d.submit_phase(t, IoKind::Read, (round * 4 + i) * 8192, 0, 0)
                })
                .collect();
            for end in ends {
                assert_eq!(end, t + 100);
                d.op_finished(end, t, IoKind::Read, 0, OpCause::ReadHit);
            }
        }
        assert_eq!(d.latency_ns(), 100);
        // About 25: the moving average swings within a round (the first completion of a round
        // accounts for the device time of all four).
        assert!((10..=40).contains(&d.service_ns()), "{}", d.service_ns());
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

    #[test]
    fn presets_carry_endurance_and_project_a_lifetime() {
        let ssd = DeviceConfig::preset("sata-ssd-863a").resolve("c").unwrap();
        assert_eq!(ssd.endurance(), Some((3.0, 5.0)));
        // 3 drive writes a day for 5 years, written at 1.5 drive writes a day: 10 years.
        let days = ssd.projected_lifetime_days(1 << 30, 1.5 * (1u64 << 30) as f64);
        assert!((days.unwrap() - 3650.0).abs() < 1e-6, "{days:?}");
        assert_eq!(ssd.projected_lifetime_days(1 << 30, 0.0), None);
        for unrated in ["ram-disk", "hdd-7200", "null"] {
            let d = DeviceConfig::preset(unrated).resolve("c").unwrap();
            assert_eq!(d.endurance(), None, "{unrated}");
        }
        let bad = DeviceConfig {
            dwpd: Some(-1.0),
            ..DeviceConfig::preset("nvme-ssd")
        };
        assert!(bad
            .resolve("cache")
            .unwrap_err()
            .to_string()
            .contains("dwpd"));
    }
}

#[cfg(test)]
mod constant_tests {
    use super::*;

    use crate::limit_tests::resolve as parse;

    #[test]
    fn constant_device_takes_the_same_time_for_every_op_at_any_depth() {
        let r = parse("d = { model = \"constant\", latency_ns = \"100us\" }").unwrap();
        let mut d = DeviceModel::from_resolved("d", &r);
        for i in 0..100u64 {
            let kind = if i % 2 == 0 {
                IoKind::Read
            } else {
                IoKind::Write
            };
            assert_eq!(d.run_op(5_000, kind, i * 4096, 1 << 20), 105_000);
        }
        assert_eq!(d.counters(1_000_000).cost_ps, 0, "never busy");
    }

    #[test]
    fn constant_device_errors_name_the_field() {
        let e = parse("d = { model = \"constant\" }")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("d.latency_ns"), "{e}");
        let e = parse("d = { model = \"constant\", latency_ns = 5, channels = 2 }")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("d.channels"), "{e}");
        let e = parse("d = { preset = \"ram-disk\", latency_ns = 5 }")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("d.latency_ns"), "{e}");
    }
}
