//! The user guide (`docs/guide`, an mdBook) is tested as a user would follow it: every page's
//! command blocks marked `tested` run in order, in one shell per page, against the built
//! `tiercache` (on `PATH`), in a scratch directory that holds the repository's `examples/`,
//! `fixtures/` and `experiments/` as a checkout does; a block failing fails its page. Every
//! `sh` block is either `tested` or says `untested` (listed when the tests run); `python
//! tested` blocks are run by the Python package's tests (`crates/python/tests/test_guide.py`),
//! against the installed wheel. The book
//! builds with mdbook, and every link of the built HTML (and of the README into the guide)
//! resolves, fragments included.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn guide_src() -> PathBuf {
    repo().join("docs/guide/src")
}

/// A fenced block: its info string and its text.
struct Block {
    info: String,
    text: String,
    line: usize,
}

fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize, Vec<&str>)> = None;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("```") {
            match open.take() {
                None => open = Some((rest.trim().to_string(), i + 1, Vec::new())),
                Some((info, at, body)) => out.push(Block {
                    info,
                    text: body.join("\n"),
                    line: at,
                }),
            }
        } else if let Some((_, _, body)) = &mut open {
            body.push(line);
        }
    }
    out
}

fn is_shell(info: &str) -> bool {
    matches!(
        info.split_whitespace().next(),
        Some("sh" | "bash" | "shell" | "console")
    )
}

fn words(info: &str) -> Vec<&str> {
    info.split_whitespace().collect()
}

/// The pages (file names under docs/guide/src) with tested blocks.
fn tested_pages() -> BTreeSet<String> {
    let mut pages = BTreeSet::new();
    for e in std::fs::read_dir(guide_src()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            let text = std::fs::read_to_string(&p).unwrap();
            if blocks(&text)
                .iter()
                .any(|b| is_shell(&b.info) && words(&b.info).contains(&"tested"))
            {
                pages.insert(p.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
    }
    pages
}

/// Runs the tested blocks of `page` in order, in one shell.
fn run_page(page: &str) {
    let path = guide_src().join(page);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut script = String::from(
        "set -euo pipefail\n\
         # Servers a page starts in the background are stopped when it ends, pass or fail.\n\
         trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n",
    );
    let mut n = 0;
    for b in blocks(&text) {
        let w = words(&b.info);
        if !is_shell(&b.info) || !w.contains(&"tested") {
            continue;
        }
        for need in w.iter().filter_map(|x| x.strip_prefix("needs=")) {
            let can = match need {
                "fuse" => tiercache_testsupport::fuse(),
                tool => tiercache_testsupport::tool(tool),
            };
            if !can {
                return;
            }
        }
        script += &format!("echo '>>> {page}:{}' >&2\n{}\n", b.line, b.text);
        n += 1;
    }
    assert!(n > 0, "{page}: no tested block");
    let work = tempfile::tempdir().unwrap();
    for d in ["examples", "fixtures", "experiments"] {
        std::os::unix::fs::symlink(repo().join(d).canonicalize().unwrap(), work.path().join(d))
            .unwrap();
    }
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_tiercache"),
        bin.path().join("tiercache"),
    )
    .unwrap();
    let path_var = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // `timeout` bounds a page that hangs (a server never answering): the test fails, it does
    // not stall the suite.
    let o = Command::new("timeout")
        .args(["--kill-after=5", "300", "bash", "-c", &script])
        .current_dir(work.path())
        .env("PATH", path_var)
        // Pages may install completions and man pages under ~: the scratch directory.
        .env("HOME", work.path())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{page}: a tested block failed ({}); the failing block is the last one named:\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

macro_rules! pages {
    ($($name:ident => $page:literal),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                run_page($page);
            }
        )*

        /// Every page with tested blocks has its test here, and every test its page.
        #[test]
        fn every_page_with_tested_blocks_is_run() {
            let listed: BTreeSet<String> = [$($page),*].iter().map(|s| s.to_string()).collect();
            assert_eq!(listed, tested_pages());
        }
    };
}

pages! {
    install => "install.md",
    first_simulation => "first-simulation.md",
    traces => "traces.md",
    sizing => "sizing.md",
    design_space => "design-space.md",
    vm_disk => "vm-disk.md",
    operating => "operating.md",
    exclusive_caching => "exclusive-caching.md",
    load_balancing => "load-balancing.md",
    slow_mount => "slow-mount.md",
    reproducing => "reproducing.md",
    seed_block_cache => "seed-block-cache.md",
    seed_exclusive => "seed-exclusive.md",
    seed_load_balancing => "seed-load-balancing.md",
    seed_file_level => "seed-file-level.md",
    seed_multi_tenant => "seed-multi-tenant.md",
    tls => "tls.md",
    degraded => "degraded.md",
    tenants => "tenants.md",
}

#[test]
fn every_shell_block_is_tested_or_says_why_not() {
    let mut untested = Vec::new();
    for e in std::fs::read_dir(guide_src()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        for b in blocks(&text) {
            let w = words(&b.info);
            if w.first() == Some(&"python") {
                // Run by the Python package's tests (crates/python/tests/test_guide.py).
                assert!(
                    w.contains(&"tested"),
                    "{}:{}: a python block must be `python tested`",
                    p.display(),
                    b.line
                );
                continue;
            }
            if !is_shell(&b.info) {
                continue;
            }
            let name = format!("{}:{}", p.file_name().unwrap().to_string_lossy(), b.line);
            assert!(
                w.contains(&"tested") || w.contains(&"untested"),
                "{name}: a shell block must be marked `tested` (it runs in tests/guide.rs) or `untested`"
            );
            if w.contains(&"untested") {
                untested.push(name);
            }
        }
    }
    eprintln!("guide blocks not run by the tests: {untested:?}");
}

/// Every `href`/`src` value in an HTML text.
fn links(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    for attr in ["href=\"", "src=\""] {
        let mut rest = html;
        while let Some(at) = rest.find(attr) {
            rest = &rest[at + attr.len()..];
            if let Some(end) = rest.find('"') {
                out.push(rest[..end].to_string());
                rest = &rest[end..];
            }
        }
    }
    out
}

fn has_id(html: &str, id: &str) -> bool {
    html.contains(&format!("id=\"{id}\""))
}

#[test]
fn the_guide_builds_and_every_link_resolves() {
    let problem = match Command::new("mdbook").arg("--version").output() {
        Ok(_) => None,
        Err(e) => Some(format!("`mdbook --version`: {e}")),
    };
    if !tiercache_testsupport::require("mdbook", "mdbook (cargo install)", problem) {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let o = Command::new("mdbook")
        .arg("build")
        .arg(repo().join("docs/guide"))
        .arg("-d")
        .arg(out.path())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "mdbook build: {log}");
    assert!(!log.contains("WARN"), "mdbook build warned: {log}");
    let mut checked = 0;
    let mut broken = Vec::new();
    let mut pages = vec![out.path().to_path_buf()];
    while let Some(dir) = pages.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                pages.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "html") {
                continue;
            }
            let html = std::fs::read_to_string(&p).unwrap();
            for link in links(&html) {
                if link.contains("://") || link.starts_with("mailto:") || link.starts_with("data:")
                {
                    continue;
                }
                let (file, frag) = link.split_once('#').unwrap_or((&link, ""));
                let file = file.split('?').next().unwrap();
                let target = if file.is_empty() {
                    p.clone()
                } else {
                    p.parent().unwrap().join(file)
                };
                checked += 1;
                if !target.exists() {
                    broken.push(format!("{}: {link}", p.display()));
                    continue;
                }
                if !frag.is_empty() && target.extension().is_some_and(|x| x == "html") {
                    let t = std::fs::read_to_string(&target).unwrap();
                    if !has_id(&t, frag) {
                        broken.push(format!("{}: {link} (no such anchor)", p.display()));
                    }
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links checked: is the book empty?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    // The README links into the guide's sources: each must exist.
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let mut into_guide = 0;
    for part in readme.split("](").skip(1) {
        let link = &part[..part.find(')').unwrap()];
        if link.contains("://") || link.starts_with('#') {
            continue;
        }
        let file = link.split('#').next().unwrap();
        assert!(
            repo().join(file).exists(),
            "README links to {link}, which does not exist"
        );
        into_guide += usize::from(file.starts_with("docs/guide/"));
    }
    assert!(
        into_guide >= 5,
        "the README links into the guide ({into_guide} links)"
    );
}
