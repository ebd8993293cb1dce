//! Recovery's scan of the slot table: each part read sequentially in large chunks, a reader
//! thread reading ahead of the decoding, every slot's newer valid copy kept
//! (docs/design.md §13).

use super::shadow::{self, line_key, Shadow, NO_LINE};
use super::{
    decode, mask_bits, unsettled_limit, Layout, Prelude, RecoveryReport, SlotRecord, SlotTable,
    SlotTableError, SUPERBLOCK_BYTES,
};
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use tiercache_blockdev::BlockDevice;

/// Threads a recovery of `lines` lines uses: the machine's cores, one for a small cache
/// (where starting threads costs more than it saves).
pub(crate) fn recovery_threads(lines: usize) -> usize {
    if lines < 1 << 16 {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get().min(16))
}

impl SlotTable {
    /// Opens the table on `dev` as [`open`](Self::open) does, a blank device excepted
    /// (`Ok(None)`, nothing written: open it with [`open`](Self::open), which formats it);
    /// the slots are recovered in `runs` (contiguous, ascending, together every slot), each
    /// by one of `threads` threads taking them in order, which calls `work(i, scan)` for
    /// run `i`: `scan()` reads the run's records into the table and returns the run's
    /// recovered lines (ascending), so they are used while other runs are still read
    /// (docs/design.md §13, the fifth stop: each shard restored by the thread that scanned
    /// it). Returns the table, the report and what `work` returned for each run, in run
    /// order; a run whose scan failed leaves the table incomplete, so `work`'s answers are
    /// where that failure is seen.
    pub fn open_runs<T: Send>(
        dev: &dyn BlockDevice,
        layout: Layout,
        runs: &[std::ops::Range<u32>],
        threads: usize,
        work: impl Fn(usize, &dyn Fn() -> io::Result<Vec<(u32, SlotRecord)>>) -> T + Sync,
    ) -> Result<Option<(SlotTable, RecoveryReport, Vec<T>)>, SlotTableError> {
        let next = AtomicUsize::new(0);
        let in_order = || Some(next.fetch_add(1, SeqCst)).filter(|&i| i < runs.len());
        Self::open_runs_taking(dev, layout, runs, threads, &in_order, work)
    }

    /// As [`open_runs`](Self::open_runs), the threads taking the runs in the order `take`
    /// hands them out (each run exactly once, then `None`): an engine serving before the
    /// scan ends hands out first the shards that requests wait for (docs/design.md §13,
    /// "Serving before the scan ends").
    pub fn open_runs_taking<T: Send>(
        dev: &dyn BlockDevice,
        layout: Layout,
        runs: &[std::ops::Range<u32>],
        threads: usize,
        take: &(dyn Fn() -> Option<usize> + Sync),
        work: impl Fn(usize, &dyn Fn() -> io::Result<Vec<(u32, SlotRecord)>>) -> T + Sync,
    ) -> Result<Option<(SlotTable, RecoveryReport, Vec<T>)>, SlotTableError> {
        let covered = runs.first().is_none_or(|r| r.start == 0)
            && runs.windows(2).all(|w| w[0].end == w[1].start)
            && runs.last().map_or(0, |r| r.end) == layout.slots;
        assert!(covered, "runs must cover the table in order: {runs:?}");
        let mut sb = [0u8; 64];
        if dev.size() >= layout.device_len() {
            dev.read_at(&mut sb, 0)?;
            if sb.iter().all(|&b| b == 0) {
                return Ok(None);
            }
        }
        match Self::prelude(dev, layout, false)? {
            // A superblock that is not all zeros is never formatted without `format`.
            Prelude::Formatted(_) => Ok(None),
            Prelude::Recover(layout) => Ok(Some(Self::recover_runs(
                dev, layout, runs, threads, take, work,
            ))),
        }
    }

    /// Recovers every slot of `layout` into a new table, the slots in `runs`, each taken by
    /// one of `threads` threads in the order `take` gives and handed to `work` (see
    /// [`open_runs_taking`](Self::open_runs_taking)).
    pub(super) fn recover_runs<T: Send>(
        dev: &dyn BlockDevice,
        layout: Layout,
        runs: &[std::ops::Range<u32>],
        threads: usize,
        take: &(dyn Fn() -> Option<usize> + Sync),
        work: impl Fn(usize, &dyn Fn() -> io::Result<Vec<(u32, SlotRecord)>>) -> T + Sync,
    ) -> (SlotTable, RecoveryReport, Vec<T>) {
        // Epoch 0: what the device holds at open, durable. Every slot is set by its run's
        // scan (the runs cover the table).
        let shadow = Shadow::new_unset(
            layout.slots,
            mask_bits(&layout),
            unsettled_limit(&layout) / shadow::STRIPES,
        );
        let totals = std::sync::Mutex::new((0u64, RecoveryReport::default()));
        let one = |i: usize| {
            let r = &runs[i];
            let scan_run = || {
                let p = scan(dev, &layout, &shadow, u64::from(r.start)..u64::from(r.end))?;
                let mut t = totals.lock().unwrap_or_else(|e| e.into_inner());
                t.0 = t.0.max(p.max_seq);
                t.1.corrupt_records += p.corrupt_records;
                t.1.lines += p.lines;
                t.1.dirty_lines += p.dirty_lines;
                Ok(p.found)
            };
            work(i, &scan_run)
        };
        let threads = threads.clamp(1, runs.len().max(1));
        let mut done: Vec<(usize, T)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let one = &one;
                    s.spawn(move || {
                        let mut mine = Vec::new();
                        while let Some(i) = take() {
                            mine.push((i, one(i)));
                        }
                        mine
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("a recovery thread panicked"))
                .collect()
        });
        done.sort_by_key(|d| d.0);
        let (max_seq, report) = totals.into_inner().unwrap_or_else(|e| e.into_inner());
        let table = Self::with_shadow(layout, shadow, max_seq);
        (table, report, done.into_iter().map(|d| d.1).collect())
    }
}

/// Slots a recovery reads at once (half a MiB of 64-byte slots).
pub(super) const SCAN_CHUNK: u64 = 8192;

/// What recovering one part of the slot table found.
pub(super) struct Scanned {
    /// Non-empty slots, ascending.
    pub found: Vec<(u32, SlotRecord)>,
    pub max_seq: u64,
    pub corrupt_records: u64,
    pub lines: u64,
    pub dirty_lines: u64,
}

/// Recovers slots `range` into `shadow`: reads their records sequentially, keeps each slot's
/// newer copy whose checksum holds.
pub(super) fn scan(
    dev: &dyn BlockDevice,
    layout: &Layout,
    shadow: &Shadow,
    range: std::ops::Range<u64>,
) -> io::Result<Scanned> {
    let slot_bytes = layout.slot_bytes();
    let mut out = Scanned {
        // At most one line a slot: sized once, so a full cache's list is never grown and
        // copied while it fills (docs/design.md §13).
        found: Vec::with_capacity((range.end - range.start) as usize),
        max_seq: 0,
        corrupt_records: 0,
        lines: 0,
        dirty_lines: 0,
    };
    // A reader thread reads the next chunk while this one decodes the last, two buffers
    // passed back and forth: the device's time and the decoding's overlap rather than add
    // (docs/design.md §13).
    let chunk_bytes = (SCAN_CHUNK * slot_bytes) as usize;
    std::thread::scope(|s| -> io::Result<()> {
        let (full_tx, full_rx) = mpsc::sync_channel::<io::Result<(u64, u64, Vec<u8>)>>(1);
        let (empty_tx, empty_rx) = mpsc::channel::<Vec<u8>>();
        for _ in 0..2 {
            empty_tx
                .send(vec![0u8; chunk_bytes])
                .expect("the reader holds its end");
        }
        let range = range.clone();
        s.spawn(move || {
            let mut slot = range.start;
            while slot < range.end {
                // The decoder gone (it failed, or has stopped): nothing more to read.
                let Ok(mut buf) = empty_rx.recv() else { return };
                let n = SCAN_CHUNK.min(range.end - slot);
                let read = dev
                    .read_at(
                        &mut buf[..(n * slot_bytes) as usize],
                        SUPERBLOCK_BYTES + slot * slot_bytes,
                    )
                    .map(|()| (slot, n, buf));
                let failed = read.is_err();
                if full_tx.send(read).is_err() || failed {
                    return;
                }
                slot += n;
            }
        });
        for read in full_rx {
            let (slot, n, buf) = read?;
            scan_chunk(layout, shadow, slot, n, &buf, &mut out);
            // The reader may have finished: the buffer is then simply dropped.
            let _ = empty_tx.send(buf);
        }
        Ok(())
    })?;
    Ok(out)
}

/// Recovers the `n` slots from `slot` on whose records `bytes` holds into `shadow` and `out`.
fn scan_chunk(
    layout: &Layout,
    shadow: &Shadow,
    slot: u64,
    n: u64,
    bytes: &[u8],
    out: &mut Scanned,
) {
    let (record_bytes, slot_bytes) = (layout.record_bytes(), layout.slot_bytes());
    for i in 0..n {
        let base = (i * slot_bytes) as usize;
        let mut best: Option<(u64, u8, SlotRecord)> = None;
        let mut keys = [NO_LINE; 2];
        for copy in 0..2u8 {
            let at = base + (copy as u64 * record_bytes) as usize;
            match decode(
                layout.version,
                slot + i,
                &bytes[at..at + record_bytes as usize],
            ) {
                Ok(Some((seq, rec))) => {
                    keys[copy as usize] = line_key(rec.line);
                    out.max_seq = out.max_seq.max(seq);
                    if best.is_none_or(|b| seq > b.0) {
                        best = Some((seq, copy, rec));
                    }
                }
                Ok(None) => {}
                // Recovery ignores it, as a copy never written.
                Err(()) => out.corrupt_records += 1,
            }
        }
        let s = (slot + i) as u32;
        // Every slot is set: the table's arrays start unset (`Shadow::new_unset`).
        match best {
            Some((_, copy, rec)) => {
                shadow.restore(s, copy, rec.line, keys[1 - copy as usize], rec.dirty);
                if rec.line.is_some() && rec.valid != 0 {
                    out.lines += 1;
                    out.dirty_lines += (rec.dirty != 0) as u64;
                    out.found.push((s, rec));
                }
            }
            None => shadow.reset(s),
        }
    }
}
