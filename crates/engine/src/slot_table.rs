//! Persistent cache metadata: which line each slot holds, which sub-blocks are valid and
//! dirty — kept on the cache device so a write-back cache survives kill -9 and power loss.
//!
//! Layout of the cache device:
//!
//! | bytes | contents |
//! | --- | --- |
//! | 0 .. 4096 | superblock: magic `TIERCSLT`, version, line size, slot count, data offset, CRC-32 |
//! | 4096 .. data offset | slot table: per slot two 64-byte records, A and B |
//! | data offset .. | slot data, slot × line size |
//!
//! A record is `seq u64, volume u32, flags u32, index u64, valid u64, dirty u64, crc u32`
//! (little endian, zero padded to 64 bytes; bit 0 of flags: the slot holds a line). An update
//! of a slot writes the copy *not* holding its newest record, with the next sequence number:
//! a write torn by power loss damages only that copy, whose CRC then fails, and recovery keeps
//! the other — the previous state. A record whose CRC fails is counted and never trusted; an
//! all-zero record is a slot never written.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard, RwLock};
use tiercache_blockdev::BlockDevice;

const MAGIC: &[u8; 8] = b"TIERCSLT";
const VERSION: u32 = 1;
/// Bytes reserved for the superblock.
pub const SUPERBLOCK_BYTES: u64 = 4096;
const RECORD_BYTES: u64 = 64;
const SLOT_BYTES: u64 = 2 * RECORD_BYTES;

/// Where things are on the cache device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Slots (cache lines).
    pub slots: u32,
    /// Line size in bytes.
    pub line_size: u64,
    /// Byte offset of slot 0's data.
    pub data_offset: u64,
}

impl Layout {
    /// The layout for `slots` lines of `line_size` bytes.
    pub fn new(slots: u32, line_size: u64) -> Self {
        let table_end = SUPERBLOCK_BYTES + slots as u64 * SLOT_BYTES;
        Self {
            slots,
            line_size,
            data_offset: table_end.div_ceil(4096) * 4096,
        }
    }

    /// Bytes the cache device needs.
    pub fn device_len(&self) -> u64 {
        self.data_offset + self.slots as u64 * self.line_size
    }
}

/// What a slot holds, as persisted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotRecord {
    /// (volume, line index), or `None` for an empty slot.
    pub line: Option<(u32, u64)>,
    /// Valid sub-blocks.
    pub valid: u64,
    /// Dirty sub-blocks.
    pub dirty: u64,
}

impl SlotRecord {
    /// An empty slot.
    pub const EMPTY: SlotRecord = SlotRecord {
        line: None,
        valid: 0,
        dirty: 0,
    };
}

/// Problems with the persisted metadata.
#[derive(Debug, thiserror::Error)]
pub enum SlotTableError {
    /// The device is too small for the configured layout.
    #[error("cache device holds {have} bytes but {need} are needed for {slots} lines")]
    TooSmall {
        /// Bytes present.
        have: u64,
        /// Bytes needed.
        need: u64,
        /// Configured lines.
        slots: u32,
    },
    /// The superblock belongs to another layout.
    #[error("cache device superblock: {field} is {on_disk} on disk but {configured} configured (the device holds another configuration's cache: write its dirty lines back with `tiercache flush` under that configuration, then delete the file or give engine.cache_path another one)")]
    Mismatch {
        /// Field name.
        field: &'static str,
        /// Value on disk.
        on_disk: u64,
        /// Value configured.
        configured: u64,
    },
    /// The superblock is damaged.
    #[error("cache device superblock at offset 0: {0}")]
    CorruptSuperblock(String),
    /// The device holds something other than a tiercache cache (no superblock, yet its
    /// metadata area is not blank): formatting it would destroy that data.
    #[error("cache device: {0}")]
    NotTiercache(String),
    /// Device I/O failed.
    #[error("cache device metadata I/O: {0}")]
    Io(#[from] io::Error),
}

/// What recovery found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RecoveryReport {
    /// The device had no superblock: formatted now.
    pub formatted: bool,
    /// Slots found holding a line.
    pub lines: u64,
    /// Of those, lines with dirty data.
    pub dirty_lines: u64,
    /// Records whose checksum failed (torn or corrupt), ignored.
    pub corrupt_records: u64,
}

#[derive(Debug, Clone, Copy)]
struct SlotState {
    seq: u64,
    /// Copy (0 = A, 1 = B) holding `seq`.
    copy: u8,
    line: Option<(u32, u64)>,
    /// Dirty sub-blocks of the newest record.
    dirty: u64,
    /// What a crash may leave in each copy (see [`SlotTable::may_recover_other`]).
    copies: [CopyState; 2],
}

/// What one copy of a slot's record may hold after a crash: its newest record (if that
/// write landed), the durable one it replaced, one written in between (`mixed`), or a torn
/// one, which recovery ignores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CopyState {
    /// The line of the newest record written to this copy, as a [`line_key`], and its
    /// sequence number.
    newest: u64,
    newest_seq: u64,
    /// The sync epoch it was written in (see [`SlotTable::sync`]).
    epoch: u64,
    /// The line and sequence number of the newest record of this copy known durable when a
    /// later one was written.
    durable: u64,
    durable_seq: u64,
    /// A record written to this copy after `durable`, and replaced without a sync since,
    /// named a line other than `durable` and `newest`.
    mixed: bool,
}

/// No line (an empty slot, or a copy never written).
const NO_LINE: u64 = u64::MAX;
/// A line that does not fit a key (recovery refuses those): never equal to a served line.
const ODD_LINE: u64 = u64::MAX - 1;

/// A line as one `u64` for the crash bookkeeping.
fn line_key(line: Option<(u32, u64)>) -> u64 {
    match line {
        None => NO_LINE,
        Some((v, i)) if v < 1 << 15 && i < 1 << 48 => (v as u64) << 48 | i,
        Some(_) => ODD_LINE,
    }
}

impl CopyState {
    /// A copy holding record `seq` of `line`, durable (`seq` 0: no record).
    fn durable(line: Option<(u32, u64)>, seq: u64) -> Self {
        let k = line_key(line);
        Self {
            newest: k,
            newest_seq: seq,
            epoch: 0,
            durable: k,
            durable_seq: seq,
            mixed: false,
        }
    }
}

/// An opened table, the recovered non-empty slots (ascending) and the recovery report.
pub type Opened = (SlotTable, Vec<(u32, SlotRecord)>, RecoveryReport);

/// The persisted slot table of one cache device.
///
/// It knows which records are durable: records written before a [`sync`](Self::sync) began
/// are, once it returns. Until then a crash may leave either copy of a slot with an older
/// record (a lost write leaves the copy as it was, a torn one fails its checksum and recovery
/// takes the other copy), and [`may_recover_other`](Self::may_recover_other) says whether one
/// of those might name another line.
#[derive(Debug)]
pub struct SlotTable {
    layout: Layout,
    /// One lock per slot: record writes of different slots go to the device at once (one
    /// table-wide lock held across the device write serialised them behind each other).
    slots: Box<[Mutex<SlotState>]>,
    /// Held shared by a record write across its bookkeeping and device write, exclusively by
    /// [`sync`](Self::sync) while it opens the next epoch: so every record of an epoch was
    /// handed to the device before that epoch's sync starts.
    gate: RwLock<()>,
    /// The current sync epoch: records written now carry it.
    epoch: AtomicU64,
    /// Records of epochs up to this one are durable.
    durable: AtomicU64,
}

fn encode(seq: u64, r: &SlotRecord) -> [u8; RECORD_BYTES as usize] {
    let mut b = [0u8; RECORD_BYTES as usize];
    let (vol, index) = r.line.unwrap_or((0, 0));
    b[0..8].copy_from_slice(&seq.to_le_bytes());
    b[8..12].copy_from_slice(&vol.to_le_bytes());
    b[12..16].copy_from_slice(&(r.line.is_some() as u32).to_le_bytes());
    b[16..24].copy_from_slice(&index.to_le_bytes());
    b[24..32].copy_from_slice(&r.valid.to_le_bytes());
    b[32..40].copy_from_slice(&r.dirty.to_le_bytes());
    let crc = crc32fast::hash(&b[0..40]);
    b[40..44].copy_from_slice(&crc.to_le_bytes());
    b
}

/// `Ok(None)`: never written. `Err(())`: checksum failed.
#[allow(clippy::result_unit_err)]
fn decode(b: &[u8]) -> Result<Option<(u64, SlotRecord)>, ()> {
    if b.iter().all(|&x| x == 0) {
        return Ok(None);
    }
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    if crc32fast::hash(&b[0..40]) != u32_at(40) {
        return Err(());
    }
    let present = u32_at(12) & 1 == 1;
    Ok(Some((
        u64_at(0),
        SlotRecord {
            line: present.then(|| (u32_at(8), u64_at(16))),
            valid: if present { u64_at(24) } else { 0 },
            dirty: if present { u64_at(32) } else { 0 },
        },
    )))
}

fn superblock(layout: &Layout) -> Vec<u8> {
    let mut b = vec![0u8; 64];
    b[0..8].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[12..20].copy_from_slice(&layout.line_size.to_le_bytes());
    b[20..28].copy_from_slice(&(layout.slots as u64).to_le_bytes());
    b[28..36].copy_from_slice(&layout.data_offset.to_le_bytes());
    let crc = crc32fast::hash(&b[0..36]);
    b[36..40].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The fields a superblock records, once its magic and checksum are checked.
struct Superblock {
    version: u64,
    line_size: u64,
    lines: u64,
    data_offset: u64,
}

impl Superblock {
    /// Reads the 64 bytes at offset 0 (see [`superblock`] for the layout).
    fn parse(sb: &[u8]) -> Result<Self, SlotTableError> {
        if &sb[0..8] != MAGIC {
            return Err(SlotTableError::NotTiercache(
                "no tiercache magic at offset 0".into(),
            ));
        }
        if crc32fast::hash(&sb[0..36]) != u32::from_le_bytes(sb[36..40].try_into().unwrap()) {
            return Err(SlotTableError::CorruptSuperblock(
                "checksum mismatch".into(),
            ));
        }
        let field = |i: usize| u64::from_le_bytes(sb[i..i + 8].try_into().unwrap());
        Ok(Self {
            version: u64::from(u32::from_le_bytes(sb[8..12].try_into().unwrap())),
            line_size: field(12),
            lines: field(20),
            data_offset: field(28),
        })
    }
}

/// The offset of the first non-zero byte of `dev` in `from..to`, if any.
fn first_nonzero(dev: &dyn BlockDevice, from: u64, to: u64) -> io::Result<Option<u64>> {
    let mut buf = vec![0u8; 1 << 20];
    let mut at = from;
    while at < to {
        let n = (to - at).min(buf.len() as u64) as usize;
        dev.read_at(&mut buf[..n], at)?;
        if let Some(i) = buf[..n].iter().position(|&b| b != 0) {
            return Ok(Some(at + i as u64));
        }
        at += n as u64;
    }
    Ok(None)
}

impl SlotTable {
    /// The layout the superblock of `dev` records, when it has a valid one.
    pub fn on_disk_layout(dev: &dyn BlockDevice) -> Result<Layout, SlotTableError> {
        let mut sb = vec![0u8; 64];
        dev.read_at(&mut sb, 0)?;
        let on_disk = Superblock::parse(&sb)?;
        let slots = u32::try_from(on_disk.lines).map_err(|_| {
            SlotTableError::CorruptSuperblock(format!("lines {} out of range", on_disk.lines))
        })?;
        let layout = Layout::new(slots, on_disk.line_size);
        if layout.data_offset != on_disk.data_offset {
            return Err(SlotTableError::CorruptSuperblock(format!(
                "data_offset {} does not follow from {slots} lines",
                on_disk.data_offset
            )));
        }
        Ok(layout)
    }

    /// Opens the table on `dev`: formats a device without a superblock (or any device when
    /// `format`), else checks the superblock against `layout` and recovers every slot.
    /// Returns the table, the recovered records of non-empty slots (ascending slot order) and
    /// a report.
    pub fn open(
        dev: &dyn BlockDevice,
        layout: Layout,
        format: bool,
    ) -> Result<Opened, SlotTableError> {
        if dev.size() < layout.device_len() {
            return Err(SlotTableError::TooSmall {
                have: dev.size(),
                need: layout.device_len(),
                slots: layout.slots,
            });
        }
        let mut sb = vec![0u8; 64];
        dev.read_at(&mut sb, 0)?;
        let mut report = RecoveryReport::default();
        // Epoch 0: what the device holds at open, durable.
        let fresh = State {
            seq: 0,
            copy: 1,
            line: None,
            dirty: 0,
            copies: [CopyState::durable(None, 0); 2],
        };
        type State = SlotState;
        // A blank device (a new file) is formatted without being asked; anything else without
        // a superblock (another filesystem, a cache whose first bytes were lost) is not.
        let blank = !format && sb.iter().all(|&b| b == 0) && {
            match first_nonzero(dev, 0, layout.data_offset)? {
                None => true,
                Some(at) => {
                    return Err(SlotTableError::NotTiercache(format!(
                        "no tiercache superblock at offset 0, yet the metadata area holds data \
                         (byte {at} is not zero): not a blank device, so it is not formatted \
                         on its own; set engine.format = true to discard what it holds"
                    )))
                }
            }
        };
        if format || blank {
            // Zero the table, then write the superblock: a crash in between leaves a device
            // that is formatted again next time.
            let zeros = vec![0u8; 1 << 20];
            let mut at = SUPERBLOCK_BYTES;
            while at < layout.data_offset {
                let n = (layout.data_offset - at).min(zeros.len() as u64) as usize;
                dev.write_at(&zeros[..n], at, false)?;
                at += n as u64;
            }
            dev.flush()?;
            dev.write_at(&superblock(&layout), 0, false)?;
            dev.flush()?;
            report.formatted = true;
            let table = Self::with_states(layout, vec![fresh; layout.slots as usize]);
            return Ok((table, Vec::new(), report));
        }
        let sbk = Superblock::parse(&sb).map_err(|e| match e {
            SlotTableError::NotTiercache(m) => SlotTableError::NotTiercache(format!(
                "{m}: not a tiercache cache device (set engine.format = true to format it)"
            )),
            e => e,
        })?;
        for (name, on_disk, configured) in [
            ("version", sbk.version, VERSION as u64),
            ("line_size", sbk.line_size, layout.line_size),
            ("lines", sbk.lines, layout.slots as u64),
            ("data_offset", sbk.data_offset, layout.data_offset),
        ] {
            if on_disk != configured {
                return Err(SlotTableError::Mismatch {
                    field: name,
                    on_disk,
                    configured,
                });
            }
        }
        let mut states = vec![fresh; layout.slots as usize];
        let mut found = Vec::new();
        let per_chunk = 8192u64;
        let mut buf = vec![0u8; (per_chunk * SLOT_BYTES) as usize];
        let mut slot = 0u64;
        while slot < layout.slots as u64 {
            let n = per_chunk.min(layout.slots as u64 - slot);
            let bytes = &mut buf[..(n * SLOT_BYTES) as usize];
            dev.read_at(bytes, SUPERBLOCK_BYTES + slot * SLOT_BYTES)?;
            for i in 0..n {
                let base = (i * SLOT_BYTES) as usize;
                let mut best: Option<(u64, u8, SlotRecord)> = None;
                let mut copies = [CopyState::durable(None, 0); 2];
                for copy in 0..2u8 {
                    let at = base + copy as usize * RECORD_BYTES as usize;
                    match decode(&bytes[at..at + RECORD_BYTES as usize]) {
                        Ok(Some((seq, rec))) => {
                            copies[copy as usize] = CopyState::durable(rec.line, seq);
                            if best.is_none_or(|b| seq > b.0) {
                                best = Some((seq, copy, rec));
                            }
                        }
                        Ok(None) => {}
                        // Recovery ignores it, as a copy never written.
                        Err(()) => report.corrupt_records += 1,
                    }
                }
                let s = (slot + i) as usize;
                states[s].copies = copies;
                if let Some((seq, copy, rec)) = best {
                    states[s] = SlotState {
                        seq,
                        copy,
                        line: rec.line,
                        dirty: rec.dirty,
                        copies,
                    };
                    if rec.line.is_some() && rec.valid != 0 {
                        report.lines += 1;
                        report.dirty_lines += (rec.dirty != 0) as u64;
                        found.push((s as u32, rec));
                    }
                }
            }
            slot += n;
        }
        let table = Self::with_states(layout, states);
        Ok((table, found, report))
    }

    fn with_states(layout: Layout, states: Vec<SlotState>) -> Self {
        Self {
            layout,
            slots: states.into_iter().map(Mutex::new).collect(),
            gate: RwLock::new(()),
            epoch: AtomicU64::new(1),
            durable: AtomicU64::new(0),
        }
    }

    /// The state of `slot`, locked.
    fn slot(&self, slot: u32) -> MutexGuard<'_, SlotState> {
        self.slots[slot as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Syncs `dev` (the cache device): every record written before this call is durable
    /// when it returns.
    pub fn sync(&self, dev: &dyn BlockDevice) -> io::Result<()> {
        // Under the gate writes hold shared while they write: every record of an epoch up
        // to `e` was handed to the device before the sync below starts.
        let e = {
            let _writes = self.gate.write().unwrap_or_else(|e| e.into_inner());
            self.epoch.fetch_add(1, SeqCst)
        };
        dev.flush()?;
        self.durable.fetch_max(e, SeqCst);
        Ok(())
    }

    /// Whether a crash now could recover a record of `slot` naming a line other than `line`
    /// (no line is always fine). Recovery takes the copy with the newer valid record. A copy
    /// written since the last sync may be left as it was, or with any record written to it
    /// since, or torn (ignored); one not written since holds its durable record, which then
    /// wins only over an older or possibly torn other copy.
    pub fn may_recover_other(&self, slot: u32, line: (u32, u64)) -> bool {
        let want = line_key(Some(line));
        let other = |k: u64| k != NO_LINE && (k != want || k == ODD_LINE);
        let durable = self.durable.load(SeqCst);
        let st = self.slot(slot);
        let copies = &st.copies;
        (0..2).any(|c| {
            let (me, them) = (&copies[c], &copies[1 - c]);
            let (me_synced, them_synced) = (me.epoch <= durable, them.epoch <= durable);
            let (d, d_seq) = if me_synced {
                (me.newest, me.newest_seq)
            } else {
                (me.durable, me.durable_seq)
            };
            let them_seq = if them_synced {
                them.newest_seq
            } else {
                them.durable_seq
            };
            let durable_wins = !them_synced || d_seq > them_seq;
            (durable_wins && other(d)) || (!me_synced && (other(me.newest) || me.mixed))
        })
    }

    /// Clears `slot`: an empty record in both copies, so that once synced no crash recovers
    /// any line from it (writing one copy would leave the other's older record to a crash
    /// that loses or tears the next write).
    pub fn clear(&self, dev: &dyn BlockDevice, slot: u32) -> io::Result<()> {
        self.write(dev, slot, &SlotRecord::EMPTY)?;
        self.write(dev, slot, &SlotRecord::EMPTY)
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The line the newest record of `slot` names.
    pub fn persisted_line(&self, slot: u32) -> Option<(u32, u64)> {
        self.slot(slot).line
    }

    /// Whether writing `rec` as `slot`'s newest record would drop dirty sub-blocks the
    /// newest record holds (of the same line, or of a line the slot no longer holds).
    pub fn drops_dirty(&self, slot: u32, rec: &SlotRecord) -> bool {
        let st = self.slot(slot);
        let kept = if rec.line == st.line { rec.dirty } else { 0 };
        st.dirty & !kept != 0
    }

    /// Writes `rec` as the newest record of `slot` (durable at the device's next sync).
    ///
    /// Panics on a record that would corrupt the table: a slot out of range, dirty sub-blocks
    /// not valid, masks on an empty slot, or a line replacing another's record directly (the
    /// old record must be cleared, and that made durable, before the new line's data lands).
    pub fn write(&self, dev: &dyn BlockDevice, slot: u32, rec: &SlotRecord) -> io::Result<()> {
        // The engine addresses slots of its own layout: another would land in the data area.
        assert!(
            slot < self.layout.slots,
            "slot {slot} beyond the table's {} slots",
            self.layout.slots
        );
        // Recovery restores only dirty data that is valid, and masks of a held line.
        assert!(
            rec.dirty & !rec.valid == 0 && (rec.line.is_some() || rec.valid == 0),
            "slot {slot}: record {rec:?} is inconsistent"
        );
        let _epoch = self.gate.read().unwrap_or_else(|e| e.into_inner());
        let mut st = self.slot(slot);
        // A slot changes lines through an empty record: the engine clears the old line's
        // record (durably) before the new line's bytes land, so a crash never pairs them.
        assert!(
            rec.line.is_none() || st.line.is_none() || st.line == rec.line,
            "slot {slot}: record of line {:?} written over line {:?}'s",
            rec.line,
            st.line
        );
        let copy = 1 - st.copy;
        // Recovery keeps the copy with the larger sequence number: it must grow.
        let seq = st
            .seq
            .checked_add(1)
            .expect("slot record sequence overflow");
        let at = SUPERBLOCK_BYTES + slot as u64 * SLOT_BYTES + copy as u64 * RECORD_BYTES;
        // Records stay inside the table, never over the slot data.
        debug_assert!(at + RECORD_BYTES <= self.layout.data_offset);
        let c = &mut st.copies[copy as usize];
        let key = line_key(rec.line);
        if c.epoch <= self.durable.load(SeqCst) {
            // The record replaced in this copy was durable: a crash leaves it or this one.
            c.durable = c.newest;
            c.durable_seq = c.newest_seq;
            c.mixed = false;
        } else if c.newest != c.durable && c.newest != key {
            // An unsynced record naming a third line may stay until the next sync.
            c.mixed = true;
        }
        c.newest = key;
        c.newest_seq = seq;
        c.epoch = self.epoch.load(SeqCst);
        // Bookkeeping first: a failed write may still have reached the device.
        dev.write_at(&encode(seq, rec), at, false)?;
        st.seq = seq;
        st.copy = copy;
        st.line = rec.line;
        st.dirty = rec.dirty;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiercache_blockdev::MemDevice;

    fn rec(v: u32, i: u64, valid: u64, dirty: u64) -> SlotRecord {
        SlotRecord {
            line: Some((v, i)),
            valid,
            dirty,
        }
    }

    #[test]
    fn round_trip_and_torn_records_fall_back() {
        let layout = Layout::new(10, 4096);
        let dev = MemDevice::new(layout.device_len() as usize);
        let (t, found, rep) = SlotTable::open(&dev, layout, false).unwrap();
        assert!(rep.formatted && found.is_empty());
        t.write(&dev, 3, &rec(0, 77, 0xff, 0x0f)).unwrap();
        t.write(&dev, 3, &rec(0, 77, 0xff, 0)).unwrap();
        t.write(&dev, 5, &rec(1, 9, 1, 1)).unwrap();
        t.write(&dev, 6, &rec(1, 10, 1, 1)).unwrap();
        t.write(&dev, 6, &SlotRecord::EMPTY).unwrap();
        let (_, found, rep) = SlotTable::open(&dev, layout, false).unwrap();
        assert_eq!(found, vec![(3, rec(0, 77, 0xff, 0)), (5, rec(1, 9, 1, 1))]);
        assert_eq!((rep.lines, rep.dirty_lines, rep.corrupt_records), (2, 1, 0));
        // Tear slot 3's newest record (copy B, seq 2): recovery falls back to seq 1.
        let at = SUPERBLOCK_BYTES + 3 * SLOT_BYTES + RECORD_BYTES + 20;
        dev.write_at(&[0xAA; 8], at, false).unwrap();
        let (_, found, rep) = SlotTable::open(&dev, layout, false).unwrap();
        assert_eq!(found[0], (3, rec(0, 77, 0xff, 0x0f)));
        assert_eq!(rep.corrupt_records, 1);
    }

    /// What a crash may recover, against what recovery does with the writes lost or torn.
    #[test]
    fn records_a_crash_may_recover_are_known() {
        let layout = Layout::new(4, 4096);
        let dev = MemDevice::new(layout.device_len() as usize);
        let (t, _, _) = SlotTable::open(&dev, layout, false).unwrap();
        let (old, new) = ((0, 5), (0, 6));
        t.write(&dev, 1, &rec(0, 5, 1, 1)).unwrap();
        assert!(!t.may_recover_other(1, old) && t.may_recover_other(1, new));
        t.sync(&dev).unwrap();
        let synced = dev.snapshot();
        // Freed without a sync: the empty record may be lost, and `old` recovered.
        t.write(&dev, 1, &SlotRecord::EMPTY).unwrap();
        assert!(
            t.may_recover_other(1, new),
            "the empty record is not durable"
        );
        let lost = MemDevice::from_bytes(synced);
        let (_, found, _) = SlotTable::open(&lost, layout, false).unwrap();
        assert_eq!(
            found,
            vec![(1, rec(0, 5, 1, 1))],
            "what that crash recovers"
        );
        t.sync(&dev).unwrap();
        assert!(!t.may_recover_other(1, new), "durably freed");
        // One record of `new` after it: at worst the empty one is recovered.
        t.write(&dev, 1, &rec(0, 6, 1, 1)).unwrap();
        assert!(!t.may_recover_other(1, new));
        // A second one goes over the empty copy: losing the first and tearing the second
        // leaves the copy the first was to replace, naming `old`.
        t.write(&dev, 1, &rec(0, 6, 3, 1)).unwrap();
        assert!(t.may_recover_other(1, new));
        t.sync(&dev).unwrap();
        assert!(!t.may_recover_other(1, new));
        // `old` back, synced; a clear writes both copies.
        t.write(&dev, 1, &SlotRecord::EMPTY).unwrap();
        t.write(&dev, 1, &rec(0, 5, 1, 0)).unwrap();
        t.sync(&dev).unwrap();
        let before = dev.snapshot();
        t.clear(&dev, 1).unwrap();
        assert!(t.may_recover_other(1, new));
        t.sync(&dev).unwrap();
        assert!(!t.may_recover_other(1, new), "durably cleared, both copies");
        // The same with one empty record instead, synced: the other copy still names `old`.
        let d2 = MemDevice::from_bytes(before);
        let (t2, _, _) = SlotTable::open(&d2, layout, false).unwrap();
        t2.write(&d2, 1, &SlotRecord::EMPTY).unwrap();
        t2.sync(&d2).unwrap();
        t2.write(&d2, 1, &rec(0, 6, 1, 1)).unwrap();
        assert!(
            !t2.may_recover_other(1, new),
            "the other copy is older and durable"
        );
        t2.write(&d2, 1, &rec(0, 6, 3, 1)).unwrap();
        assert!(
            t2.may_recover_other(1, new),
            "both copies unsynced: the older one may win"
        );
    }

    /// A slot changes lines only through an empty record.
    #[test]
    #[should_panic(expected = "written over line")]
    fn a_line_replacing_another_without_a_clear_is_refused() {
        let layout = Layout::new(4, 4096);
        let dev = MemDevice::new(layout.device_len() as usize);
        let (t, _, _) = SlotTable::open(&dev, layout, false).unwrap();
        t.write(&dev, 2, &rec(0, 7, 1, 1)).unwrap();
        t.write(&dev, 2, &rec(0, 7, 3, 0)).unwrap();
        t.write(&dev, 2, &SlotRecord::EMPTY).unwrap();
        t.write(&dev, 2, &rec(0, 8, 1, 0)).unwrap();
        t.write(&dev, 2, &rec(0, 9, 1, 0)).unwrap();
    }

    #[test]
    #[should_panic(expected = "inconsistent")]
    fn dirty_data_that_is_not_valid_is_refused() {
        let layout = Layout::new(4, 4096);
        let dev = MemDevice::new(layout.device_len() as usize);
        let (t, _, _) = SlotTable::open(&dev, layout, false).unwrap();
        t.write(&dev, 0, &rec(0, 1, 0b01, 0b10)).unwrap();
    }

    #[test]
    #[should_panic(expected = "beyond the table")]
    fn a_slot_out_of_range_is_refused() {
        let layout = Layout::new(4, 4096);
        let dev = MemDevice::new(layout.device_len() as usize);
        let (t, _, _) = SlotTable::open(&dev, layout, false).unwrap();
        t.write(&dev, 4, &SlotRecord::EMPTY).unwrap();
    }

    #[test]
    fn superblock_mismatch_and_corruption_are_named() {
        let layout = Layout::new(10, 4096);
        let dev = MemDevice::new(Layout::new(20, 4096).device_len() as usize);
        SlotTable::open(&dev, layout, false).unwrap();
        let e = SlotTable::open(&dev, Layout::new(20, 4096), false).unwrap_err();
        assert!(e.to_string().contains("lines is 10 on disk but 20"), "{e}");
        dev.write_at(&[1], 13, false).unwrap();
        let e = SlotTable::open(&dev, layout, false).unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
        let small = MemDevice::new(4096);
        assert!(matches!(
            SlotTable::open(&small, layout, false),
            Err(SlotTableError::TooSmall { .. })
        ));
    }

    /// A device whose writes are volatile until `flush`, which copies them to the image a
    /// crash would leave. Writes pause before landing, to widen the window in which a sync
    /// could overtake a record write that has already taken its epoch.
    struct Volatile {
        mem: MemDevice,
        durable: Mutex<Vec<u8>>,
    }

    impl BlockDevice for Volatile {
        fn size(&self) -> u64 {
            self.mem.size()
        }
        fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
            self.mem.read_at(buf, off)
        }
        fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
            std::thread::sleep(std::time::Duration::from_micros(20));
            self.mem.write_at(data, off, fua)
        }
        fn flush(&self) -> io::Result<()> {
            *self.durable.lock().unwrap() = self.mem.snapshot();
            Ok(())
        }
    }

    /// Every record `t` counts durable (its copy's epoch synced) is in `image`, the device's
    /// durable bytes as of the last sync; how many were checked.
    fn check_durable(t: &SlotTable, image: &[u8]) -> usize {
        let durable_epoch = t.durable.load(SeqCst);
        let mut checked = 0;
        for slot in 0..t.layout.slots {
            let st = t.slot(slot);
            for c in 0..2u64 {
                let copy = &st.copies[c as usize];
                if copy.newest_seq == 0 || copy.epoch > durable_epoch {
                    continue;
                }
                let at = (SUPERBLOCK_BYTES + slot as u64 * SLOT_BYTES + c * RECORD_BYTES) as usize;
                let seq = decode(&image[at..at + RECORD_BYTES as usize])
                    .expect("a checksummed record")
                    .map_or(0, |(seq, _)| seq);
                assert_eq!(
                    seq, copy.newest_seq,
                    "slot {slot} copy {c}: counted durable"
                );
                checked += 1;
            }
        }
        checked
    }

    /// Record writes of many slots run at once while syncs run: after each sync, every
    /// record the table counts durable is in the image that sync made durable. Without the
    /// gate, a write that took its epoch before a sync bumped it could land after that
    /// sync's flush and still be counted durable.
    #[test]
    fn records_counted_durable_are_durable_under_concurrent_writes_and_syncs() {
        let layout = Layout::new(64, 4096);
        let dev = Volatile {
            mem: MemDevice::new(layout.device_len() as usize),
            durable: Mutex::new(Vec::new()),
        };
        let (t, _, _) = SlotTable::open(&dev.mem, layout, false).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let checked = std::thread::scope(|sc| {
            let (t, dev, stop) = (&t, &dev, &stop);
            let syncer = sc.spawn(move || {
                let mut checked = 0;
                while !stop.load(SeqCst) {
                    t.sync(dev).unwrap();
                    // The only syncer: the image is this sync's.
                    let image = dev.durable.lock().unwrap().clone();
                    checked += check_durable(t, &image);
                }
                checked
            });
            let writers: Vec<_> = (0..4u32)
                .map(|w| {
                    sc.spawn(move || {
                        for n in 0..300u64 {
                            let slot = w * 16 + (n % 16) as u32;
                            t.write(dev, slot, &rec(0, slot as u64, 0xff, n & 0xff))
                                .unwrap();
                        }
                    })
                })
                .collect();
            for h in writers {
                h.join().unwrap();
            }
            stop.store(true, SeqCst);
            syncer.join().unwrap()
        });
        assert!(checked > 0, "no record was counted durable");
    }
}
