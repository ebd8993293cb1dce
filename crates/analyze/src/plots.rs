//! SVG plots of an analysis, files a person opens in a browser: the miss-ratio curves, TRD
//! against URD, IOPS per interval with bursts, and the working set over time.

use crate::Analysis;
use std::io;
use std::path::{Path, PathBuf};
use tiercache_plot::{line_chart, Scale, Series};

fn series(name: &str, points: impl IntoIterator<Item = (f64, f64)>) -> Series {
    Series {
        name: name.to_string(),
        points: points.into_iter().collect(),
    }
}

/// The plots of `a` as (file name, SVG text). A sampled analysis has no exact curves, reuse
/// distributions or working sets: their series and plots are left out.
pub fn render(a: &Analysis) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let mib = |lines: u64| (lines * a.line_size) as f64 / (1 << 20) as f64;
    let exact = |name: &str, g: fn(&crate::CurvePoint) -> Option<f64>| {
        series(
            name,
            a.curve
                .iter()
                .filter_map(|p| g(p).map(|m| (mib(p.lines), m))),
        )
    };
    let mut mrc = Vec::new();
    if a.exact {
        // A series of no points (no reads, say) is left out, not drawn as zero.
        let any = |g: fn(&crate::CurvePoint) -> Option<f64>| a.curve.iter().any(|p| g(p).is_some());
        for (name, g) in [
            (
                "LRU exact, all",
                (|p| p.miss_ratio) as fn(&crate::CurvePoint) -> Option<f64>,
            ),
            ("LRU exact, reads", |p| p.read_miss_ratio),
            ("LRU exact, writes", |p| p.write_miss_ratio),
        ] {
            if any(g) {
                mrc.push(exact(name, g));
            }
        }
    }
    if a.curve.iter().any(|p| p.opt_miss_ratio.is_some()) {
        mrc.push(exact("OPT (Belady), all", |p| p.opt_miss_ratio));
    }
    if a.curve.iter().any(|p| p.shards_miss_ratio.is_some()) {
        mrc.push(series(
            "LRU SHARDS",
            a.curve
                .iter()
                .filter_map(|p| p.shards_miss_ratio.map(|m| (mib(p.lines), m))),
        ));
    }
    if let Some(m) = &a.minisim {
        for c in &m.curves {
            mrc.push(series(
                &format!("{} (mini-sim, {:.2}%)", c.policy, m.rate * 100.0),
                c.points.iter().map(|&(l, r)| (mib(l), r)),
            ));
        }
    }
    out.push((
        "mrc.svg",
        line_chart(
            "mrc",
            "Miss-ratio curves",
            "cache size (MiB)",
            "miss ratio",
            &mrc,
            Scale::Log,
            Scale::Linear,
        ),
    ));
    if let Some(cdf) = &a.reuse_cdf {
        let reuse = [
            series(
                "TRD (all reuses)",
                cdf.iter().map(|&(d, t, _)| (d as f64, t)),
            ),
            series(
                "URD (reuses read later)",
                cdf.iter().map(|&(d, _, u)| (d as f64, u)),
            ),
        ];
        out.push((
            "reuse_cdf.svg",
            line_chart(
                "reuse",
                "Reuse distances: traditional vs useful",
                "reuse distance (lines)",
                "share of reuses ≤ distance",
                &reuse,
                Scale::Log,
                Scale::Linear,
            ),
        ));
    }
    let c = &a.characterisation;
    let secs = |r: &crate::characterise::IntervalRow| r.start_ns as f64 / 1e9;
    let iops = [
        series("IOPS", c.intervals.iter().map(|r| (secs(r), r.iops))),
        series(
            &format!("burst threshold ({}× median)", c.bursts.factor),
            c.intervals
                .iter()
                .map(|r| (secs(r), c.bursts.threshold_iops)),
        ),
    ];
    out.push((
        "iops.svg",
        line_chart(
            "iops",
            "IOPS per interval",
            "trace time (s)",
            "requests per second",
            &iops,
            Scale::Linear,
            Scale::Linear,
        ),
    ));
    if c.intervals.iter().any(|r| r.working_set_lines.is_none()) {
        return out;
    }
    let ws = [
        series(
            "working set of the interval",
            c.intervals
                .iter()
                .filter_map(|r| Some((secs(r), mib(r.working_set_lines?)))),
        ),
        series(
            "footprint so far",
            c.intervals
                .iter()
                .filter_map(|r| Some((secs(r), mib(r.footprint_lines?)))),
        ),
    ];
    out.push((
        "working_set.svg",
        line_chart(
            "ws",
            "Working set over time",
            "trace time (s)",
            "MiB",
            &ws,
            Scale::Linear,
            Scale::Linear,
        ),
    ));
    out
}

/// Writes the plots into `dir` (created if needed); returns the files.
pub fn write(a: &Analysis, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    render(a)
        .into_iter()
        .map(|(name, svg)| {
            let p = dir.join(name);
            std::fs::write(&p, svg)?;
            Ok(p)
        })
        .collect()
}
