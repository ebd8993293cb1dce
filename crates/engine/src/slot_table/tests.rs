//! The slot table: records round trip, torn ones fall back, what a crash may recover is
//! known, and the compact shadow answers as the reference model of docs/design.md §13.

use super::*;
use std::sync::Mutex;
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
    let at = SUPERBLOCK_BYTES + 3 * layout.slot_bytes() + layout.record_bytes() + 12;
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
        let copies = t.shadow.lock(slot).copies();
        for c in 0..2u64 {
            let copy = &copies[c as usize];
            if copy.epoch > durable_epoch {
                continue;
            }
            let rb = t.layout.record_bytes();
            let at = (SUPERBLOCK_BYTES + slot as u64 * t.layout.slot_bytes() + c * rb) as usize;
            let on_disk = decode(t.layout.version, slot as u64, &image[at..at + rb as usize])
                .expect("a checksummed record");
            if copy.newest_seq > SETTLED_NEWEST_SEQ {
                // Written since the open: its own sequence number.
                assert_eq!(
                    on_disk.map_or(0, |(seq, _)| seq),
                    copy.newest_seq,
                    "slot {slot} copy {c}: counted durable"
                );
            } else {
                // Settled: a stand-in number, the line is the record's.
                assert_eq!(
                    on_disk.map_or(NO_LINE, |(_, r)| line_key(r.line)),
                    copy.newest,
                    "slot {slot} copy {c}: settled"
                );
            }
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

/// The slot table as it was before its shadow was made compact (docs/design.md §13): every
/// slot's full state, per-slot sequence numbers. The reference the compact shadow answers
/// as.
mod reference {
    use super::super::shadow::{line_key, CopyState, NO_LINE, ODD_LINE};
    use super::SlotRecord;

    /// What one copy holds on the device: (seq, line, dirty).
    type OnDisk = (u64, Option<(u32, u64)>, u64);

    #[derive(Debug, Clone, Copy)]
    struct Slot {
        seq: u64,
        copy: u8,
        line: Option<(u32, u64)>,
        dirty: u64,
        copies: [CopyState; 2],
        /// What each copy holds on the device: (seq, line, dirty).
        disk: [OnDisk; 2],
    }

    #[derive(Debug)]
    pub struct Model {
        slots: Vec<Slot>,
        epoch: u64,
        durable: u64,
    }

    impl Model {
        pub fn new(n: usize) -> Self {
            let s = Slot {
                seq: 0,
                copy: 1,
                line: None,
                dirty: 0,
                copies: [CopyState::durable(NO_LINE, 0); 2],
                disk: [(0, None, 0); 2],
            };
            Self {
                slots: vec![s; n],
                epoch: 1,
                durable: 0,
            }
        }

        /// The model of a table opened on the device the model's writes made.
        pub fn reopen(&self) -> Self {
            let mut m = Model::new(self.slots.len());
            for (s, old) in m.slots.iter_mut().zip(&self.slots) {
                s.disk = old.disk;
                for c in 0..2 {
                    let (seq, line, _) = old.disk[c];
                    s.copies[c] = CopyState::durable(line_key(line), seq);
                }
                let c = if old.disk[0].0 > old.disk[1].0 { 0 } else { 1 };
                if old.disk[c].0 > 0 {
                    s.seq = old.disk[c].0;
                    s.copy = c as u8;
                    s.line = old.disk[c].1;
                    s.dirty = old.disk[c].2;
                }
            }
            m
        }

        pub fn sync(&mut self) {
            self.durable = self.epoch;
            self.epoch += 1;
        }

        pub fn may_recover_other(&self, slot: u32, line: (u32, u64)) -> bool {
            let want = line_key(Some(line));
            let other = |k: u64| k != NO_LINE && (k != want || k == ODD_LINE);
            let copies = &self.slots[slot as usize].copies;
            (0..2).any(|c| {
                let (me, them) = (&copies[c], &copies[1 - c]);
                let (me_synced, them_synced) =
                    (me.epoch <= self.durable, them.epoch <= self.durable);
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

        pub fn persisted_line(&self, slot: u32) -> Option<(u32, u64)> {
            self.slots[slot as usize].line
        }

        pub fn drops_dirty(&self, slot: u32, rec: &SlotRecord) -> bool {
            let st = &self.slots[slot as usize];
            let kept = if rec.line == st.line { rec.dirty } else { 0 };
            st.dirty & !kept != 0
        }

        /// Whether `rec` may be written to `slot` (the table panics otherwise).
        pub fn allows(&self, slot: u32, rec: &SlotRecord) -> bool {
            let held = self.slots[slot as usize].line;
            rec.line.is_none() || held.is_none() || held == rec.line
        }

        /// A record write; `lands`: the device took it.
        pub fn write(&mut self, slot: u32, rec: &SlotRecord, lands: bool) {
            let durable = self.durable;
            let epoch = self.epoch;
            let st = &mut self.slots[slot as usize];
            let copy = 1 - st.copy;
            let seq = st.seq + 1;
            let c = &mut st.copies[copy as usize];
            let key = line_key(rec.line);
            if c.epoch <= durable {
                c.durable = c.newest;
                c.durable_seq = c.newest_seq;
                c.mixed = false;
            } else if c.newest != c.durable && c.newest != key {
                c.mixed = true;
            }
            c.newest = key;
            c.newest_seq = seq;
            c.epoch = epoch;
            if lands {
                st.seq = seq;
                st.copy = copy;
                st.line = rec.line;
                st.dirty = rec.dirty;
                st.disk[copy as usize] = (seq, rec.line, rec.dirty);
            }
        }
    }
}

/// A memory device whose record writes fail while `failing` is set (they do not land).
struct Failing {
    mem: MemDevice,
    failing: std::sync::atomic::AtomicBool,
}

impl BlockDevice for Failing {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.mem.read_at(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        if self.failing.load(SeqCst) {
            return Err(io::Error::other("injected write error"));
        }
        self.mem.write_at(data, off, fua)
    }
    fn flush(&self) -> io::Result<()> {
        self.mem.flush()
    }
}

/// The lines the steps name: of volume 0 below 2^32 (keys whose high half is 0), above it
/// and of other volumes (other high halves), and of a volume no key fits (odd lines).
const LINES: [(u32, u64); 8] = [
    (0, 0),
    (0, 1),
    (0, 2),
    (0, 3),
    (0, 1 << 40),
    (3, 5),
    (3, (1 << 48) - 1),
    (0x8001, 2),
];

#[derive(Debug, Clone)]
enum Step {
    /// A record of line `line` (`None`: empty) with masks, to a slot; fails when `fail`.
    Write {
        slot: u32,
        /// An index into [`LINES`].
        line: Option<usize>,
        valid: u64,
        dirty: u64,
        fail: bool,
    },
    Clear(u32),
    Sync,
    Reopen,
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        6 => (0u32..6, prop::option::weighted(0.8, 0usize..LINES.len()), any::<u8>(), any::<u8>(), prop::bool::weighted(0.05))
            .prop_map(|(slot, line, valid, dirty, fail)| {
                let valid = if line.is_some() { u64::from(valid) } else { 0 };
                Step::Write { slot, line, valid, dirty: u64::from(dirty) & valid, fail }
            }),
        1 => (0u32..6).prop_map(Step::Clear),
        2 => Just(Step::Sync),
        1 => Just(Step::Reopen),
    ]
}

proptest::proptest! {
    /// Over random record writes (some failing), clears, syncs and reopens, the compact table
    /// answers every question — which line a slot's newest record names, whether a record
    /// drops dirty data, whether a crash may recover another line — as the reference model
    /// of the table before it was made compact, and a reopen recovers what the model's
    /// device holds.
    #[test]
    fn compact_shadow_answers_as_the_reference(
        steps in proptest::collection::vec(step(), 1..120),
        version in 1u32..=4,
    ) {
        let layout = Layout::with_version(version, 6, 4096);
        let dev = Failing {
            mem: MemDevice::new(layout.device_len() as usize),
            failing: false.into(),
        };
        let (mut t, _, _) = SlotTable::open(&dev, layout, false).unwrap();
        let mut m = reference::Model::new(6);
        for s in steps {
            match s {
                Step::Write { slot, line, valid, dirty, fail } => {
                    let rec = SlotRecord { line: line.map(|i| LINES[i]), valid, dirty };
                    if !m.allows(slot, &rec) {
                        continue;
                    }
                    proptest::prop_assert_eq!(t.drops_dirty(slot, &rec), m.drops_dirty(slot, &rec));
                    dev.failing.store(fail, SeqCst);
                    let r = t.write(&dev, slot, &rec);
                    dev.failing.store(false, SeqCst);
                    proptest::prop_assert_eq!(r.is_ok(), !fail);
                    m.write(slot, &rec, !fail);
                }
                Step::Clear(slot) => {
                    t.clear(&dev, slot).unwrap();
                    m.write(slot, &SlotRecord::EMPTY, true);
                    m.write(slot, &SlotRecord::EMPTY, true);
                }
                Step::Sync => {
                    t.sync(&dev).unwrap();
                    m.sync();
                }
                Step::Reopen => {
                    let (t2, found, _) = SlotTable::open(&dev, layout, false).unwrap();
                    t = t2;
                    m = m.reopen();
                    for (slot, rec) in found {
                        proptest::prop_assert_eq!(Some(rec.line), Some(m.persisted_line(slot)));
                    }
                }
            }
            for slot in 0..6 {
                proptest::prop_assert_eq!(t.persisted_line(slot), m.persisted_line(slot), "slot {}", slot);
                for line in LINES {
                    proptest::prop_assert_eq!(
                        t.may_recover_other(slot, line),
                        m.may_recover_other(slot, line),
                        "slot {} line {:?}", slot, line
                    );
                }
            }
        }
    }
}

/// Both record formats round trip every field a record holds, and the compact one takes
/// 64 bytes a slot (two 32-byte copies) where the wide one takes 128.
#[test]
fn both_record_formats_round_trip() {
    let recs = [
        SlotRecord::EMPTY,
        rec(0, 0, 1, 0),
        rec(7, (1 << 48) - 1, 0xffff, 0x8001),
        rec(u16::MAX as u32, 12345, 0xff, 0x0f),
    ];
    for version in [1, 2, 3, 4] {
        let layout = Layout::with_version(version, 4, 4096);
        assert_eq!(
            layout.slot_bytes(),
            if is_compact(version) { 64 } else { 128 }
        );
        for (i, r) in recs.iter().enumerate() {
            let b = encode(version, 9, 5 + i as u64, r);
            let n = layout.record_bytes() as usize;
            assert!(b[n..].iter().all(|&x| x == 0), "record within its size");
            assert_eq!(decode(version, 9, &b[..n]), Ok(Some((5 + i as u64, *r))));
            // Formats 3 and 4 bind the record to its slot: the same bytes at another slot
            // fail their check.
            if version >= 3 {
                assert_eq!(decode(version, 10, &b[..n]), Err(()), "copied to slot 10");
            } else {
                assert_eq!(decode(version, 10, &b[..n]), Ok(Some((5 + i as u64, *r))));
            }
            // Any flipped bit of the checksummed bytes is caught.
            let mut torn = b;
            torn[9] ^= 0x10;
            assert_eq!(decode(version, 9, &torn[..n]), Err(()));
        }
    }
    assert_eq!(
        Layout::new(4, 4096).version,
        3,
        "4 KiB lines: compact records bound to their slots"
    );
    assert_eq!(Layout::new(4, 8192).version, 3, "16 sub-blocks still fit");
    assert_eq!(
        Layout::new(4, 65536).version,
        4,
        "64 sub-blocks need the wide records"
    );
}

/// A device written in the wide format by an earlier build opens in its own format under
/// the configured (compact) layout: its lines recover, new records go in its format, and
/// formatting it makes it compact.
#[test]
fn a_wide_device_keeps_its_format_until_formatted() {
    let wide = Layout::with_version(1, 8, 4096);
    let dev = MemDevice::new(wide.device_len() as usize);
    let (t, _, _) = SlotTable::open(&dev, wide, false).unwrap();
    t.write(&dev, 2, &rec(0, 40, 0xff, 0x0f)).unwrap();
    t.sync(&dev).unwrap();
    drop(t);
    let compact = Layout::new(8, 4096);
    assert_eq!(compact.version, 3);
    let (t, found, _) = SlotTable::open(&dev, compact, false).unwrap();
    assert_eq!(t.layout(), wide, "opened in the device's format");
    assert_eq!(found, vec![(2, rec(0, 40, 0xff, 0x0f))]);
    t.write(&dev, 2, &rec(0, 40, 0xff, 0)).unwrap();
    t.write(&dev, 5, &rec(0, 41, 1, 1)).unwrap();
    drop(t);
    let (_, found, _) = SlotTable::open(&dev, compact, false).unwrap();
    assert_eq!(found, vec![(2, rec(0, 40, 0xff, 0)), (5, rec(0, 41, 1, 1))]);
    let (t, found, rep) = SlotTable::open(&dev, compact, true).unwrap();
    assert!(rep.formatted && found.is_empty());
    assert_eq!(t.layout(), compact);
    assert_eq!(SlotTable::on_disk_layout(&dev).unwrap(), compact);
}

/// A memory device that counts its syncs.
struct CountingSyncs {
    mem: MemDevice,
    syncs: std::sync::atomic::AtomicU64,
}

impl BlockDevice for CountingSyncs {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.mem.read_at(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        self.mem.write_at(data, off, fua)
    }
    fn flush(&self) -> io::Result<()> {
        self.syncs.fetch_add(1, SeqCst);
        self.mem.flush()
    }
}

/// Record writes to many slots with no sync between: the table syncs on its own before the
/// slots written since the last sync pass their limit, so the memory of their crash states
/// stays bounded (a few bytes a slot), and every record is still recovered.
#[test]
fn slots_written_without_syncs_are_bounded() {
    let slots = 400_000u32;
    let layout = Layout::new(slots, 512);
    let dev = CountingSyncs {
        mem: MemDevice::new(layout.device_len() as usize),
        syncs: 0.into(),
    };
    let (t, _, _) = SlotTable::open(&dev, layout, false).unwrap();
    let after_open = dev.syncs.load(SeqCst);
    let limit = unsettled_limit(&layout);
    assert_eq!(limit, 6250);
    for s in 0..3 * limit as u32 {
        t.write(&dev, s, &rec(0, u64::from(s), 1, 1)).unwrap();
        assert!(t.shadow.unsettled() <= limit + 1, "slot {s}");
    }
    assert!(
        dev.syncs.load(SeqCst) - after_open >= 2,
        "the table synced on its own"
    );
    assert!(
        t.memory_bytes() < slots as usize * 16,
        "{} bytes for {slots} slots",
        t.memory_bytes()
    );
    let (_, found, _) = SlotTable::open(&dev.mem, layout, false).unwrap();
    assert_eq!(found.len(), 3 * limit);
}

/// A recovery in parallel parts (one per thread, each read sequentially) finds what one
/// thread finds: the same lines, report and shadow, over a table of random records with
/// both copies used, torn copies, empty and never-written slots, lines of several volumes.
#[test]
fn a_parallel_recovery_finds_what_a_serial_one_does() {
    use rand::{Rng, SeedableRng};
    let slots = 150_000u32;
    let layout = Layout::new(slots, 4096);
    let dev = MemDevice::new(layout.device_len() as usize);
    SlotTable::open(&dev, layout, true).unwrap();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(40);
    let rb = layout.record_bytes() as usize;
    let mut image = vec![0u8; (slots as u64 * layout.slot_bytes()) as usize];
    for (slot, bytes) in image.chunks_mut(2 * rb).enumerate() {
        for copy in 0..2 {
            let r = match rng.gen_range(0..10) {
                0 => continue,
                1 => SlotRecord::EMPTY,
                _ => {
                    let valid = rng.gen_range(1..=0xffu64);
                    rec(
                        rng.gen_range(0..3),
                        rng.gen_range(0..1 << 40),
                        valid,
                        valid & rng.gen::<u64>(),
                    )
                }
            };
            let seq = rng.gen_range(1..1_000_000u64);
            let at = copy * rb;
            bytes[at..at + rb].copy_from_slice(&encode(layout.version, slot as u64, seq, &r)[..rb]);
            if rng.gen_range(0..20) == 0 {
                bytes[at + 9] ^= 0x5a;
            }
        }
    }
    dev.write_at(&image, SUPERBLOCK_BYTES, false).unwrap();
    let (one, found_one, rep_one) = open_in_one(&dev, layout, 1);
    let (four, found_four, rep_four) = open_in_one(&dev, layout, 4);
    assert!(
        rep_one.lines > 100_000 && rep_one.corrupt_records > 1000,
        "{rep_one:?}"
    );
    assert_eq!(rep_one, rep_four);
    assert_eq!(found_one, found_four);
    for s in 0..slots {
        assert_eq!(one.persisted_line(s), four.persisted_line(s), "slot {s}");
        let probe = found_one
            .get(s as usize % found_one.len())
            .unwrap()
            .1
            .line
            .unwrap();
        assert_eq!(
            one.may_recover_other(s, probe),
            four.may_recover_other(s, probe),
            "slot {s}"
        );
    }
}

/// Decoding as it was before start-up was made cheaper (a byte search for blank records, the
/// checksum hashed in two pieces): the reference the faster `decode` must answer as.
fn decode_before(version: u32, slot: u64, b: &[u8]) -> Result<Option<(u64, SlotRecord)>, ()> {
    if b.iter().all(|&x| x == 0) {
        return Ok(None);
    }
    let crc_len = if is_compact(version) { 22 } else { 40 };
    let mut h = crc32fast::Hasher::new();
    if version >= COMPACT_SLOT_BOUND {
        h.update(&slot.to_le_bytes());
    }
    h.update(&b[..crc_len]);
    let stored = u32::from_le_bytes(b[crc_len..crc_len + 4].try_into().unwrap());
    if h.finalize() != stored {
        return Err(());
    }
    // The fields as the current decoder reads them, once the checksum is known to agree.
    decode(version, slot, b)
}

proptest::proptest! {
    /// Every format, records encoded then damaged (a byte changed, the slot moved, blank):
    /// `decode` answers exactly as before — same record, same checksum verdict.
    #[test]
    fn decode_answers_as_before(
        version in 1u32..=4,
        slot in 0u64..1 << 40,
        seq in 1u64..u64::MAX,
        vol in 0u32..1 << 15,
        index in 0u64..1 << 48,
        valid in 1u64..=0xffff,
        dirty_bits in 0u64..=0xffff,
        damage in 0usize..4,
        at in 0usize..64,
        flip in 1u8..=255,
    ) {
        let rec = SlotRecord { line: Some((vol, index)), valid, dirty: dirty_bits & valid };
        let len = Layout::with_version(version, 1, 4096).record_bytes() as usize;
        let mut b = encode(version, slot, seq, &rec)[..len].to_vec();
        let read_at = match damage {
            0 => slot,
            1 => { b[at % len] ^= flip; slot }
            2 => slot ^ 1,
            _ => { b.iter_mut().for_each(|x| *x = 0); slot }
        };
        let want = decode_before(version, read_at, &b);
        proptest::prop_assert_eq!(decode(version, read_at, &b), want);
        if damage == 0 {
            proptest::prop_assert_eq!(want, Ok(Some((seq, rec))));
        }
    }
}

/// A read failing in the middle of the table (each part's reader thread reads ahead of its
/// decoder) fails the open with the device's error, in every part and with any number of
/// threads — no hang waiting on a reader that stopped, no table recovered from part of it.
#[test]
fn a_read_failing_mid_scan_fails_the_open() {
    use crate::device::{FaultDevice, FaultKind, FaultOp, FaultRule};
    let layout = Layout::new(40_000, 4096);
    let dev: std::sync::Arc<dyn BlockDevice> =
        std::sync::Arc::new(MemDevice::new(layout.device_len() as usize));
    let (t, _, _) = SlotTable::open(&*dev, layout, true).unwrap();
    for s in (0..40_000).step_by(7) {
        t.write(&*dev, s, &rec(0, u64::from(s), 0xff, 0)).unwrap();
    }
    t.sync(&*dev).unwrap();
    let table_end = SUPERBLOCK_BYTES + u64::from(layout.slots) * layout.slot_bytes();
    for at in [SUPERBLOCK_BYTES + (1 << 20), table_end - 4096] {
        for threads in [1, 2, 5] {
            let rule = FaultRule {
                start: at,
                end: Some(at + 1),
                ..FaultRule::new(FaultOp::Read, FaultKind::Eio)
            };
            let faulty = FaultDevice::new(dev.clone(), vec![rule], 1);
            let r = SlotTable::open_in(&faulty, layout, false, threads);
            let e = r.err().map(|e| e.to_string());
            assert!(
                e.as_deref().is_some_and(|e| e.contains("metadata I/O")),
                "read failing at {at}, {threads} threads: {e:?}"
            );
        }
    }
    // The same device, without the fault, recovers every line.
    let (_, found, _) = open_in_one(&*dev, layout, 5);
    assert_eq!(found.len(), 40_000usize.div_ceil(7));
}

/// A slot's key is kept as its low 32 bits and the index of its high half in a table of 31
/// (docs/design.md §13): lines of more volumes than the table names keep their whole key in
/// their stripe's map, and every slot answers its line unsettled, settled, reopened, after an
/// empty record (the slot's key is then the other copy's line) and rewritten to volume 0
/// (which leaves the map).
#[test]
fn keys_of_many_volumes_beyond_the_table_of_high_halves() {
    let slots = 96;
    let layout = Layout::new(slots, 4096);
    let dev = MemDevice::new(layout.device_len() as usize);
    let (t, _, _) = SlotTable::open(&dev, layout, true).unwrap();
    let line = |s: u32| (s % 48 + 1, u64::from(s) << 20 | 7);
    for s in 0..slots {
        t.write(&dev, s, &rec(line(s).0, line(s).1, 1, 1)).unwrap();
        assert_eq!(t.persisted_line(s), Some(line(s)), "slot {s}, unsettled");
    }
    t.sync(&dev).unwrap();
    for s in 0..slots {
        assert_eq!(t.persisted_line(s), Some(line(s)), "slot {s}, settled");
        assert!(!t.may_recover_other(s, line(s)), "slot {s}: only its line");
        assert!(t.may_recover_other(s, (0, 7)), "slot {s}: not line (0, 7)");
    }
    let (t, found, _) = SlotTable::open(&dev, layout, false).unwrap();
    assert_eq!(found.len(), slots as usize);
    for (s, r) in found {
        assert_eq!(r.line, Some(line(s)), "slot {s}, recovered");
        assert_eq!(t.persisted_line(s), Some(line(s)), "slot {s}, reopened");
    }
    for s in 0..slots {
        t.write(&dev, s, &SlotRecord::EMPTY).unwrap();
    }
    t.sync(&dev).unwrap();
    for s in 0..slots {
        assert_eq!(t.persisted_line(s), None, "slot {s}, emptied");
        assert!(
            !t.may_recover_other(s, (0, 7)),
            "slot {s}: the empty record wins"
        );
    }
    for s in 0..slots {
        t.write(&dev, s, &rec(0, u64::from(s), 1, 0)).unwrap();
    }
    t.sync(&dev).unwrap();
    for s in 0..slots {
        assert_eq!(
            t.persisted_line(s),
            Some((0, u64::from(s))),
            "slot {s}, rewritten"
        );
        assert!(
            !t.may_recover_other(s, (0, u64::from(s))),
            "slot {s}: only its new line"
        );
    }
}

/// `SlotTable::open_in` with `threads` threads, its parts' records in one list.
fn open_in_one(dev: &dyn BlockDevice, layout: Layout, threads: usize) -> Opened {
    let (t, parts, rep) = SlotTable::open_in(dev, layout, false, threads).unwrap();
    for w in parts.windows(2) {
        if let (Some(a), Some(b)) = (w[0].last(), w[1].first()) {
            assert!(a.0 < b.0, "parts ascend");
        }
    }
    (t, concat(parts), rep)
}
