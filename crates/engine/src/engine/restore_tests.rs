//! Each shard restored by the thread that scanned it (`scan_and_restore`) against the path
//! through lists (`SlotTable::open_parts`, then `restore_shards`): the same table, report,
//! cores and first error (docs/design.md §13, the fifth stop).

use super::*;
use crate::device::{FaultDevice, FaultKind, FaultOp, FaultRule};
use crate::slot_table::SUPERBLOCK_BYTES;
use tiercache_blockdev::MemDevice;

/// No write policies journaled, no pass-through mark.
const NOTHING_READ: ReadFirst<'static> = ReadFirst {
    write_policies: &[],
    pass_through: false,
    early: None,
};

/// What an open left, comparable: the report, every slot's persisted line, and per shard
/// its counts and every named line's state.
type Seen = (
    RecoveryReport,
    Vec<Option<(u32, u64)>>,
    Vec<(u64, u64)>,
    Vec<Option<tiercache_policy::cache::LineState>>,
);

fn seen(
    table: &SlotTable,
    report: RecoveryReport,
    caches: &[Cache],
    layout: &ShardLayout,
    lines: &[(u32, u64)],
) -> Seen {
    let slots = (0..layout.total_lines())
        .map(|s| table.persisted_line(s))
        .collect();
    let counts = caches
        .iter()
        .map(|c| (c.resident_lines(), c.dirty_lines()))
        .collect();
    let states = lines
        .iter()
        .map(|&(v, i)| caches[layout.shard_of(VolumeId(v), i)].line_state(VolumeId(v), i))
        .collect();
    (report, slots, counts, states)
}

proptest::proptest! {
    /// Over records of lines of several volumes — some outside their backend, in another
    /// shard than their slot's, named twice, torn — a read failing at a chosen slot, and the
    /// pass-through mark set or not: the per-shard path answers as the lists did, with one
    /// thread or several, and leaves the same records on the device.
    #[test]
    fn per_shard_restore_answers_as_the_lists(
        shards in 1u32..6,
        picks in proptest::collection::vec((0u8..60, 0u64..600, 0u8..60, proptest::bool::ANY), 0..300),
        torn in proptest::collection::vec(0u32..512, 0..3),
        fail_at in proptest::option::weighted(0.15, 0u32..512),
        threads in 1usize..4,
        sound in proptest::bool::ANY,
        marked in proptest::bool::ANY,
    ) {
        let cfg = CacheConfig {
            capacity: 2 << 20,
            line_size: 4096,
            shards,
            write_policy: tiercache_policy::WritePolicy::WriteBack,
            ..CacheConfig::default()
        };
        let sl = ShardLayout::new(&cfg).unwrap();
        let layout = Layout::new(sl.total_lines(), 4096);
        let mem: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(layout.device_len() as usize));
        let (table, _, _) = SlotTable::open(&*mem, layout, true).unwrap();
        // Volume 2 is not served; volume 1's backend is smaller than the lines named.
        let extents = [(0, 0, 600 * 4096), (1, 600 * 4096, 300 * 4096)];
        let backends = Backends { extents: &extents, line_size: 4096 };
        let mut next = vec![0u32; sl.shards()];
        let mut lines = Vec::new();
        for (vol, index, odd, dirty) in picks {
            // Mostly sound lines of volumes 0 and 1, each named once, in their own shard;
            // else rarely one of volume 2, beyond volume 1's end, named twice or in the next
            // shard over; some slots left empty.
            // Half the cases only sound lines, so the cores' whole state is compared too.
            let (vol, odd) = if sound { (vol.max(1), odd.max(3)) } else { (vol, odd) };
            let vol = match vol {
                0 => 2,
                1..=20 => 1,
                _ => 0,
            };
            let index = if vol == 1 && odd != 1 { index % 300 } else { index };
            if odd != 2 && lines.contains(&(vol, index)) {
                continue;
            }
            let owner = sl.shard_of(VolumeId(vol), index);
            let k = if odd == 0 { (owner + 1) % sl.shards() } else { owner };
            if next[k] + 1 < sl.lines(k) {
                next[k] += u32::from(odd % 5 == 1);
                let rec = SlotRecord {
                    line: Some((vol, index)),
                    valid: 0xff,
                    // Some lines wholly dirty (the pass-through step keeps them as they are).
                    dirty: match (dirty, odd % 3) {
                        (false, _) => 0,
                        (true, 0) => 0xff,
                        (true, _) => 0x0f,
                    },
                };
                table.write(&*mem, sl.base(k) + next[k], &rec).unwrap();
                next[k] += 1;
                lines.push((vol, index));
            }
        }
        table.sync(&*mem).unwrap();
        for s in torn {
            let at = SUPERBLOCK_BYTES + u64::from(s) * layout.slot_bytes() + 12;
            mem.write_at(&[0xAA; 8], at, false).unwrap();
        }
        // Two copies of the device, one opened each way (the pass-through step writes).
        let copy: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(layout.device_len() as usize));
        let mut bytes = vec![0u8; layout.device_len() as usize];
        mem.read_at(&mut bytes, 0).unwrap();
        copy.write_at(&bytes, 0, false).unwrap();
        let faulty = |mem: &Arc<dyn BlockDevice>| -> Arc<dyn BlockDevice> {
            match fail_at {
                Some(s) => {
                    let at = SUPERBLOCK_BYTES + u64::from(s) * layout.slot_bytes();
                    let rule = FaultRule {
                        start: at,
                        end: Some(at + 1),
                        ..FaultRule::new(FaultOp::Read, FaultKind::Eio)
                    };
                    Arc::new(FaultDevice::new(mem.clone(), vec![rule], 1))
                }
                None => mem.clone(),
            }
        };
        let (dev, dev2) = (faulty(&mem), faulty(&copy));
        // The path through lists, with the pass-through step as open.rs runs it.
        let lists = (|| -> Result<Seen, EngineError> {
            let mut caches = new_cores(&cfg, &sl, threads)?;
            let (table, mut found, mut report) = SlotTable::open_parts(&*dev, layout, false)?;
            if marked {
                let before: usize = found.iter().map(Vec::len).sum();
                for part in &mut found {
                    for (slot, rec) in keep_dirty_only(part) {
                        table.write(&*dev, slot, &rec)?;
                        report.clean_dropped_after_pass_through += 1;
                    }
                }
                report.lines -= (before - found.iter().map(Vec::len).sum::<usize>()) as u64;
                table.sync(&*dev)?;
            }
            restore_shards(&mut caches, &sl, &found, backends, threads)?;
            Ok(seen(&table, report, &caches, &sl, &lines))
        })()
        .map_err(|e| e.to_string());
        let per_shard = scan_and_restore(&*dev2, layout, &cfg, &sl, backends, ReadFirst { write_policies: &[], pass_through: marked, early: None }, threads)
            .map(|o| {
                let (table, report, caches) = o.expect("a formatted device is not blank");
                seen(&table, report, &caches, &sl, &lines)
            })
            .map_err(|e| e.to_string());
        // What each left on its device: the same records.
        let reopened = |d: &Arc<dyn BlockDevice>| {
            SlotTable::open(&**d, layout, false).map(|(_, found, _)| found).map_err(|e| e.to_string())
        };
        proptest::prop_assert_eq!(reopened(&mem), reopened(&copy));
        proptest::prop_assert_eq!(per_shard, lists);
    }
}

/// A blank device is left to the path that formats it: nothing read past the superblock's
/// first bytes, nothing written.
#[test]
fn a_blank_device_is_left_untouched() {
    let cfg = CacheConfig {
        capacity: 2 << 20,
        line_size: 4096,
        shards: 3,
        ..CacheConfig::default()
    };
    let sl = ShardLayout::new(&cfg).unwrap();
    let layout = Layout::new(sl.total_lines(), 4096);
    let dev = MemDevice::new(layout.device_len() as usize);
    let backends = Backends {
        extents: &[(0, 0, 1 << 30)],
        line_size: 4096,
    };
    let r = scan_and_restore(&dev, layout, &cfg, &sl, backends, NOTHING_READ, 2).unwrap();
    assert!(r.is_none());
    let mut all = vec![1u8; layout.device_len() as usize];
    dev.read_at(&mut all, 0).unwrap();
    assert!(all.iter().all(|&b| b == 0));
}

/// The cores [`scan_and_restore`] makes from a device holding the records `found` (each
/// slot's, durable), with `threads` threads: for the tests in restore.rs, which give the
/// path through lists the same lines.
pub(super) fn per_shard_from(
    found: &[(u32, SlotRecord)],
    cfg: &CacheConfig,
    sl: &ShardLayout,
    backends: Backends<'_>,
    threads: usize,
) -> Result<Vec<Cache>, EngineError> {
    let layout = Layout::new(sl.total_lines(), 4096);
    let dev = MemDevice::new(layout.device_len() as usize);
    let (table, _, _) = SlotTable::open(&dev, layout, true).unwrap();
    for (slot, rec) in found {
        table.write(&dev, *slot, rec).unwrap();
    }
    table.sync(&dev).unwrap();
    let (_, report, caches) =
        scan_and_restore(&dev, layout, cfg, sl, backends, NOTHING_READ, threads)?
            .expect("a formatted device is not blank");
    assert_eq!(report.lines, found.len() as u64);
    Ok(caches)
}
