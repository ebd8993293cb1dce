//! The hierarchy runner (`tiercache hierarchy`): a cache hierarchy (docs/design.md §4.7) from a
//! config's `[hierarchy]` section, each `[[variant]]` in turn, into one record per run.

use anyhow::{Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use tiercache_config::Document;
use tiercache_core::{Arrival, RequestSource};
use tiercache_sim::hierarchy::{HierarchyConfig, HierarchyResult, HierarchySim};
use tiercache_workload::SyntheticWorkload;

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
pub fn has_hierarchy(path: &Path) -> crate::Result<bool> {
    let doc = Document::load(path).map_err(|e| crate::RunError::from(anyhow::Error::from(e)))?;
    Ok(doc
        .value
        .as_table()
        .is_some_and(|t| t.contains_key("hierarchy")))
}

/// Runs one document (a variant): builds the levels and the clients' sources and runs them.
pub fn run_document(doc: &Document, base_dir: &Path) -> crate::Result<HierarchyResult> {
    run_any(doc, base_dir).map_err(crate::RunError::from)
}

fn run_any(doc: &Document, base_dir: &Path) -> Result<HierarchyResult> {
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

/// One run of a hierarchy config: a variant, with overrides applied.
pub struct HierarchyRun {
    /// The variant's name.
    pub name: String,
    /// The document as it runs.
    pub doc: Document,
    /// The directory relative trace paths start from.
    base_dir: PathBuf,
}

/// The runs of the hierarchy config at `config`: every variant (the command line's overrides
/// win over a variant's own `set`, as in `sim`), kept to those whose name contains `only`.
pub fn hierarchy_runs(
    config: &Path,
    overrides: &[String],
    only: Option<&str>,
) -> crate::Result<Vec<HierarchyRun>> {
    let runs = || -> Result<Vec<HierarchyRun>> {
        let mut doc = Document::load(config)?;
        doc.apply_overrides(overrides)?;
        let base_dir = config.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut runs = doc.variants_with(overrides)?;
        if let Some(only) = only {
            runs.retain(|(name, _)| name.contains(only));
            if runs.is_empty() {
                anyhow::bail!("--only {only}: no run's name contains it");
            }
        }
        Ok(runs
            .into_iter()
            .map(|(name, doc)| HierarchyRun {
                name,
                doc,
                base_dir: base_dir.clone(),
            })
            .collect())
    };
    runs().map_err(crate::RunError::from)
}

impl HierarchyRun {
    /// Runs it into its record.
    pub fn run(&self) -> crate::Result<HierarchyRecord> {
        let result = run_document(&self.doc, &self.base_dir)
            .with_context(|| format!("run `{}`", self.name))?;
        Ok(HierarchyRecord {
            tool: tiercache_metrics::TOOL_NAME,
            version: env!("CARGO_PKG_VERSION"),
            kind: "hierarchy",
            name: self.name.clone(),
            config: self.doc.to_json(),
            result,
        })
    }
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
