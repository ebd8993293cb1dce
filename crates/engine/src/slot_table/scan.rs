//! Recovery's scan of the slot table: each part read sequentially in large chunks, a reader
//! thread reading ahead of the decoding, every slot's newer valid copy kept
//! (docs/design.md §13).

use super::shadow::{line_key, Shadow, NO_LINE};
use super::{decode, Layout, SlotRecord, SUPERBLOCK_BYTES};
use std::io;
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
        if let Some((_, copy, rec)) = best {
            shadow.restore(s, copy, rec.line, keys[1 - copy as usize], rec.dirty);
            if rec.line.is_some() && rec.valid != 0 {
                out.lines += 1;
                out.dirty_lines += (rec.dirty != 0) as u64;
                out.found.push((s, rec));
            }
        }
    }
}
