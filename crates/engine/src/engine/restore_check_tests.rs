//! Tests of the restore: the line checks against a model answering as before, shards restored
//! in parallel against one thread, and a restore before the journal starts.

use super::*;

/// Volume 0, large enough for every line the tests name.
const ANY_BACKEND: Backends<'static> = Backends {
    extents: &[(0, 0, 1 << 40)],
    line_size: 4096,
};

/// `found` cut into lists at `at` (positions, any order; empty lists kept), as the
/// recovery threads leave it.
fn cut(found: &[(u32, SlotRecord)], at: &[usize]) -> Vec<Vec<(u32, SlotRecord)>> {
    let mut at: Vec<usize> = at.iter().map(|&a| a.min(found.len())).collect();
    at.sort_unstable();
    let mut parts = Vec::new();
    let mut from = 0;
    for a in at.into_iter().chain([found.len()]) {
        parts.push(found[from..a].to_vec());
        from = a;
    }
    parts
}

/// The per-line checks as open.rs ran them before `first_bad_line` (each line's shard
/// searched, its volume looked up): the reference `first_bad_line` (and so restoring) must answer as.
fn checks_before(
    found: &[(u32, SlotRecord)],
    extents: &[(u32, u64, u64)],
    shard_layout: &ShardLayout,
    line_size: u64,
) -> Result<(), String> {
    for (slot, rec) in found {
        let (vol, index) = rec.line.expect("recovered slots hold lines");
        let end = index.checked_add(1).and_then(|n| n.checked_mul(line_size));
        let size = extents.iter().find(|e| e.0 == vol).map(|e| e.2);
        if end.is_none_or(|e| size.is_none_or(|s| e > s)) {
            return Err(format!(
                "slot {slot}: its record names line {index} of volume {vol},"
            ));
        }
        let k = shard_layout.shard_of_slot(*slot);
        if shard_layout.shard_of(VolumeId(vol), index) != k {
            return Err(format!("slot {slot} holds line {index}, which"));
        }
    }
    Ok(())
}

proptest::proptest! {
    /// Over lines of several volumes, some outside their backend or in another shard
    /// than their slot's: `first_bad_line` accepts exactly what the old checks did, and
    /// refuses naming the same first slot for the same reason.
    #[test]
    fn line_checks_answer_as_before(
        shards in 1u32..6,
        picks in proptest::collection::vec((0u32..3, 0u64..600, 0u8..20), 0..200),
        cuts in proptest::collection::vec(0usize..200, 0..4),
    ) {
        let cfg = CacheConfig {
            capacity: 2 << 20,
            line_size: 4096,
            shards,
            ..CacheConfig::default()
        };
        let layout = ShardLayout::new(&cfg).unwrap();
        // Volume 2 is not served; volume 1's backend is smaller than the lines named.
        let extents = [(0, 0, 600 * 4096), (1, 600 * 4096, 300 * 4096)];
        let mut found = Vec::new();
        let mut next = vec![0u32; layout.shards()];
        for (vol, index, odd) in picks {
            // Mostly lines in their own shard (as a sound device holds), so the checks
            // run past the first few; some in the next shard over.
            let owner = layout.shard_of(VolumeId(vol), index);
            let k = if odd == 0 { (owner + 1) % layout.shards() } else { owner };
            if next[k] < layout.lines(k) {
                let rec = SlotRecord { line: Some((vol, index)), valid: 1, dirty: 0 };
                found.push((layout.base(k) + next[k], rec));
                next[k] += 1;
            }
        }
        found.sort_by_key(|f| f.0);
        let want = checks_before(&found, &extents, &layout, 4096);
        let backends = Backends { extents: &extents, line_size: 4096 };
        let got = first_bad_line(&[&found], backends, &layout).map_err(|(_, e)| e.to_string());
        // The lists the recovery threads fill meet anywhere, inside a shard too.
        let parts = cut(&found, &cuts);
        // Restoring checks each shard's run in its own thread: the same first error.
        let mut caches: Vec<Cache> = (0..layout.shards())
            .map(|k| Cache::new(&layout.shard_config(&cfg, k)).unwrap())
            .collect();
        let restored = restore_shards(&mut caches, &layout, &parts, backends, 3)
            .map_err(|e| e.to_string());
        proptest::prop_assert_eq!(&restored, &got);
        // Each shard restored by the thread that scanned it, from a device holding
        // these records: the same first error.
        for threads in [1, 3] {
            let per_shard = super::per_shard_tests::per_shard_from(&found, &cfg, &layout, backends, threads)
                .map(|_| ()).map_err(|e| e.to_string());
            proptest::prop_assert_eq!(&per_shard, &got);
        }
        match (&want, &got) {
            (Ok(()), Ok(())) => {}
            (Err(w), Err(g)) => proptest::prop_assert!(g.contains(w.as_str()), "{w} / {g}"),
            _ => proptest::prop_assert!(false, "before {want:?}, now {got:?}"),
        }
    }
}

/// Shards made and restored by several threads hold what one thread makes and restores:
/// every line, with its masks.
#[test]
fn shards_restored_in_parallel_match_one_thread() {
    let cfg = CacheConfig {
        capacity: 8 << 20,
        line_size: 4096,
        write_policy: tiercache_policy::WritePolicy::WriteBack,
        shards: 5,
        ..CacheConfig::default()
    };
    let layout = ShardLayout::new(&cfg).unwrap();
    let shards = |threads: usize, found: &[(u32, SlotRecord)]| {
        // The cores made, and restored, by as many threads, from as many lists.
        let mut caches = new_cores(&cfg, &layout, threads).unwrap();
        assert_eq!(caches.len(), layout.shards());
        let parts = cut(
            found,
            &[found.len() / 3, found.len() / 3 * 2][..threads - 1],
        );
        restore_shards(&mut caches, &layout, &parts, ANY_BACKEND, threads).map(|()| caches)
    };
    // Every third slot of each shard holds the shard's lines, some dirty.
    let mut found = Vec::new();
    let mut index = 0u64;
    let mut next = vec![0u32; layout.shards()];
    while next.iter().enumerate().any(|(k, &n)| n < layout.lines(k)) {
        let k = layout.shard_of(VolumeId(0), index);
        if next[k] < layout.lines(k) {
            if next[k].is_multiple_of(3) {
                let dirty = if index.is_multiple_of(2) { 0xf } else { 0 };
                found.push((
                    layout.base(k) + next[k],
                    SlotRecord {
                        line: Some((0, index)),
                        valid: 0xff,
                        dirty,
                    },
                ));
            }
            next[k] += 1;
        }
        index += 1;
    }
    found.sort_by_key(|f| f.0);
    let one = shards(1, &found).unwrap();
    let three = shards(3, &found).unwrap();
    // Each shard restored by the thread that scanned it (from a device holding the
    // records), by one thread and by three.
    let per_shard = |threads| {
        super::per_shard_tests::per_shard_from(&found, &cfg, &layout, ANY_BACKEND, threads).unwrap()
    };
    let (scanned_one, scanned_three) = (per_shard(1), per_shard(3));
    for other in [&three, &scanned_one, &scanned_three] {
        for (a, b) in one.iter().zip(other) {
            assert_eq!(a.resident_lines(), b.resident_lines());
            assert_eq!(a.dirty_lines(), b.dirty_lines());
        }
    }
    assert_eq!(
        one.iter().map(|c| c.resident_lines()).sum::<u64>(),
        found.len() as u64
    );
    for (_, rec) in &found {
        let (v, i) = rec.line.unwrap();
        let k = layout.shard_of(VolumeId(v), i);
        for other in [&three, &scanned_one, &scanned_three] {
            assert_eq!(
                one[k].line_state(VolumeId(v), i),
                other[k].line_state(VolumeId(v), i)
            );
        }
        assert!(three[k].line_state(VolumeId(v), i).is_some());
    }
}

/// Restoring with the journal off and turning it on after (as the engine opens now)
/// leaves the cores as restoring with it on and draining what it journaled (as before):
/// the same lines and masks, nothing left to write, and the same updates journaled by
/// what comes next (a line evicted and its slot reused).
#[test]
fn restoring_before_the_journal_starts_leaves_what_draining_it_did() {
    let cfg = CacheConfig {
        capacity: 1 << 20,
        line_size: 4096,
        write_policy: tiercache_policy::WritePolicy::WriteBack,
        shards: 1,
        ..CacheConfig::default()
    };
    let layout = ShardLayout::new(&cfg).unwrap();
    let found: Vec<(u32, SlotRecord)> = (0..layout.lines(0))
        .map(|s| {
            let dirty = if s % 3 == 0 { 0x3 } else { 0 };
            let rec = SlotRecord {
                line: Some((0, 7 * u64::from(s))),
                valid: 0xff,
                dirty,
            };
            (s, rec)
        })
        .collect();
    let restored = |journal_first: bool| {
        let mut c = vec![Cache::new(&layout.shard_config(&cfg, 0)).unwrap()];
        c[0].set_journal(journal_first);
        restore_shards(
            &mut c,
            &layout,
            std::slice::from_ref(&found),
            ANY_BACKEND,
            1,
        )
        .unwrap();
        if journal_first {
            c[0].drain_meta_updates(&mut Vec::new());
        } else {
            c[0].set_journal(true);
        }
        c.pop().unwrap()
    };
    let (mut before, mut now) = (restored(true), restored(false));
    for (_, rec) in &found {
        let (v, i) = rec.line.unwrap();
        assert_eq!(
            before.line_state(VolumeId(v), i),
            now.line_state(VolumeId(v), i)
        );
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    before.drain_meta_updates(&mut a);
    now.drain_meta_updates(&mut b);
    assert!(a.is_empty() && b.is_empty(), "{a:?} {b:?}");
    // A line not cached, read in full: the full cache evicts a clean line for it, and
    // both journal the same slot's change.
    let len = cfg.line_size;
    let req = tiercache_core::Request {
        time_ns: 0,
        volume: VolumeId(0),
        op: tiercache_core::Op::Read,
        offset: len,
        len,
    };
    for c in [&mut before, &mut now] {
        c.access(&req, Some(&mut Plan::default())).unwrap();
    }
    before.drain_meta_updates(&mut a);
    now.drain_meta_updates(&mut b);
    assert!(!a.is_empty(), "the read changed a slot");
    assert_eq!(a, b);
}
