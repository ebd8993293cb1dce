//! Loading result lines and grouping them into workloads and designs.

use crate::ReportError;
use std::collections::BTreeMap;
use std::path::Path;
use tiercache_sweep::{latest_per_point, ResultLine, Status};

/// One run: a sweep result line, or a bare run record (`tiercache sim --json` output).
#[derive(Debug, Clone)]
pub struct Run {
    /// Point id (or `record-N` for bare records).
    pub point: String,
    /// Design name.
    pub name: String,
    /// Workload name (`all` for bare records).
    pub workload: String,
    /// Repetition.
    pub rep: u32,
    /// Expansion order (file order for bare records).
    pub index: usize,
    /// Whether the design is the sweep's default.
    pub default: bool,
    /// `(axis, label)` pairs in axis order.
    pub labels: Vec<(String, String)>,
    /// Whether the run produced a record.
    pub ok: bool,
    /// Why it failed.
    pub error: Option<String>,
    /// The result record.
    pub record: serde_json::Value,
}

/// Every run read from the result files.
#[derive(Debug, Clone, Default)]
pub struct ResultSet {
    /// Runs (latest outcome per point), in expansion order.
    pub runs: Vec<Run>,
    /// Files read.
    pub sources: Vec<String>,
    /// Unreadable lines skipped, as `file:line`.
    pub malformed: Vec<String>,
    /// Cache-hierarchy records (`"kind": "hierarchy"`, from `tiercache hierarchy --json`), in
    /// file order: they have levels, not a run's metrics, and get a section of their own.
    pub hierarchies: Vec<serde_json::Value>,
}

impl ResultSet {
    /// Reads JSON-lines files: sweep result lines and bare run records may be mixed. Unreadable
    /// lines are skipped and listed (an interrupted sweep leaves a partial last line).
    pub fn load(paths: &[impl AsRef<Path>]) -> Result<Self, ReportError> {
        let mut set = ResultSet::default();
        let mut sweep_lines = Vec::new();
        let mut bare = Vec::new();
        for path in paths {
            let path = path.as_ref();
            // A directory means the sweep output directory.
            let file = if path.is_dir() {
                path.join(tiercache_sweep::RESULTS_JSONL)
            } else {
                path.to_path_buf()
            };
            let text = std::fs::read_to_string(&file).map_err(|source| ReportError::Io {
                path: file.clone(),
                source,
            })?;
            set.sources.push(file.display().to_string());
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let v: serde_json::Value = match serde_json::from_str(line) {
                    Ok(v) => v,
                    Err(_) => {
                        set.malformed.push(format!("{}:{}", file.display(), i + 1));
                        continue;
                    }
                };
                if v.get("point").is_some() && v.get("status").is_some() {
                    match serde_json::from_value::<ResultLine>(v) {
                        Ok(l) => sweep_lines.push(l),
                        Err(_) => set.malformed.push(format!("{}:{}", file.display(), i + 1)),
                    }
                } else if v.get("metrics").is_some() {
                    bare.push(v);
                } else if v.get("kind").and_then(|k| k.as_str()) == Some("hierarchy")
                    && v.get("result").is_some()
                {
                    set.hierarchies.push(v);
                } else {
                    set.malformed.push(format!("{}:{}", file.display(), i + 1));
                }
            }
        }
        for l in latest_per_point(&sweep_lines) {
            set.runs.push(Run {
                point: l.point.clone(),
                name: l.name.clone(),
                workload: l.workload.clone(),
                rep: l.rep,
                index: l.index,
                default: l.default,
                labels: l.labels.clone(),
                ok: l.status == Status::Ok,
                error: l.error.clone(),
                record: l.record.clone(),
            });
        }
        let offset = set.runs.len();
        // Bare records: repetitions of a name are told apart by order.
        let mut reps: BTreeMap<String, u32> = BTreeMap::new();
        for (i, v) in bare.into_iter().enumerate() {
            let name = v
                .get("name")
                .and_then(|n| n.as_str())
                .unwrap_or("run")
                .to_string();
            let rep = reps.entry(name.clone()).or_insert(0);
            set.runs.push(Run {
                point: format!("record-{i}"),
                name,
                workload: "all".into(),
                rep: *rep,
                index: offset + i,
                default: false,
                labels: Vec::new(),
                ok: true,
                error: None,
                record: v,
            });
            *rep += 1;
        }
        Ok(set)
    }

    /// Workload names in order of first appearance.
    pub fn workloads(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in &self.runs {
            if !out.contains(&r.workload) {
                out.push(r.workload.clone());
            }
        }
        out
    }

    /// The designs of one workload, in expansion order.
    pub fn designs(&self, workload: &str) -> Vec<Design<'_>> {
        let mut out: Vec<Design<'_>> = Vec::new();
        for r in self.runs.iter().filter(|r| r.workload == workload) {
            match out.iter_mut().find(|d| d.name == r.name) {
                Some(d) => d.runs.push(r),
                None => out.push(Design {
                    name: r.name.clone(),
                    short: String::new(),
                    labels: r.labels.clone(),
                    default: r.default,
                    runs: vec![r],
                }),
            }
        }
        // Short names: only the labels of the axes that vary here, `ht-fg · 4KiB · nhit-2`.
        let mut varying: Vec<&str> = Vec::new();
        for d in &out {
            for (a, l) in &d.labels {
                if !varying.contains(&a.as_str())
                    && out.iter().any(|o| o.label(a) != Some(l.as_str()))
                {
                    varying.push(a);
                }
            }
        }
        let shorts: Vec<String> = out
            .iter()
            .map(|d| {
                let parts: Vec<&str> = d
                    .labels
                    .iter()
                    .filter(|(a, _)| varying.contains(&a.as_str()))
                    .map(|(_, l)| l.as_str())
                    .collect();
                if parts.is_empty() {
                    d.name.clone()
                } else {
                    parts.join(" · ")
                }
            })
            .collect();
        for (d, s) in out.iter_mut().zip(shorts) {
            d.short = s;
        }
        if !out.iter().any(|d| d.default) {
            if let Some(first) = out.first_mut() {
                first.default = true;
            }
        }
        out
    }
}

/// One design of one workload: its runs over repetitions.
#[derive(Debug, Clone)]
pub struct Design<'a> {
    /// Design name.
    pub name: String,
    /// Display name: the labels of the axes that vary in this workload, joined by ` · `.
    pub short: String,
    /// `(axis, label)` pairs.
    pub labels: Vec<(String, String)>,
    /// The reference design for margins.
    pub default: bool,
    /// Its runs (ok and failed).
    pub runs: Vec<&'a Run>,
}

/// Mean and range of a metric over a design's successful repetitions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stat {
    /// Mean.
    pub mean: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Repetitions with a value.
    pub n: usize,
}

impl Design<'_> {
    /// The metric at a dotted path, aggregated over successful runs; `None` when no run has it.
    pub fn stat(&self, path: &str) -> Option<Stat> {
        let vals: Vec<f64> = self
            .runs
            .iter()
            .filter(|r| r.ok)
            .filter_map(|r| lookup_f64(&r.record, path))
            .collect();
        if vals.is_empty() {
            return None;
        }
        let n = vals.len();
        Some(Stat {
            mean: vals.iter().sum::<f64>() / n as f64,
            min: vals.iter().copied().fold(f64::INFINITY, f64::min),
            max: vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            n,
        })
    }

    /// The label of an axis for this design.
    pub fn label(&self, axis: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(a, _)| a == axis)
            .map(|(_, l)| l.as_str())
    }

    /// The first successful run (repetition order).
    pub fn first_ok(&self) -> Option<&Run> {
        self.runs
            .iter()
            .filter(|r| r.ok)
            .min_by_key(|r| r.rep)
            .copied()
    }
}

/// The JSON value at a dotted path.
pub fn lookup<'a>(v: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    path.split('.').try_fold(v, |v, p| v.get(p))
}

/// A finite number at a dotted path (numbers, or numeric strings).
pub fn lookup_f64(v: &serde_json::Value, path: &str) -> Option<f64> {
    let x = lookup(v, path)?;
    // Flags (a burst, say) read as 1 and 0, so they can be plotted and tested alike.
    let f = x
        .as_f64()
        .or_else(|| x.as_bool().map(|b| f64::from(u8::from(b))))
        .or_else(|| x.as_str().and_then(|s| s.parse().ok()))?;
    f.is_finite().then_some(f)
}
