//! `tiercache sim`: run a config (and each of its variants) through the simulator.

use anyhow::{Context, Result};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use tiercache_run::experiment::{self, Experiment};
use tiercache_run::sim::{run_experiment, select_runs, with_suffix};

/// Arguments of `tiercache sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Experiment config (TOML). Without it, the embedded examples/default.toml runs.
    pub config: Option<PathBuf>,
    /// Override a config key: `--set cache.line_size=32KiB` (repeatable). It applies to every
    /// variant after the variant's own `set`: the command line wins.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// `--json`: one JSON result record per run (JSON lines: one document with one design)
    /// instead of the table; `--quiet`: no notes, no progress bar.
    #[command(flatten)]
    pub output: crate::output::OutputArgs,
    /// Write the per-interval timeline of every run as CSV (the run name is added to the file
    /// name when the config has several variants). A run whose tenancy mode made decisions
    /// also gets its per-volume, per-interval records (allocation, write policy, hits, cache
    /// writes, latency) beside it, in the same name with `-volumes` added.
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// Run only the variants whose name contains this text.
    #[arg(long)]
    pub only: Option<String>,
    /// Trace workloads: skip and count malformed records instead of stopping at the first
    /// (the same as `workload.skip_bad = true`).
    #[arg(long)]
    pub skip_bad: bool,
}

/// Entry point of `tiercache sim`.
pub fn run(args: SimArgs) -> Result<()> {
    // A config with a `[hierarchy]` section describes several levels: the hierarchy runner
    // (per-level table, or one record per run with the levels).
    if let Some(path) = &args.config {
        if tiercache_run::hierarchy::has_hierarchy(path)? {
            // Refused rather than ignored: a result is never silently other than asked.
            if args.timeline.is_some() {
                anyhow::bail!(
                    "--timeline: a hierarchy config ({}) has no single timeline; set \
                     hierarchy.timeline_interval_ns and each level's record holds its own \
                     (result.levels[i].timeline)",
                    path.display()
                );
            }
            if args.skip_bad {
                anyhow::bail!(
                    "--skip-bad: not read for a hierarchy config ({}): its trace clients stop \
                     at the first malformed record",
                    path.display()
                );
            }
            return crate::hierarchy_cmd::run(crate::hierarchy_cmd::HierarchyArgs {
                config: path.clone(),
                overrides: args.overrides,
                json: args.output.json,
                only: args.only,
            });
        }
    }
    let runs = select_runs(
        experiment::load(args.config.as_deref(), &args.overrides)?,
        args.only.as_deref(),
        args.skip_bad,
    )?;
    let several = runs.len() > 1;
    let mut rows = Vec::new();
    // Multi-tenant runs: a per-volume table each, printed under the runs' table.
    let mut tenancy_tables = Vec::new();
    let stdout = std::io::stdout();
    // Every timeline file is created before anything runs, so a bad path fails at once instead
    // of losing a long run's results at the end. (A multi-tenant run's `-volumes` file beside
    // it is created once the run shows per-volume intervals: its directory is checked by then.)
    let mut timelines = Vec::new();
    if let Some(path) = &args.timeline {
        let paths: Vec<PathBuf> = runs
            .iter()
            .map(|e| {
                if several {
                    with_suffix(path, &e.name)
                } else {
                    path.clone()
                }
            })
            .collect();
        check_distinct_timelines(&runs, &paths)?;
        for path in paths {
            let f = std::fs::File::create(&path)
                .with_context(|| format!("--timeline {}", path.display()))?;
            timelines.push((f, path));
        }
    }
    let mut timelines = timelines.into_iter();
    for e in &runs {
        for n in &e.notes {
            args.output.note(&format!("run `{}`: {n}", e.name));
        }
        let out = run_experiment(e)?;
        if let Some((mut f, path)) = timelines.next() {
            tiercache_metrics::write_timeline_csv(&out.timeline, &mut f)?;
            if let Some(t) = out
                .record
                .metrics
                .tenancy
                .as_ref()
                .filter(|t| !t.intervals.is_empty())
            {
                let path = with_suffix(&path, "volumes");
                let mut f = std::fs::File::create(&path)
                    .with_context(|| format!("--timeline {}", path.display()))?;
                tiercache_metrics::write_tenancy_csv(&t.intervals, &mut f)?;
            }
        }
        if args.output.json {
            let mut lock = stdout.lock();
            writeln!(lock, "{}", out.record.to_json_line()?)?;
        } else {
            if let Some(t) = out.record.metrics.tenancy.as_ref() {
                tenancy_tables.push(format!(
                    "{}{}",
                    if several {
                        format!("run `{}`, ", e.name)
                    } else {
                        String::new()
                    },
                    tiercache_metrics::render_tenancy_table(t, &|v| volume_name(e, v))
                ));
            }
            rows.push((e.name.clone(), out.record.metrics));
        }
    }
    if !args.output.json {
        let mut out = stdout.lock();
        writeln!(out, "{}", describe(&runs))?;
        write!(out, "{}", tiercache_metrics::render_table(&rows))?;
        for t in tenancy_tables {
            write!(out, "\n{t}")?;
        }
    }
    Ok(())
}

/// Volume `v`'s name in `e`'s `[[volumes]]` (its id when it has none or is not listed).
fn volume_name(e: &Experiment, v: u32) -> String {
    match &e.workload {
        experiment::Workload::Volumes(parts) => parts
            .iter()
            .find(|p| p.id == v)
            .map_or_else(|| v.to_string(), |p| p.name.clone()),
        _ => v.to_string(),
    }
}

/// What a table's runs simulated, in two lines a person reads above it: the cache and its
/// devices, then the workload and how much of it was measured. Read from the first run's
/// config as written (its spellings, its units); variants change some of it, and the table
/// names them.
pub fn describe(runs: &[Experiment]) -> String {
    let Some(e) = runs.first() else {
        return String::new();
    };
    let c = &e.config_json;
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    };
    let device = |v: &serde_json::Value| -> String {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(raid) = m.get("raid") {
                    let members = text(&m["members"]);
                    let member = device_name(&m["member"]);
                    format!("{} of {members} × {member}", text(raid))
                } else {
                    device_name(v)
                }
            }
            other => device_name(other),
        }
    };
    // The run names are the table's first column; the base's design is described.
    let designs = if runs.len() > 1 {
        format!("{} designs (the table's rows) varying ", runs.len())
    } else {
        String::new()
    };
    let cache = format!(
        "a {} cache, {} lines, {}",
        size(e.cache.capacity),
        size(e.cache.line_size),
        tiercache_server::control::config_name(&e.cache.write_policy)
    );
    let first = match e.mode {
        tiercache_run::experiment::RunMode::Timed => format!(
            "{designs}{cache}, on {} over {}, simulated in virtual time (seed {})",
            device(&c["devices"]["cache"]).if_empty("the default cache device"),
            device(&c["devices"]["backend"]).if_empty("the default backend"),
            e.seed
        ),
        tiercache_run::experiment::RunMode::HitRatio => format!(
            "{designs}{cache}: the policy alone, no timing (run.mode = \"hit-ratio\", seed {})",
            e.seed
        ),
    };
    let w = &c["workload"];
    let mut work = Vec::new();
    if let Some(t) = w.get("trace") {
        work.push(format!("trace {}", text(t)));
    } else if c.get("volumes").is_some() {
        work.push("several volumes ([[volumes]])".to_string());
    } else {
        if let (Some(j), Some(q)) = (w.get("jobs"), w.get("iodepth")) {
            work.push(format!("{} jobs × QD {}", text(j), text(q)));
        }
        if let Some(r) = w.get("read_fraction").and_then(|v| v.as_f64()) {
            work.push(format!("{:.0}% reads", r * 100.0));
        }
        if let Some(b) = w.get("block_sizes").and_then(|v| v.as_array()) {
            let sizes: Vec<String> = b.iter().map(|x| text(&x["size"])).collect();
            work.push(format!("{} blocks", sizes.join("/")));
        }
        let dist = &w["distribution"];
        if let Some(t) = dist.get("type") {
            let params: Vec<String> = dist
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| *k != "type")
                .map(|(k, v)| format!("{k} {}", text(v)))
                .collect();
            let params = if params.is_empty() {
                String::new()
            } else {
                format!(" ({})", params.join(", "))
            };
            let over = w
                .get("footprint")
                .map_or_else(String::new, |f| format!(" over {}", text(f)));
            work.push(format!("{}{params}{over}", text(t)));
        }
    }
    let r = &c["run"];
    let mut measured = String::new();
    if let Some(n) = r.get("requests") {
        measured = format!("; {} requests measured", text(n));
        if let Some(w) = r.get("warmup_requests") {
            measured += &format!(" after {} of warm-up", text(w));
        }
    } else if let Some(d) = r.get("duration_ns") {
        measured = format!("; {} measured", text(d));
    }
    format!(
        "{first}\nworkload: {}{measured}\n",
        work.join(", ").if_empty("as configured")
    )
}

/// A device as configs name it: a preset's name, or its model's fields.
fn device_name(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        serde_json::Value::Object(m) => m
            .get("preset")
            .and_then(|p| p.as_str())
            .map_or_else(|| v.to_string(), str::to_string),
        other => other.to_string(),
    }
}

/// Bytes in the largest binary unit that divides them (`256 MiB`, `4 KiB`).
fn size(bytes: u64) -> String {
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} B")
}

/// A fallback for an empty description.
trait IfEmpty {
    fn if_empty(self, fallback: &str) -> String;
}

impl IfEmpty for String {
    fn if_empty(self, fallback: &str) -> String {
        if self.is_empty() {
            fallback.to_string()
        } else {
            self
        }
    }
}

/// Fails, naming both runs, when two runs' timeline files (`paths`, one per run, or the
/// `-volumes` file beside one) are the same file: variant names that differ only in characters
/// a file name cannot hold would overwrite each other's results.
fn check_distinct_timelines(runs: &[Experiment], paths: &[PathBuf]) -> Result<()> {
    let mut owners: Vec<(PathBuf, String)> = Vec::new();
    for (e, path) in runs.iter().zip(paths) {
        let files = [
            (path.clone(), format!("`{}`", e.name)),
            (
                with_suffix(path, "volumes"),
                format!("`{}` (its -volumes file)", e.name),
            ),
        ];
        for (file, what) in files {
            if let Some((_, other)) = owners.iter().find(|(f, _)| *f == file) {
                anyhow::bail!(
                    "--timeline: runs {other} and {what} would both write {}: give the variants names that differ in letters, digits, '-' or '_'",
                    file.display()
                );
            }
            owners.push((file, what));
        }
    }
    Ok(())
}
