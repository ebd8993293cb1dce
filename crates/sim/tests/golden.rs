//! The timed simulator's results are fixed: fixed configurations' full results (metrics,
//! timeline, final counters, end time, bytes written back, latency sample counts) equal, field
//! by field and exactly, the records in `tests/golden/<case>.json`. An optimisation of the
//! executor or the device models that changes any event's order or time changes a field; a
//! mismatch prints every field that changed (path, expected, actual). When a change of results
//! is meant (a model fixed), regenerate the records with
//! `TIERCACHE_BLESS=1 cargo test -p tiercache-sim --test golden` (never on CI: the test refuses
//! to bless there), check the diff of the JSON files and say why in the commit.
//!
//! History: the results were first fixed, as FNV-1a hashes of their JSON, with the simulator
//! before its speed work (commit 5dd122d). The hashes were recomputed when the demote counters
//! and the tenancy record were added, after checking field by field that every earlier value
//! was identical, and again when a plan's contiguous backend reads came to merge past the cache
//! ops of their stage (the two-line requests of the open-loop run read the backend in fewer,
//! larger ops). The closed-loop hash changed once more when `UniformSource` gave each job its
//! own random stream (so the executor may draw a job's requests ahead): that hash was computed
//! with the executor as it was before the draw-ahead and the new event queue, then held
//! unchanged by them. It changed again when dirty lines came to be held out of the replacement
//! policy under `dirty_full = "bypass"`: with `metadata_bytes` zeroed, the result hashed the
//! same before and after; the held-out bits add 1 KiB of metadata. The JSON records replaced
//! the hashes (17002254944445930613 and 6353532219807021471) and were written by the code
//! those hashes were last checked against, in the same run as the check.

use tiercache_policy::{Cache, CacheConfig};
use tiercache_sim::testing::UniformSource;
use tiercache_sim::{simulate, DeviceConfig, HostConfig, SimConfig, SimOutput, VolumeBackend};

use serde_json::{json, Value};
use std::path::PathBuf;

/// Everything a run reports, as one JSON record (the fields the hashes covered). The timeline
/// is stored by column (`timeline.COLUMN[row]`): one line per column in the file, a few MB
/// instead of the 21 MB of a pretty-printed row per object.
fn result_record(out: &SimOutput) -> Value {
    let rows = serde_json::to_value(&out.timeline).unwrap();
    let mut columns = serde_json::Map::new();
    for row in rows.as_array().unwrap() {
        for (k, v) in row.as_object().unwrap() {
            columns
                .entry(k.clone())
                .or_insert_with(|| Value::Array(Vec::new()))
                .as_array_mut()
                .unwrap()
                .push(v.clone());
        }
    }
    assert!(
        columns
            .values()
            .all(|c| c.as_array().unwrap().len() == out.timeline.len()),
        "every timeline row has every column"
    );
    json!({
        "metrics": out.metrics,
        "timeline": columns,
        "final_stats": out.final_stats,
        "end_ns": out.end_ns,
        "backend_written_back_bytes": out.backend_written_back_bytes,
        "latency_count": out.latency.count(),
        "read_latency_count": out.read_latency.count(),
        "write_latency_count": out.write_latency.count(),
    })
}

fn golden_path(case: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/{case}.json"))
}

/// Appends to `diffs` every field where `actual` differs from `expected`: `(path, expected,
/// actual)`, a missing field shown as `(absent)`. Numbers are equal when of the same kind and,
/// for floats, the same bits (`-0.0` is not `0.0`), as the bytes the hashes covered were.
fn diff(path: &str, expected: &Value, actual: &Value, diffs: &mut Vec<(String, String, String)>) {
    let child = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                match a.get(k) {
                    Some(av) => diff(&child(k), ev, av, diffs),
                    None => diffs.push((child(k), ev.to_string(), "(absent)".into())),
                }
            }
            for (k, av) in a.iter().filter(|(k, _)| !e.contains_key(*k)) {
                diffs.push((child(k), "(absent)".into(), av.to_string()));
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                diffs.push((
                    format!("{path}.len()"),
                    e.len().to_string(),
                    a.len().to_string(),
                ));
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                diff(&format!("{path}[{i}]"), ev, av, diffs);
            }
        }
        (Value::Number(e), Value::Number(a)) => {
            let same = match (e.as_f64(), a.as_f64()) {
                _ if e.is_f64() != a.is_f64() => false,
                (Some(x), Some(y)) if e.is_f64() => x.to_bits() == y.to_bits(),
                _ => e == a,
            };
            if !same {
                diffs.push((path.to_string(), e.to_string(), a.to_string()));
            }
        }
        (e, a) if e != a => diffs.push((path.to_string(), e.to_string(), a.to_string())),
        _ => {}
    }
}

/// The stored form of a record: pretty-printed, except that each timeline column is one line.
fn to_golden_text(record: &Value) -> String {
    let mut record = record.clone();
    let timeline = record
        .as_object_mut()
        .unwrap()
        .insert("timeline".into(), Value::Null)
        .unwrap();
    let mut lines: Vec<String> = timeline
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("    {}: {}", Value::from(k.as_str()), v))
        .collect();
    lines.sort();
    let pretty = serde_json::to_string_pretty(&record).unwrap();
    let columns = format!("{{\n{}\n  }}", lines.join(",\n"));
    pretty.replacen("\"timeline\": null", &format!("\"timeline\": {columns}"), 1) + "\n"
}

/// Compares the run's record with the golden record of `case` (or, with `TIERCACHE_BLESS=1`,
/// writes it), failing with every field that changed.
fn check(case: &str, out: &SimOutput) {
    // Serialised and read back, as the file is: what is compared is what would be stored.
    let actual: Value =
        serde_json::from_str(&serde_json::to_string(&result_record(out)).unwrap()).unwrap();
    let path = golden_path(case);
    if std::env::var_os("TIERCACHE_BLESS").is_some_and(|v| v == "1") {
        assert!(
            std::env::var_os("CI").is_none(),
            "TIERCACHE_BLESS must not be set on CI: golden results are regenerated by hand"
        );
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text = to_golden_text(&actual);
        std::fs::write(&path, text).unwrap();
        eprintln!("blessed {}", path.display());
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (TIERCACHE_BLESS=1 writes it from the current code)",
            path.display()
        )
    });
    let expected: Value = serde_json::from_str(&text).unwrap();
    let mut diffs = Vec::new();
    diff("", &expected, &actual, &mut diffs);
    if !diffs.is_empty() {
        let shown: Vec<String> = diffs
            .iter()
            .take(100)
            .map(|(p, e, a)| format!("  {p}: expected {e}, actual {a}"))
            .collect();
        panic!(
            "{case}: {} fields differ from {} (first {}):\n{}\nIf the change is meant, \
             regenerate with TIERCACHE_BLESS=1 and say why in the commit.",
            diffs.len(),
            path.display(),
            shown.len(),
            shown.join("\n")
        );
    }
}

fn cache(extra: &str) -> Cache {
    let cfg: CacheConfig =
        toml::from_str(&format!("capacity = 33554432\nline_size = 4096\n{extra}")).unwrap();
    Cache::new(&cfg).unwrap()
}

/// The speed benchmark's setting (`examples/sim_throughput.rs`), smaller: a write-back cache
/// on an NVMe SSD over a SATA SSD, 64 requests in flight, a hot set; lazy cleaning, a
/// timeline and the final flush.
#[test]
fn write_back_on_two_devices_is_unchanged() {
    let mut c = cache("write_policy = \"write-back\"\ncleaning = { policy = \"lazy\", idle_ns = \"50us\", batch = 16 }\ndirty_full = \"bypass\"");
    let mut src =
        UniformSource::closed(7, 16, 4, 2_500, 512 << 20, 4096, 0.7).with_hot_set(0.8, 24 << 20);
    let mut cfg = SimConfig {
        cache_device: DeviceConfig::preset("nvme-ssd"),
        backend: DeviceConfig::preset("sata-ssd-5100"),
        ..Default::default()
    };
    cfg.run.warmup_requests = 20_000;
    cfg.run.final_flush = true;
    cfg.run.timeline_interval_ns = Some(2_000_000);
    let out = simulate(&mut c, &mut src, &cfg).unwrap();
    assert_eq!(out.metrics.requests, 20_000);
    check("write_back_on_two_devices", &out);
}

/// Open loop with the host CPU model, a RAID-5 backend behind a link (multi-phase ops) and a
/// second volume on a backend of its own.
#[test]
fn open_loop_with_host_raid_and_volume_backends_is_unchanged() {
    let mut c = cache("write_policy = \"write-back\"");
    let mut src = UniformSource::open(11, 60_000, 4_000, 256 << 20, 8192, 0.6)
        .with_hot_set(0.7, 16 << 20)
        .with_volumes(2);
    let mut backend = DeviceConfig::array(
        tiercache_sim::RaidLevel::Raid5,
        5,
        DeviceConfig::preset("sata-ssd-5100"),
        65536,
    );
    backend.link = Some(toml::from_str("preset = \"net-10g\"").unwrap());
    let mut cfg = SimConfig {
        cache_device: DeviceConfig::preset("sata-ssd-863a"),
        backend,
        volume_backends: vec![VolumeBackend {
            volume: 1,
            device: DeviceConfig::preset("hdd-7200-sas"),
        }],
        host: Some(HostConfig::default()),
        ..Default::default()
    };
    cfg.run.warmup_requests = 10_000;
    cfg.run.final_flush = true;
    cfg.run.timeline_interval_ns = Some(5_000_000);
    let out = simulate(&mut c, &mut src, &cfg).unwrap();
    assert_eq!(out.metrics.requests, 50_000);
    check("open_loop_with_host_raid_and_volume_backends", &out);
}
