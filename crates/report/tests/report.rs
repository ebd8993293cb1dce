//! Reports from a fake sweep: the summary against a brute-force reference, every expected plot
//! present, well-formed and non-empty, no external resources, SVG files, custom metrics, bare
//! records, and heat-map cells.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use tiercache_report::{build_report, page_place, Better, MetricSpec, ReportOptions, ResultSet};
use tiercache_sweep::{read_results, Status};

fn assert_well_formed_plot(svg: &str) {
    let doc =
        roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("malformed SVG: {e}\n{svg}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(root.attribute("class"), Some("plot"));
    let marks = root
        .descendants()
        .filter(|n| ["rect", "path", "circle", "line"].contains(&n.tag_name().name()))
        .count();
    assert!(
        marks >= 5,
        "plot {} has only {marks} marks",
        root.attribute("id").unwrap_or("?")
    );
    assert!(
        root.descendants().any(|n| n.tag_name().name() == "text"),
        "plot has no text"
    );
}

#[test]
fn summary_matches_a_brute_force_reference() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = common::run_fake_sweep(dir.path());
    let set = ResultSet::load(&[&jsonl]).unwrap();
    assert_eq!(set.runs.len(), 2 * 18 * 2);
    let report = build_report(&set, &ReportOptions::default());
    // Reference: means over repetitions per (workload, design), straight from the results file.
    let lines = read_results(&jsonl).unwrap().lines;
    for m in MetricSpec::defaults() {
        for w in ["read-heavy", "write-heavy"] {
            let mut sums: BTreeMap<String, (f64, usize, bool)> = BTreeMap::new();
            for l in lines
                .iter()
                .filter(|l| l.workload == w && l.status == Status::Ok)
            {
                let v = tiercache_report::lookup_f64(&l.record, &m.path).unwrap();
                let e = sums.entry(l.name.clone()).or_insert((0.0, 0, l.default));
                e.0 += v;
                e.1 += 1;
            }
            let means: Vec<(String, f64, bool)> = sums
                .into_iter()
                .map(|(k, (s, n, d))| (k, s / n as f64, d))
                .collect();
            let key = |x: f64| if m.better == Better::Max { -x } else { x };
            let best = means
                .iter()
                .min_by(|a, b| key(a.1).total_cmp(&key(b.1)))
                .unwrap();
            let worst = means
                .iter()
                .max_by(|a, b| key(a.1).total_cmp(&key(b.1)))
                .unwrap();
            let default = means.iter().find(|d| d.2).unwrap();
            let row = report
                .summary
                .iter()
                .find(|r| r.workload == w && r.metric == m)
                .unwrap();
            assert_eq!(
                row.designs,
                18 - usize::from(w == "write-heavy"),
                "a design whose runs all failed has no value"
            );
            assert!(
                (row.best.1 - best.1).abs() < 1e-9 && (row.worst.1 - worst.1).abs() < 1e-9,
                "{w} {}",
                m.label
            );
            assert_eq!(
                row.default.0,
                "line_size=4KiB,promotion=always,lookup=ht-fg"
            );
            assert!((row.default.1 - default.1).abs() < 1e-9);
            let change = row.change_pct(default.1).unwrap();
            assert!((change - (best.1 - default.1) / default.1 * 100.0).abs() < 1e-9);
            assert!(row.factor(worst.1).unwrap() >= 1.0 && row.factor(default.1).unwrap() >= 1.0);
        }
    }
    let iops = report
        .summary
        .iter()
        .find(|r| r.workload == "read-heavy" && r.metric.path == "metrics.iops")
        .unwrap();
    assert_eq!(iops.best.0, "line_size=4KiB,promotion=nhit-4,lookup=ht-fg");
    assert!(report.html.contains(&iops.best.0));
    // Bars name designs by the labels of the varying axes only.
    let bars = report
        .plots
        .iter()
        .find(|p| p.id.contains("read-heavy-iops-bars"))
        .unwrap();
    assert!(bars.svg.contains(">4KiB · nhit-4 · ht-fg<"), "{}", bars.svg);
    assert!(report
        .html
        .contains("named by their <b>line_size · promotion · lookup</b>"));
}

/// What `tiercache report` does with the library, its printing and checks aside: the page of
/// `inputs` (default options but `max_series`) where the command puts it; returns its path.
fn write_page(
    inputs: &[PathBuf],
    out: Option<PathBuf>,
    title: Option<String>,
    max_series: usize,
) -> PathBuf {
    let set = ResultSet::load(inputs).unwrap();
    let place = page_place(inputs, out, None, title);
    let opts = ReportOptions {
        title: place.title,
        description: place.description,
        max_series,
        ..Default::default()
    };
    build_report(&set, &opts)
        .write(&place.out, &place.svg_dir)
        .unwrap();
    place.out
}

#[test]
fn every_plot_is_present_well_formed_and_self_contained() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = common::run_fake_sweep(dir.path());
    let out = dir.path().join("out/report.html");
    let page = write_page(
        &[dir.path().to_path_buf()],
        Some(out.clone()),
        Some("fake <sweep> & co".into()),
        4,
    );
    assert_eq!(page, out);
    let html = std::fs::read_to_string(&out).unwrap();
    let set = ResultSet::load(&[&jsonl]).unwrap();
    let report = build_report(
        &set,
        &ReportOptions {
            max_series: 4,
            ..Default::default()
        },
    );
    // Per workload: 4 bar charts, 1 CDF, 4 heat maps (line_size x promotion), 5 timelines.
    assert_eq!(
        report.plots.len(),
        2 * (4 + 1 + 4 + 5),
        "{:?}",
        report.plots.iter().map(|p| &p.id).collect::<Vec<_>>()
    );
    for kind in [
        "bars",
        "latency-cdf",
        "heat",
        "iops-timeline",
        "dirty-lines-timeline",
        "backend-queue-depth-timeline",
    ] {
        assert!(
            report.plots.iter().any(|p| p.id.contains(kind)),
            "no {kind} plot"
        );
    }
    let svg_files: Vec<_> = std::fs::read_dir(dir.path().join("out/report-plots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(svg_files.len(), report.plots.len());
    for p in &report.plots {
        assert_well_formed_plot(&p.svg);
        assert!(
            html.contains(&format!("id=\"{}\"", p.id)),
            "plot {} not inlined",
            p.id
        );
        let file =
            std::fs::read_to_string(dir.path().join(format!("out/report-plots/{}.svg", p.id)))
                .unwrap();
        assert_well_formed_plot(&file);
    }
    // Self-contained: nothing fetched from anywhere (the SVG namespace is a name, not a fetch).
    let lower = html.to_lowercase();
    for bad in [
        "src=",
        "<link",
        "@import",
        "url(",
        "href=\"http",
        "href='http",
    ] {
        assert!(
            !lower.contains(bad),
            "report references an external resource ({bad})"
        );
    }
    assert!(
        html.contains("fake &lt;sweep&gt; &amp; co"),
        "the title is escaped"
    );
    assert!(
        html.contains("queue overflow (on purpose)"),
        "failed runs are listed with their errors"
    );
    assert_eq!(html.matches("<svg").count(), report.plots.len());
}

#[test]
fn custom_metrics_heat_axes_and_cells() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = common::run_fake_sweep(dir.path());
    let set = ResultSet::load(&[&jsonl]).unwrap();
    let opts = ReportOptions {
        metrics: vec![
            "metrics.cache_bytes_written:min:cache writes"
                .parse()
                .unwrap(),
            "metrics.no_such_metric:max".parse().unwrap(),
        ],
        heat_axes: Some(("lookup".into(), "promotion".into())),
        ..Default::default()
    };
    let report = build_report(&set, &opts);
    assert!(
        report
            .summary
            .iter()
            .all(|r| r.metric.label == "cache writes"),
        "absent metrics are left out"
    );
    let heat: Vec<_> = report
        .plots
        .iter()
        .filter(|p| p.id.contains("heat"))
        .collect();
    assert_eq!(heat.len(), 2);
    let svg = &heat[0].svg;
    assert!(svg.contains("by lookup × promotion"));
    // Each cell is the best (min) over line sizes: cache writes = line*1000/n, best at 4KiB.
    assert!(svg.contains("lookup=lt, promotion=nhit-2: 2000<"), "{svg}");
    assert!(
        svg.contains("lookup=ht-fg, promotion=always: 4000<"),
        "{svg}"
    );
    for bad in ["metrics.x", "metrics.x:best", ":max", "a..b:min"] {
        assert!(bad.parse::<MetricSpec>().is_err(), "{bad}");
    }
}

#[test]
fn bare_run_records_and_large_sweeps_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.jsonl");
    let mut text = String::new();
    for i in 0..60 {
        let rec = serde_json::json!({ "tool": "tiercache", "kind": "sim", "name": format!("design-{i:02}"),
            "metrics": { "iops": 1000.0 + i as f64 * 10.0, "hit_ratio": 0.5,
                         "latency_us": { "all": { "p50": 10.0, "p90": 20.0, "p99": 50.0 + i as f64, "p999": 80.0, "p9999": 100.0, "max": 200.0 } } } });
        text += &format!("{rec}\n");
    }
    text += "{ truncated\n";
    std::fs::write(&path, text).unwrap();
    let set = ResultSet::load(&[&path]).unwrap();
    assert_eq!((set.runs.len(), set.malformed.len()), (60, 1));
    let report = build_report(
        &set,
        &ReportOptions {
            max_bars: 10,
            ..Default::default()
        },
    );
    let iops = report
        .summary
        .iter()
        .find(|r| r.metric.path == "metrics.iops")
        .unwrap();
    assert_eq!(
        (
            iops.best.0.as_str(),
            iops.default.0.as_str(),
            iops.worst.0.as_str()
        ),
        ("design-59", "design-00", "design-00")
    );
    let bars = report
        .plots
        .iter()
        .find(|p| p.id.contains("iops-bars"))
        .unwrap();
    let doc = roxmltree::Document::parse(&bars.svg).unwrap();
    let bar_groups = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "g")
        .count();
    assert_eq!(
        bar_groups, 10,
        "a long list is cut to the best designs plus default and worst"
    );
    assert!(bars.svg.contains("design-00"));
    // hit ratio is the same everywhere: reported as a 60-way tie; no heat maps without axes.
    let hit = report
        .summary
        .iter()
        .find(|r| r.metric.path == "metrics.hit_ratio")
        .unwrap();
    assert_eq!((hit.ties, iops.ties), (59, 0));
    assert!(report.html.contains("(+59 within 0.1%)"));
    assert!(!report.plots.iter().any(|p| p.id.contains("heat")));
}

#[test]
fn a_sweep_whose_runs_all_failed_still_gets_a_page_and_no_input_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let pts =
        tiercache_sweep::SweepSpec::parse(common::SPEC, "f.toml", std::path::Path::new("."), "f")
            .unwrap()
            .expand()
            .unwrap();
    let opts = tiercache_sweep::RunOptions {
        progress: false,
        ..tiercache_sweep::RunOptions::new(dir.path())
    };
    let s = tiercache_sweep::run_points(
        &pts,
        &|_: &tiercache_sweep::PointSpec| Err("no device".to_string()),
        &opts,
    )
    .unwrap();
    let set = ResultSet::load(&[&s.results_jsonl]).unwrap();
    let report = build_report(&set, &ReportOptions::default());
    assert!(report.plots.is_empty() && report.summary.is_empty());
    assert!(report.html.contains("Failed runs (72)") && report.html.contains("no device"));
    // An empty input is refused by the command: `report_cmd`'s tests in `crates/cli`.
}

/// A sweep's hierarchy points (docs/design.md §9: the record of each point is a hierarchy
/// record) and the same records from `tiercache hierarchy --json` are read alike: one run per
/// cache level, whose `metrics` are the level's own (the backend row has none), in a workload
/// per level, with the level's hierarchy figures under `level`.
#[test]
fn hierarchy_records_become_one_run_per_level() {
    let dir = tempfile::tempdir().unwrap();
    let hier = common::write_fake_hierarchies(&dir.path().join("hierarchy.jsonl"));
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&hier)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let spec = tiercache_sweep::SweepSpec::parse(
        "[base]\nn = 0\n[[axis]]\nkey = 'n'\nvalues = [0, 1, 2, 3, 4, 5]\n",
        "h.toml",
        std::path::Path::new("."),
        "h",
    )
    .unwrap();
    let points = spec.expand().unwrap();
    let backend = |p: &tiercache_sweep::PointSpec| -> Result<serde_json::Value, String> {
        Ok(records[p.index].clone())
    };
    let sweep_dir = dir.path().join("sweep");
    let opts = tiercache_sweep::RunOptions {
        progress: false,
        ..tiercache_sweep::RunOptions::new(&sweep_dir)
    };
    tiercache_sweep::run_points(&points, &backend, &opts).unwrap();
    let bare = ResultSet::load(&[&hier]).unwrap();
    let swept = ResultSet::load(&[&sweep_dir]).unwrap();
    for set in [&bare, &swept] {
        assert!(set.malformed.is_empty());
        assert_eq!(set.runs.len(), 6 * 2, "two cache levels per record");
        assert!(set.runs.iter().all(|r| r.ok));
        let workloads = set.workloads();
        assert_eq!(workloads.len(), 2, "{workloads:?}");
        assert!(workloads[0].ends_with(" · host.client") && workloads[1].ends_with(" · array"));
        for (run, (rec, level)) in set
            .runs
            .iter()
            .zip(records.iter().flat_map(|r| [(r, 0), (r, 1)]))
        {
            let l = &rec["result"]["levels"][level];
            assert_eq!(run.record["metrics"], l["metrics"]);
            assert_eq!(run.record["level"]["hit_fraction"], l["hit_fraction"]);
            assert!(run.record["level"].get("metrics").is_none());
            assert_eq!(run.record["name"], rec["name"]);
        }
    }
    // The same records, per level, whichever way they came.
    let recs = |set: &ResultSet| {
        set.runs
            .iter()
            .map(|r| r.record.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(recs(&bare), recs(&swept));
    // Drawn as single caches are: per level, bars of the default metrics and a summary whose
    // best array hit ratio is a demoting design's.
    let report = build_report(&bare, &ReportOptions::default());
    let best = report
        .summary
        .iter()
        .find(|r| r.workload == "all · array" && r.metric.path == "metrics.hit_ratio")
        .expect("a summary row for the array's hit ratio");
    assert!(best.best.0.ends_with("LRU-MRU-demote"), "{:?}", best.best);
    assert!(report
        .summary
        .iter()
        .any(|r| r.workload == "all · host.client" && r.metric.path == "metrics.iops"));
    for p in &report.plots {
        assert_well_formed_plot(&p.svg);
    }
}

/// A hierarchy record whose levels carry no `metrics` (an older tiercache's) is a failed run
/// saying so, not an empty report that looks complete.
#[test]
fn a_hierarchy_record_without_level_metrics_is_a_failure_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.jsonl");
    std::fs::write(
        &path,
        r#"{"kind":"hierarchy","name":"old","result":{"levels":[{"name":"array","hit_fraction":0.5}]}}"#,
    )
    .unwrap();
    let set = ResultSet::load(&[&path]).unwrap();
    assert_eq!(set.runs.len(), 1);
    assert!(!set.runs[0].ok);
    assert!(set.runs[0]
        .error
        .as_deref()
        .unwrap()
        .contains("per-level `metrics`"));
}
