//! `tiercache hierarchy`: run a cache hierarchy (SPEC §4.7) from a config's `[hierarchy]`
//! section, each `[[variant]]` in turn, and print the per-level table or one JSON record per
//! run.

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use tiercache_config::Document;
use tiercache_core::{Arrival, RequestSource};
use tiercache_sim::hierarchy::{HierarchyConfig, HierarchyResult, HierarchySim};
use tiercache_workload::SyntheticWorkload;

/// Arguments of `tiercache hierarchy`.
#[derive(Debug, Args)]
pub struct HierarchyArgs {
    /// Config (TOML) with a `[hierarchy]` section.
    pub config: PathBuf,
    /// Override a config key: `--set hierarchy.exclusive=true` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Print one JSON record per run (JSON lines) instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Run only the variants whose name contains this text.
    #[arg(long)]
    pub only: Option<String>,
}

/// The JSON record of one hierarchy run: the whole configuration and every figure.
#[derive(Debug, Serialize)]
pub struct HierarchyRecord {
    /// Always `tiercache`.
    pub tool: &'static str,
    /// Version of the tool.
    pub version: &'static str,
    /// Always `hierarchy`.
    pub kind: &'static str,
    /// Run (variant) name.
    pub name: String,
    /// The document as run.
    pub config: serde_json::Value,
    /// The measurements.
    pub result: HierarchyResult,
}

/// Whether the config at `path` describes a hierarchy (has a `[hierarchy]` section).
pub fn has_hierarchy(path: &Path) -> Result<bool> {
    let doc = Document::load(path)?;
    Ok(doc
        .value
        .as_table()
        .is_some_and(|t| t.contains_key("hierarchy")))
}

/// Runs one document (a variant): builds the levels and the clients' sources and runs them.
pub fn run_document(doc: &Document, base_dir: &Path) -> Result<HierarchyResult> {
    let cfg: HierarchyConfig = doc.typed(Some("hierarchy"))?;
    let sim = HierarchySim::new(&cfg)?;
    let mut sources: Vec<Box<dyn RequestSource>> = Vec::new();
    for (i, c) in cfg.clients.iter().enumerate() {
        let field = format!("hierarchy.clients[{i}].workload");
        if let Some(mut spec) = cfg.synthetic_spec(i) {
            if spec.requests.is_none() && spec.duration_ns.is_none() {
                // Nothing would end this client: bounded as `sim` bounds an unbounded run.
                spec.requests = Some(crate::experiment::DEFAULT_RUN_REQUESTS);
                eprintln!(
                    "tiercache: note: {field}: nothing bounds this client's workload (requests, duration_ns): measuring {} requests",
                    crate::experiment::DEFAULT_RUN_REQUESTS
                );
            }
            sources.push(Box::new(
                SyntheticWorkload::new(&spec).with_context(|| field.clone())?,
            ));
        } else if let Some(trace) = &c.workload.trace {
            let path = if trace.is_relative() {
                base_dir.join(trace)
            } else {
                trace.clone()
            };
            let text = path.to_str().context("trace path is not UTF-8")?;
            let reader =
                tiercache_trace::open(text, None, &tiercache_trace::ReadOptions::default())
                    .with_context(|| format!("{field}.trace {}", path.display()))?;
            // As fast as possible, one request in flight (the analytical setting).
            let arrival = Arrival::Closed {
                jobs: 1,
                iodepth: 1,
            };
            sources.push(Box::new(tiercache_trace::ReplaySource::new(
                reader, arrival, 1.0,
            )));
        }
    }
    Ok(sim.run(&mut sources)?)
}

/// Entry point of `tiercache hierarchy`.
pub fn run(args: HierarchyArgs) -> Result<()> {
    let mut doc = Document::load(&args.config)?;
    doc.apply_overrides(&args.overrides)?;
    let base_dir = args
        .config
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    // The command line wins over a variant's own `set`, as in `sim`.
    let mut runs = doc.variants_with(&args.overrides)?;
    if let Some(only) = &args.only {
        runs.retain(|(name, _)| name.contains(only.as_str()));
        if runs.is_empty() {
            anyhow::bail!("--only {only}: no run's name contains it");
        }
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for (name, d) in runs {
        let result = run_document(&d, &base_dir).with_context(|| format!("run `{name}`"))?;
        if args.json {
            let record = HierarchyRecord {
                tool: tiercache_metrics::TOOL_NAME,
                version: env!("CARGO_PKG_VERSION"),
                kind: "hierarchy",
                name,
                config: d.to_json(),
                result,
            };
            writeln!(out, "{}", serde_json::to_string(&record)?)?;
        } else {
            writeln!(out, "== {name}: {} requests", result.requests)?;
            writeln!(out, "{}", result.table())?;
        }
        out.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic client nothing bounds is measured over the default request count, as
    /// `sim` measures an unbounded run (it ran for ever).
    #[test]
    fn an_unbounded_synthetic_client_is_bounded_by_default() {
        let doc = Document::parse(
            r#"
            [hierarchy]
            backend = { model = "constant", latency_ns = "5ms" }
            [[hierarchy.levels]]
            name = "array"
            cache = { capacity = "16MiB" }
            device = { model = "constant", latency_ns = "200us" }
            [[hierarchy.clients]]
            name = "host"
            workload = { synthetic = { footprint = "64MiB" } }
            "#,
            "test",
        )
        .unwrap();
        let r = run_document(&doc, Path::new(".")).unwrap();
        assert_eq!(r.requests, crate::experiment::DEFAULT_RUN_REQUESTS);
    }
}
