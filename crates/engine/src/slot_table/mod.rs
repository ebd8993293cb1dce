//! Persistent cache metadata: which line each slot holds, which sub-blocks are valid and
//! dirty — kept on the cache device so a write-back cache survives kill -9 and power loss.
//!
//! Layout of the cache device:
//!
//! | bytes | contents |
//! | --- | --- |
//! | 0 .. 4096 | superblock: magic `TIERCSLT`, version (the record format), line size, slot count, data offset, CRC-32 |
//! | 4096 .. data offset | slot table: per slot two records, A and B (32 bytes each in format 2, 64 in format 1) |
//! | data offset .. | slot data, slot × line size |
//!
//! Format 2 (lines of up to 16 sub-blocks, so up to 8 KiB: 64 bytes a slot, docs/design.md
//! §13): `seq u64, volume u16, flags u8, 0u8, index u48, valid u16, dirty u16, crc u32`, zero
//! padded to 32 bytes. Format 1 (wider lines, and devices formatted by earlier builds):
//! `seq u64, volume u32, flags u32, index u64, valid u64, dirty u64, crc u32`, zero padded to
//! 64 bytes. Formats 3 and 4 are formats 2 and 1 whose CRC also covers the slot's number
//! (a record is valid only where it was written); new devices use them. Little endian; bit 0
//! of flags: the slot holds a line. An update
//! of a slot writes the copy *not* holding its newest record, with a larger sequence number:
//! a write torn by power loss damages only that copy, whose CRC then fails, and recovery keeps
//! the other — the previous state. A record whose CRC fails is counted and never trusted; an
//! all-zero record is a slot never written.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::RwLock;
use tiercache_blockdev::BlockDevice;

mod scan;
mod shadow;
#[cfg(test)]
mod tests;

pub(crate) use scan::recovery_threads;
use scan::SCAN_CHUNK;
use shadow::{line_key, Shadow, NO_LINE, ODD_LINE, SETTLED_NEWEST_SEQ};

const MAGIC: &[u8; 8] = b"TIERCSLT";
/// Format 1: 64-byte records (any line). Format 2: 32-byte records, for lines of up to 16
/// sub-blocks (docs/design.md §13). A device keeps the format it was formatted with.
const WIDE: u32 = 1;
const COMPACT: u32 = 2;
/// Formats 3 and 4: formats 2 and 1 whose record checksum also covers the slot's number, so a
/// valid record copied over another slot's place (a misdirected write, or a fuzzed image) fails
/// its check instead of naming its line in the wrong slot. New devices are formatted with
/// these; a device formatted by an earlier build keeps format 1 or 2.
const COMPACT_SLOT_BOUND: u32 = 3;
const WIDE_SLOT_BOUND: u32 = 4;

/// Format `version` has 32-byte records.
fn is_compact(version: u32) -> bool {
    version == COMPACT || version == COMPACT_SLOT_BOUND
}

/// The checksum of a record's `bytes` (at most 40) in format `version` at slot `slot`.
///
/// One pass over one contiguous buffer: recovery checks two records a slot, so at start-up
/// this is per-slot work (docs/design.md §13). The bytes checked are those of the
/// IEEE CRC-32 over the slot's number (slot-bound formats) then the record, as written.
fn record_crc(version: u32, slot: u64, bytes: &[u8]) -> u32 {
    let mut buf = [0u8; 8 + 40];
    let head = if version >= COMPACT_SLOT_BOUND {
        buf[..8].copy_from_slice(&slot.to_le_bytes());
        8
    } else {
        0
    };
    buf[head..head + bytes.len()].copy_from_slice(bytes);
    crc32fast::hash(&buf[..head + bytes.len()])
}
/// Bytes reserved for the superblock.
pub const SUPERBLOCK_BYTES: u64 = 4096;
/// A record write syncs first when more than 1/64 of the slots (at least
/// [`MIN_UNSETTLED_LIMIT`]) are unsettled: their crash states (about 100 bytes each) then
/// cost at most about 2 bytes a slot, for one device sync per that many record writes.
const UNSETTLED_SHARE: usize = 64;
const MIN_UNSETTLED_LIMIT: usize = 4096;
/// The largest record.
const MAX_RECORD_BYTES: usize = 64;

/// Where things are on the cache device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Slots (cache lines).
    pub slots: u32,
    /// Line size in bytes.
    pub line_size: u64,
    /// Byte offset of slot 0's data.
    pub data_offset: u64,
    /// Record format (1 and 4: 64-byte records, 2 and 3: 32-byte records; 3 and 4 bind each
    /// record's checksum to its slot).
    pub version: u32,
}

impl Layout {
    /// The layout a device is formatted with for `slots` lines of `line_size` bytes: 32-byte
    /// records where a line's masks fit them (up to 16 sub-blocks: lines up to 8 KiB).
    pub fn new(slots: u32, line_size: u64) -> Self {
        let compact =
            tiercache_core::LineGeometry::new(line_size).is_ok_and(|g| g.subs_per_line() <= 16);
        Self::with_version(
            if compact {
                COMPACT_SLOT_BOUND
            } else {
                WIDE_SLOT_BOUND
            },
            slots,
            line_size,
        )
    }

    /// The layout of record format `version` (1 to 4).
    pub fn with_version(version: u32, slots: u32, line_size: u64) -> Self {
        let mut l = Self {
            slots,
            line_size,
            data_offset: 0,
            version,
        };
        let table_end = SUPERBLOCK_BYTES + slots as u64 * l.slot_bytes();
        l.data_offset = table_end.div_ceil(4096) * 4096;
        l
    }

    /// Bytes of one record.
    pub fn record_bytes(&self) -> u64 {
        if is_compact(self.version) {
            32
        } else {
            64
        }
    }

    /// Bytes of one slot's two records.
    pub fn slot_bytes(&self) -> u64 {
        2 * self.record_bytes()
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
    /// Lines whose clean sub-blocks were dropped because the last run served requests past
    /// the cache (the pass-through mark, docs/design.md §11): the backend may hold newer data
    /// than they do. Their dirty sub-blocks are kept; lines with none are not recovered.
    pub clean_dropped_after_pass_through: u64,
}

/// An opened table, the recovered non-empty slots (ascending) and the recovery report.
pub type Opened = (SlotTable, Vec<(u32, SlotRecord)>, RecoveryReport);

/// What [`SlotTable::open_parts`] returns: the table, the recovered records of non-empty
/// slots as lists each ascending, every slot of a list below every slot of the next, and the
/// report.
pub type OpenedParts = (SlotTable, Vec<Vec<(u32, SlotRecord)>>, RecoveryReport);

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
    /// What the records of every slot name, and what a crash may leave of them (a striped
    /// lock: record writes of slots in different stripes go to the device at once).
    shadow: Shadow,
    /// Held shared by a record write across its bookkeeping and device write, exclusively by
    /// [`sync`](Self::sync) while it opens the next epoch: so every record of an epoch was
    /// handed to the device before that epoch's sync starts.
    gate: RwLock<()>,
    /// The current sync epoch: records written now carry it.
    epoch: AtomicU64,
    /// Records of epochs up to this one are durable.
    durable: AtomicU64,
}

/// A record in format `version`: the bytes, of which the first `record_bytes` are written.
///
/// Format 2 (32 bytes): `seq u64, volume u16, flags u8, 0u8, index u48, valid u16, dirty u16,
/// crc u32` over the 22 bytes before it, zero padded. Format 1 (64 bytes): see the module doc.
fn encode(version: u32, slot: u64, seq: u64, r: &SlotRecord) -> [u8; MAX_RECORD_BYTES] {
    let mut b = [0u8; MAX_RECORD_BYTES];
    let (vol, index) = r.line.unwrap_or((0, 0));
    if is_compact(version) {
        b[0..8].copy_from_slice(&seq.to_le_bytes());
        b[8..10].copy_from_slice(&(vol as u16).to_le_bytes());
        b[10] = r.line.is_some() as u8;
        b[12..18].copy_from_slice(&index.to_le_bytes()[..6]);
        b[18..20].copy_from_slice(&(r.valid as u16).to_le_bytes());
        b[20..22].copy_from_slice(&(r.dirty as u16).to_le_bytes());
        let crc = record_crc(version, slot, &b[0..22]);
        b[22..26].copy_from_slice(&crc.to_le_bytes());
        return b;
    }
    b[0..8].copy_from_slice(&seq.to_le_bytes());
    b[8..12].copy_from_slice(&vol.to_le_bytes());
    b[12..16].copy_from_slice(&(r.line.is_some() as u32).to_le_bytes());
    b[16..24].copy_from_slice(&index.to_le_bytes());
    b[24..32].copy_from_slice(&r.valid.to_le_bytes());
    b[32..40].copy_from_slice(&r.dirty.to_le_bytes());
    let crc = record_crc(version, slot, &b[0..40]);
    b[40..44].copy_from_slice(&crc.to_le_bytes());
    b
}

/// `Ok(None)`: never written. `Err(())`: checksum failed.
#[allow(clippy::result_unit_err)]
fn decode(version: u32, slot: u64, b: &[u8]) -> Result<Option<(u64, SlotRecord)>, ()> {
    // Or-ed whole rather than searched byte by byte: the compiler makes it a few vector
    // instructions, and most records at start-up are not blank.
    if b.iter().fold(0u8, |acc, &x| acc | x) == 0 {
        return Ok(None);
    }
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    if is_compact(version) {
        let u16_at = |i: usize| u64::from(u16::from_le_bytes(b[i..i + 2].try_into().unwrap()));
        if record_crc(version, slot, &b[0..22]) != u32_at(22) {
            return Err(());
        }
        let present = b[10] & 1 == 1;
        let mut index = [0u8; 8];
        index[..6].copy_from_slice(&b[12..18]);
        return Ok(Some((
            u64_at(0),
            SlotRecord {
                line: present.then(|| (u16_at(8) as u32, u64::from_le_bytes(index))),
                valid: if present { u16_at(18) } else { 0 },
                dirty: if present { u16_at(20) } else { 0 },
            },
        )));
    }
    if record_crc(version, slot, &b[0..40]) != u32_at(40) {
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
    b[8..12].copy_from_slice(&layout.version.to_le_bytes());
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
        let version = known_version(on_disk.version)?;
        let layout = Layout::with_version(version, slots, on_disk.line_size);
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
    ///
    /// A device of the other record format with the same slots and line size is opened in
    /// its own format ([`layout`](Self::layout) says which): formatting is what changes it.
    pub fn open(
        dev: &dyn BlockDevice,
        layout: Layout,
        format: bool,
    ) -> Result<Opened, SlotTableError> {
        let (table, parts, report) = Self::open_parts(dev, layout, format)?;
        Ok((table, concat(parts), report))
    }

    /// [`open`](Self::open), the recovered records left in the lists the recovery threads
    /// filled (docs/design.md §13: at 64 GiB, one list of them all was 640 MiB copied by one
    /// thread).
    pub fn open_parts(
        dev: &dyn BlockDevice,
        layout: Layout,
        format: bool,
    ) -> Result<OpenedParts, SlotTableError> {
        Self::open_in(dev, layout, format, recovery_threads(layout.slots as usize))
    }

    /// [`open`](Self::open), recovering with `threads` threads.
    fn open_in(
        dev: &dyn BlockDevice,
        layout: Layout,
        format: bool,
        threads: usize,
    ) -> Result<OpenedParts, SlotTableError> {
        let layout = match Self::prelude(dev, layout, format)? {
            Prelude::Formatted(opened) => return Ok(*opened),
            Prelude::Recover(layout) => layout,
        };
        // The table is read in contiguous parts, one per thread, each sequentially in large
        // reads (docs/design.md §13: start-up bounded by the device, not by one CPU decoding).
        let slots = u64::from(layout.slots);
        let threads = threads.max(1) as u64;
        let part = slots.div_ceil(threads).div_ceil(SCAN_CHUNK) * SCAN_CHUNK;
        let runs: Vec<std::ops::Range<u32>> = (0..threads)
            .map(|t| (t * part).min(slots) as u32..((t + 1) * part).min(slots) as u32)
            .filter(|r| !r.is_empty())
            .collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let in_order = || {
            Some(next.fetch_add(1, std::sync::atomic::Ordering::SeqCst)).filter(|&i| i < runs.len())
        };
        let (table, report, parts) = Self::recover_runs(
            dev,
            layout,
            &runs,
            threads as usize,
            &in_order,
            |_, scan| scan(),
        );
        let found = parts.into_iter().collect::<io::Result<Vec<_>>>()?;
        Ok((table, found, report))
    }

    /// Checks the superblock of `dev` against `layout`; formats the device when asked (or
    /// blank).
    fn prelude(
        dev: &dyn BlockDevice,
        layout: Layout,
        format: bool,
    ) -> Result<Prelude, SlotTableError> {
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
            let shadow = Shadow::new(
                layout.slots,
                mask_bits(&layout),
                unsettled_limit(&layout) / shadow::STRIPES,
            );
            let table = Self::with_shadow(layout, shadow, 0);
            return Ok(Prelude::Formatted(Box::new((table, Vec::new(), report))));
        }
        let sbk = Superblock::parse(&sb).map_err(|e| match e {
            SlotTableError::NotTiercache(m) => SlotTableError::NotTiercache(format!(
                "{m}: not a tiercache cache device (set engine.format = true to format it)"
            )),
            e => e,
        })?;
        // A device of the other format is read in its own.
        let layout = match known_version(sbk.version)? {
            v if v != layout.version => Layout::with_version(v, layout.slots, layout.line_size),
            _ => layout,
        };
        for (name, on_disk, configured) in [
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
        Ok(Prelude::Recover(layout))
    }
}

/// What [`SlotTable::prelude`] found: a device it formatted, or the layout to recover in.
enum Prelude {
    Formatted(Box<OpenedParts>),
    Recover(Layout),
}

/// One list of the records `parts` hold, in their order: the first list grows once to hold
/// all (a large allocation is moved by the allocator, pages remapped rather than copied), the
/// others appended to it. Only what was found is reserved: room for every slot of a huge,
/// mostly empty cache could exceed what the machine would allocate.
pub fn concat(mut parts: Vec<Vec<(u32, SlotRecord)>>) -> Vec<(u32, SlotRecord)> {
    if parts.is_empty() {
        return Vec::new();
    }
    let mut found = std::mem::take(&mut parts[0]);
    found.reserve_exact(parts.iter().skip(1).map(Vec::len).sum());
    for p in parts.into_iter().skip(1) {
        found.extend(p);
    }
    found
}

impl SlotTable {
    /// A table over `shadow`, whose device holds sequence numbers up to `max_seq`.
    fn with_shadow(layout: Layout, mut shadow: Shadow, max_seq: u64) -> Self {
        // Above every number on the device and every stand-in of a settled slot (see
        // `shadow`), so each slot's records grow.
        shadow.start_sequence(max_seq.max(SETTLED_NEWEST_SEQ) + 1);
        Self {
            layout,
            shadow,
            gate: RwLock::new(()),
            epoch: AtomicU64::new(1),
            durable: AtomicU64::new(0),
        }
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
        self.shadow.settle(self.durable.load(SeqCst));
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
        let copies = &self.shadow.lock(slot).copies();
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
        self.shadow.lock(slot).line()
    }

    /// Heap bytes of the in-memory state of the records (see `shadow`).
    pub fn memory_bytes(&self) -> usize {
        self.shadow.memory_bytes()
    }

    /// Whether writing `rec` as `slot`'s newest record would drop dirty sub-blocks the
    /// newest record holds (of the same line, or of a line the slot no longer holds).
    pub fn drops_dirty(&self, slot: u32, rec: &SlotRecord) -> bool {
        let st = self.shadow.lock(slot);
        let kept = if rec.line == st.line() { rec.dirty } else { 0 };
        st.dirty() & !kept != 0
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
        // A compact record holds a line of a 16-bit volume and a 48-bit index.
        assert!(
            !is_compact(self.layout.version)
                || rec
                    .line
                    .is_none_or(|(v, i)| v <= u16::MAX as u32 && i < 1 << 48),
            "slot {slot}: record {rec:?} does not fit the compact format"
        );
        // The shadow keeps dirty masks as wide as the line's sub-blocks.
        assert!(
            rec.valid & !self.shadow.mask_max() == 0,
            "slot {slot}: record {rec:?} is inconsistent: more sub-blocks than a line has"
        );
        let mut synced = false;
        let (_epoch, mut st) = loop {
            let epoch = self.gate.read().unwrap_or_else(|e| e.into_inner());
            let st = self.shadow.lock(slot);
            // Once is enough: slots a sync cannot settle (a failed write's) must not make
            // every write sync.
            if synced || !st.crowded() {
                break (epoch, st);
            }
            // Many slots written and no sync: one now settles them (a sync only makes more
            // records durable, which no caller minds). It takes the gate and every stripe.
            drop((st, epoch));
            self.sync(dev)?;
            synced = true;
        };
        let held = st.line();
        // A slot changes lines through an empty record: the engine clears the old line's
        // record (durably) before the new line's bytes land, so a crash never pairs them.
        assert!(
            rec.line.is_none() || held.is_none() || held == rec.line,
            "slot {slot}: record of line {:?} written over line {:?}'s",
            rec.line,
            held
        );
        let copy = 1 - st.copy();
        // Recovery keeps the copy with the larger sequence number: it must grow.
        let seq = st.next_seq();
        assert!(seq < u64::MAX / 2, "slot record sequence overflow");
        let rb = self.layout.record_bytes();
        let at = SUPERBLOCK_BYTES + slot as u64 * self.layout.slot_bytes() + copy as u64 * rb;
        // Records stay inside the table, never over the slot data.
        debug_assert!(at + rb <= self.layout.data_offset);
        let durable = self.durable.load(SeqCst);
        let epoch = self.epoch.load(SeqCst);
        let c = &mut st.copies_mut()[copy as usize];
        let key = line_key(rec.line);
        if c.epoch <= durable {
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
        c.epoch = epoch;
        // Bookkeeping first: a failed write may still have reached the device.
        dev.write_at(
            &encode(self.layout.version, slot as u64, seq, rec)[..rb as usize],
            at,
            false,
        )?;
        st.written(copy, rec.line, rec.dirty);
        Ok(())
    }
}

/// The most slots left unsettled (written since the last sync, see `shadow`) before a
/// record write syncs the device first: bounds the memory of their crash states
/// (docs/design.md §13). Each lock stripe holds its share.
fn unsettled_limit(layout: &Layout) -> usize {
    (layout.slots as usize / UNSETTLED_SHARE).max(MIN_UNSETTLED_LIMIT)
}

/// The record format a superblock names, if this build reads it.
fn known_version(v: u64) -> Result<u32, SlotTableError> {
    match v {
        1 => Ok(WIDE),
        2 => Ok(COMPACT),
        3 => Ok(COMPACT_SLOT_BOUND),
        4 => Ok(WIDE_SLOT_BOUND),
        _ => Err(SlotTableError::CorruptSuperblock(format!(
            "version {v}: this build reads record formats 1 to 4"
        ))),
    }
}

/// Bits of a dirty mask for the layout's lines (all 64 for a line size the geometry refuses,
/// which the engine never configures).
fn mask_bits(layout: &Layout) -> u32 {
    tiercache_core::LineGeometry::new(layout.line_size).map_or(64, |g| g.subs_per_line())
}
