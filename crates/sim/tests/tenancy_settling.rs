//! Tenancy sizing that settles (docs/design.md §4.10): a closed-loop scenario after the one that
//! showed sizing following the requests a volume manages to issue (a 24 MiB skewed hot set on
//! its own HDD sharing a 48 MiB cache with a fast sequential scanner and two others), made
//! smaller to keep the test short: a volume with a 3 MiB skewed hot set (less than its fair
//! share, a quarter of the cache) shares a 16 MiB cache with a sequential scanner (which
//! issues most of the requests until the hot set is cached) and two volumes of wide, weakly
//! reused footprints, each on its own HDD. Under `eci` with the default demand history, the hot volume's allocation
//! grows as its reuses show up and ends with at least its hot set; the record says after how
//! many intervals it settled there.

use tiercache_core::VolumeId;
use tiercache_policy::{Cache, CacheConfig, CleaningConfig, TenancyConfig, TenancyModeKind};
use tiercache_sim::{simulate, DeviceConfig, RunLimits, SimConfig, VolumeBackend};
use tiercache_workload::mix::BoxedSource;
use tiercache_workload::{AddressDist, SyntheticWorkload, VolumeMix, WorkloadSpec};

const MIB: u64 = 1 << 20;
const CACHE: u64 = 16 * MIB;
/// The hot set: less than a fair (equal) share of the cache.
const HOT: u64 = 3 * MIB;
const DURATION_NS: u64 = 20_000_000_000;

fn volume(
    seed: u64,
    iodepth: u32,
    read_fraction: f64,
    footprint: u64,
    dist: AddressDist,
) -> BoxedSource {
    Box::new(
        SyntheticWorkload::new(&WorkloadSpec {
            seed,
            iodepth: Some(iodepth),
            read_fraction,
            footprint,
            distribution: dist,
            ..Default::default()
        })
        .unwrap(),
    )
}

#[test]
fn a_hot_set_ends_with_at_least_its_size_and_the_record_says_when_it_settled() {
    let zipf = |theta| AddressDist::Zipf {
        theta,
        scramble: true,
    };
    let mut mix = VolumeMix::new(vec![
        (VolumeId(0), volume(1, 8, 0.95, HOT, zipf(0.9))),
        (
            VolumeId(1),
            volume(2, 4, 1.0, 8 << 30, AddressDist::Sequential),
        ),
        (VolumeId(2), volume(3, 4, 0.7, 64 * MIB, zipf(0.6))),
        (
            VolumeId(3),
            volume(4, 4, 0.9, 32 * MIB, AddressDist::Uniform),
        ),
    ])
    .unwrap();
    let cfg = CacheConfig {
        capacity: CACHE,
        cleaning: CleaningConfig::Lazy {
            idle_ns: 5_000_000,
            batch: 64,
        },
        tenancy: TenancyConfig {
            mode: TenancyModeKind::Eci,
            interval_ns: 1_000_000_000,
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(
        cfg.tenancy.history > 0.0,
        "the demand history is on by default"
    );
    let mut cache = Cache::new(&cfg).unwrap();
    let sim = SimConfig {
        cache_device: DeviceConfig::preset("sata-ssd-863a"),
        backend: DeviceConfig::preset("hdd-7200-sas"),
        volume_backends: (0..4)
            .map(|v| VolumeBackend {
                volume: v,
                device: DeviceConfig::preset("hdd-7200-sas"),
            })
            .collect(),
        run: RunLimits {
            duration_ns: Some(DURATION_NS),
            ..Default::default()
        },
        ..Default::default()
    };
    let out = simulate(&mut cache, &mut mix, &sim).unwrap();
    let t = out.metrics.tenancy.expect("a tenancy section");
    let hot_lines = HOT / 4096;
    let hot: Vec<(u64, u64)> = t
        .intervals
        .iter()
        .filter(|i| i.volume == 0)
        .map(|i| (i.at_ns, i.allocation_lines))
        .collect();
    const { assert!(HOT < CACHE / 4) };
    assert!(hot.len() >= 19, "{} decisions", hot.len());
    // Until the hot set is cached the scanner issues most requests; it has no reuse, so
    // it gets no lines.
    let early = |v: u32| -> u64 {
        t.intervals
            .iter()
            .filter(|i| i.volume == v && i.at_ns <= 5_000_000_000)
            .map(|i| i.requests)
            .sum()
    };
    assert!(early(1) > 10 * early(0), "{} vs {}", early(1), early(0));
    assert_eq!(
        t.intervals
            .iter()
            .rfind(|i| i.volume == 1)
            .unwrap()
            .allocation_lines,
        0
    );
    // The hot volume starts far below its hot set (its reuses show up as it issues requests)
    // and ends with at least all of it.
    assert!(hot[0].1 < hot_lines / 4, "{:?}", &hot[..3]);
    let s = t.volumes["0"]
        .settling
        .clone()
        .expect("settling of the hot volume");
    assert!(
        s.final_lines >= hot_lines,
        "{} lines < {hot_lines}: {s:?}",
        s.final_lines
    );
    // Settled: in the band from some decision to the end, and held there.
    assert!(s.settled && s.intervals_to_settle > 1, "{s:?}");
    assert_eq!(s.decisions, hot.len() as u64);
    let from = s.intervals_to_settle as usize - 1;
    assert_eq!(hot[from].0, s.settled_at_ns);
    assert!(
        hot[from..]
            .iter()
            .all(|&(_, a)| a.abs_diff(s.final_lines) <= s.band_lines),
        "{s:?}"
    );
    assert!(
        hot[from - 1].1.abs_diff(s.final_lines) > s.band_lines,
        "{s:?}"
    );
    // Once settled, its hit ratio is that of a cache holding the hot set.
    let last: Vec<_> = t
        .intervals
        .iter()
        .filter(|i| i.volume == 0)
        .rev()
        .take(5)
        .collect();
    let (h, m) = last
        .iter()
        .fold((0, 0), |(h, m), i| (h + i.hits, m + i.misses));
    assert!(h as f64 / (h + m) as f64 > 0.95, "{h} hits, {m} misses");
}
