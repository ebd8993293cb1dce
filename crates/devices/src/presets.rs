//! Device presets (docs/design.md §5), from public datasheets and measurements.

use crate::*;

// Built once per device at configuration time: its size does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Preset {
    Disk(DiskParams),
    Link(LinkParams),
}

/// Names of the shipped presets.
pub const PRESETS: [&str; 16] = [
    "sata-ssd-5100",
    "sata-ssd-863a",
    "hdd-7200-sas",
    "hdd-c2-sas",
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
pub(crate) fn per_byte(bw: f64) -> f64 {
    1e9 / bw
}

/// Preset parameters. Derivations (docs/design.md §5 table, 4 KiB ops): the per-byte time is the
/// interface transfer time at the sequential bandwidth; `base = latency − 4096 × per_byte`;
/// `channels ≈ IOPS × latency` (Little's law: that many ops must be in service at once to reach
/// the rated IOPS at the rated latency); the IOPS and bandwidth ceilings are the rated figures.
pub(crate) fn preset(name: &str) -> Option<Preset> {
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
            // Endurance: Micron 5100 PRO class, rated about 1.5 drive writes per day over its
            // 5-year warranty (the family spans ECO < 1 to MAX 5 DWPD).
            dwpd: 1.5,
            warranty_years: 5.0,
            ..d
        },
        // Samsung 863a-class enterprise SATA SSD (the cache LBICA was evaluated with,
        // docs/design.md §5): datasheet 97K/25K random 4 KiB IOPS (QD32), 520/485 MB/s sequential,
        // 3 DWPD over 5 years. Latency not in the table: 100 µs read, 40 µs write (DRAM-buffered)
        // assumed; channels = 97K × 100 µs ≈ 10; 1.92 ns/B → 4 KiB 7.9 µs → base 92.1 µs read,
        // 31.6 µs write. Price: about $500/TB (enterprise SATA, street price of its day).
        "sata-ssd-863a" => DiskParams {
            read_base_ns: 92_100,
            write_base_ns: 31_600,
            read_ns_per_byte: per_byte(520e6),
            write_ns_per_byte: per_byte(485e6),
            channels: 10,
            read_iops: 97_000.0,
            write_iops: 25_000.0,
            read_bandwidth: 520_000_000,
            write_bandwidth: 485_000_000,
            trim_ns: 50_000,
            flush_ns: 20_000,
            price_per_tb: 500.0,
            // 3 DWPD over 5 years (docs/design.md §5, Samsung 863a datasheet).
            dwpd: 3.0,
            warranty_years: 5.0,
            ..d
        },
        // 7.2K rpm SAS nearline HDD (the backend LBICA was evaluated with): one actuator,
        // ~140 random IOPS (7.1 ms: seek plus 4.17 ms mean rotation), 215 MB/s sequential
        // (4.65 ns/B) with a 20 µs base when an op continues the previous one. $30/TB.
        "hdd-7200-sas" => DiskParams {
            read_base_ns: 7_100_000,
            write_base_ns: 7_100_000,
            seq_base_ns: Some(20_000),
            read_ns_per_byte: per_byte(215e6),
            write_ns_per_byte: per_byte(215e6),
            channels: 1,
            trim_ns: 100_000,
            flush_ns: 100_000,
            price_per_tb: 30.0,
            ..d
        },
        // Seagate Constellation.2 SAS, 1 TB, 7,200 rpm (ST91000640SS; figures from its product
        // manual, rev. H, §5): 732,998 bytes per track (average), seek not including the
        // 0.2 ms controller overhead (access 7.7 − seek 7.5 ms) read 7.5 ms average, 0.23 ms
        // single track, 17.06 ms full stroke; write 8.5 / 0.44 / 18.08 ms; 4.16 ms average
        // rotational latency; internal data rate 84–163 MB/s; 64 MB cache. The positional
        // model (docs/design.md §5.1): a track per revolution is 88 MB/s, and a random 4 KiB
        // read at queue depth 1 takes 0.2 + 7.5 + 4.17 + 0.05 ms ≈ 11.9 ms (84 IOPS). SAS
        // tagged queueing: 32 commands reordered; the write cache on (64 MiB; set
        // `write_cache = 0` for a drive run with it off). The base times below are the mean
        // random op's (what reports and estimates read; the model itself uses the geometry).
        "hdd-c2-sas" => {
            let g = Geometry {
                rpm: 7200.0,
                track_bytes: 732_998,
                capacity: 1_000_000_000_000,
                read_seek: Geometry::fit_seek(230_000.0, 7_500_000.0, 17_060_000.0),
                write_seek: Geometry::fit_seek(440_000.0, 8_500_000.0, 18_080_000.0),
                overhead_ns: 200_000,
            };
            DiskParams {
                read_base_ns: 11_870_000,
                write_base_ns: 12_870_000,
                seq_base_ns: Some(20_000),
                read_ns_per_byte: g.ns_per_byte(),
                write_ns_per_byte: g.ns_per_byte(),
                channels: 1,
                trim_ns: 100_000,
                flush_ns: 100_000,
                price_per_tb: 30.0,
                queue_depth: 32,
                write_cache: 64 << 20,
                geometry: Some(g),
                ..d
            }
        }
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
            // Optane SSD P5800X datasheet: 100 DWPD over 5 years.
            dwpd: 100.0,
            warranty_years: 5.0,
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
            // Optane PMem 100-series: a 128 GB module is rated 292 PBW over 5 years, i.e.
            // 292e15 / (128e9 × 365 × 5) ≈ 1250 drive writes per day.
            dwpd: 1_250.0,
            warranty_years: 5.0,
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
            // Samsung 850 Pro 1 TB: 300 TBW over a 10-year warranty, i.e.
            // 300e12 / (1e12 × 365 × 10) ≈ 0.08 drive writes per day.
            dwpd: 0.08,
            warranty_years: 10.0,
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
            // Read-intensive datacenter TLC class (e.g. Samsung PM9A3, Micron 7450 PRO):
            // 1 DWPD over 5 years.
            dwpd: 1.0,
            warranty_years: 5.0,
            ..d
        },
        // Zero-cost device (tests, and "infinitely fast" targets).
        "null" => DiskParams {
            channels: 1024,
            ..d
        },
        // Links: 10 Gbit/s = 1.25 GB/s, 25 µs one way (switch + stack); slower links for
        // DEMOTE bandwidth sweeps (docs/design.md §4.7).
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
