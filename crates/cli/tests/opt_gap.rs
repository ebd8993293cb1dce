//! Every sweep design against the optimum (docs/design.md §9, §12): hit-ratio trace points carry
//! `metrics.opt` (OPT's miss ratio, the gap, the write-back bound and cost), Belady's own gap is
//! zero, no policy beats OPT or the bound, the tidy table has the columns, a timed point has
//! none, and the report shows the table or says why not.

use std::path::Path;
use std::process::Command;

fn tiercache(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(args)
        .output()
        .expect("run tiercache")
}

fn records(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .collect()
}

fn write_spec(dir: &Path, mode: &str) -> std::path::PathBuf {
    let trace = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/traces/msr-hm0-sample.csv"
    );
    std::fs::write(
        dir.join("base.toml"),
        format!(
            "[run]\nmode = '{mode}'\n[workload]\ntrace = '{trace}'\n[cache]\ncapacity = '64KiB'\nline_size = '4KiB'\n"
        ),
    )
    .unwrap();
    let spec = dir.join("sweep.toml");
    std::fs::write(
        &spec,
        r#"
name = "opt-gap"
base = "base.toml"

[[axis]]
name = "eviction"
key = "cache.eviction"
values = ["lru", "fifo", "belady"]

[[axis]]
name = "admission"
key = "cache.admission"
values = [{ policy = "all" }, { policy = "tinylfu" }]
labels = ["all", "tinylfu"]

[[workload]]
name = "hm0"
"#,
    )
    .unwrap();
    spec
}

#[test]
fn hit_ratio_trace_points_carry_their_gap_to_opt() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path(), "hit-ratio");
    let out = dir.path().join("out");
    let o = tiercache(&[
        "sweep",
        spec.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    // Belady with TinyLFU admission is refused (MIN caches every miss); the rest run.
    let recs = records(&out);
    let ok: Vec<_> = recs.iter().filter(|r| r["status"] == "ok").collect();
    assert_eq!(ok.len(), 5, "{err}");
    let failed: Vec<_> = recs.iter().filter(|r| r["status"] != "ok").collect();
    assert_eq!(failed.len(), 1);
    assert!(failed[0]["error"]
        .as_str()
        .unwrap()
        .contains("cache.admission"));
    let mut opt_ratios = Vec::new();
    for r in &ok {
        let m = &r["record"]["metrics"];
        let opt = &m["opt"];
        let miss = 1.0 - m["hit_ratio"].as_f64().unwrap();
        let opt_miss = opt["miss_ratio"].as_f64().expect("metrics.opt.miss_ratio");
        opt_ratios.push(opt_miss);
        let gap = opt["gap_miss_ratio"].as_f64().unwrap();
        assert!((gap - (miss - opt_miss)).abs() < 1e-12);
        assert!(gap >= -1e-12, "{}: misses less than OPT", r["name"]);
        let eviction = r["axes"]["eviction"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let admission = &r["record"]["config"]["cache"]["admission"]["policy"];
        if r["name"].as_str().unwrap().contains("belady") {
            assert!(gap.abs() < 1e-12, "belady's own gap: {gap}");
        }
        let wb = &opt["writeback"];
        if admission == "tinylfu" {
            // Not a schedule of the bound's model: said so, no numbers.
            assert!(wb.is_null(), "{eviction}");
            assert!(opt["writeback_note"]
                .as_str()
                .unwrap()
                .contains("admission"));
        } else {
            let (bound, cost) = (wb["bound"].as_f64().unwrap(), wb["cost"].as_f64().unwrap());
            assert!(
                bound > 0.0 && cost >= bound,
                "cost {cost} below bound {bound}"
            );
            assert_eq!(wb["read_cost"], 1.0);
            // The bound is the largest of the three, and on this trace at 16 lines the flow
            // (reads and dirty data competing for the same lines) is above the sum of minima.
            let minima = wb["sum_of_minima"].as_f64().unwrap();
            let flow = wb["joint_flow"]
                .as_f64()
                .expect("the flow within its limits");
            let aggregated = wb["joint_aggregated"].as_f64().unwrap();
            assert_eq!(bound, minima.max(flow).max(aggregated));
            assert!(
                flow > minima,
                "flow {flow} not above the sum of minima {minima}"
            );
            assert_eq!(wb["binds"], "joint-flow");
        }
    }
    // One OPT for the trace and size, whatever the design.
    assert!(
        opt_ratios.windows(2).all(|w| w[0] == w[1]),
        "{opt_ratios:?}"
    );
    // The tidy table has the columns.
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    for col in [
        "metrics.opt.miss_ratio",
        "metrics.opt.gap_miss_ratio",
        "metrics.opt.writeback.bound",
    ] {
        assert!(header.contains(col), "{col} not in {header}");
    }
    // The report shows the table.
    let html = dir.path().join("report.html");
    let o = tiercache(&[
        "report",
        out.to_str().unwrap(),
        "--out",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Gap to OPT") && page.contains("misses over OPT"));
    assert!(page.contains("cost over bound") && page.contains("joint-flow"));
}

#[test]
fn timed_points_have_no_optimum_and_the_report_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path(), "timed");
    let out = dir.path().join("out");
    tiercache(&[
        "sweep",
        spec.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-q",
        "--set",
        "workload.replay='fast'",
    ]);
    let recs = records(&out);
    let ok: Vec<_> = recs.iter().filter(|r| r["status"] == "ok").collect();
    assert!(!ok.is_empty());
    for r in ok {
        assert!(r["record"]["metrics"]["opt"].is_null(), "{}", r["name"]);
    }
    let html = dir.path().join("report.html");
    let o = tiercache(&[
        "report",
        out.to_str().unwrap(),
        "--out",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("the gap to OPT is computed for hit-ratio runs of a trace"));
}
