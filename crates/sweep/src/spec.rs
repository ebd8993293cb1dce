//! Sweep specs: a base configuration, axes over configuration keys, workloads and repetitions,
//! expanded into the list of points to run.

use crate::canonical::{fnv1a64, value_label, write_canonical};
use crate::SweepError;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use tiercache_config::{lookup, set_value, Document};
use toml::Value;

/// Most points a sweep may expand to (each is built, with its configuration, in memory).
pub const MAX_POINTS: usize = 1_000_000;

/// Keys a sweep spec may have at its top level.
const SPEC_KEYS: [&str; 10] = [
    "name",
    "description",
    "base",
    "set",
    "axis",
    "workload",
    "repetitions",
    "seed",
    "seed_key",
    "ci",
];

/// One configuration key and the values an axis (or one member of a zipped axis) gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct AxisKey {
    /// Dotted key path, e.g. `cache.line_size`.
    pub key: String,
    /// Values in sweep order (any TOML value, including inline tables).
    pub values: Vec<Value>,
}

/// One axis of the design space: a single key, or several keys advanced together (zipped).
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// Short name used in point names and report columns (`line_size`).
    pub name: String,
    /// The keys this axis sets: one for a plain axis, several for a zipped one.
    pub keys: Vec<AxisKey>,
    /// One readable label per value index (`nhit-2`).
    pub labels: Vec<String>,
}

impl Axis {
    /// Number of values (positions) on this axis.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when the axis has no values (never true for a parsed spec).
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
}

/// A workload of the sweep: a name and overrides applied to the base.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadSpec {
    /// Name (unique within the spec).
    pub name: String,
    /// `key=value` overrides, as for `--set`.
    pub set: Vec<String>,
}

/// The `[ci]` profile: a reduced sweep for continuous integration, applied with `--ci`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CiProfile {
    /// Overrides applied to the base (after the spec's own `set`).
    pub set: Vec<String>,
    /// Repetitions replacing the spec's.
    pub repetitions: Option<u32>,
    /// Keep at most this many designs per workload (a fixed pseudo-random sample; the default
    /// design is always kept).
    pub points: Option<usize>,
}

/// A parsed sweep spec.
#[derive(Debug, Clone)]
pub struct SweepSpec {
    /// Sweep name (the spec's `name`, else its file stem).
    pub name: String,
    /// Free text.
    pub description: String,
    /// The base configuration, spec-level `set` already applied, `[[variant]]` tables removed.
    pub base: Document,
    /// Directory relative paths of the base resolve against (the base file's, else the spec's).
    pub base_dir: PathBuf,
    /// Axes in spec order (the last varies fastest in the expansion).
    pub axes: Vec<Axis>,
    /// Workloads; one unnamed (`default`) workload when the spec lists none.
    pub workloads: Vec<WorkloadSpec>,
    /// Runs per design and workload, seeds `seed + rep`.
    pub repetitions: u32,
    /// Base seed; `None` takes the base configuration's value at `seed_key` (else 1).
    pub seed: Option<u64>,
    /// Key that receives each repetition's seed.
    pub seed_key: String,
    /// The reduced CI profile.
    pub ci: CiProfile,
    /// Keep at most this many designs per workload (set from the CI profile by
    /// [`SweepSpec::apply_ci`]; a fixed pseudo-random sample, the default design always kept).
    pub max_designs: Option<usize>,
}

/// What one axis contributes to a point.
#[derive(Debug, Clone, PartialEq)]
pub struct AxisSetting {
    /// Axis name.
    pub axis: String,
    /// Label of the chosen value.
    pub label: String,
    /// Index of the chosen value on the axis.
    pub index: usize,
    /// The keys set and their values.
    pub values: Vec<(String, Value)>,
}

/// One point of the expanded sweep: a design × workload × repetition, with its resolved config.
#[derive(Debug, Clone)]
pub struct PointSpec {
    /// Deterministic id: a hash of the workload, repetition and resolved configuration; stable
    /// across runs of the same spec, so a rerun recognises finished points.
    pub id: String,
    /// Design name, `line_size=4KiB,promotion=nhit-2` (`base` when the spec has no axes).
    pub name: String,
    /// Workload name.
    pub workload: String,
    /// Repetition number, from 0.
    pub rep: u32,
    /// Seed given to this point (`seed + rep`, at `seed_key`).
    pub seed: u64,
    /// Position in the expansion order (workload, then axes with the last fastest, then rep).
    pub index: usize,
    /// True for the design whose values equal the base's on every axis (or, when no design
    /// does, the first design) — the reference the report measures margins against.
    pub is_default: bool,
    /// Axis settings in axis order.
    pub axes: Vec<AxisSetting>,
    /// Every override applied to the base, in order, as `key=value` text (workload, axes, seed).
    pub overrides: Vec<String>,
    /// The resolved configuration.
    pub doc: Document,
    /// Directory relative paths in `doc` resolve against.
    pub base_dir: PathBuf,
}

pub(crate) fn spec_err(at: impl Into<String>, message: impl Into<String>) -> SweepError {
    SweepError::Spec {
        at: at.into(),
        message: message.into(),
    }
}

impl SweepSpec {
    /// Reads and parses a spec file; a `base = "file.toml"` resolves relative to it.
    pub fn load(path: &Path) -> Result<Self, SweepError> {
        let text = std::fs::read_to_string(path).map_err(|source| SweepError::Io {
            path: path.into(),
            source,
        })?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "sweep".into());
        Self::parse(&text, &path.display().to_string(), &dir, &stem)
    }

    /// Parses spec text. `source` names it in errors, `dir` resolves a base file path and
    /// `default_name` names the sweep when the spec has no `name`.
    pub fn parse(
        text: &str,
        source: &str,
        dir: &Path,
        default_name: &str,
    ) -> Result<Self, SweepError> {
        let doc = Document::parse(text, source)?;
        let table = match doc.value {
            Value::Table(t) => t,
            _ => return Err(spec_err(source, "a sweep spec must be a table")),
        };
        for k in table.keys() {
            if !SPEC_KEYS.contains(&k.as_str()) {
                return Err(spec_err(
                    k.clone(),
                    format!("unknown key (expected one of {})", SPEC_KEYS.join(", ")),
                ));
            }
        }
        let str_of = |key: &str| -> Result<Option<String>, SweepError> {
            match table.get(key) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(spec_err(key, "must be a string")),
            }
        };
        let name = str_of("name")?.unwrap_or_else(|| default_name.to_string());
        let description = str_of("description")?.unwrap_or_default();
        let seed_key = str_of("seed_key")?.unwrap_or_else(|| "run.seed".to_string());
        check_key_path(&seed_key).map_err(|m| spec_err("seed_key", m))?;

        let (mut base, base_dir) = match table.get("base") {
            None => (
                Document {
                    source: format!("{source} [base]"),
                    value: Value::Table(Default::default()),
                },
                dir.to_path_buf(),
            ),
            Some(Value::Table(t)) => (
                Document {
                    source: format!("{source} [base]"),
                    value: Value::Table(t.clone()),
                },
                dir.to_path_buf(),
            ),
            Some(Value::String(p)) => {
                let path = dir.join(p);
                let d = Document::load(&path).map_err(|e| spec_err("base", e.to_string()))?;
                let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
                (d, base_dir)
            }
            Some(_) => {
                return Err(spec_err(
                    "base",
                    "must be a table ([base]) or a path to a config file",
                ))
            }
        };
        // The axes define the designs: variants of a shared example config do not apply.
        if let Some(t) = base.value.as_table_mut() {
            t.remove("variant");
        }
        let set = string_list(table.get("set"), "set")?;
        base.apply_overrides(&set)
            .map_err(|e| spec_err("set", e.to_string()))?;

        let repetitions = match table.get("repetitions") {
            None => 1,
            Some(v) => {
                positive_u32(v).ok_or_else(|| spec_err("repetitions", "must be an integer >= 1"))?
            }
        };
        let seed = match table.get("seed") {
            None => None,
            Some(Value::Integer(i)) if *i >= 0 => Some(*i as u64),
            Some(_) => return Err(spec_err("seed", "must be a non-negative integer")),
        };

        let axes = parse_axes(table.get("axis"))?;
        let workloads = parse_workloads(table.get("workload"))?;
        let ci = parse_ci(table.get("ci"))?;
        Ok(Self {
            name,
            description,
            base,
            base_dir,
            axes,
            workloads,
            repetitions,
            seed,
            seed_key,
            ci,
            max_designs: None,
        })
    }

    /// Applies the `[ci]` profile: its overrides go onto the base and its repetitions replace
    /// the spec's. (Its `points` limit is applied by [`SweepSpec::expand`].)
    pub fn apply_ci(&mut self) -> Result<(), SweepError> {
        let set = self.ci.set.clone();
        self.base
            .apply_overrides(&set)
            .map_err(|e| spec_err("ci.set", e.to_string()))?;
        if let Some(r) = self.ci.repetitions {
            self.repetitions = r;
        }
        self.max_designs = self.ci.points;
        Ok(())
    }

    /// Number of designs (the product of the axis lengths).
    pub fn designs(&self) -> usize {
        self.axes.iter().map(Axis::len).product()
    }

    /// Expands the spec into points: workloads × designs × repetitions, in that nesting order.
    /// Errors name the workload or axis whose override cannot be applied.
    pub fn expand(&self) -> Result<Vec<PointSpec>, SweepError> {
        // Every point is built in memory: refuse a count that could not be, before building.
        let designs = self
            .axes
            .iter()
            .try_fold(1usize, |n, a| n.checked_mul(a.len()))
            .map(|n| self.max_designs.map_or(n, |m| n.min(m.max(1))));
        let count = designs
            .and_then(|d| d.checked_mul(self.workloads.len()))
            .and_then(|n| n.checked_mul(self.repetitions as usize));
        if count.is_none_or(|n| n > MAX_POINTS) {
            return Err(spec_err(
                "repetitions",
                format!(
                    "{} workload(s) × {} design(s) × {} repetitions is more than {MAX_POINTS} points: lower `repetitions` or shorten the axes",
                    self.workloads.len(),
                    designs.map_or_else(|| "too many".to_string(), |d| d.to_string()),
                    self.repetitions
                ),
            ));
        }
        let designs = self.design_indices();
        let mut points = Vec::new();
        let mut ids = BTreeSet::new();
        for w in &self.workloads {
            let mut wdoc = self.base.clone();
            wdoc.apply_overrides(&w.set)
                .map_err(|e| spec_err(format!("workload `{}`", w.name), e.to_string()))?;
            let default_design = self.default_design(&wdoc.value);
            let kept = self.kept_designs(&designs, &default_design);
            let base_seed = match self.seed {
                Some(s) => s,
                None => match lookup(&wdoc.value, &self.seed_key) {
                    None => 1,
                    Some(Value::Integer(i)) if *i >= 0 => *i as u64,
                    Some(_) => return Err(spec_err(
                        self.seed_key.clone(),
                        "the base seed must be a non-negative integer (or give the spec a `seed`)",
                    )),
                },
            };
            for design in kept {
                let mut doc = wdoc.clone();
                let mut settings = Vec::with_capacity(self.axes.len());
                let mut overrides = w.set.clone();
                for (axis, &i) in self.axes.iter().zip(design.iter()) {
                    let mut values = Vec::with_capacity(axis.keys.len());
                    for k in &axis.keys {
                        let v = k.values[i].clone();
                        set_value(&mut doc.value, &k.key, v.clone()).map_err(|m| {
                            spec_err(format!("axis `{}` ({})", axis.name, k.key), m)
                        })?;
                        overrides.push(format!("{}={}", k.key, inline(&v)));
                        values.push((k.key.clone(), v));
                    }
                    settings.push(AxisSetting {
                        axis: axis.name.clone(),
                        label: axis.labels[i].clone(),
                        index: i,
                        values,
                    });
                }
                let name = if settings.is_empty() {
                    "base".to_string()
                } else {
                    settings
                        .iter()
                        .map(|s| format!("{}={}", s.axis, s.label))
                        .collect::<Vec<_>>()
                        .join(",")
                };
                let is_default = *design == default_design;
                for rep in 0..self.repetitions {
                    let seed = base_seed + u64::from(rep);
                    let mut pdoc = doc.clone();
                    set_value(&mut pdoc.value, &self.seed_key, Value::Integer(seed as i64))
                        .map_err(|m| spec_err(format!("seed_key `{}`", self.seed_key), m))?;
                    let mut ov = overrides.clone();
                    ov.push(format!("{}={seed}", self.seed_key));
                    pdoc.source = format!("{} [{} / {} / rep {rep}]", self.name, w.name, name);
                    let id = point_id(&w.name, rep, &pdoc.value);
                    if !ids.insert(id.clone()) {
                        return Err(spec_err(
                            format!("workload `{}`", w.name),
                            format!("two points resolve to the same configuration (`{name}`, rep {rep}): duplicate axis values?"),
                        ));
                    }
                    points.push(PointSpec {
                        id,
                        name: name.clone(),
                        workload: w.name.clone(),
                        rep,
                        seed,
                        index: points.len(),
                        is_default,
                        axes: settings.clone(),
                        overrides: ov,
                        doc: pdoc,
                        base_dir: self.base_dir.clone(),
                    });
                }
            }
        }
        Ok(points)
    }

    /// Every design as a vector of value indices, last axis fastest.
    fn design_indices(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new()];
        for axis in &self.axes {
            out = out
                .into_iter()
                .flat_map(|d| (0..axis.len()).map(move |i| [d.clone(), vec![i]].concat()))
                .collect();
        }
        out
    }

    /// The design matching the base on every axis, else the first design.
    fn default_design(&self, base: &Value) -> Vec<usize> {
        let matched: Option<Vec<usize>> = self
            .axes
            .iter()
            .map(|axis| {
                (0..axis.len()).find(|&i| {
                    axis.keys
                        .iter()
                        .all(|k| lookup(base, &k.key) == Some(&k.values[i]))
                })
            })
            .collect();
        matched.unwrap_or_else(|| vec![0; self.axes.len()])
    }

    /// The designs kept under the CI `points` limit: a fixed pseudo-random sample, the default
    /// always kept.
    fn kept_designs<'a>(
        &self,
        designs: &'a [Vec<usize>],
        default: &[usize],
    ) -> Vec<&'a Vec<usize>> {
        match self.max_designs {
            Some(n) if n < designs.len() => {
                let n = n.max(1);
                // A deterministic pseudo-random sample: an evenly strided one would keep the
                // fastest-varying axes at one value whenever the stride is a multiple of their
                // product. Ranking by a hash of the value indices varies every axis.
                let mut order: Vec<usize> = (0..designs.len()).collect();
                order.sort_by_key(|&i| (fnv1a64(format!("{:?}", designs[i]).as_bytes()), i));
                let mut keep: BTreeSet<usize> = order[..n].iter().copied().collect();
                if let Some(d) = designs.iter().position(|d| d == default) {
                    if !keep.contains(&d) {
                        // Swap the last sampled design for the default so the count stays n.
                        keep.remove(&order[n - 1]);
                        keep.insert(d);
                    }
                }
                keep.into_iter().map(|i| &designs[i]).collect()
            }
            _ => designs.iter().collect(),
        }
    }
}

/// The stable point id: FNV-1a of the workload name, repetition and canonical configuration.
fn point_id(workload: &str, rep: u32, doc: &Value) -> String {
    let mut text = format!("{workload}\u{0}{rep}\u{0}");
    write_canonical(doc, &mut text);
    format!("{:016x}", fnv1a64(text.as_bytes()))
}

/// A value as inline TOML text (for the recorded `key=value` overrides).
fn inline(v: &Value) -> String {
    match v {
        Value::Table(t) => {
            let items: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{k} = {}", inline(v)))
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", ")),
        other => other.to_string(),
    }
}

fn check_key_path(key: &str) -> Result<(), String> {
    if key.trim().is_empty() || key.split('.').any(|p| p.trim().is_empty()) {
        return Err(format!("`{key}` is not a dotted key path"));
    }
    Ok(())
}

fn positive_u32(v: &Value) -> Option<u32> {
    v.as_integer()
        .filter(|i| *i >= 1)
        .and_then(|i| u32::try_from(i).ok())
}

fn string_list(v: Option<&Value>, at: &str) -> Result<Vec<String>, SweepError> {
    match v {
        None => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|s| {
                s.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| spec_err(at, "entries must be \"key=value\" strings"))
            })
            .collect(),
        Some(_) => Err(spec_err(at, "must be an array of \"key=value\" strings")),
    }
}

fn parse_values(t: &toml::Table, at: &str) -> Result<Vec<Value>, SweepError> {
    match t.get("values") {
        Some(Value::Array(a)) if !a.is_empty() => Ok(a.clone()),
        Some(Value::Array(_)) => Err(spec_err(at, "`values` is empty")),
        Some(_) => Err(spec_err(at, "`values` must be an array")),
        None => Err(spec_err(at, "needs `values`")),
    }
}

fn parse_axes(v: Option<&Value>) -> Result<Vec<Axis>, SweepError> {
    let list = match v {
        None => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(spec_err("axis", "must be an array of tables ([[axis]])")),
    };
    let mut axes: Vec<Axis> = Vec::new();
    let mut seen_keys = BTreeSet::new();
    for (i, a) in list.iter().enumerate() {
        let t = a
            .as_table()
            .ok_or_else(|| spec_err(format!("axis[{i}]"), "must be a table"))?;
        // Name errors by the axis's key when it has one, so the user finds it.
        let described = match (
            t.get("name").and_then(Value::as_str),
            t.get("key").and_then(Value::as_str),
        ) {
            (Some(n), _) => format!("axis[{i}] `{n}`"),
            (None, Some(k)) => format!("axis[{i}] `{k}`"),
            _ => format!("axis[{i}]"),
        };
        for k in t.keys() {
            if !["key", "values", "labels", "name", "zip"].contains(&k.as_str()) {
                return Err(spec_err(
                    described.clone(),
                    format!("unknown key `{k}` (expected key, values, labels, name, or zip)"),
                ));
            }
        }
        let keys = match (t.get("key"), t.get("zip")) {
            (Some(_), Some(_)) => {
                return Err(spec_err(described, "give either `key` or `zip`, not both"))
            }
            (None, None) => {
                return Err(spec_err(described, "needs `key` (with `values`) or `zip`"))
            }
            (Some(k), None) => {
                let key = k
                    .as_str()
                    .ok_or_else(|| spec_err(described.clone(), "`key` must be a string"))?;
                check_key_path(key).map_err(|m| spec_err(described.clone(), m))?;
                vec![AxisKey {
                    key: key.to_string(),
                    values: parse_values(t, &described)?,
                }]
            }
            (None, Some(z)) => {
                if t.contains_key("values") {
                    return Err(spec_err(
                        described,
                        "a zipped axis lists `values` per member, not at its top",
                    ));
                }
                let members = z.as_array().ok_or_else(|| {
                    spec_err(described.clone(), "`zip` must be an array of tables")
                })?;
                if members.is_empty() {
                    return Err(spec_err(described, "`zip` is empty"));
                }
                let mut keys = Vec::new();
                for (j, m) in members.iter().enumerate() {
                    let at = format!("{described} zip[{j}]");
                    let mt = m
                        .as_table()
                        .ok_or_else(|| spec_err(at.clone(), "must be a table { key, values }"))?;
                    for k in mt.keys() {
                        if k != "key" && k != "values" {
                            return Err(spec_err(
                                at,
                                format!("unknown key `{k}` (expected key, values)"),
                            ));
                        }
                    }
                    let key = mt
                        .get("key")
                        .and_then(Value::as_str)
                        .ok_or_else(|| spec_err(at.clone(), "needs a string `key`"))?;
                    check_key_path(key).map_err(|m| spec_err(at.clone(), m))?;
                    keys.push(AxisKey {
                        key: key.to_string(),
                        values: parse_values(mt, &at)?,
                    });
                }
                let n = keys[0].values.len();
                if let Some(bad) = keys.iter().find(|k| k.values.len() != n) {
                    return Err(spec_err(
                        described,
                        format!(
                            "zipped lists differ in length: `{}` has {} values, `{}` has {}",
                            keys[0].key,
                            n,
                            bad.key,
                            bad.values.len()
                        ),
                    ));
                }
                keys
            }
        };
        let n = keys[0].values.len();
        let name = match t.get("name") {
            Some(v) => v
                .as_str()
                .ok_or_else(|| spec_err(described.clone(), "`name` must be a string"))?
                .to_string(),
            None => keys
                .iter()
                .map(|k| k.key.rsplit('.').next().unwrap_or(&k.key).to_string())
                .collect::<Vec<_>>()
                .join("+"),
        };
        let labels: Vec<String> = match t.get("labels") {
            Some(Value::Array(a)) => {
                if a.len() != n {
                    return Err(spec_err(
                        described,
                        format!("has {n} values but {} labels", a.len()),
                    ));
                }
                a.iter()
                    .map(|l| {
                        l.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| spec_err(described.clone(), "labels must be strings"))
                    })
                    .collect::<Result<_, _>>()?
            }
            Some(_) => return Err(spec_err(described, "`labels` must be an array of strings")),
            None => (0..n)
                .map(|i| {
                    keys.iter()
                        .map(|k| value_label(&k.values[i]))
                        .collect::<Vec<_>>()
                        .join("/")
                })
                .collect(),
        };
        let mut seen_labels = BTreeSet::new();
        for l in &labels {
            if !seen_labels.insert(l) {
                return Err(spec_err(
                    described,
                    format!("two values share the label `{l}` (give distinct `labels`)"),
                ));
            }
        }
        for k in &keys {
            if !seen_keys.insert(k.key.clone()) {
                return Err(spec_err(
                    described,
                    format!("key `{}` is already swept by another axis", k.key),
                ));
            }
        }
        if axes.iter().any(|a| a.name == name) {
            return Err(spec_err(
                described,
                format!("axis name `{name}` is used twice (give a distinct `name`)"),
            ));
        }
        // An axis is a column of the results table: one named as another column made the CSV
        // hold two columns of that name (pandas and pyarrow then read the wrong one, or fail).
        if TABLE_COLUMNS.contains(&name.as_str()) || name.starts_with("metrics.") {
            return Err(spec_err(
                described,
                format!(
                    "axis name `{name}` is a column of the results table (give a distinct `name`)"
                ),
            ));
        }
        axes.push(Axis { name, keys, labels });
    }
    Ok(axes)
}

/// The results table's own columns (see [`crate::results::tidy_table`]), which no axis may be
/// named as.
const TABLE_COLUMNS: &[&str] = &[
    "point",
    "workload",
    "name",
    "rep",
    "seed",
    "default",
    "status",
    "error",
    "elapsed_s",
];

fn parse_workloads(v: Option<&Value>) -> Result<Vec<WorkloadSpec>, SweepError> {
    let list = match v {
        None => {
            return Ok(vec![WorkloadSpec {
                name: "default".into(),
                set: Vec::new(),
            }])
        }
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(_) => {
            return Err(spec_err(
                "workload",
                "must be a non-empty array of tables ([[workload]])",
            ))
        }
    };
    let mut out: Vec<WorkloadSpec> = Vec::new();
    for (i, w) in list.iter().enumerate() {
        let at = format!("workload[{i}]");
        let t = w
            .as_table()
            .ok_or_else(|| spec_err(at.clone(), "must be a table"))?;
        for k in t.keys() {
            if k != "name" && k != "set" {
                return Err(spec_err(
                    at,
                    format!("unknown key `{k}` (expected name, set)"),
                ));
            }
        }
        let name = t
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| spec_err(at.clone(), "needs a string `name`"))?;
        if name.is_empty() || out.iter().any(|o| o.name == name) {
            return Err(spec_err(
                at,
                format!("workload name `{name}` is empty or used twice"),
            ));
        }
        let set = string_list(t.get("set"), &format!("{at}.set"))?;
        out.push(WorkloadSpec {
            name: name.to_string(),
            set,
        });
    }
    Ok(out)
}

fn parse_ci(v: Option<&Value>) -> Result<CiProfile, SweepError> {
    let t = match v {
        None => return Ok(CiProfile::default()),
        Some(Value::Table(t)) => t,
        Some(_) => return Err(spec_err("ci", "must be a table ([ci])")),
    };
    for k in t.keys() {
        if !["set", "repetitions", "points"].contains(&k.as_str()) {
            return Err(spec_err(
                "ci",
                format!("unknown key `{k}` (expected set, repetitions, points)"),
            ));
        }
    }
    let repetitions = match t.get("repetitions") {
        None => None,
        Some(v) => Some(
            positive_u32(v).ok_or_else(|| spec_err("ci.repetitions", "must be an integer >= 1"))?,
        ),
    };
    let points = match t.get("points") {
        None => None,
        Some(v) => Some(
            v.as_integer()
                .filter(|i| *i >= 1)
                .ok_or_else(|| spec_err("ci.points", "must be an integer >= 1"))?
                as usize,
        ),
    };
    Ok(CiProfile {
        set: string_list(t.get("set"), "ci.set")?,
        repetitions,
        points,
    })
}
