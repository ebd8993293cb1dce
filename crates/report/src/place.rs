//! Where a report of some inputs goes and what it is called, when not told.

use std::path::PathBuf;

/// A report's page, SVG directory, title and description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PagePlace {
    /// The HTML file.
    pub out: PathBuf,
    /// The directory of the SVG files.
    pub svg_dir: PathBuf,
    /// Page title.
    pub title: String,
    /// The sweep's description, when the inputs are a sweep's.
    pub description: Option<String>,
}

/// The place of a report of `inputs` (result files or sweep output directories; at least
/// one): `out`, `svg_dir` and `title` when given, otherwise `report.html` in the first input's
/// directory, SVG files in `<out stem>-plots` beside it, and a title naming the sweep (its
/// `sweep.json` in that directory) or the directory.
pub fn page_place(
    inputs: &[PathBuf],
    out: Option<PathBuf>,
    svg_dir: Option<PathBuf>,
    title: Option<String>,
) -> PagePlace {
    let first = inputs.first().cloned().unwrap_or_default();
    // The first input's directory: a sweep's output directory names the sweep and says what
    // it is about, and the page goes there by default.
    let dir = if first.is_dir() {
        first
    } else {
        first.parent().map(PathBuf::from).unwrap_or_default()
    };
    let about: Option<serde_json::Value> =
        std::fs::read_to_string(dir.join(tiercache_sweep::SWEEP_JSON))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
    let sweep_name = about
        .as_ref()
        .and_then(|a| a["name"].as_str())
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    let description = about
        .as_ref()
        .and_then(|a| a["description"].as_str())
        .map(str::to_string);
    let title = title
        .or(sweep_name.map(|n| format!("tiercache report: {n}")))
        .unwrap_or_else(|| match dir.file_name() {
            Some(n) => format!("tiercache report: {}", n.to_string_lossy()),
            None => "tiercache report".into(),
        });
    let out = out.unwrap_or_else(|| dir.join("report.html"));
    let svg_dir = svg_dir.unwrap_or_else(|| {
        let stem = out
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "report".into());
        out.with_file_name(format!("{stem}-plots"))
    });
    PagePlace {
        out,
        svg_dir,
        title,
        description,
    }
}
