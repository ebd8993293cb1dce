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

/// What a hierarchy run reads of a document: anything else (a `[cache]`, a `[workload]`,
/// `run.requests`) is for `sim`, and a hierarchy run would ignore it.
const HIERARCHY_READS: [&str; 3] = ["name", "hierarchy", "run.seed"];

fn run_any(doc: &Document, base_dir: &Path) -> Result<HierarchyResult> {
    // A result is never silently wrong (docs/design.md §9): refuse what this runner would not
    // read, naming the key.
    crate::refuse_unread(doc, &HIERARCHY_READS)?;
    let mut cfg: HierarchyConfig = doc.typed(Some("hierarchy"))?;
    seed_clients(doc, &mut cfg)?;
    let sim = HierarchySim::new(&cfg)?;
    let mut sources: Vec<Box<dyn RequestSource>> = Vec::new();
    for (i, c) in cfg.clients.iter().enumerate() {
        let field = format!("hierarchy.clients[{i}].workload");
        if let Some(mut spec) = cfg.synthetic_spec(i) {
            if spec.requests.is_none() && spec.duration_ns.is_none() && cfg.duration_ns.is_none() {
                // Nothing would end this client: bounded as `sim` bounds an unbounded run.
                spec.requests = Some(crate::experiment::DEFAULT_RUN_REQUESTS);
                crate::print_note(&format!(
                    "{field}: nothing bounds this client's workload (requests, duration_ns, hierarchy.duration_ns): measuring {} requests",
                    crate::experiment::DEFAULT_RUN_REQUESTS
                ));
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

/// Seeds every client that has no seed of its own from `run.seed` (1 when absent): client `i`
/// gets `run.seed + i`, so repetitions of a sweep (which set `run.seed`, docs/design.md §9)
/// differ, and without `run.seed` an archetype client keeps its default, `i + 1`. A synthetic
/// client's `seed` defaults to 0 and is left alone unless the document sets `run.seed`.
fn seed_clients(doc: &Document, cfg: &mut HierarchyConfig) -> Result<()> {
    let explicit = tiercache_config::lookup(&doc.value, "run.seed").is_some();
    let seed = crate::experiment::run_seed(doc)?;
    for (i, c) in cfg.clients.iter_mut().enumerate() {
        let own = format!("hierarchy.clients[{i}].workload.synthetic.seed");
        if c.workload.archetype.is_some() && c.workload.seed.is_none() {
            c.workload.seed = Some(seed + i as u64);
        } else if let Some(spec) = c.workload.synthetic.as_mut() {
            if explicit && tiercache_config::lookup(&doc.value, &own).is_none() {
                spec.seed = seed + i as u64;
            }
        }
    }
    Ok(())
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
    /// A run of `doc` named `name`, relative trace paths starting from `base_dir` (a sweep
    /// point's resolved document is one run).
    pub fn new(name: String, doc: Document, base_dir: PathBuf) -> Self {
        Self {
            name,
            doc,
            base_dir,
        }
    }

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

    const SMALL: &str = r#"
        [hierarchy]
        backend = { model = "constant", latency_ns = "5ms" }
        [[hierarchy.levels]]
        name = "array"
        cache = { capacity = "64KiB" }
        device = { model = "constant", latency_ns = "200us" }
        [[hierarchy.clients]]
        name = "host"
        workload = { archetype = "zipf", requests = 2000 }
        "#;

    /// A key a hierarchy run would not read (a sweep's `--set run.requests`, a `[cache]`) is an
    /// error naming it, not a result that silently ignored it.
    #[test]
    fn keys_a_hierarchy_does_not_read_are_refused_by_name() {
        for (extra, key) in [
            ("[run]\nrequests = 10\n", "`run.requests`"),
            ("[cache]\nline_size = 4096\n", "`cache`"),
        ] {
            let doc = Document::parse(&format!("{SMALL}\n{extra}"), "point p").unwrap();
            let e = format!(
                "{:#}",
                run_document(&doc, Path::new("."))
                    .unwrap_err()
                    .into_anyhow()
            );
            assert!(e.contains(key) && e.contains("point p"), "{e}");
        }
    }

    /// `run.seed` seeds the clients (a sweep's repetitions differ); seed 1, the default, gives
    /// what a config without it gives.
    #[test]
    fn run_seed_seeds_the_clients() {
        let run = |extra: &str| {
            let doc = Document::parse(&format!("{SMALL}\n{extra}"), "t").unwrap();
            let r = run_document(&doc, Path::new(".")).unwrap();
            r.levels.iter().map(|l| l.hit_fraction).collect::<Vec<_>>()
        };
        let plain = run("");
        assert_eq!(run("[run]\nseed = 1\n"), plain);
        assert_ne!(run("[run]\nseed = 2\n"), plain);
    }

    /// A synthetic client nothing bounds is measured over the default request count, as
    /// `sim` measures an unbounded run (it ran for ever).
    #[test]
    fn an_unbounded_synthetic_client_is_bounded_by_default() {
        let text = SMALL.replace(
            r#"{ archetype = "zipf", requests = 2000 }"#,
            r#"{ synthetic = { footprint = "64MiB" } }"#,
        );
        let doc = Document::parse(&text, "test").unwrap();
        let r = run_document(&doc, Path::new(".")).unwrap();
        assert_eq!(r.requests, crate::experiment::DEFAULT_RUN_REQUESTS);
    }
}
