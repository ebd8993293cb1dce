//! The file-level experiment (docs/design.md §4.9) in the simulator: the four variants on the three file
//! workloads, then file-level against block-level caching (without and with TRIM) at several
//! cache sizes. Deterministic (fixed seeds); needs no FUSE (the simulator runs the same policy
//! core the mount runs, on generated operation streams).

use tiercache_filecache::sim::{simulate, Level, SimConfig, SimResult};
use tiercache_filecache::workload::{
    generate, summarize, StreamSummary, WorkloadKind, WorkloadSpec,
};
use tiercache_filecache::Variant;

/// The cache block size of every run.
pub const BLOCK: u64 = 4096;

/// The workloads' sizes: `quick` ones for a smoke run, else the full experiment's.
pub fn workload_spec(kind: WorkloadKind, quick: bool) -> WorkloadSpec {
    let (files, transactions) = match (kind, quick) {
        (WorkloadKind::Mail, false) => (2000, 20000),
        (WorkloadKind::Mail, true) => (500, 4000),
        (WorkloadKind::FileServer, false) => (50, 600),
        (WorkloadKind::FileServer, true) => (20, 150),
        (WorkloadKind::WebServer, false) => (1000, 3000),
        (WorkloadKind::WebServer, true) => (300, 600),
    };
    WorkloadSpec {
        kind,
        files,
        transactions,
        seed: 42,
    }
}

/// One simulated run: its workload and what it counted.
#[derive(Debug, Clone)]
pub struct FileLevelRun {
    /// The workload.
    pub workload: WorkloadKind,
    /// What the run counted (its level, variant and capacity included).
    pub result: SimResult,
}

impl FileLevelRun {
    /// The run's JSON record, marked with its table (`variants` or `levels`).
    pub fn record(&self, table: &str) -> serde_json::Value {
        let r = &self.result;
        let mut v = serde_json::to_value(r).expect("results serialise");
        v["table"] = table.into();
        v["workload"] = self.workload.name().into();
        v["read_hit_ratio"] = r.hit_ratio().into();
        v
    }
}

/// Everything the experiment measured.
#[derive(Debug, Clone, Default)]
pub struct FileLevelResults {
    /// Each workload's operations, counted.
    pub workloads: Vec<(WorkloadKind, StreamSummary)>,
    /// The four variants at file level, one cache size per workload (a quarter of what it
    /// writes, at least 64 blocks).
    pub variants: Vec<FileLevelRun>,
    /// File level against block level without and with TRIM (write-back), at 1/32, 1/8 and
    /// 1/2 of what each workload writes.
    pub levels: Vec<FileLevelRun>,
}

impl FileLevelResults {
    /// One JSON record per run, the variants' first.
    pub fn records(&self) -> Vec<serde_json::Value> {
        let variants = self.variants.iter().map(|r| r.record("variants"));
        let levels = self.levels.iter().map(|r| r.record("levels"));
        variants.chain(levels).collect()
    }
}

/// Runs the experiment (`quick`: smaller workloads).
pub fn run_file_level(quick: bool) -> FileLevelResults {
    let streams: Vec<_> = WorkloadKind::ALL
        .iter()
        .map(|&k| (k, generate(&workload_spec(k, quick))))
        .collect();
    let mut out = FileLevelResults {
        workloads: streams
            .iter()
            .map(|(k, ops)| (*k, summarize(ops)))
            .collect(),
        ..FileLevelResults::default()
    };
    for (kind, ops) in &streams {
        let capacity = capacity_of(ops, 4);
        for variant in Variant::ALL {
            let result = simulate(
                ops,
                SimConfig {
                    level: Level::File,
                    variant,
                    capacity_blocks: capacity,
                    block_size: BLOCK,
                },
            );
            out.variants.push(FileLevelRun {
                workload: *kind,
                result,
            });
        }
    }
    for (kind, ops) in &streams {
        for fraction in [32, 8, 2] {
            let capacity = capacity_of(ops, fraction);
            for level in [
                Level::File,
                Level::Block { trim: false },
                Level::Block { trim: true },
            ] {
                let result = simulate(
                    ops,
                    SimConfig {
                        level,
                        variant: Variant::WB,
                        capacity_blocks: capacity,
                        block_size: BLOCK,
                    },
                );
                out.levels.push(FileLevelRun {
                    workload: *kind,
                    result,
                });
            }
        }
    }
    out
}

/// The `[file_level]` section: one run of the file-level simulator (docs/design.md §4.9), the
/// shape of a sweep point. Its workload is seeded by `run.seed` (1 when absent; the experiment
/// uses 42).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileLevelConfig {
    /// `mail`, `fileserver` or `webserver`.
    pub workload: String,
    /// The smoke run's sizes (the `file_level` example's `--quick`) instead of the full experiment's.
    #[serde(default)]
    pub quick: bool,
    /// `file`, `block` or `block+trim`.
    pub level: String,
    /// `wb`, `wb-around`, `wt` or `wt-around`.
    pub variant: String,
    /// Cache size in blocks of [`BLOCK`] bytes.
    #[serde(default)]
    pub capacity_blocks: Option<u32>,
    /// Cache size as 1/N of the blocks the workload writes (at least 64 blocks), as the
    /// experiment's tables size it; give this or `capacity_blocks`.
    #[serde(default)]
    pub capacity_fraction: Option<u64>,
}

/// What a file-level run reads of a document.
const FILE_LEVEL_READS: [&str; 3] = ["name", "file_level", "run.seed"];

/// Runs a `[file_level]` document: one workload through one cache. Errors name the key.
pub fn run_file_level_doc(doc: &tiercache_config::Document) -> crate::Result<SimResult> {
    let run = || -> anyhow::Result<SimResult> {
        crate::refuse_unread(doc, &FILE_LEVEL_READS)?;
        let cfg: FileLevelConfig = doc.typed(Some("file_level"))?;
        let bad = |key: &str, e: &dyn std::fmt::Display| {
            anyhow::anyhow!("{}: file_level.{key}: {e}", doc.context())
        };
        let kind: WorkloadKind = cfg.workload.parse().map_err(|e| bad("workload", &e))?;
        let variant: Variant = cfg.variant.parse().map_err(|e| bad("variant", &e))?;
        let level = [
            Level::File,
            Level::Block { trim: false },
            Level::Block { trim: true },
        ]
        .into_iter()
        .find(|l| l.name() == cfg.level)
        .ok_or_else(|| bad("level", &"expected file, block or block+trim"))?;
        let spec = WorkloadSpec {
            seed: crate::experiment::run_seed(doc)?,
            ..workload_spec(kind, cfg.quick)
        };
        let ops = generate(&spec);
        let capacity_blocks = match (cfg.capacity_blocks, cfg.capacity_fraction) {
            (Some(b), None) if b > 0 => b,
            (None, Some(n)) if n > 0 => capacity_of(&ops, n),
            _ => {
                return Err(bad(
                    "capacity_blocks",
                    &"give a positive capacity_blocks or capacity_fraction, not both",
                ))
            }
        };
        Ok(simulate(
            &ops,
            SimConfig {
                level,
                variant,
                capacity_blocks,
                block_size: BLOCK,
            },
        ))
    };
    run().map_err(crate::RunError::from)
}

/// A cache of 1/`fraction` of the blocks `ops` writes, at least 64 blocks.
fn capacity_of(ops: &[tiercache_filecache::workload::FileOp], fraction: u64) -> u32 {
    ((summarize(ops).bytes_written / BLOCK) / fraction).max(64) as u32
}

/// The record of a `[file_level]` sweep point: `kind = "file_level"`, its counts under
/// `metrics` (with `hit_ratio`, the block read hit ratio, and the store's bytes written), so the
/// tidy table and the report read them as they read a run's (docs/design.md §9).
pub fn file_level_record(
    name: &str,
    doc: &tiercache_config::Document,
) -> crate::Result<serde_json::Value> {
    let r = run_file_level_doc(doc)?;
    let mut metrics =
        serde_json::to_value(&r).map_err(|e| crate::RunError::from(anyhow::Error::from(e)))?;
    metrics["hit_ratio"] = r.hit_ratio().into();
    metrics["store_bytes_written"] = (r.store_blocks_written * BLOCK).into();
    Ok(serde_json::json!({
        "tool": tiercache_metrics::TOOL_NAME,
        "version": env!("CARGO_PKG_VERSION"),
        "kind": "file_level",
        "name": name,
        "seed": crate::experiment::run_seed(doc).map_err(|e| crate::RunError::from(anyhow::Error::from(e)))?,
        "config": doc.to_json(),
        "metrics": metrics,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `[file_level]` document names what it gets wrong by key, and what it would not read.
    #[test]
    fn file_level_documents_name_their_errors() {
        let err = |text: &str| {
            let doc = tiercache_config::Document::parse(text, "point p").unwrap();
            format!("{:#}", run_file_level_doc(&doc).unwrap_err().into_anyhow())
        };
        let base =
            "[file_level]\nworkload = 'mail'\nquick = true\nlevel = 'file'\nvariant = 'wb'\n";
        for (extra, says) in [
            (
                "capacity_fraction = 4\n[run]\nrequests = 5\n",
                "`run.requests`",
            ),
            ("capacity_fraction = 4\n[cache]\ncapacity = 5\n", "`cache`"),
            ("", "file_level.capacity_blocks"),
            ("capacity_blocks = 64\ncapacity_fraction = 4\n", "not both"),
        ] {
            let e = err(&format!("{base}{extra}"));
            assert!(e.contains(says) && e.contains("point p"), "{e}");
        }
        let e = err(&format!(
            "{}capacity_fraction = 4\n",
            base.replace("'file'", "'disk'")
        ));
        assert!(e.contains("file_level.level"), "{e}");
    }

    /// The quick experiment runs every table's rows, and a delete-aware file-level cache
    /// writes back no dead blocks.
    #[test]
    fn the_quick_experiment_fills_every_table() {
        let r = run_file_level(true);
        assert_eq!(r.workloads.len(), 3);
        assert_eq!(r.variants.len(), 3 * Variant::ALL.len());
        assert_eq!(r.levels.len(), 3 * 3 * 3);
        assert_eq!(r.records().len(), r.variants.len() + r.levels.len());
        for run in r.levels.iter().filter(|x| x.result.level == "file") {
            assert_eq!(run.result.dead_write_backs, 0, "{run:?}");
        }
    }
}
