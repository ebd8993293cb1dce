//! Tests of the queueing disk: the `hdd-c2-sas` preset against its datasheet, and the
//! queueing, merging and write-cache rules.

use super::*;

fn preset(overrides: &str) -> DiskParams {
    let text = format!("d = {{ preset = 'hdd-c2-sas'{overrides} }}");
    match crate::limit_tests::resolve(&text).unwrap().kind {
        ResolvedKind::Disk(p) => p,
        k => panic!("{k:?}"),
    }
}

/// A deterministic stream of uniformly random 4 KiB-aligned offsets over the drive.
fn random_offsets(n: usize, capacity: u64) -> Vec<u64> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % (capacity / 4096)) * 4096
        })
        .collect()
}

/// Closed loop at `depth` ops of `len` bytes in flight at `offsets` (each op resubmitted as
/// one completes), as a benchmark tool runs a drive; returns (ops per second, end time).
fn closed_loop(
    p: DiskParams,
    kind: IoKind,
    depth: usize,
    offsets: &[u64],
    len: u64,
) -> (f64, Nanos) {
    let mut d = QueuedDisk::new(p);
    let ops = offsets.len() - depth;
    let mut next = 0usize;
    let mut done = Vec::new();
    // Completions by time, each freeing a slot for the next op.
    let mut pending: std::collections::BinaryHeap<std::cmp::Reverse<(Nanos, u64)>> =
        Default::default();
    let mut wake: Option<Nanos> = None;
    for _ in 0..depth {
        d.submit(0, kind, offsets[next], len, next as u64, &mut done);
        next += 1;
    }
    let mut completed = 0usize;
    let mut now = 0;
    while completed < ops {
        for (tag, end) in done.drain(..) {
            pending.push(std::cmp::Reverse((end, tag)));
        }
        if wake.is_none() {
            wake = d.wake_request();
        }
        let next_completion = pending.peek().map(|r| r.0 .0);
        match (next_completion, wake) {
            (Some(c), w) if w.is_none_or(|w| c <= w) => {
                pending.pop();
                now = c;
                completed += 1;
                d.submit(now, kind, offsets[next], len, next as u64, &mut done);
                next += 1;
            }
            (_, Some(w)) => {
                // The guard above failed: a wake comes first.
                wake = None;
                now = w;
                d.wake(now, &mut done);
            }
            _ => panic!("nothing pending"),
        }
    }
    (completed as f64 / (now as f64 / 1e9), now)
}

fn closed_loop_iops(p: DiskParams, kind: IoKind, depth: usize, ops: usize) -> f64 {
    let offsets = random_offsets(ops + depth, p.geometry.unwrap().capacity);
    closed_loop(p, kind, depth, &offsets, 4096).0
}

/// The preset against its datasheet (Seagate Constellation.2 SAS product manual): random
/// 4 KiB reads at queue depth 1 take overhead + average seek + average rotational latency
/// (0.2 + 7.5 + 4.16 ms + transfer: 84 IOPS) within 5%; at queue depth 32, tagged
/// queueing with shortest positioning time first serves 2–3.2× as many (enterprise
/// 7,200 rpm drives roughly double their random IOPS at deep queues, and Seagate's
/// datasheets of the family quote 2–3× at QD16–32; the manual itself quotes no QD32 figure);
/// writes at queue depth 1 with the cache off, overhead + 8.5 ms seek + latency (78 IOPS).
#[test]
fn preset_matches_its_datasheet() {
    let p = preset(", write_cache = 0");
    let qd1 = closed_loop_iops(p, IoKind::Read, 1, 3000);
    let want_qd1 = 1e9 / (200_000.0 + 7_500_000.0 + 4_166_667.0 + 4096.0 * p.read_ns_per_byte);
    assert!(
        (qd1 / want_qd1 - 1.0).abs() < 0.05,
        "QD1 {qd1:.1} IOPS vs {want_qd1:.1}"
    );
    let qd32 = closed_loop_iops(p, IoKind::Read, 32, 6000);
    let gain = qd32 / qd1;
    eprintln!("QD1 {qd1:.1} IOPS, QD32 {qd32:.1} IOPS ({gain:.2}×)");
    assert!(
        (2.0..=3.2).contains(&gain),
        "QD32 {qd32:.1} IOPS, {gain:.2}× QD1"
    );
    let wqd1 = closed_loop_iops(p, IoKind::Write, 1, 3000);
    let want_w = 1e9 / (200_000.0 + 8_500_000.0 + 4_166_667.0 + 4096.0 * p.write_ns_per_byte);
    assert!(
        (wqd1 / want_w - 1.0).abs() < 0.05,
        "write QD1 {wqd1:.1} vs {want_w:.1}"
    );
    // The fitted seek curve gives the datasheet's average, single-track and full stroke.
    let g = p.geometry.unwrap();
    assert!((g.mean_seek_ns(IoKind::Read) - 7.5e6).abs() < 1.0);
    // One track over: the single-track figure plus the curve's slope over one track (3%).
    assert!((g.seek_ns(IoKind::Read, 0, g.track_bytes) - 230_000.0).abs() < 10_000.0);
    assert!((g.seek_ns(IoKind::Read, 0, g.capacity) - 17.06e6).abs() < 1.0);
}

/// Sequential 1 MiB reads stream at a track per revolution (88 MB/s), inside the
/// datasheet's 84–163 MB/s internal rate, the commands merging into one pass (no overhead,
/// seek or rotational wait between them) at any queue depth.
#[test]
fn sequential_reads_stream_at_the_media_rate() {
    for depth in [1usize, 8] {
        let offsets: Vec<u64> = (0..200 + depth as u64).map(|i| i << 20).collect();
        let (iops, _) = closed_loop(preset(""), IoKind::Read, depth, &offsets, 1 << 20);
        let mbps = iops * (1 << 20) as f64 / 1e6;
        assert!(
            (84.0..=163.0).contains(&mbps),
            "depth {depth}: {mbps:.1} MB/s"
        );
        assert!((mbps - 88.0).abs() < 4.0, "depth {depth}: {mbps:.1} MB/s");
    }
}

/// With the write cache on, writes are acknowledged after the command overhead, destaged in
/// the background (in fewer media writes when runs are contiguous), and a flush completes
/// only once the cache is empty; a read of cached data is served from it.
#[test]
fn write_cache_acknowledges_early_and_a_flush_empties_it() {
    let mut d = QueuedDisk::new(preset(""));
    let mut done = Vec::new();
    // 64 contiguous 4 KiB writes and 64 scattered ones.
    let scattered = random_offsets(64, 1 << 40);
    for i in 0..64u64 {
        d.submit(0, IoKind::Write, (1 << 30) + i * 4096, 4096, i, &mut done);
    }
    for (i, &o) in scattered.iter().enumerate() {
        d.submit(0, IoKind::Write, o, 4096, 100 + i as u64, &mut done);
    }
    assert_eq!(done.len(), 128, "every write acknowledged from the cache");
    assert!(done.iter().all(|&(_, e)| e == 200_000), "{:?}", &done[..3]);
    // The first write's destage started at once, on the idle head.
    assert_eq!(d.dirty_bytes(), 127 * 4096);
    done.clear();
    d.submit(10, IoKind::Read, (1 << 30) + 5 * 4096, 4096, 500, &mut done);
    assert_eq!(
        done,
        vec![(500, 200_010)],
        "a cached block is read from the cache"
    );
    done.clear();
    d.submit(20, IoKind::Flush, 0, 0, 999, &mut done);
    let mut now = 20;
    while let Some(w) = d.wake_request() {
        now = w;
        d.wake(now, &mut done);
        if !done.is_empty() {
            break;
        }
    }
    assert_eq!(
        d.dirty_bytes(),
        0,
        "the flush completes after the cache empties"
    );
    assert_eq!(done.len(), 1);
    assert!(done[0].1 > now);
    // The contiguous run went out merged: the first block alone (destaged as it came), the
    // other 63 in one media write; the 64 scattered ones one each.
    assert_eq!(d.writes, 1 + 1 + 64, "media writes");
    assert_eq!(d.cached_writes, 128);
}

/// Once the cache is full, writes queue for the media.
#[test]
fn without_room_in_the_cache_writes_go_to_the_media() {
    let mut d = QueuedDisk::new(preset(", write_cache = 8192"));
    let mut done = Vec::new();
    for i in 0..4u64 {
        d.submit(0, IoKind::Write, i * (1 << 30), 4096, i, &mut done);
    }
    // The first is destaged at once (the head was idle), the next two fill the cache, the
    // fourth waits for the media.
    assert_eq!(d.cached_writes, 3);
    assert_eq!(done.len(), 3);
    while !done.iter().any(|x| x.0 == 3) {
        let w = d.wake_request().expect("work left");
        d.wake(w, &mut done);
    }
    let fourth = done.iter().find(|x| x.0 == 3).unwrap().1;
    assert!(fourth > 1_000_000, "{fourth} ns: a media write");
}

/// Shortest positioning time first: among queued commands the head serves the near ones
/// before a far one submitted first, yet a command waiting past the age limit goes next.
#[test]
fn the_head_serves_the_nearest_first_but_ages_the_rest() {
    let mut d = QueuedDisk::new(preset(", write_cache = 0"));
    let mut done = Vec::new();
    d.submit(0, IoKind::Read, 0, 4096, 0, &mut done); // starts at once
    d.submit(1, IoKind::Read, 900 << 30, 4096, 1, &mut done); // far
    for i in 0..10u64 {
        d.submit(
            2,
            IoKind::Read,
            (i + 1) * (1 << 20),
            4096,
            10 + i,
            &mut done,
        );
    }
    let mut order = vec![];
    while let Some(w) = d.wake_request() {
        done.clear();
        d.wake(w, &mut done);
        order.extend(done.iter().map(|x| x.0));
    }
    assert_eq!(*order.last().unwrap(), 1, "the far read last: {order:?}");
    // A stream of near reads cannot hold a far one back past the age limit.
    let mut d = QueuedDisk::new(preset(", write_cache = 0"));
    done.clear();
    d.submit(0, IoKind::Read, 0, 4096, 0, &mut done);
    d.submit(0, IoKind::Read, 900 << 30, 4096, 1, &mut done);
    let mut now = 0;
    let mut far_done = None;
    let mut i = 2u64;
    while far_done.is_none() {
        d.submit(now, IoKind::Read, (i % 4) * 8192, 4096, i, &mut done);
        i += 1;
        if let Some(w) = d.wake_request() {
            now = w;
            d.wake(now, &mut done);
        }
        far_done = done.iter().find(|x| x.0 == 1).map(|x| x.1);
        assert!(now < 10 * AGE_LIMIT_NS, "the far read starved");
    }
    assert!(far_done.unwrap() >= AGE_LIMIT_NS);
}

/// The positional settings are refused on a FIFO preset and out of range, naming the field.
#[test]
fn positional_settings_are_checked() {
    let e = |s: &str| crate::limit_tests::resolve(s).unwrap_err().to_string();
    assert!(e("d = { preset = 'hdd-7200-sas', queue_depth = 32 }").starts_with("d.queue_depth"));
    assert!(e("d = { preset = 'hdd-7200', write_cache = '1MiB' }").starts_with("d.write_cache"));
    assert!(e("d = { preset = 'hdd-c2-sas', queue_depth = 0 }").starts_with("d.queue_depth"));
    assert!(e("d = { preset = 'hdd-c2-sas', write_cache = '1TiB' }").starts_with("d.write_cache"));
    assert!(e("d = { preset = 'hdd-c2-sas', link = 'net-1g' }").starts_with("d.link"));
    // RAID-0 arrays of them are allowed (queued_array.rs); RAID-5 ones are not.
    assert!(
        e("d = { raid = 'raid5', members = 3, member = 'hdd-c2-sas' }").starts_with("d.member")
    );
}

/// A power cut (docs/design.md §5.1) loses what the write cache held: 128 writes acknowledged
/// at once and cut at their acknowledgement are all lost (the first one's destage had not
/// ended); cut later while a flush drains the cache, a drive loses no more the later the
/// cut, exactly its lost writes' bytes (the writes are disjoint), and nothing once the flush
/// has completed.
#[test]
fn a_power_cut_loses_the_acknowledged_writes_not_on_the_media() {
    let mut d = QueuedDisk::new(preset(""));
    let mut done = Vec::new();
    let scattered = random_offsets(64, 1 << 40);
    let mut written = std::collections::BTreeSet::new();
    for i in 0..64u64 {
        d.submit(0, IoKind::Write, (1 << 30) + i * 4096, 4096, i, &mut done);
        written.insert(i);
    }
    for (i, &o) in scattered.iter().enumerate() {
        d.submit(0, IoKind::Write, o, 4096, 100 + i as u64, &mut done);
        written.insert(100 + i as u64);
    }
    assert_eq!(done.len(), 128, "every write acknowledged from the cache");
    let ack = done[0].1;
    let lost = d.clone().power_cut(ack);
    assert_eq!(
        lost.acknowledged_writes,
        written.iter().copied().collect::<Vec<_>>()
    );
    assert_eq!(lost.ranges.iter().map(|r| r.1).sum::<u64>(), 128 * 4096);
    // Before their acknowledgement, they were not acknowledged: none is reported.
    assert!(d.clone().power_cut(ack - 1).acknowledged_writes.is_empty());
    done.clear();
    d.submit(ack, IoKind::Flush, 0, 0, 999, &mut done);
    let mut last = lost.acknowledged_writes.len();
    let mut cuts = 0;
    let flushed = loop {
        let w = d.wake_request().expect("work left until the flush is done");
        // A cut at each instant the head frees, before its next piece of work.
        let lost = d.clone().power_cut(w);
        let n = lost.acknowledged_writes.len();
        assert!(n <= last, "a later cut lost more: {n} > {last}");
        assert!(lost.acknowledged_writes.iter().all(|t| written.contains(t)));
        assert_eq!(
            lost.ranges.iter().map(|r| r.1).sum::<u64>(),
            n as u64 * 4096,
            "the lost writes' bytes"
        );
        last = n;
        cuts += 1;
        d.wake(w, &mut done);
        if let Some(&(_, end)) = done.iter().find(|x| x.0 == 999) {
            break end;
        }
    };
    assert!(cuts > 10, "{cuts} cuts while the cache drained");
    let after = d.clone().power_cut(flushed);
    assert_eq!(
        after,
        PowerCutLoss::default(),
        "the flush made every write durable"
    );
    // The drive comes back empty and serves again.
    let mut cut = d.clone();
    cut.power_cut(flushed);
    assert_eq!(cut.queued(), 0);
    assert_eq!(cut.dirty_bytes(), 0);
    done.clear();
    let end = cut.run_one(flushed + 1, IoKind::Read, 0, 4096);
    assert!(end > flushed + 1);
}

/// A write with FUA bypasses the cache and is durable at its completion; it supersedes a
/// cached run it covers. Without a write cache a drive loses nothing a host was told is
/// written.
#[test]
fn fua_writes_and_cacheless_drives_lose_nothing_acknowledged() {
    let mut d = QueuedDisk::new(preset(""));
    let mut done = Vec::new();
    // The head takes the first write's destage; the second stays cached; FUA rewrites it.
    d.submit(0, IoKind::Write, 500 << 30, 4096, 1, &mut done);
    d.submit(0, IoKind::Write, 7 << 30, 4096, 2, &mut done);
    assert_eq!(done.len(), 2);
    d.submit_fua(10, 7 << 30, 4096, 3, &mut done);
    assert_eq!(
        d.dirty_bytes(),
        0,
        "the FUA write superseded the cached run"
    );
    assert!(
        done.iter().all(|x| x.0 != 3),
        "not acknowledged before the media"
    );
    let end = loop {
        if let Some(&(_, e)) = done.iter().find(|x| x.0 == 3) {
            break e;
        }
        let w = d.wake_request().expect("the FUA write is queued");
        d.wake(w, &mut done);
    };
    assert!(end > 1_000_000, "{end} ns: a media write");
    assert_eq!(d.clone().power_cut(end), PowerCutLoss::default());
    // Cacheless: writes complete on the media, and a cut at any instant loses none of them.
    let mut d = QueuedDisk::new(preset(", write_cache = 0"));
    done.clear();
    for (i, &o) in random_offsets(20, 1 << 40).iter().enumerate() {
        d.submit(0, IoKind::Write, o, 4096, i as u64, &mut done);
    }
    while let Some(w) = d.wake_request() {
        assert_eq!(d.clone().power_cut(w), PowerCutLoss::default());
        d.wake(w, &mut done);
    }
    assert_eq!(done.len(), 20);
}

/// A flush completes once the writes cached before it are on the media, however many come
/// after it (a drive flushes what it held when the FLUSH came).
#[test]
fn a_flush_waits_for_the_older_writes_only() {
    let mut d = QueuedDisk::new(preset(""));
    let mut done = Vec::new();
    let offsets = random_offsets(4000, 16 << 20);
    for (i, &o) in offsets[..32].iter().enumerate() {
        d.submit(0, IoKind::Write, o, 4096, i as u64, &mut done);
    }
    done.clear();
    d.submit(1, IoKind::Flush, 0, 0, 9999, &mut done);
    let (mut now, mut next, mut wake) = (1, 32, None);
    let end = loop {
        if let Some(&(_, e)) = done.iter().find(|x| x.0 == 9999) {
            break e;
        }
        assert!(next < offsets.len(), "the flush never completed");
        wake = wake.or_else(|| d.wake_request());
        // A write every 2 ms keeps the cache from emptying; the head's wakes between them.
        let write_at = now + 2_000_000;
        match wake {
            Some(w) if w <= write_at => {
                now = now.max(w);
                wake = None;
                d.wake(now, &mut done);
            }
            _ => {
                now = write_at;
                d.submit(
                    now,
                    IoKind::Write,
                    offsets[next],
                    4096,
                    next as u64,
                    &mut done,
                );
                next += 1;
            }
        }
    };
    assert!(d.dirty_bytes() > 0, "later writes are still cached");
    eprintln!("flush done at {end} ns after {} later writes", next - 32);
}

proptest::proptest! {
    /// Power cuts at any instant of a random stream of cached writes, FUA writes, flushes
    /// and head wakes: a cut reports only writes acknowledged from the cache, loses at least
    /// the cached bytes and at most one destage (up to 1 MiB and a run) more, never a write acknowledged before a
    /// flush that completed by the cut, and leaves an empty drive.
    #[test]
    fn power_cuts_lose_only_what_the_cache_held(
        steps in proptest::collection::vec((0u64..3_000_000, 0u8..10, 0u64..64, 1u64..4), 1..150),
        small_cache in proptest::bool::ANY,
    ) {
        let over = if small_cache { ", write_cache = 32768" } else { "" };
        let mut d = QueuedDisk::new(preset(over));
        let mut done = Vec::new();
        let mut now = 0u64;
        let mut cached_tags = std::collections::BTreeSet::new();
        // (tags acknowledged from the cache before it, its tag, its submission time)
        let mut flushes: Vec<(Vec<u64>, u64)> = Vec::new();
        let mut flush_end: std::collections::BTreeMap<u64, Nanos> = Default::default();
        for (i, (dt, what, block, blocks)) in steps.into_iter().enumerate() {
            now += dt;
            let tag = i as u64;
            let offset = block * (1 << 24);
            match what {
                0..=5 => {
                    let before = d.cached_writes;
                    d.submit(now, IoKind::Write, offset, blocks * 4096, tag, &mut done);
                    if d.cached_writes > before {
                        cached_tags.insert(tag);
                    }
                }
                6 => d.submit_fua(now, offset, blocks * 4096, tag, &mut done),
                7 => {
                    flushes.push((cached_tags.iter().copied().collect(), tag));
                    d.submit(now, IoKind::Flush, 0, 0, tag, &mut done);
                }
                _ => {
                    if let Some(w) = d.wake_request() {
                        now = now.max(w);
                        d.wake(now, &mut done);
                    }
                }
            }
            for &(t, e) in &done {
                flush_end.insert(t, e);
            }
            let dirty = d.dirty_bytes();
            let mut cut = d.clone();
            let lost = cut.power_cut(now);
            let bytes: u64 = lost.ranges.iter().map(|r| r.1).sum();
            proptest::prop_assert!(bytes >= dirty && bytes <= dirty + DESTAGE_MERGE_MAX + 3 * 4096);
            proptest::prop_assert!(lost.acknowledged_writes.iter().all(|t| cached_tags.contains(t)));
            for (before, ftag) in &flushes {
                if flush_end.get(ftag).is_some_and(|&e| e <= now) {
                    proptest::prop_assert!(
                        lost.acknowledged_writes.iter().all(|t| !before.contains(t)),
                        "a write acknowledged before a completed flush was lost"
                    );
                }
            }
            proptest::prop_assert_eq!(cut.dirty_bytes(), 0);
            proptest::prop_assert_eq!(cut.queued(), 0);
        }
    }
}
