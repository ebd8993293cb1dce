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
        let written = summarize(ops).bytes_written;
        let capacity = ((written / BLOCK) / 4).max(64) as u32;
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
        let written_blocks = summarize(ops).bytes_written / BLOCK;
        for fraction in [32, 8, 2] {
            let capacity = (written_blocks / fraction).max(64) as u32;
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

#[cfg(test)]
mod tests {
    use super::*;

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
