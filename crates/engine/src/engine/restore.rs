//! Restoring the policy cores from the lines the slot table's scan recovered
//! (`slot_table::SlotTable::open`): the checks that every line belongs to these backends and
//! to its slot's shard, then the shards' cores filled in parallel (docs/design.md §13).

use super::*;

/// The shards' policy cores for `cache_cfg` laid out by `shard_layout`, made by `threads`
/// threads: a core's arrays are written as they are made (page faults and fills a line at a
/// time), which at 64 GiB took 0.66 s on one thread (docs/design.md §13). The first error in
/// shard order, as made one by one.
pub(super) fn new_cores(
    cache_cfg: &CacheConfig,
    shard_layout: &ShardLayout,
    threads: usize,
) -> Result<Vec<Cache>, EngineError> {
    let n = shard_layout.shards();
    let threads = threads.min(n);
    let make = |k: usize| Cache::new(&shard_layout.shard_config(cache_cfg, k));
    let made: Vec<Result<Cache, PolicyError>> = if threads <= 1 {
        (0..n).map(make).collect()
    } else {
        let mut made: Vec<(usize, Result<Cache, PolicyError>)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let make = &make;
                    s.spawn(move || {
                        (t..n)
                            .step_by(threads)
                            .map(|k| (k, make(k)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("a thread making cores panicked"))
                .collect()
        });
        made.sort_by_key(|m| m.0);
        made.into_iter().map(|m| m.1).collect()
    };
    Ok(made.into_iter().collect::<Result<Vec<_>, _>>()?)
}

/// The backends recovered lines must lie in: `extents` lists each volume as (volume, base,
/// size); lines are `line_size` bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Backends<'a> {
    pub extents: &'a [(u32, u64, u64)],
    pub line_size: u64,
}

/// Checks every recovered line (`found`: lists, their lines ascending by slot from one to
/// the next) before anything uses it: it must
/// lie inside its volume's backend and belong to its slot's shard. The first offending slot,
/// in slot order, is the error, with its slot.
///
/// One pass in slot order: the slot's shard advances with the slots (shards are contiguous
/// runs of slots) rather than being searched for each line, and the volume's size is looked
/// up once per run of lines of one volume — this is per-line work at start-up.
fn first_bad_line(
    found: &[&[(u32, SlotRecord)]],
    backends: Backends<'_>,
    shard_layout: &ShardLayout,
) -> Result<(), (u32, EngineError)> {
    let Backends { extents, line_size } = backends;
    let n = shard_layout.shards();
    let mut k = found
        .iter()
        .find_map(|p| p.first())
        .map_or(0, |&(slot, _)| shard_layout.shard_of_slot(slot));
    // (volume, its size if served) of the last line checked.
    let mut last: Option<(u32, Option<u64>)> = None;
    for &(slot, ref rec) in found.iter().flat_map(|p| p.iter()) {
        let (vol, index) = rec.line.expect("recovered slots hold lines");
        // A record can pass its checksum and still name a line this backend cannot hold
        // (another backend's cache device, or a corrupt record): say so before anything
        // uses it, rather than panic or write back past the backend's end.
        let size = match last {
            Some((v, size)) if v == vol => size,
            _ => {
                let size = extents.iter().find(|e| e.0 == vol).map(|e| e.2);
                last = Some((vol, size));
                size
            }
        };
        let end = index.checked_add(1).and_then(|n| n.checked_mul(line_size));
        if end.is_none_or(|e| size.is_none_or(|s| e > s)) {
            return Err((
                slot,
                EngineError::Recovery(format!(
                    "slot {slot}: its record names line {index} of volume {vol}, outside the \
                     backends ({}): the cache device belongs to other backends \
                     or its metadata is corrupt; nothing was changed",
                    extents
                        .iter()
                        .map(|(v, _, s)| format!("volume {v}: {s} bytes"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            ));
        }
        while k + 1 < n && slot >= shard_layout.base(k + 1) {
            k += 1;
        }
        let owner = shard_layout.shard_of(VolumeId(vol), index);
        if owner != k {
            return Err((
                slot,
                EngineError::Recovery(format!(
                    "slot {slot} holds line {index}, which {n} lock shards place in shard \
                     {owner}, not {k}: cache.shards changed since the cache was written; start \
                     with the old setting and run `tiercache flush` before changing it"
                )),
            ));
        }
    }
    Ok(())
}

/// Why restoring a shard failed: a line's check (at a slot), or the core refusing a line.
enum Failed {
    Check(u32, EngineError),
    Restore(usize, EngineError),
}

/// Checks ([`first_bad_line`]) and restores the recovered lines (`found`, ascending by slot) into
/// their shards' cores, the shards in parallel (docs/design.md §13: start-up is bounded by
/// reading the slot table, not by one CPU restoring every line). A shard's slots are
/// contiguous, so its lines are one run of `found`, restored in ascending order in one
/// [`Cache::restore_lines`].
///
/// Fails as one thread checking every line first, then restoring shard by shard: the first
/// failed check in slot order, else the first shard's refusal. Each thread checks all its
/// shards before restoring any (its shards ascend, so its first failed check is its lowest),
/// and the lowest slot over the threads is the one reported.
pub(super) fn restore_shards(
    caches: &mut [Cache],
    shard_layout: &ShardLayout,
    found: &[Vec<(u32, SlotRecord)>],
    backends: Backends<'_>,
    threads: usize,
) -> Result<(), EngineError> {
    // A shard's run of lines, in the pieces of the lists holding it (a list per recovery
    // thread, cut where the threads' parts of the table meet, not at shards).
    let runs: Vec<Vec<&[(u32, SlotRecord)]>> = (0..caches.len())
        .map(|k| {
            let (lo, hi) = (
                shard_layout.base(k),
                shard_layout.base(k) + shard_layout.lines(k),
            );
            found
                .iter()
                .map(|part| {
                    let from = part.partition_point(|(s, _)| *s < lo);
                    let to = part.partition_point(|(s, _)| *s < hi);
                    &part[from..to]
                })
                .filter(|piece| !piece.is_empty())
                .collect()
        })
        .collect();
    let restore = |k: usize, cache: &mut Cache| restore_run(cache, &runs[k], shard_layout.base(k));
    // One thread's shards, ascending: all checked, then all restored.
    let work = |mine: Vec<(usize, &mut Cache)>| -> Result<(), Failed> {
        for (k, _) in &mine {
            first_bad_line(&runs[*k], backends, shard_layout)
                .map_err(|(slot, e)| Failed::Check(slot, e))?;
        }
        for (k, c) in mine {
            restore(k, c).map_err(|e| Failed::Restore(k, e))?;
        }
        Ok(())
    };
    let threads = threads.clamp(1, caches.len().max(1));
    // Shards dealt round-robin to the threads: neighbouring shards hold alike many lines.
    let mut dealt: Vec<Vec<(usize, &mut Cache)>> = (0..threads).map(|_| Vec::new()).collect();
    for (k, c) in caches.iter_mut().enumerate() {
        dealt[k % threads].push((k, c));
    }
    let outcomes: Vec<Result<(), Failed>> = if threads == 1 {
        dealt.into_iter().map(work).collect()
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = dealt
                .into_iter()
                .map(|mine| {
                    let work = &work;
                    s.spawn(move || work(mine))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a restoring thread panicked"))
                .collect()
        })
    };
    first_failure(outcomes)
}

/// The error one thread checking every line, then restoring shard by shard, would report
/// of `outcomes` (a thread's or a shard's each): the lowest slot's failed check, else the
/// lowest shard's refusal.
fn first_failure(
    outcomes: impl IntoIterator<Item = Result<(), Failed>>,
) -> Result<(), EngineError> {
    let mut check: Option<(u32, EngineError)> = None;
    let mut refused: Option<(usize, EngineError)> = None;
    for o in outcomes {
        match o {
            Ok(()) => {}
            Err(Failed::Check(slot, e)) => {
                if check.as_ref().is_none_or(|(at, _)| slot < *at) {
                    check = Some((slot, e));
                }
            }
            Err(Failed::Restore(k, e)) => {
                if refused.as_ref().is_none_or(|(first, _)| k < *first) {
                    refused = Some((k, e));
                }
            }
        }
    }
    match (check, refused) {
        (Some((_, e)), _) | (None, Some((_, e))) => Err(e),
        (None, None) => Ok(()),
    }
}

/// Restores a shard's run of recovered lines (`run`, its pieces in slot order; the shard's
/// slots from `base`) into its core `cache` at once: the same lines and first error as
/// restoring them one by one, without an index lookup before each insert
/// (docs/design.md §13).
fn restore_run(
    cache: &mut Cache,
    run: &[&[(u32, SlotRecord)]],
    base: u32,
) -> Result<(), EngineError> {
    // The `i`-th line of the run (one piece, or a few where the lists meet).
    let at = |mut i: usize| {
        for piece in run {
            if i < piece.len() {
                return &piece[i];
            }
            i -= piece.len();
        }
        unreachable!("a line beyond the shard's run")
    };
    let len = run.iter().map(|p| p.len()).sum();
    cache
        .restore_lines(len, |i| {
            let (slot, rec) = at(i);
            let (vol, index) = rec.line.expect("recovered slots hold lines");
            tiercache_policy::cache::RestoredLine {
                slot: slot - base,
                volume: VolumeId(vol),
                index,
                valid: rec.valid,
                dirty: rec.dirty,
            }
        })
        .map_err(|e| EngineError::Recovery(e.to_string()))
}

/// The slot table and the cores restored by [`scan_and_restore`], with the partition log
/// and the notes, when nothing between the scan and the restore needs every line: no
/// journaled partitions (sized by their lines before the restore), no tenancy mode linking
/// the cores; a pass-through mark's step (§11) is done per shard ([`keep_dirty_only`]).
/// The partition log and the mark are read first (read only); if a partition or a tenancy
/// mode is set, either cannot be read, or the device is blank, `Ok(None)`: the path through lists (open.rs) reads them again in its order, so
/// its errors come as before. The journaled write policies are set in each core before its
/// lines, as that path sets them.
pub(super) fn open_per_shard(
    dev: &dyn BlockDevice,
    layout: Layout,
    cache_cfg: &CacheConfig,
    shard_layout: &ShardLayout,
    backends: Backends<'_>,
    threads: usize,
    early: Option<super::early::EarlyDevices<'_>>,
) -> Result<Option<PerShard>, EngineError> {
    let Ok((_, journaled)) = crate::partition_log::PartitionLog::open(dev) else {
        return Ok(None);
    };
    let Ok(marked) = crate::pass_through_mark::read(dev) else {
        return Ok(None);
    };
    let journaled = journaled.unwrap_or_default();
    if cache_cfg.tenancy.partitions() || !journaled.partitions.is_empty() {
        return Ok(None);
    }
    let served = |v: u32| backends.extents.iter().any(|e| e.0 == v);
    let write_policies: Vec<_> = journaled
        .write_policies
        .into_iter()
        .filter(|&(v, _)| served(v))
        .collect();
    // Serving before the scan ends (docs/design.md §13): from here, once the on-device
    // layout (where the data area starts) is known; the scan's prelude checks it again.
    // Serving before the scan ends (docs/design.md §13): from here.
    let early = early.and_then(|e| e.begin(dev, layout, backends, shard_layout));
    let Some((table, report, mut caches)) = scan_and_restore(
        dev,
        layout,
        cache_cfg,
        shard_layout,
        backends,
        ReadFirst {
            write_policies: &write_policies,
            pass_through: marked.is_some(),
            early,
        },
        threads,
    )?
    else {
        return Ok(None);
    };
    let (partition_log, _) = crate::partition_log::PartitionLog::open(dev)?;
    let mut notes = Vec::new();
    if let Some(runs) = marked {
        notes.push(pass_through_note(
            runs,
            report.clean_dropped_after_pass_through,
        ));
    }
    // The write policies' notes (set again: the same values).
    super::journaled::restore(
        &mut caches,
        cache_cfg,
        shard_layout,
        &[],
        &[],
        &write_policies,
        &mut notes,
    )?;
    Ok(Some((table, report, caches, partition_log, notes)))
}

/// The note saying the clean data of `dropped` lines was dropped after `runs` runs past the
/// cache (docs/design.md §11).
pub(super) fn pass_through_note(runs: u64, dropped: u64) -> String {
    format!(
        "the last run served requests past the cache ({runs} run(s) since the cache was \
         last trusted whole): the clean data of {dropped} recovered lines was dropped, \
         as the backend may hold newer; dirty data is kept"
    )
}

/// What [`open_per_shard`] opens: the table, the report, the cores, the partition log and
/// the notes to show.
pub(super) type PerShard = (
    SlotTable,
    RecoveryReport,
    Vec<Cache>,
    crate::partition_log::PartitionLog,
    Vec<String>,
);

/// The pass-through mark's step on one list of recovered lines (docs/design.md §11: the
/// last run served requests past the cache, whose records of dropped clean copies may never
/// have landed): a line with clean data keeps only its dirty sub-blocks, one with none
/// leaves the list and its slot is emptied. Returns the slots whose records change and
/// their new records, ascending, to be written before the table is trusted.
pub(super) fn keep_dirty_only(found: &mut Vec<(u32, SlotRecord)>) -> Vec<(u32, SlotRecord)> {
    let mut rewrites = Vec::new();
    for (slot, rec) in found.iter_mut() {
        if rec.valid == rec.dirty {
            continue;
        }
        *rec = if rec.dirty == 0 {
            SlotRecord::EMPTY
        } else {
            SlotRecord {
                valid: rec.dirty,
                ..*rec
            }
        };
        rewrites.push((*slot, *rec));
    }
    found.retain(|(_, rec)| rec.line.is_some());
    rewrites
}

/// What was read before the scan that shapes the restore: the journaled write policies (of
/// served volumes) and whether the pass-through mark is set; and, when the engine serves
/// before the scan ends, where each shard is published once ready (`early.rs`).
#[derive(Clone, Copy)]
pub(super) struct ReadFirst<'a> {
    pub write_policies: &'a [(u32, tiercache_policy::WritePolicy)],
    pub pass_through: bool,
    pub early: Option<&'a super::early::Opening>,
}

/// What became of one shard in the thread that scanned it ([`scan_and_restore`]).
enum ShardOutcome {
    /// Its core could not be made.
    Core(PolicyError),
    /// Reading its slots failed.
    Scan(std::io::Error),
    /// Its core, whether its lines' checks and restore passed, and the records the
    /// pass-through step changed ([`keep_dirty_only`]); no core when it was published to
    /// serve early (`early.rs`), from where it is taken back.
    Made(
        Option<Box<Cache>>,
        Result<(), Failed>,
        Vec<(u32, SlotRecord)>,
    ),
}

/// The slot table recovered and the shards' cores made and restored, each shard by the
/// thread that scanned its slots (docs/design.md §13, the fifth stop): a shard's core is
/// made, its slots read, its lines checked ([`first_bad_line`]) and restored while other
/// threads read other shards, and no list of every recovered line exists. `None` for a
/// blank device (nothing done: open it with `SlotTable::open_parts`).
///
/// Fails as making the cores ([`new_cores`]), then scanning the table, then
/// [`restore_shards`] would, one after the other: the first core refused in shard order,
/// else the table's error (the lowest shard's read failing), else the first failed check in
/// slot order, else the first shard's refusal. Every shard is scanned even after another
/// failed, so the lowest is known; nothing is written to the device.
///
/// `write_policies` are set in every core before its lines are restored, as
/// `journaled::restore` sets them; journaled partitions need the path through lists
/// (open.rs). With `pass_through` (the mark set), each shard's lines keep only their dirty
/// data ([`keep_dirty_only`]) before they are checked, and the changed records are written,
/// synced and the mark cleared once every shard is scanned, before a check's error is
/// reported, as the path through lists does.
pub(super) fn scan_and_restore(
    dev: &dyn BlockDevice,
    layout: Layout,
    cache_cfg: &CacheConfig,
    shard_layout: &ShardLayout,
    backends: Backends<'_>,
    before: ReadFirst<'_>,
    threads: usize,
) -> Result<Option<(SlotTable, RecoveryReport, Vec<Cache>)>, EngineError> {
    let ReadFirst {
        write_policies,
        pass_through,
        early,
    } = before;
    let n = shard_layout.shards();
    let runs: Vec<std::ops::Range<u32>> = (0..n)
        .map(|k| shard_layout.base(k)..shard_layout.base(k) + shard_layout.lines(k))
        .collect();
    let work = |k: usize, scan: &dyn Fn() -> std::io::Result<Vec<(u32, SlotRecord)>>| {
        let mut cache = match Cache::new(&shard_layout.shard_config(cache_cfg, k)) {
            Ok(c) => c,
            Err(e) => return ShardOutcome::Core(e),
        };
        for &(v, p) in write_policies {
            cache.set_write_policy(Some(VolumeId(v)), p);
        }
        let mut found = match scan() {
            Ok(f) => f,
            Err(e) => return ShardOutcome::Scan(e),
        };
        let rewrites = if pass_through {
            keep_dirty_only(&mut found)
        } else {
            Vec::new()
        };
        let run = [&found[..]];
        let done = first_bad_line(&run, backends, shard_layout)
            .map_err(|(slot, e)| Failed::Check(slot, e))
            .and_then(|()| {
                restore_run(&mut cache, &run, shard_layout.base(k))
                    .map_err(|e| Failed::Restore(k, e))
            });
        // Ready: reads may use the core from now (docs/design.md §13, "Serving before the
        // scan ends"); the engine takes it back below.
        let cache = match early {
            Some(e) if done.is_ok() => {
                e.publish(k, cache);
                None
            }
            _ => Some(Box::new(cache)),
        };
        ShardOutcome::Made(cache, done, rewrites)
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let in_order =
        || Some(next.fetch_add(1, std::sync::atomic::Ordering::SeqCst)).filter(|&i| i < runs.len());
    let take: &(dyn Fn() -> Option<usize> + Sync) = match early {
        Some(e) => &|| e.take_run(),
        None => &in_order,
    };
    let opened = match SlotTable::open_runs_taking(dev, layout, &runs, threads, take, work) {
        Ok(Some(opened)) => opened,
        Ok(None) => return Ok(None),
        Err(e) => {
            // Today's order: a core refused comes before the table's error.
            new_cores(cache_cfg, shard_layout, threads)?;
            return Err(e.into());
        }
    };
    let (table, report, outcomes) = opened;
    if let Some(e) = outcomes.iter().find_map(|o| match o {
        ShardOutcome::Core(e) => Some(e.clone()),
        _ => None,
    }) {
        return Err(e.into());
    }
    let mut caches = Vec::with_capacity(n);
    let mut failed = Vec::new();
    let mut rewrites = Vec::new();
    // In shard order: the first read failing is the lowest shard's.
    for (k, o) in outcomes.into_iter().enumerate() {
        match o {
            ShardOutcome::Scan(e) => return Err(SlotTableError::Io(e).into()),
            ShardOutcome::Made(c, done, changed) => {
                let c = match (c, early) {
                    (Some(c), _) => *c,
                    (None, Some(e)) => e.take_core(k).expect("a published core is taken once"),
                    (None, None) => unreachable!("published only when serving early"),
                };
                caches.push(c);
                failed.push(done);
                rewrites.extend(changed);
            }
            ShardOutcome::Core(_) => unreachable!("reported above"),
        }
    }
    let (table, mut report) = (table, report);
    if pass_through {
        // As the path through lists: the changed records written in slot order and made
        // durable, and the mark cleared, before the lines' checks are reported.
        for (slot, rec) in &rewrites {
            table.write(dev, *slot, rec)?;
        }
        table.sync(dev)?;
        crate::pass_through_mark::clear(dev)?;
        let emptied = rewrites.iter().filter(|(_, r)| r.line.is_none()).count() as u64;
        report.lines -= emptied;
        report.clean_dropped_after_pass_through = rewrites.len() as u64;
    }
    first_failure(failed)?;
    Ok(Some((table, report, caches)))
}

#[cfg(test)]
#[path = "restore_check_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "restore_tests.rs"]
mod per_shard_tests;
