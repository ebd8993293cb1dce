//! The report in a real headless browser (Debian's chromium): every plot rendered with a
//! non-empty box, no console errors, and a screenshot kept under the target directory. Skipped,
//! with the reason printed, only when chromium is not installed, and never on CI (`CI` set:
//! the test fails instead).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tiercache_report::{build_report, ReportOptions, ResultSet};

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    tiercache_testsupport::find_on_path(&["chromium", "chromium-browser", "google-chrome"])
}

/// Runs headless chromium with `extra` arguments on `page`; returns (stdout, stderr).
fn run_chromium(bin: &Path, profile: &Path, page: &Path, extra: &[String]) -> (String, String) {
    let out_path = profile.with_extension("stdout");
    let err_path = profile.with_extension("stderr");
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--disable-extensions",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--enable-logging=stderr", "--v=0"])
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("start chromium");
    // A hung browser must not hang the suite: give up after two minutes.
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (
        std::fs::read_to_string(out_path).unwrap_or_default(),
        std::fs::read_to_string(err_path).unwrap_or_default(),
    )
}

/// Console messages and uncaught errors chromium logged for the page.
fn console_errors(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_report_renders_in_headless_chromium() {
    let bin = chromium();
    let problem = bin
        .is_none()
        .then(|| "not on PATH, and CHROMIUM names no browser".to_string());
    if !tiercache_testsupport::require("chromium", "chromium", problem) {
        return;
    }
    let bin = bin.unwrap();
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-browser");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let jsonl = common::run_fake_sweep(&root.join("sweep"));
    // Hierarchy records beside the sweep's: their levels' plots are checked too.
    let hier = common::write_fake_hierarchies(&root.join("hierarchy.jsonl"));
    let set = ResultSet::load(&[&jsonl, &hier]).unwrap();
    assert_eq!(
        set.runs
            .iter()
            .filter(|r| r.record["kind"] == "hierarchy")
            .count(),
        12
    );
    let report = build_report(
        &set,
        &ReportOptions {
            title: "browser check".into(),
            ..Default::default()
        },
    );
    let html = root.join("report.html");
    report.write(&html, &root.join("plots")).unwrap();

    // The DOM after load: the page's own check counts rendered plots and empty ones.
    let (dom, stderr) = run_chromium(
        &bin,
        &root.join("profile-dom"),
        &html,
        &["--dump-dom".into()],
    );
    assert!(
        dom.contains("<svg"),
        "no DOM dumped; chromium stderr:\n{stderr}"
    );
    assert!(
        dom.contains(&format!("data-plots=\"{}\"", report.plots.len())),
        "the page did not see all {} plots; chromium stderr:\n{stderr}",
        report.plots.len()
    );
    assert!(
        dom.contains("data-empty-plots=\"0\""),
        "some plot rendered empty: {}",
        &dom[..dom.len().min(2000)]
    );
    // No title, label or legend entry is cut off: every text lies inside its plot.
    assert!(
        dom.contains("data-overflowing-text=\"0\""),
        "text outside its plot: {}",
        dom.split("id=\"plot-check\"")
            .nth(1)
            .map_or("", |t| &t[..t.len().min(3000)])
    );
    let errors = console_errors(&stderr);
    assert!(errors.is_empty(), "console errors: {errors:#?}");

    // The check itself works: a page with an empty plot and a script error is caught.
    let bad = root.join("bad.html");
    std::fs::write(
        &bad,
        report
            .html
            .replacen("<svg ", "<svg style=\"display:none\" ", 1)
            // A label drawn past the left edge of every plot.
            .replacen(
                "</svg>",
                "<text x=\"-400\" y=\"20\">cut off</text></svg>",
                report.plots.len(),
            )
            .replace("</body>", "<script>undefinedCall();</script></body>"),
    )
    .unwrap();
    let (bad_dom, bad_err) = run_chromium(
        &bin,
        &root.join("profile-bad"),
        &bad,
        &["--dump-dom".into()],
    );
    assert!(
        bad_dom.contains("data-empty-plots=\"1\""),
        "a hidden plot must count as empty"
    );
    assert!(
        !bad_dom.contains("data-overflowing-text=\"0\""),
        "text drawn outside its plot was not caught"
    );
    let errors = console_errors(&bad_err);
    assert!(
        errors.iter().any(|e| e.contains("Empty plots")),
        "console.error not seen: {bad_err}"
    );
    assert!(
        errors.iter().any(|e| e.contains("undefinedCall")),
        "uncaught error not seen: {bad_err}"
    );

    // A screenshot, kept as a test artifact.
    let shot = root.join("report.png");
    let (_, shot_err) = run_chromium(
        &bin,
        &root.join("profile-shot"),
        &html,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1400,3200".into(),
            "--hide-scrollbars".into(),
        ],
    );
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 20_000,
        "screenshot missing or blank ({size} bytes); chromium stderr:\n{shot_err}"
    );
    println!(
        "report screenshot: {} ({size} bytes); report: {}",
        shot.display(),
        html.display()
    );
}
