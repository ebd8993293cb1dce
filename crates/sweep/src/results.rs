//! Result lines (`results.jsonl`) and their CSV flattening (`results.csv`).

use crate::SweepError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

/// Outcome of one point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The backend returned a record.
    Ok,
    /// The backend returned an error or panicked; `error` says why.
    Failed,
}

/// One line of `results.jsonl`: a point's identity, design, outcome and the backend's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultLine {
    /// Point id (stable across runs of the same spec).
    pub point: String,
    /// Sweep name.
    #[serde(default)]
    pub sweep: String,
    /// Design name (`line_size=4KiB,promotion=nhit-2`).
    pub name: String,
    /// Workload name.
    pub workload: String,
    /// Repetition, from 0.
    pub rep: u32,
    /// Seed the point ran with.
    #[serde(default)]
    pub seed: u64,
    /// Position in the expansion order.
    #[serde(default)]
    pub index: usize,
    /// True for the default design (the reference of margins in reports).
    #[serde(default)]
    pub default: bool,
    /// Swept keys and their values: `{ "cache.line_size": "4KiB", ... }`.
    #[serde(default)]
    pub axes: serde_json::Map<String, serde_json::Value>,
    /// `[axis name, value label]` pairs in axis order.
    #[serde(default)]
    pub labels: Vec<(String, String)>,
    /// Outcome.
    pub status: Status,
    /// Why the point failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Wall-clock seconds the backend took.
    #[serde(default)]
    pub elapsed_s: f64,
    /// The backend's result record (`null` when failed).
    #[serde(default)]
    pub record: serde_json::Value,
}

/// What was read from an existing `results.jsonl`.
#[derive(Debug, Clone, Default)]
pub struct ExistingResults {
    /// Every well-formed line, in file order.
    pub lines: Vec<ResultLine>,
    /// Lines that could not be parsed (for example cut short by a crash), by 1-based number.
    pub malformed: Vec<usize>,
    /// True when the file's last byte is not a newline (an interrupted write).
    pub missing_final_newline: bool,
}

impl ExistingResults {
    /// Ids of points that finished with status ok.
    pub fn ok_ids(&self) -> BTreeSet<&str> {
        self.lines
            .iter()
            .filter(|l| l.status == Status::Ok)
            .map(|l| l.point.as_str())
            .collect()
    }

    /// Ids of points that have any line (ok or failed).
    pub fn seen_ids(&self) -> BTreeSet<&str> {
        self.lines.iter().map(|l| l.point.as_str()).collect()
    }
}

/// Reads a `results.jsonl`; a missing file reads as empty. Malformed lines are reported, not
/// fatal: an interrupted run can leave a partial last line and must still be resumable.
pub fn read_results(path: &Path) -> Result<ExistingResults, SweepError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ExistingResults::default()),
        Err(source) => {
            return Err(SweepError::Io {
                path: path.into(),
                source,
            })
        }
    };
    let mut out = ExistingResults {
        missing_final_newline: !bytes.is_empty() && bytes.last() != Some(&b'\n'),
        ..Default::default()
    };
    for (n, line) in json_lines(&bytes) {
        match line.and_then(|l| serde_json::from_str::<ResultLine>(l).ok()) {
            Some(r) => out.lines.push(r),
            None => out.malformed.push(n),
        }
    }
    Ok(out)
}

/// The current outcome of each run, in expansion order: per point id the latest line, an ok one
/// winning over a later failure; then, per (workload, design name, repetition), only the point
/// whose last line comes latest in the file. The second rule keeps results of an edited spec, a
/// different `--set` or `--ci` run (other point ids for the same design) from being averaged
/// with the new ones: the most recent run of a design supersedes older ones.
pub fn latest_per_point(lines: &[ResultLine]) -> Vec<&ResultLine> {
    let mut by_id: BTreeMap<&str, (&ResultLine, usize)> = BTreeMap::new();
    for (pos, l) in lines.iter().enumerate() {
        match by_id.get_mut(l.point.as_str()) {
            Some((prev, last)) => {
                *last = pos;
                if !(prev.status == Status::Ok && l.status != Status::Ok) {
                    *prev = l;
                }
            }
            None => {
                by_id.insert(&l.point, (l, pos));
            }
        }
    }
    let mut by_run: BTreeMap<(&str, &str, u32), (&ResultLine, usize)> = BTreeMap::new();
    for (l, last) in by_id.into_values() {
        let key = (l.workload.as_str(), l.name.as_str(), l.rep);
        match by_run.get(&key) {
            Some((_, other)) if *other > last => {}
            _ => {
                by_run.insert(key, (l, last));
            }
        }
    }
    let mut v: Vec<&ResultLine> = by_run.into_values().map(|(l, _)| l).collect();
    v.sort_by_key(|l| (l.index, l.rep));
    v
}

/// Adds every scalar leaf under `v` to `out` by dotted path. An array of objects that each have
/// a string `name` (a hierarchy's levels and clients, docs/design.md §9) is read as a table by
/// that name (`result.levels.array.hit_fraction`); other arrays are skipped: timelines and CDFs
/// do not fit a table cell.
pub fn flatten_scalars(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    let join = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        serde_json::Value::Array(a)
            if !a.is_empty() && a.iter().all(|x| x["name"].is_string() && x.is_object()) =>
        {
            for x in a {
                let p = join(x["name"].as_str().unwrap_or_default());
                // The name is in the column's path already.
                for (k, y) in x
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(k, _)| *k != "name")
                {
                    flatten_scalars(&format!("{p}.{k}"), y, out);
                }
            }
        }
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                flatten_scalars(&join(k), x, out);
            }
        }
        serde_json::Value::Array(_) | serde_json::Value::Null => {}
        serde_json::Value::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The sections of a result record whose scalars are table columns: a run record's `metrics`,
/// a hierarchy record's `result` (docs/design.md §9).
const MEASURED: [&str; 2] = ["metrics", "result"];

/// The tidy table of a sweep: one row per point (its latest result), columns `point`,
/// `workload`, `name`, `rep`, `seed`, `default`, `status`, one per axis (its label), one per
/// scalar measurement (`metrics.<dotted path>`, or `result.<dotted path>` for a hierarchy),
/// then `error` and `elapsed_s`. Missing cells are
/// `None`. Shared by the CSV and Parquet writers so both hold the same table.
pub fn tidy_table(lines: &[ResultLine]) -> (Vec<String>, Vec<Vec<Option<String>>>) {
    let rows = latest_per_point(lines);
    let mut axes: Vec<String> = Vec::new();
    for r in &rows {
        for (a, _) in &r.labels {
            if !axes.contains(a) {
                axes.push(a.clone());
            }
        }
    }
    let flat: Vec<BTreeMap<String, String>> = rows
        .iter()
        .map(|r| {
            let mut m = BTreeMap::new();
            // A run record measures under `metrics`, a hierarchy record under `result`
            // (docs/design.md §9).
            for section in MEASURED {
                if let Some(v) = r.record.get(section) {
                    flatten_scalars(section, v, &mut m);
                }
            }
            m
        })
        .collect();
    let metric_cols: BTreeSet<&String> = flat.iter().flat_map(|m| m.keys()).collect();
    let mut header: Vec<String> = [
        "point", "workload", "name", "rep", "seed", "default", "status",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    header.extend(axes.iter().cloned());
    header.extend(metric_cols.iter().map(|c| c.to_string()));
    header.extend(["error".to_string(), "elapsed_s".to_string()]);
    let mut table = Vec::with_capacity(rows.len());
    for (r, m) in rows.iter().zip(&flat) {
        let status = if r.status == Status::Ok {
            "ok"
        } else {
            "failed"
        };
        let mut cells = vec![
            Some(r.point.clone()),
            Some(r.workload.clone()),
            Some(r.name.clone()),
            Some(r.rep.to_string()),
            Some(r.seed.to_string()),
            Some(r.default.to_string()),
            Some(status.to_string()),
        ];
        for a in &axes {
            cells.push(
                r.labels
                    .iter()
                    .find(|(n, _)| n == a)
                    .map(|(_, l)| l.clone()),
            );
        }
        for c in &metric_cols {
            cells.push(m.get(*c).cloned());
        }
        cells.push(r.error.clone());
        cells.push(Some(format!("{:.3}", r.elapsed_s)));
        table.push(cells);
    }
    (header, table)
}

/// Writes a tidy CSV: one row per point (latest outcome), columns `point, workload, name, rep,
/// seed, default, status`, one column per axis (its value label), every scalar under the
/// record's `metrics` or `result` (dotted paths, union over all rows, sorted), then `error` and
/// `elapsed_s`.
pub fn write_csv(lines: &[ResultLine], out: &mut dyn Write) -> std::io::Result<()> {
    let (header, rows) = tidy_table(lines);
    let join = |cells: &mut dyn Iterator<Item = String>| {
        cells.map(|c| csv_field(&c)).collect::<Vec<_>>().join(",")
    };
    writeln!(out, "{}", join(&mut header.iter().cloned()))?;
    for row in rows {
        writeln!(
            out,
            "{}",
            join(&mut row.into_iter().map(Option::unwrap_or_default))
        )?;
    }
    Ok(())
}

/// The non-blank lines of a JSON-lines file as `(line number from 1, text)`, the text `None`
/// for a line that is not UTF-8. Split on newline bytes: such a line (a write cut inside a
/// character) is one malformed line, not the end of the file.
pub fn json_lines(bytes: &[u8]) -> impl Iterator<Item = (usize, Option<&str>)> {
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, line)| (i + 1, std::str::from_utf8(line).ok()))
        .filter(|(_, line)| line.is_none_or(|l| !l.trim().is_empty()))
}

/// Rewrites `csv_path` from the lines of `jsonl_path`.
pub fn write_csv_file(jsonl_path: &Path, csv_path: &Path) -> Result<(), SweepError> {
    write_csv_lines(&read_results(jsonl_path)?.lines, csv_path)
}

/// Rewrites `csv_path` from `lines` (through a temporary file, so a reader never sees half).
pub fn write_csv_lines(lines: &[ResultLine], csv_path: &Path) -> Result<(), SweepError> {
    let tmp = csv_path.with_extension("csv.tmp");
    let io = |source| SweepError::Io {
        path: csv_path.into(),
        source,
    };
    let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp).map_err(io)?);
    write_csv(lines, &mut f).map_err(io)?;
    f.flush().map_err(io)?;
    drop(f);
    std::fs::rename(&tmp, csv_path).map_err(io)
}
