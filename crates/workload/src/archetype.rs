//! docs/design.md §4.7's workload archetypes, scaled to a cache hierarchy: named workloads whose
//! working set is set by the sum of the levels' capacities (`aggregate`).
//!
//! | archetype | addresses | working set |
//! | --- | --- | --- |
//! | `random` | uniform | `aggregate` |
//! | `sequential` | a loop, request after request | `aggregate` × [`SEQUENTIAL_FRACTION`] (slightly smaller) |
//! | `zipf` | zipf θ = 1 (probability ∝ 1/i), ranks scattered | `aggregate` × [`ZIPF_SPAN`] |
//!
//! Every archetype reads one block (a cache line) per request, one job at queue depth one;
//! the caller bounds the run (`requests`) and may change anything else in the returned spec.

use crate::spec::{AddressDist, BlockSize, WorkloadSpec};
use serde::{Deserialize, Serialize};

/// Share of the aggregate capacity the SEQUENTIAL loop covers ("slightly smaller").
pub const SEQUENTIAL_FRACTION: f64 = 0.95;

/// Footprint of ZIPF in aggregates: the tail reaches well past what the hierarchy holds.
pub const ZIPF_SPAN: u64 = 4;

/// A §4.7 archetype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Archetype {
    /// Uniform over a working set equal to the aggregate capacity.
    Random,
    /// A loop over a working set slightly smaller than the aggregate.
    Sequential,
    /// Zipf with θ = 1 over a footprint of [`ZIPF_SPAN`] aggregates.
    Zipf,
}

impl Archetype {
    /// Every archetype, in report order.
    pub const ALL: [Archetype; 3] = [Archetype::Random, Archetype::Sequential, Archetype::Zipf];

    /// Name as written in configs.
    pub fn name(self) -> &'static str {
        match self {
            Archetype::Random => "random",
            Archetype::Sequential => "sequential",
            Archetype::Zipf => "zipf",
        }
    }

    /// The workload for a hierarchy of `aggregate` bytes of cache, reading `block`-byte
    /// blocks (`block` divides into the footprint; the aggregate is rounded down to blocks,
    /// at least one).
    pub fn spec(self, aggregate: u64, block: u64, requests: u64, seed: u64) -> WorkloadSpec {
        let block = block.max(1);
        let blocks = (aggregate / block).max(1);
        let (footprint_blocks, distribution) = match self {
            Archetype::Random => (blocks, AddressDist::Uniform),
            Archetype::Sequential => (
                blocks,
                AddressDist::Loop {
                    size: Some(((blocks as f64 * SEQUENTIAL_FRACTION) as u64).max(1) * block),
                    size_fraction: None,
                },
            ),
            Archetype::Zipf => (
                blocks * ZIPF_SPAN,
                AddressDist::Zipf {
                    theta: 1.0,
                    scramble: true,
                },
            ),
        };
        WorkloadSpec {
            seed,
            jobs: 1,
            iodepth: Some(1),
            read_fraction: 1.0,
            block_sizes: vec![BlockSize {
                size: block,
                weight: 1.0,
            }],
            alignment: Some(block),
            footprint: footprint_blocks * block,
            distribution,
            requests: Some(requests),
            ..WorkloadSpec::default()
        }
    }
}

impl std::str::FromStr for Archetype {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Archetype::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| format!("unknown archetype `{s}` (random, sequential, zipf)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SyntheticWorkload;
    use std::collections::HashSet;

    #[test]
    fn archetypes_are_scaled_to_the_aggregate() {
        let (agg, block) = (256 * 4096, 4096);
        let blocks_of = |a: Archetype| -> (HashSet<u64>, Vec<u64>) {
            let reqs: Vec<_> = SyntheticWorkload::new(&a.spec(agg, block, 5000, 3))
                .unwrap()
                .into_stream()
                .collect();
            assert_eq!(reqs.len(), 5000);
            assert!(reqs.iter().all(|r| r.len == block && r.offset % block == 0));
            let seq: Vec<u64> = reqs.iter().map(|r| r.offset / block).collect();
            (seq.iter().copied().collect(), seq)
        };
        let (random, _) = blocks_of(Archetype::Random);
        assert!(random.iter().all(|&b| b < 256) && random.len() > 240);
        let (seq, order) = blocks_of(Archetype::Sequential);
        assert_eq!(seq.len(), 243, "a loop over 95% of 256 blocks");
        assert_eq!(&order[..3], &[0, 1, 2]);
        assert_eq!(order[243], 0, "the loop wraps");
        let (zipf, _) = blocks_of(Archetype::Zipf);
        assert!(zipf.iter().any(|&b| b >= 256), "reaches past the aggregate");
        assert!(zipf.len() < 5000 / 2, "skewed: many repeats");
        assert_eq!("zipf".parse::<Archetype>().unwrap(), Archetype::Zipf);
        assert!("loop".parse::<Archetype>().is_err());
    }
}
