//! The data path off the lock (docs/design.md §14): a store read held on one file stalls
//! no request on another.

use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use super::{read_unlocked, write_unlocked, State};
use crate::{MountConfig, Variant};

const BS: usize = 512;

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// A state over a store holding `files` (name, bytes), a cache of `blocks` blocks, each file
/// met and opened; its ids in `files`' order.
fn opened(
    files: &[(&str, &[u8])],
    blocks: u32,
    variant: Variant,
) -> (tempfile::TempDir, State, Vec<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    for (name, data) in files {
        std::fs::write(store.join(name), data).unwrap();
    }
    let mut st = State::open(MountConfig::new(
        store.clone(),
        dir.path().join("cache"),
        blocks,
        BS as u32,
        variant,
    ))
    .unwrap();
    let ids = files
        .iter()
        .map(|(name, _)| {
            let md = std::fs::metadata(store.join(name)).unwrap();
            let id = st.remember(PathBuf::from(name), &md).unwrap();
            st.open_handle(id).unwrap();
            id
        })
        .collect();
    (dir, st, ids)
}

/// File `a`'s miss is held in its store read (without the lock); meanwhile a cached read, a
/// miss, and a write that fills a partial block, all of file `b`, complete with the right
/// bytes; then `a`'s read completes with its own. The reads of `b` run on another thread and
/// the test waits for them a minute at most (a liveness bound: a data path holding the lock
/// over `a`'s store read never lets them finish).
#[test]
fn a_store_read_held_on_one_file_stalls_no_request_on_another() {
    for variant in [Variant::WB, Variant::WT] {
        let (a_data, b_data) = (pattern(1, 16 * BS), pattern(2, 16 * BS));
        let (_dir, mut st, ids) = opened(&[("a", &a_data), ("b", &b_data)], 8, variant);
        let (a, b) = (ids[0], ids[1]);
        // Two blocks of `b` cached.
        assert_eq!(st.read(b, 0, 2 * BS as u32).unwrap(), b_data[..2 * BS]);
        let hold = st.hold_store_reads(a);
        let state = Arc::new(Mutex::new(st));
        let held = {
            let state = state.clone();
            std::thread::spawn(move || {
                let st = state.lock().unwrap();
                read_unlocked(&state, st, a, BS as u64, 2 * BS as u32).unwrap()
            })
        };
        hold.wait_held();
        let (tx, rx) = mpsc::channel();
        {
            let state = state.clone();
            std::thread::spawn(move || {
                let read = |offset: usize, len: usize| {
                    let st = state.lock().unwrap();
                    read_unlocked(&state, st, b, offset as u64, len as u32).unwrap()
                };
                let hit = read(10, BS);
                let miss = read(5 * BS + 3, 2 * BS);
                let st = state.lock().unwrap();
                write_unlocked(&state, st, b, 9 * BS as u64 + 7, &[0xEE; 100]).unwrap();
                let after = read(9 * BS, BS);
                tx.send((hit, miss, after)).unwrap();
            });
        }
        let got = rx.recv_timeout(Duration::from_secs(60));
        hold.open();
        let (hit, miss, after) = got.expect("file b's requests waited for a's store read");
        assert_eq!(hit, b_data[10..10 + BS]);
        assert_eq!(miss, b_data[5 * BS + 3..7 * BS + 3]);
        let mut want = b_data[9 * BS..10 * BS].to_vec();
        want[7..107].fill(0xEE);
        assert_eq!(after, want);
        assert_eq!(held.join().unwrap(), a_data[BS..3 * BS]);
        let st = state.lock().unwrap();
        // `a`'s read went ahead of the lock (the store read counted once), and was admitted.
        assert!(st.core.lookup(crate::core::BlockKey::new(a, 1)).is_some());
        let stats = st.stats();
        assert!(stats.store_ops_in_flight_peak >= 1);
        // a's read, b's miss and b's partial write each read the store ahead of the lock.
        assert_eq!(stats.store_reads_unlocked, 3, "{stats:?}");
        assert_eq!(stats.store_reads_unlocked_dropped, 0);
    }
}

/// Store data read ahead is dropped when the file changed in between (a write of the
/// block's bytes): the read returns the write's bytes, not the store's older ones.
#[test]
fn data_read_ahead_of_a_change_is_not_used() {
    let data = pattern(3, 8 * BS);
    let (_dir, mut st, ids) = opened(&[("f", &data)], 2, Variant::WB);
    let f = ids[0];
    let fill = st.read_fills(f, 0, BS as u32).unwrap().expect("a miss");
    let staged = fill.run().unwrap();
    // A whole-block write in between, then evicted (written back) by two other blocks.
    st.write(f, 0, &[0x55; BS]).unwrap();
    st.read(f, 4 * BS as u64, 2 * BS as u32).unwrap();
    assert!(st.core.lookup(crate::core::BlockKey::new(f, 0)).is_none());
    // Had the store not been written back, its old bytes would still differ: either way the
    // staged copy is older than the write.
    assert_eq!(
        st.read_staged(f, 0, BS as u32, staged).unwrap(),
        vec![0x55; BS]
    );
    // And a partial write's fill read ahead before a truncate sees the truncate.
    let fill = st
        .write_fills(f, 2 * BS as u64 + 5, 10)
        .unwrap()
        .expect("a fill");
    let staged = fill.run().unwrap();
    st.truncate(f, 2 * BS as u64 + 1).unwrap();
    st.write_staged(f, 2 * BS as u64 + 5, &[9; 10], staged)
        .unwrap();
    let mut want = data[2 * BS..2 * BS + 1].to_vec();
    want.extend_from_slice(&[0, 0, 0, 0]);
    want.extend_from_slice(&[9; 10]);
    assert_eq!(st.read(f, 2 * BS as u64, BS as u32).unwrap(), want);
}

/// A hit read planned under the lock and run off it reads the bytes it was planned on: a
/// write of the same block, and an eviction that refills its slot with another file's
/// block, each wait (holding the lock) until the read has run, then proceed; later reads see
/// them. Deterministic: the test runs the read only once the writer is seen waiting (a
/// minute's bound, liveness only).
#[test]
fn a_hit_read_off_the_lock_keeps_its_slot_until_it_has_read() {
    let (a_data, b_data) = (pattern(4, 4 * BS), pattern(5, 4 * BS));
    let (_dir, mut st, ids) = opened(&[("a", &a_data), ("b", &b_data)], 2, Variant::WB);
    let (a, b) = (ids[0], ids[1]);
    st.read(a, 0, 2 * BS as u32).unwrap(); // the cache holds a's blocks 0 and 1
    let pins = st.pins.clone();
    let state = Arc::new(Mutex::new(st));
    for (round, waits) in [(0, 1), (1, 2)] {
        let hit = match state.lock().unwrap().read_hits(a, 0, 2 * BS as u32) {
            Some(super::HitPlan::Io(hit)) => hit,
            _ => panic!("round {round}: a's blocks are cached"),
        };
        let writer = {
            let state = state.clone();
            std::thread::spawn(move || {
                let mut st = state.lock().unwrap();
                if round == 0 {
                    st.write(a, 3, &[0xAB; 600]).unwrap(); // both of a's blocks
                } else {
                    st.read(b, 0, 2 * BS as u32).unwrap(); // evicts a's blocks for b's
                }
            })
        };
        let mut seen = 0;
        while pins.waited.load(std::sync::atomic::Ordering::SeqCst) < waits {
            std::thread::sleep(Duration::from_millis(1));
            seen += 1;
            assert!(
                seen < 60_000,
                "round {round}: the writer never waited for the pin"
            );
        }
        let want = if round == 0 {
            a_data[..2 * BS].to_vec()
        } else {
            let mut w = a_data[..2 * BS].to_vec();
            w[3..603].fill(0xAB);
            w
        };
        assert_eq!(hit.run().unwrap(), want, "round {round}: the planned bytes");
        writer.join().unwrap();
    }
    let mut st = state.lock().unwrap();
    assert_eq!(st.read(b, 0, 2 * BS as u32).unwrap(), b_data[..2 * BS]);
    let mut want = a_data[..2 * BS].to_vec();
    want[3..603].fill(0xAB);
    assert_eq!(st.read(a, 0, 2 * BS as u32).unwrap(), want);
}
