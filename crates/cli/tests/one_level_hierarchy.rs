//! One timing model (docs/design.md §4.7, §5): a hierarchy of one level under one client runs
//! on the simulator's event loop exactly as `sim` runs the same cache, devices, host and
//! workload, so the level's record (`result.levels[0].metrics`) is byte for byte the `metrics`
//! of `tiercache sim --json` on the single-level config.

use serde_json::Value;
mod common;

use common::tiercache_ok as tiercache;

/// The settings a case varies: the `[cache]` table's body, the cache device, the backend, an
/// optional `[host]` body, the workload's fields and `run.final_flush`.
struct Case {
    name: &'static str,
    cache: &'static str,
    cache_device: &'static str,
    backend: &'static str,
    host: Option<&'static str>,
    workload: &'static str,
    final_flush: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "write-back with lazy cleaning, queueing devices, host model",
        cache: r#"capacity = "8MiB", write_policy = "write-back", cleaning = { policy = "lazy", idle_ns = "100us", batch = 16 }"#,
        cache_device: r#""nvme-ssd""#,
        backend: r#""hdd-7200""#,
        host: Some(r#"cores = 4, lookup = "ht-fg""#),
        workload: r#"jobs = 4, iodepth = 8, requests = 12000, read_fraction = 0.7, footprint = "64MiB", distribution = { type = "zipf", theta = 0.9 }"#,
        final_flush: true,
    },
    Case {
        name: "write-back with aggressive cleaning over a RAID-5 array",
        cache: r#"capacity = "4MiB", line_size = "16KiB", write_policy = "write-back", cleaning = { policy = "aggressive", period_ns = "50us", batch = 8 }, eviction = "arc""#,
        cache_device: r#""sata-ssd-5100""#,
        backend: r#"{ raid = "raid5", members = 5, member = "hdd-7200", stripe_unit = "64KiB" }"#,
        host: None,
        workload: r#"jobs = 2, iodepth = 4, requests = 6000, read_fraction = 0.5, footprint = "32MiB", block_sizes = [{ size = "4KiB", weight = 3 }, { size = "64KiB", weight = 1 }]"#,
        final_flush: true,
    },
    Case {
        name: "write-through, constant-latency devices",
        cache: r#"capacity = "2MiB", write_policy = "write-through", eviction = "s3-fifo""#,
        cache_device: r#"{ model = "constant", latency_ns = "20us" }"#,
        backend: r#"{ model = "constant", latency_ns = "2ms" }"#,
        host: None,
        workload: r#"jobs = 1, iodepth = 2, requests = 5000, read_fraction = 0.8, footprint = "16MiB", distribution = { type = "zipf", theta = 0.8 }"#,
        final_flush: false,
    },
    Case {
        name: "open-loop arrivals, write-around, queueing devices",
        cache: r#"capacity = "4MiB", write_policy = "write-around""#,
        cache_device: r#""sata-ssd-5100""#,
        backend: r#""hdd-7200""#,
        host: Some(r#"cores = 2, lookup = "ht-cg""#),
        workload: r#"rate_iops = 2000.0, requests = 4000, read_fraction = 0.6, footprint = "16MiB""#,
        final_flush: false,
    },
];

fn sim_config(c: &Case) -> String {
    let mut t = format!(
        "name = \"one\"\n[run]\nseed = 7\nwarmup_requests = 1000\nfinal_flush = {}\n\
         [workload]\n{}\n[cache]\n{}\n[devices]\ncache = {}\nbackend = {}\n",
        c.final_flush,
        split_inline(c.workload),
        split_inline(c.cache),
        c.cache_device,
        c.backend
    );
    if let Some(h) = c.host {
        t.push_str(&format!("[host]\n{}\n", split_inline(h)));
    }
    t
}

/// `a = 1, b = { x = 2, y = 3 }, c = [{ .. }]` as one `key = value` per line: splits at the
/// commas outside braces and brackets.
fn split_inline(s: &str) -> String {
    let (mut depth, mut out) = (0i32, String::new());
    for ch in s.chars() {
        match ch {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            _ => {}
        }
        if ch == ',' && depth == 0 {
            out.push('\n');
        } else {
            out.push(ch);
        }
    }
    out.lines().map(str::trim).collect::<Vec<_>>().join("\n")
}

fn hierarchy_config(c: &Case) -> String {
    let host = c
        .host
        .map_or(String::new(), |h| format!("host = {{ {h} }}\n"));
    format!(
        "name = \"one\"\n[run]\nseed = 7\n[hierarchy]\nwarmup_requests = 1000\nfinal_flush = {}\n\
         backend = {}\n[[hierarchy.clients]]\nname = \"c\"\nworkload = {{ synthetic = {{ {} }} }}\n\
         [[hierarchy.clients.levels]]\nname = \"l\"\ncache = {{ {} }}\ndevice = {}\n{host}",
        c.final_flush, c.backend, c.workload, c.cache, c.cache_device
    )
}

fn json_of(dir: &std::path::Path, file: &str, text: &str) -> Value {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    let out = tiercache(&["sim", path.to_str().unwrap(), "--json"]);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn one_level_hierarchy_is_sim() {
    let dir = tempfile::tempdir().unwrap();
    for c in CASES {
        let sim = json_of(dir.path(), "sim.toml", &sim_config(c));
        let hier = json_of(dir.path(), "hier.toml", &hierarchy_config(c));
        assert_eq!(sim["kind"], "sim", "{}", c.name);
        assert_eq!(hier["kind"], "hierarchy", "{}", c.name);
        let a = &sim["metrics"];
        let b = &hier["result"]["levels"][0]["metrics"];
        // The run measured something: an empty record would pass trivially.
        assert!(a["requests"].as_u64().unwrap() > 1000, "{}: {a}", c.name);
        let (ta, tb) = (a.to_string(), b.to_string());
        if ta != tb {
            let obj = a.as_object().unwrap();
            let diff: Vec<String> = obj
                .iter()
                .filter(|(k, v)| b.get(k.as_str()) != Some(v))
                .map(|(k, v)| format!("{k}: sim {v} hierarchy {}", b[k.as_str()]))
                .collect();
            panic!("{}: records differ:\n{}", c.name, diff.join("\n"));
        }
        // The hierarchy's own figures agree with it: every measured request reached the level.
        assert_eq!(
            hier["result"]["requests"], a["requests"],
            "{}: client requests",
            c.name
        );
        assert_eq!(hier["result"]["levels"][0]["requests_in"], a["requests"]);
    }
}

/// `tiercache hierarchy` is an alias of `sim`: the same record; and `sim`'s options a
/// hierarchy run does not read are refused, naming them, rather than ignored.
#[test]
fn hierarchy_is_an_alias_of_sim() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hier.toml");
    std::fs::write(&path, hierarchy_config(&CASES[2])).unwrap();
    let p = path.to_str().unwrap();
    let a = tiercache(&["sim", p, "--json"]).stdout;
    let b = tiercache(&["hierarchy", p, "--json"]).stdout;
    assert!(!a.is_empty());
    assert_eq!(a, b);
    for opt in [
        ["--timeline", "t.csv"].as_slice(),
        ["--skip-bad"].as_slice(),
    ] {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_tiercache"))
            .args(["sim", p])
            .args(opt)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(opt[0]), "{err}");
    }
}

/// `hierarchy.warmup_ns`, `duration_ns` and `timeline_interval_ns` mean what `run.warmup_ns`,
/// `run.duration_ns` and `run.timeline_interval_ns` mean in a single-level run: a one-level
/// hierarchy with them gives `sim`'s metrics and `sim`'s timeline rows, for its level.
#[test]
fn hierarchy_warmup_duration_and_timeline_are_sims() {
    use tiercache_config::Document;
    let c = &CASES[2];
    // An endless workload: only the duration ends the run.
    let endless = c.workload.replace("requests = 5000, ", "");
    assert_ne!(endless, c.workload);
    let case = Case {
        workload: Box::leak(endless.into_boxed_str()),
        ..*c
    };
    let timing = "warmup_ns = \"500ms\"\nduration_ns = \"2s\"\ntimeline_interval_ns = \"100ms\"\n";
    let sim_text = sim_config(&case).replace("[run]\n", &format!("[run]\n{timing}"));
    let hier_text =
        hierarchy_config(&case).replace("[hierarchy]\n", &format!("[hierarchy]\n{timing}"));
    let sim_doc = Document::parse(&sim_text, "sim").unwrap();
    let e = tiercache_run::experiment::Experiment::from_document(
        "one",
        &sim_doc,
        std::path::Path::new("."),
    )
    .unwrap();
    let sim = tiercache_run::sim::run_experiment(&e).unwrap();
    let hier_doc = Document::parse(&hier_text, "hier").unwrap();
    let hier =
        tiercache_run::hierarchy::run_document(&hier_doc, std::path::Path::new(".")).unwrap();
    let level = &hier.levels[0];
    let m = &sim.record.metrics;
    // The window is the duration, after the warm-up time (not the warm-up requests alone).
    assert!(m.requests > 1000 && m.duration_ns >= 2_000_000_000, "{m:?}");
    assert_eq!(
        serde_json::to_value(level.metrics.as_ref().unwrap()).unwrap(),
        serde_json::to_value(m).unwrap()
    );
    // Rows from time 0 to the window's end, every 100 ms (idle intervals merged), the same.
    assert!(sim.timeline.len() >= 20, "{}", sim.timeline.len());
    assert_eq!(
        serde_json::to_value(&level.timeline).unwrap(),
        serde_json::to_value(&sim.timeline).unwrap()
    );
    // And the record carries it: `--json` writes each level's timeline.
    let dir = tempfile::tempdir().unwrap();
    let rec = json_of(dir.path(), "hier.toml", &hier_text);
    assert_eq!(
        rec["result"]["levels"][0]["timeline"],
        serde_json::to_value(&sim.timeline).unwrap()
    );
    assert!(
        rec["result"]["levels"][1].get("timeline").is_none(),
        "the backend has none"
    );
}
