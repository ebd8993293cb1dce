//! Loading result lines and grouping them into workloads and designs.

use crate::ReportError;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::path::Path;
use tiercache_sweep::{latest_per_point, ResultLine, Status};

/// Unreadable lines listed by `file:line` in a report's notes (the rest are counted).
const MAX_LISTED: usize = 20;

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
    /// What loading did that the reader should know: lines of other specs left out of a sweep
    /// directory, inputs whose workloads were renamed to keep them apart.
    pub notes: Vec<String>,
}

impl ResultSet {
    /// Reads JSON-lines files: sweep result lines and bare run records may be mixed. Unreadable
    /// lines are skipped and listed (an interrupted sweep leaves a partial last line).
    ///
    /// Each input (a file, or a sweep output directory) is read on its own: repeated lines of a
    /// point are reduced to its latest outcome within that input only, and bare records of one
    /// name count as repetitions only within one input. When a later input has a (workload,
    /// design) an earlier one has too, its workload is renamed `WORKLOAD (TAG)`, TAG naming the
    /// input, so records of different inputs are never merged nor averaged; [`Self::notes`]
    /// says so. A sweep directory whose `sweep.json` lists its points keeps to those: lines of
    /// other specs run into the same directory are left out, and counted in the notes.
    pub fn load(paths: &[impl AsRef<Path>]) -> Result<Self, ReportError> {
        let mut set = ResultSet::default();
        let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
        let mut bare_count = 0;
        for path in paths {
            let input = read_input(path.as_ref(), &mut set)?;
            let mut runs = input.runs(&mut bare_count);
            if let Some(n) = input.left_out.filter(|n| *n > 0) {
                set.notes.push(format!(
                    "{}: {n} line(s) of points not in its sweep's latest spec left out",
                    input.file.display()
                ));
            }
            keep_apart(&mut runs, &input, &seen, &mut set.notes);
            // Inputs keep their order: each one's indices follow the previous ones'.
            let offset = set.runs.iter().map(|r| r.index + 1).max().unwrap_or(0);
            for r in &mut runs {
                r.index += offset;
                seen.insert((r.workload.clone(), r.name.clone()));
            }
            set.runs.extend(runs);
        }
        Ok(set)
    }

    /// What the reader of a report must be told about its inputs: the unreadable lines
    /// skipped, by `file:line` (the first 20, then how many more), and the
    /// [`notes`](Self::notes).
    pub fn input_notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.malformed.is_empty() {
            let shown = &self.malformed[..self.malformed.len().min(MAX_LISTED)];
            let more = self.malformed.len() - shown.len();
            out.push(format!(
                "{} unreadable line(s) skipped: {}{}",
                self.malformed.len(),
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ));
        }
        out.extend(self.notes.iter().cloned());
        out
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

/// What one input held.
struct Input {
    /// The file read.
    file: std::path::PathBuf,
    /// A short name for the input: a sweep directory's name, else the file stem.
    tag: String,
    sweep_lines: Vec<ResultLine>,
    bare: Vec<serde_json::Value>,
    /// Lines left out as not of the sweep's current points (`None`: no list of points).
    left_out: Option<usize>,
}

impl Input {
    /// The runs of this input alone: the latest outcome per point, then the bare records
    /// (repetitions of a name told apart by order). `bare_count` numbers bare records across
    /// inputs so their point ids stay distinct.
    fn runs(&self, bare_count: &mut usize) -> Vec<Run> {
        let mut runs: Vec<Run> = latest_per_point(&self.sweep_lines)
            .into_iter()
            .map(|l| Run {
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
            })
            .collect();
        let offset = runs.iter().map(|r| r.index + 1).max().unwrap_or(0);
        let mut reps: BTreeMap<String, u32> = BTreeMap::new();
        for (i, v) in self.bare.iter().enumerate() {
            let name = v
                .get("name")
                .and_then(|n| n.as_str())
                .unwrap_or("run")
                .to_string();
            let rep = reps.entry(name.clone()).or_insert(0);
            runs.push(Run {
                point: format!("record-{}", *bare_count),
                name,
                workload: "all".into(),
                rep: *rep,
                index: offset + i,
                default: false,
                labels: Vec::new(),
                ok: true,
                error: None,
                record: v.clone(),
            });
            *rep += 1;
            *bare_count += 1;
        }
        runs.into_iter().flat_map(per_level).collect()
    }
}

/// A run as the report draws it. A cache hierarchy's record (`"kind": "hierarchy"`,
/// docs/design.md §9) becomes one run per cache level, each a run record like `sim`'s: its
/// `metrics` the level's own (`result.levels[i].metrics`, a single-level run's metrics), its
/// hierarchy figures (hit fraction of all requests, demotes, link) under `level`, its timeline
/// (if any) as `timeline`, in the workload `WORKLOAD · LEVEL`, so each level's designs are compared as a single cache's are.
/// Any other run is itself.
fn per_level(run: Run) -> Vec<Run> {
    let rec = &run.record;
    if !run.ok || rec.get("kind").and_then(|k| k.as_str()) != Some("hierarchy") {
        return vec![run];
    }
    let levels = lookup(rec, "result.levels")
        .and_then(|l| l.as_array())
        .map_or(&[][..], Vec::as_slice);
    let out: Vec<Run> = levels
        .iter()
        .filter_map(|l| {
            let name = l.get("name")?.as_str()?;
            let metrics = l.get("metrics")?.clone();
            let mut level = l.clone();
            level.as_object_mut()?.remove("metrics");
            // The level's timeline is drawn as a single run's (`timeline` on the record).
            let timeline = level.as_object_mut()?.remove("timeline");
            let mut record = serde_json::json!({ "level": level, "metrics": metrics });
            if let Some(t) = timeline {
                record["timeline"] = t;
            }
            for key in ["tool", "version", "kind", "name", "config"] {
                if let Some(v) = rec.get(key) {
                    record[key] = v.clone();
                }
            }
            Some(Run {
                point: format!("{}/{name}", run.point),
                workload: format!("{} · {name}", run.workload),
                record,
                ..run.clone()
            })
        })
        .collect();
    if out.is_empty() {
        // A record from before levels carried their metrics: nothing to draw, said as a failure.
        return vec![Run {
            ok: false,
            error: Some(
                "a hierarchy record without per-level `metrics` (written by an older tiercache): run it again".into(),
            ),
            ..run
        }];
    }
    out
}

/// Reads one input (a file, or a sweep directory's results.jsonl), listing its unreadable
/// lines in `set`.
fn read_input(path: &Path, set: &mut ResultSet) -> Result<Input, ReportError> {
    // A directory means the sweep output directory.
    let file = if path.is_dir() {
        path.join(tiercache_sweep::RESULTS_JSONL)
    } else {
        path.to_path_buf()
    };
    let bytes = std::fs::read(&file).map_err(|source| ReportError::Io {
        path: file.clone(),
        source,
    })?;
    set.sources.push(file.display().to_string());
    let dir = file.parent().unwrap_or(Path::new(""));
    let about: Option<serde_json::Value> = std::fs::read(dir.join(tiercache_sweep::SWEEP_JSON))
        .ok()
        .and_then(|t| serde_json::from_slice(&t).ok());
    // Two sweeps' directories tell inputs apart better than their sweep names (often equal).
    let in_sweep_dir = file.file_name() == Some(OsStr::new(tiercache_sweep::RESULTS_JSONL));
    let tag = if in_sweep_dir {
        dir.file_name()
    } else {
        file.file_stem()
    }
    .map(|s| s.to_string_lossy().into_owned())
    .filter(|s| !s.is_empty())
    .unwrap_or_else(|| "input".into());
    let mut input = Input {
        file: file.clone(),
        tag,
        sweep_lines: Vec::new(),
        bare: Vec::new(),
        left_out: None,
    };
    for (n, line) in tiercache_sweep::json_lines(&bytes) {
        let bad = |set: &mut ResultSet| set.malformed.push(format!("{}:{n}", file.display()));
        let Some(line) = line else {
            bad(set);
            continue;
        };
        let v: serde_json::Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(_) => {
                bad(set);
                continue;
            }
        };
        if v.get("point").is_some() && v.get("status").is_some() {
            match serde_json::from_value::<ResultLine>(v) {
                Ok(l) => input.sweep_lines.push(l),
                Err(_) => bad(set),
            }
        } else if v.get("metrics").is_some()
            || (v.get("kind").and_then(|k| k.as_str()) == Some("hierarchy")
                && v.get("result").is_some())
        {
            input.bare.push(v);
        } else {
            bad(set);
        }
    }
    let points: Option<BTreeSet<&str>> = about
        .as_ref()
        .filter(|_| in_sweep_dir)
        .and_then(|a| a["points"].as_array())
        .map(|ids| ids.iter().filter_map(|v| v.as_str()).collect());
    if let Some(points) = points {
        let before = input.sweep_lines.len();
        input
            .sweep_lines
            .retain(|l| points.contains(l.point.as_str()));
        input.left_out = Some(before - input.sweep_lines.len());
    }
    Ok(input)
}

/// Renames the workloads of `runs` (one input's) that share a (workload, design) with an
/// earlier input to `WORKLOAD (TAG)`, saying so in `notes`.
fn keep_apart(
    runs: &mut [Run],
    input: &Input,
    seen: &BTreeSet<(String, String)>,
    notes: &mut Vec<String>,
) {
    let clashing: BTreeSet<String> = runs
        .iter()
        .filter(|r| seen.contains(&(r.workload.clone(), r.name.clone())))
        .map(|r| r.workload.clone())
        .collect();
    let taken: BTreeSet<&str> = seen.iter().map(|(w, _)| w.as_str()).collect();
    for w in clashing {
        let mut renamed = format!("{w} ({})", input.tag);
        let mut n = 2;
        while taken.contains(renamed.as_str()) {
            renamed = format!("{w} ({} #{n})", input.tag);
            n += 1;
        }
        notes.push(format!(
            "{}: workload `{w}` has designs an earlier input has too: shown apart as `{renamed}`",
            input.file.display()
        ));
        for r in runs.iter_mut().filter(|r| r.workload == w) {
            r.workload = renamed.clone();
        }
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
