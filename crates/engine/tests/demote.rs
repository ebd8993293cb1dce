//! Demotes in the engine (docs/design.md §4.7): an engine takes clean lines from above (recorded at
//! a clean shutdown, so a restart finds them; `demote_crash.rs` crashes in between), a RAM
//! level above an engine reads and writes like one volume with every demote accounted for, and over NBD two clients racing writes and demotes
//! of stale copies on the same blocks never leave anything but the latest write.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tiercache_blockdev::DemoteReply;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_engine::slot_table::Layout;
use tiercache_engine::{Engine, EngineConfig, RamLevelConfig, TwoLevel};
use tiercache_nbd::client::Command;
use tiercache_nbd::{ClientError, Connection};
use tiercache_policy::{CacheConfig, CleaningConfig, EvictionKind, WritePolicy};

const LINE: u64 = 4096;

fn lower_config(lines: u64, eviction: EvictionKind) -> CacheConfig {
    CacheConfig {
        capacity: lines * LINE,
        line_size: LINE,
        eviction,
        write_policy: WritePolicy::WriteBack,
        cleaning: CleaningConfig::None,
        shards: 2,
        ..CacheConfig::default()
    }
}

fn cache_device(cfg: &CacheConfig) -> Arc<MemDevice> {
    let len = Layout::new((cfg.capacity / cfg.line_size) as u32, cfg.line_size).device_len();
    Arc::new(MemDevice::new(len as usize))
}

/// Bytes of line `i` as write `n` leaves them.
fn pattern(i: u64, n: u32) -> Vec<u8> {
    let mut v = vec![(n % 251) as u8; LINE as usize];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v[8..12].copy_from_slice(&n.to_le_bytes());
    v
}

#[test]
fn a_demoted_line_is_served_from_the_cache_and_survives_a_restart() {
    let cfg = lower_config(16, EvictionKind::Lru);
    let cache = cache_device(&cfg);
    let backend = Arc::new(MemDevice::new((256 * LINE) as usize));
    // The backend has the line's data already (a demote is a clean copy of it).
    backend.write_at(&pattern(7, 1), 7 * LINE, false).unwrap();
    let engine = Engine::with_devices(
        &cfg,
        &EngineConfig::default(),
        cache.clone(),
        backend.clone(),
    )
    .unwrap();
    assert_eq!(
        engine.demote(7 * LINE, &pattern(7, 1), &|| true).unwrap(),
        DemoteReply::Accepted
    );
    assert_eq!(
        engine.demote(7 * LINE, &pattern(7, 1), &|| true).unwrap(),
        DemoteReply::AlreadyHeld
    );
    // A demote refused by its caller's check changes nothing.
    assert_eq!(
        engine.demote(9 * LINE, &pattern(9, 1), &|| false).unwrap(),
        DemoteReply::Rejected
    );
    let before = engine.stats().cache.line_hits;
    let mut b = vec![0u8; LINE as usize];
    engine.read(&mut b, 7 * LINE).unwrap();
    assert_eq!(b, pattern(7, 1));
    let st = engine.stats();
    assert_eq!(st.cache.line_hits, before + 1, "the demoted line is a hit");
    assert_eq!(st.dirty_lines, 0, "a demoted line is clean");
    let d = st.demotes;
    assert_eq!(
        (
            d.received,
            d.received_accepted,
            d.received_already_held,
            d.received_rejected
        ),
        (3, 1, 1, 1)
    );
    engine.shutdown().unwrap();
    drop(engine);
    // Recorded at the clean shutdown: a restart on the same devices finds the line.
    let again = Engine::with_devices(&cfg, &EngineConfig::default(), cache, backend).unwrap();
    assert_eq!(again.stats().recovery.lines, 1);
    let mut b = vec![0u8; LINE as usize];
    again.read(&mut b, 7 * LINE).unwrap();
    assert_eq!(b, pattern(7, 1));
    assert_eq!(again.stats().cache.line_hits, 1);
}

/// A RAM level over an engine, with a reference model of the volume.
fn run_two_level(exclusive: bool, lower_eviction: EvictionKind) -> (TwoLevel, u64) {
    const VOLUME_LINES: u64 = 512;
    let lower_cfg = lower_config(64, lower_eviction);
    let lower = Arc::new(
        Engine::with_devices(
            &lower_cfg,
            &EngineConfig::default(),
            cache_device(&lower_cfg),
            Arc::new(MemDevice::new((VOLUME_LINES * LINE) as usize)),
        )
        .unwrap(),
    );
    let ram = RamLevelConfig {
        capacity: 32 * LINE,
        exclusive,
        shards: 2,
        ..RamLevelConfig::default()
    };
    let two = TwoLevel::new(&ram, &lower_cfg, lower).unwrap();
    let model: Mutex<HashMap<u64, Vec<u8>>> = Mutex::new(HashMap::new());
    let reads = std::sync::atomic::AtomicU64::new(0);
    let fast = std::sync::atomic::AtomicU64::new(0);
    // Four threads on disjoint line sets (each line's model is exact), zipf-ish reuse of a
    // working set larger than either level.
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (two, model, reads, fast) = (&two, &model, &reads, &fast);
            s.spawn(move || {
                let mut rng = 0x2545_F491_4F6C_DD1D_u64 ^ (t + 1);
                let mut next = || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                for n in 0..3000u32 {
                    // Lines t, t+4, t+8 …, small indices far more often.
                    let r = next() % 1000;
                    let k = (r * r / 1000) % (VOLUME_LINES / 4);
                    let i = k * 4 + t;
                    if next() % 5 == 0 {
                        let v = pattern(i, n);
                        two.write_at(&v, i * LINE, false).unwrap();
                        model.lock().unwrap().insert(i, v);
                    } else {
                        let mut b = vec![0u8; LINE as usize];
                        // Every other read as a server's batch of waiting reads: a hit is
                        // served there, a miss declined and run as a plain read.
                        let claimed = n % 2 == 0
                            && matches!(
                                two.read_fast_many(&mut [(i * LINE, &mut b[..])])[..],
                                [Some(Ok(()))]
                            );
                        if !claimed {
                            two.read_at(&mut b, i * LINE).unwrap();
                        } else {
                            fast.fetch_add(1, Relaxed);
                        }
                        reads.fetch_add(1, Relaxed);
                        let want = model
                            .lock()
                            .unwrap()
                            .get(&i)
                            .cloned()
                            .unwrap_or_else(|| vec![0u8; LINE as usize]);
                        assert!(b == want, "line {i}: stale or wrong data");
                    }
                }
            });
        }
    });
    assert!(fast.load(Relaxed) > 0, "no batched read hit the RAM level");
    BlockDevice::flush(&two).unwrap();
    two.ram().audit();
    two.lower().audit();
    (two, reads.load(Relaxed))
}

#[test]
fn an_exclusive_two_level_stack_reads_back_every_write_and_accounts_every_demote() {
    let (two, _) = run_two_level(true, EvictionKind::Mru);
    // Let the RAM level finish the plans of answered reads (fills and demotes).
    two.ram().shutdown().unwrap();
    let st = two.stats();
    let (up, down) = (st.ram.demotes, st.lower.demotes);
    assert!(up.sent > 0, "no clean victim was demoted: {up:?}");
    assert_eq!(
        up.sent,
        up.sent_accepted + up.sent_already_held + up.sent_rejected + up.sent_failed
    );
    assert_eq!(up.sent_failed, 0);
    // In one process every demote sent is one received, with the same answer.
    assert_eq!(
        (
            up.sent,
            up.sent_accepted,
            up.sent_already_held,
            up.sent_rejected
        ),
        (
            down.received,
            down.received_accepted,
            down.received_already_held,
            down.received_rejected
        )
    );
    assert!(down.received_accepted > 0);
    assert_eq!(st.ram.dirty_lines, 0, "the RAM level holds clean data only");
    two.shutdown().unwrap();
}

/// A RAM miss that the level below holds in memory is served on the caller's thread (a
/// server's fast path), with the RAM level filled as by any read; a miss the level below
/// would take to its backend is declined.
#[test]
fn a_ram_miss_the_level_below_holds_in_memory_is_served_fast() {
    let lower_cfg = lower_config(64, EvictionKind::Mru);
    let backend: Vec<u8> = (0..256).flat_map(|i| pattern(i, 0)).collect();
    let lower = Arc::new(
        Engine::with_devices(
            &lower_cfg,
            &EngineConfig::default(),
            cache_device(&lower_cfg),
            Arc::new(MemDevice::from_bytes(backend)),
        )
        .unwrap(),
    );
    let ram = RamLevelConfig {
        capacity: 8 * LINE,
        exclusive: true,
        shards: 1,
        ..RamLevelConfig::default()
    };
    let two = TwoLevel::new(&ram, &lower_cfg, lower).unwrap();
    let mut b = vec![0u8; LINE as usize];
    assert!(
        two.read_fast(&mut b, 0).is_none(),
        "a cold line is declined"
    );
    // Line 0 read, then pushed out of the RAM level (demoted into the level below).
    for i in 0..16 {
        two.read_at(&mut b, i * LINE).unwrap();
    }
    // Reads are answered before their fills and demotes finish: wait for line 0's.
    let t0 = std::time::Instant::now();
    while !two.lower().serves_from_memory(0, LINE) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "line 0 never reached the level below"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let before = two.stats();
    b.fill(0);
    assert!(matches!(two.read_fast(&mut b, 0), Some(Ok(()))));
    assert!(b == pattern(0, 0));
    let after = two.stats();
    assert_eq!(
        after.ram.cache.read_line_accesses - after.ram.cache.read_line_hits,
        before.ram.cache.read_line_accesses - before.ram.cache.read_line_hits + 1
    );
    assert_eq!(
        after.lower.cache.read_line_hits,
        before.lower.cache.read_line_hits + 1
    );
    // Now a RAM hit.
    assert!(matches!(two.read_fast(&mut b, 0), Some(Ok(()))));
    assert_eq!(
        two.stats().ram.cache.read_line_hits,
        after.ram.cache.read_line_hits + 1
    );
    // A line neither level holds is declined, and nothing was done for it.
    assert!(!two.lower().serves_from_memory(200 * LINE, LINE));
    assert!(two.read_fast(&mut b, 200 * LINE).is_none());
    assert_eq!(
        two.stats().lower.cache.backend_bytes_read,
        after.lower.cache.backend_bytes_read
    );
}

#[test]
fn an_inclusive_two_level_stack_demotes_nothing() {
    let (two, reads) = run_two_level(false, EvictionKind::Lru);
    two.ram().shutdown().unwrap();
    let st = two.stats();
    assert!(reads > 0);
    assert_eq!(st.ram.demotes.sent, 0);
    assert_eq!(st.lower.demotes.received, 0);
    two.shutdown().unwrap();
}

#[test]
fn a_ram_level_that_would_hold_dirty_data_is_refused() {
    let lower_cfg = lower_config(16, EvictionKind::Lru);
    let ram = RamLevelConfig {
        write_policy: WritePolicy::WriteBack,
        ..RamLevelConfig::default()
    };
    let e = ram.cache_config(&lower_cfg).unwrap_err().to_string();
    assert!(e.contains("ram_level.write_policy"), "{e}");
}

const T: Duration = Duration::from_secs(10);

#[test]
fn racing_writes_and_stale_demotes_into_an_engine_never_outlive_the_latest_write() {
    const BLOCKS: u64 = 24;
    // A cache smaller than the blocks raced on: demotes evict, get refused for room, and
    // lines come and go while the race runs.
    let cfg = lower_config(8, EvictionKind::Mru);
    let engine = Arc::new(
        Engine::with_devices(
            &cfg,
            &EngineConfig::default(),
            cache_device(&cfg),
            Arc::new(MemDevice::new((BLOCKS * LINE) as usize)),
        )
        .unwrap(),
    );
    let export = Arc::new(
        tiercache_nbd::DemoteExport::new(engine.clone(), tiercache_nbd::DemoteConfig::default())
            .unwrap(),
    );
    let tracker = export.tracker().clone();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let stop = tiercache_nbd::Shutdown::new();
    let server = {
        let stop = stop.clone();
        let stats = Arc::new(tiercache_nbd::ServerStats::default());
        std::thread::spawn(move || {
            tiercache_nbd::serve_unix(
                l,
                export,
                tiercache_nbd::ServerConfig::default(),
                stats,
                stop,
            )
        })
    };
    let uri: tiercache_nbd::NbdUri = format!("nbd+unix:///?socket={}", sock.display())
        .parse()
        .unwrap();
    let open = |session: Option<u64>| {
        let losses = Arc::new(std::sync::atomic::AtomicU64::new(0));
        Connection::open_with(&uri, T, losses, session).unwrap()
    };
    let latest: Vec<Mutex<Vec<u8>>> = (0..BLOCKS)
        .map(|_| Mutex::new(vec![0; LINE as usize]))
        .collect();
    std::thread::scope(|s| {
        for client in 0..2u64 {
            let (latest, open) = (&latest, &open);
            s.spawn(move || {
                let a = open(Some(500 + client));
                let b = open(Some(500 + client));
                assert!(a.demote_enabled());
                let mut copies: HashMap<u64, Vec<u8>> = HashMap::new();
                let mut rng = 0x9E37_79B9_7F4A_7C15_u64 ^ (client + 3);
                let mut next = || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                let demote = |c: &Connection, off: u64, v: &[u8]| match c.call(
                    Command::Demote,
                    false,
                    off,
                    LINE as u32,
                    v,
                    T,
                ) {
                    Ok(_) => {}
                    Err(ClientError::Reply(e)) => {
                        assert!(
                            tiercache_nbd::demote::reply_of_errno(e).is_some(),
                            "errno {e}"
                        )
                    }
                    Err(e) => panic!("demote: {e}"),
                };
                for n in 0..1500u32 {
                    let blk = next() % BLOCKS;
                    let off = blk * LINE;
                    match next() % 3 {
                        0 => {
                            let v = pattern(blk, n * 2 + client as u32);
                            let mut l = latest[blk as usize].lock().unwrap();
                            a.call(Command::Write, false, off, LINE as u32, &v, T)
                                .unwrap();
                            *l = v.clone();
                            drop(l);
                            copies.insert(blk, v);
                        }
                        1 => {
                            let v = b
                                .call(Command::Read, false, off, LINE as u32, &[], T)
                                .unwrap();
                            copies.insert(blk, v);
                        }
                        _ => {
                            if let Some(v) = copies.remove(&blk) {
                                demote(if next() % 2 == 0 { &a } else { &b }, off, &v);
                            }
                        }
                    }
                }
                // Every copy still held goes down last, stale ones included.
                for (blk, v) in copies {
                    demote(&a, blk * LINE, &v);
                }
            });
        }
    });
    for (blk, l) in latest.iter().enumerate() {
        let mut got = vec![0u8; LINE as usize];
        engine.read(&mut got, blk as u64 * LINE).unwrap();
        assert!(
            got == *l.lock().unwrap(),
            "block {blk}: a stale demote outlived the latest write"
        );
    }
    let st = &tracker.stats;
    let g = |a: &std::sync::atomic::AtomicU64| a.load(Relaxed);
    assert_eq!(
        g(&st.received),
        g(&st.accepted)
            + g(&st.already_held)
            + g(&st.rejected_stale)
            + g(&st.rejected_unknown)
            + g(&st.rejected_by_cache)
            + g(&st.rejected_invalid)
    );
    assert!(g(&st.accepted) > 0, "{st:?}");
    assert!(g(&st.rejected_stale) > 0, "{st:?}");
    engine.audit();
    stop.trigger();
    let _ = server.join();
}

/// A demote cut across policy shards is counted once, as the simulator's sharded core counts
/// it (one helper, `DemotePieces`, for both): the engine's cache counters after a sequence of
/// demotes, some spanning two shards, equal `ShardedCache`'s on the same demotes.
#[test]
fn a_demote_across_shards_is_counted_once_as_the_simulator_counts_it() {
    use tiercache_core::{Op, Request, VolumeId};
    use tiercache_policy::shards::CHUNK_BYTES;
    use tiercache_policy::{Decide, Report, ShardedCache};
    let cfg = lower_config(64, EvictionKind::Lru);
    let backend = Arc::new(MemDevice::new((4 * CHUNK_BYTES) as usize));
    let engine =
        Engine::with_devices(&cfg, &EngineConfig::default(), cache_device(&cfg), backend).unwrap();
    let mut sim = ShardedCache::new(&cfg).unwrap();
    // (offset, lines): across the first shard boundary, within a shard, the same again
    // (already held), and across again, overlapping (accepted in part).
    let demotes = [
        (CHUNK_BYTES - LINE, 2),
        (3 * LINE, 1),
        (CHUNK_BYTES - LINE, 2),
        (CHUNK_BYTES - 2 * LINE, 4),
    ];
    let mut replies = Vec::new();
    for (offset, lines) in demotes {
        let data: Vec<u8> = (0..lines)
            .flat_map(|i| pattern(offset / LINE + i, 1))
            .collect();
        let reply = engine.demote(offset, &data, &|| true).unwrap();
        let req = Request {
            time_ns: 0,
            volume: VolumeId(0),
            op: Op::Write,
            offset,
            len: lines * LINE,
        };
        let out = sim.accept_demote(&req, None).unwrap();
        assert_eq!(format!("{reply:?}"), format!("{out:?}"), "{offset}+{lines}");
        replies.push(reply);
    }
    assert_eq!(replies[2], DemoteReply::AlreadyHeld);
    let (e, s) = (engine.stats().cache, sim.stats_snapshot());
    assert_eq!(e.demotes_received, demotes.len() as u64, "once per demote");
    assert_eq!(
        (
            e.demotes_received,
            e.demotes_accepted,
            e.demotes_already_held,
            e.demotes_rejected
        ),
        (
            s.demotes_received,
            s.demotes_accepted,
            s.demotes_already_held,
            s.demotes_rejected
        )
    );
}
