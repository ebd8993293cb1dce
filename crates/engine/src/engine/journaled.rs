//! The layout the last run journaled (`crate::partition_log`), put back on the shards at open
//! before recovery restores their lines: each volume's partitions and its own write policy.

use super::*;
use tiercache_policy::WritePolicy;

/// Puts `journaled` (partitions of served volumes) and `write_policies` back on `caches`, the
/// shards of `cache_cfg` laid out by `shard_layout`, with a note of each in `notes`. A partition
/// first holds exactly the lines `found` (the recovery threads' lists) for it in its shard (restoring fails on a full
/// partition, and a crash may have come mid-resize): the journaled sizes are applied once
/// the engine runs. A write policy configured for a volume (`tenancy.fixed`) replaces the
/// journaled one.
pub(super) fn restore(
    caches: &mut [Cache],
    cache_cfg: &CacheConfig,
    shard_layout: &ShardLayout,
    found: &[Vec<(u32, SlotRecord)>],
    journaled: &[crate::partition_log::PartitionEntry],
    write_policies: &[(u32, WritePolicy)],
    notes: &mut Vec<String>,
) -> Result<(), EngineError> {
    let n = caches.len();
    if !journaled.is_empty() {
        let mut per_volume: Vec<(u32, u64)> = Vec::new();
        for e in journaled {
            match per_volume.iter_mut().find(|p| p.0 == e.volume) {
                Some(p) => p.1 += u64::from(e.lines),
                None => per_volume.push((e.volume, u64::from(e.lines))),
            }
        }
        notes.push(format!(
            "partitions as journaled by the last run (configured ones replace them): {}",
            per_volume
                .iter()
                .map(|(v, l)| format!("volume {v}: {l} lines"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // Write policies given at run time (by an operator or a tenancy mode) as the last
    // run journaled them; a configured one (`tenancy.fixed`) replaces its volume's.
    let mut restored = Vec::new();
    for &(v, p) in write_policies {
        let fixed = cache_cfg
            .tenancy
            .fixed
            .iter()
            .any(|f| f.volume == v && f.write_policy.is_some());
        if !fixed {
            for c in caches.iter_mut() {
                c.set_write_policy(Some(VolumeId(v)), p);
            }
            restored.push(format!("volume {v}: {}", p.name()));
        }
    }
    if !restored.is_empty() {
        notes.push(format!(
            "write policies as journaled by the last run: {}",
            restored.join(", ")
        ));
    }
    // Journaled partitions first hold exactly the lines found for them (restoring fails
    // on a full partition, and a crash may have come mid-resize); the journaled sizes are
    // applied once the engine runs (see the end).
    for e in journaled {
        let k = e.shard as usize;
        if k >= n {
            return Err(EngineError::Recovery(format!(
                "the journaled partition layout names shard {k} of {n}: cache.shards changed \
                 since the cache was written"
            )));
        }
        let found_here = found
            .iter()
            .flatten()
            .filter(|(slot, rec)| {
                shard_layout.shard_of_slot(*slot) == k
                    && rec.line.is_some_and(|(v, _)| v == e.volume)
            })
            .count() as u64;
        let mut none = Vec::new();
        caches[k]
            .set_partition(VolumeId(e.volume), found_here, &mut none)
            .map_err(|err| EngineError::Recovery(format!("journaled partitions: {err}")))?;
    }
    Ok(())
}
