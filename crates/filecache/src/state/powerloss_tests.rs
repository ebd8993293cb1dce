//! Power loss on the write path ([`crate::powerloss`]): after writes that were not fsync'd,
//! the blocks file and the journal keep what was synced and any subset of the rest. Recovery
//! must then give every block its fsync'd version or a later one, never older data, zeros or
//! another block's data.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};

use super::State;
use crate::powerloss::{self, Recording};
use crate::recovery::recover;
use crate::store::CacheDir;
use crate::{MountConfig, Variant};

const BS: usize = 512;

/// A write-back state with `capacity` slots over a store holding one empty file, `f`.
fn one_file(capacity: u32) -> (tempfile::TempDir, State, u64) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("store")).unwrap();
    std::fs::write(dir.path().join("store/f"), b"").unwrap();
    let mut st = State::open(MountConfig::new(
        dir.path().join("store"),
        dir.path().join("cache"),
        capacity,
        BS as u32,
        Variant::WB,
    ))
    .unwrap();
    let md = std::fs::metadata(dir.path().join("store/f")).unwrap();
    let id = st.remember(PathBuf::from("f"), &md).unwrap();
    (dir, st, id)
}

fn cache_files(dir: &Path) -> Vec<PathBuf> {
    let cache = CacheDir::new(&dir.join("cache"));
    vec![cache.blocks(), cache.journal()]
}

/// The cache's files and the store's file `f`: a power loss loses unsynced store writes too.
fn cache_and_store_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = cache_files(dir);
    files.push(dir.join("store/f"));
    files
}

/// Every power-loss image of `rec` (all subsets of its unsynced writes when there are few,
/// else `samples` random ones and the two extremes) is recovered and `check` is given the
/// store file then (an error names what is wrong). With `every_point` (and the store file
/// followed) the power loss strikes at every point ([`Recording::points`]), so `check` must
/// hold all along (see [`check_images_at`] for a check that depends on the point); otherwise at the end only, with the store as
/// the process left it if the recording does not follow it (a truncate's `set_len` is not
/// modelled). Points before the end are tried exhaustively when that is no more than
/// `samples` and the extremes, else sampled.
fn check_images(
    dir: &Path,
    rec: &Recording,
    samples: u32,
    every_point: bool,
    check: impl Fn(&[u8]) -> Result<(), String>,
) {
    check_images_at(dir, rec, samples, every_point, |_, back| check(back));
}

/// [`check_images`] with `check` told the point (events before the power loss).
fn check_images_at(
    dir: &Path,
    rec: &Recording,
    samples: u32,
    every_point: bool,
    check: impl Fn(usize, &[u8]) -> Result<(), String>,
) {
    let store_file = dir.join("store/f");
    let store_now = std::fs::read(&store_file).unwrap();
    let mut points = rec.points();
    if !(every_point && rec.follows(&store_file)) {
        points.drain(..points.len() - 1);
    }
    let cache = CacheDir::new(&dir.join("cache"));
    let end = rec.points().last().copied();
    for point in points {
        let rec = rec.until(point);
        let unsynced = rec.unsynced();
        let exhaustive = if Some(point) == end {
            unsynced.len() <= 12
        } else {
            unsynced.len() <= 16 && 1u32 << unsynced.len() <= samples + 2
        };
        let masks: Vec<Vec<bool>> = if exhaustive {
            (0..1u32 << unsynced.len())
                .map(|m| (0..unsynced.len()).map(|i| m >> i & 1 == 1).collect())
                .collect()
        } else {
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
            let mut v = vec![vec![false; unsynced.len()], vec![true; unsynced.len()]];
            v.extend((0..samples).map(|_| (0..unsynced.len()).map(|_| rng.gen()).collect()));
            v
        };
        for mask in masks {
            let image = rec.image(|i| unsynced.binary_search(&i).is_ok_and(|at| mask[at]));
            // The same store file (recovery finds it by inode number), as the power loss left
            // it or, when not followed, as the process did.
            std::fs::write(&store_file, &store_now).unwrap();
            for (path, bytes) in &image {
                std::fs::write(path, bytes).unwrap();
            }
            recover(&dir.join("store"), &cache).unwrap();
            if let Err(what) = check(point, &std::fs::read(&store_file).unwrap()) {
                let kept: Vec<usize> = unsynced
                    .iter()
                    .zip(&mask)
                    .filter(|(_, k)| **k)
                    .map(|(i, _)| *i)
                    .collect();
                panic!(
                    "after a power loss after event {point} keeping unsynced writes {kept:?} \
                     of {unsynced:?}: {what}"
                );
            }
        }
    }
}

/// A check that each block of the file is one of the versions `allowed` lists for it.
fn blocks_among(allowed: &[HashSet<Vec<u8>>]) -> impl Fn(&[u8]) -> Result<(), String> + '_ {
    move |back| {
        for (b, versions) in allowed.iter().enumerate() {
            let mut got = back.get(b * BS..).unwrap_or(&[]).to_vec();
            got.resize(BS, 0); // past the store's end reads as zeros
            got.truncate(BS);
            if !versions.contains(&got) {
                return Err(format!(
                    "block {b} recovered to data it never held (fsync'd or later): starts {:?}",
                    &got[..8]
                ));
            }
        }
        Ok(())
    }
}

fn pattern(tag: u8, b: usize) -> Vec<u8> {
    (0..BS).map(|i| tag ^ (b as u8) ^ (i as u8)).collect()
}

#[test]
fn overwriting_fsynced_dirty_blocks_keeps_them_across_a_power_loss() {
    // Four fsync'd dirty blocks, then each overwritten (not fsync'd). Each new version goes to
    // a spare slot; the slot it frees must not take the next block's version while the
    // journal on disk may still name it for the fsync'd one.
    let (dir, mut st, id) = one_file(8);
    let v1: Vec<Vec<u8>> = (0..4).map(|b| pattern(0x10, b)).collect();
    st.write(id, 0, &v1.concat()).unwrap();
    st.fsync(id).unwrap();
    powerloss::start(&cache_and_store_files(dir.path())).unwrap();
    let v2: Vec<Vec<u8>> = (0..4).map(|b| pattern(0x20, b)).collect();
    for (b, v) in v2.iter().enumerate() {
        st.write(id, (b * BS) as u64, v).unwrap();
    }
    drop(st);
    let rec = powerloss::stop();
    let allowed: Vec<HashSet<Vec<u8>>> = (0..4)
        .map(|b| [v1[b].clone(), v2[b].clone()].into_iter().collect())
        .collect();
    check_images(dir.path(), &rec, 200, true, blocks_among(&allowed));
}

#[test]
fn random_writes_and_fsyncs_survive_a_power_loss() {
    // A file of 12 blocks in caches smaller and larger than it (evictions write back), written
    // at random with fsyncs now and then; a power loss at every point. What a block may hold
    // then is what it might after the operation under way: before it or after it.
    for (capacity, seed) in [(8u32, 1u64), (8, 2), (40, 3), (40, 4), (64, 5)] {
        let (dir, mut st, id) = one_file(capacity);
        let blocks = 12;
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut model: Vec<u8> = (0..blocks * BS).map(|i| (i % 7) as u8).collect();
        st.write(id, 0, &model).unwrap();
        st.fsync(id).unwrap();
        powerloss::start(&cache_and_store_files(dir.path())).unwrap();
        let block = |m: &Vec<u8>, b: usize| m[b * BS..(b + 1) * BS].to_vec();
        let mut allowed: Vec<HashSet<Vec<u8>>> =
            (0..blocks).map(|b| [block(&model, b)].into()).collect();
        // After each operation: events logged, and what each block may hold.
        let mut after = vec![(0, allowed.clone())];
        for _ in 0..60 {
            if rng.gen_range(0..10) == 0 {
                st.fsync(id).unwrap();
                for (b, a) in allowed.iter_mut().enumerate() {
                    *a = [block(&model, b)].into();
                }
                after.push((powerloss::logged(), allowed.clone()));
                continue;
            }
            let at = rng.gen_range(0..blocks * BS - 1);
            let len = rng.gen_range(1..(blocks * BS - at).min(3 * BS));
            let tag: u8 = rng.gen();
            model[at..at + len].fill(tag);
            st.write(id, at as u64, &model[at..at + len]).unwrap();
            let touched = at / BS..(at + len).div_ceil(BS);
            for (b, a) in allowed.iter_mut().enumerate() {
                if touched.contains(&b) {
                    a.insert(block(&model, b));
                }
            }
            after.push((powerloss::logged(), allowed.clone()));
        }
        drop(st);
        let rec = powerloss::stop();
        check_images_at(dir.path(), &rec, 14, true, |point, back| {
            // The operation under way at `point` is the first to end after it.
            let op = after.iter().position(|(n, _)| *n > point);
            let mut may = after[op.map_or(after.len() - 1, |k| k - 1)].1.clone();
            if let Some(k) = op {
                for (m, a) in may.iter_mut().zip(&after[k].1) {
                    m.extend(a.iter().cloned());
                }
            }
            let verdict = blocks_among(&may)(back);
            verdict
        });
    }
}

#[test]
fn a_written_back_slot_keeps_its_fsynced_data_until_the_clean_is_synced() {
    // Eight fsync'd dirty blocks fill the cache; a ninth evicts the first: written back to
    // the store and journaled clean, its slot taken by the ninth. A power loss that loses
    // the clean record leaves the synced record of the first block: its slot must still hold
    // that data. (One that keeps the clean record must find the write-back in the store.)
    let (dir, mut st, id) = one_file(8);
    let v1: Vec<Vec<u8>> = (0..9).map(|b| pattern(0x30, b)).collect();
    st.write(id, 0, &v1[..8].concat()).unwrap();
    st.fsync(id).unwrap();
    powerloss::start(&cache_and_store_files(dir.path())).unwrap();
    st.write(id, (8 * BS) as u64, &v1[8]).unwrap();
    assert_eq!(
        st.stats().core.write_backs,
        1,
        "the first block was written back"
    );
    drop(st);
    let rec = powerloss::stop();
    let mut allowed: Vec<HashSet<Vec<u8>>> = (0..9).map(|b| [v1[b].clone()].into()).collect();
    allowed[8].insert(vec![0; BS]); // never fsync'd
    check_images(dir.path(), &rec, 200, true, blocks_among(&allowed));
}

#[test]
fn overwrites_sync_only_when_every_spare_waits_for_a_sync() {
    // 64 slots, 4 spares. Each overwrite of an fsync'd dirty block quarantines one slot
    // until the next sync: an application that fsyncs every 4 such overwrites never makes
    // the mount sync on its own; one that overwrites 16 without an fsync, every 4th time.
    let (_dir, mut st, id) = one_file(64);
    assert_eq!(super::slots::spare_slots(64), 4);
    st.write(id, 0, &vec![1; 16 * BS]).unwrap();
    st.fsync(id).unwrap();
    for round in 0..4 {
        for b in 0..4 {
            st.write(id, ((round * 4 + b) * BS) as u64, &[2; BS])
                .unwrap();
        }
        st.fsync(id).unwrap();
    }
    assert_eq!(st.stats().spare_syncs, 0);
    for b in 0..16 {
        st.write(id, (b * BS) as u64, &[3; BS]).unwrap();
    }
    assert_eq!(st.stats().spare_syncs, 3);
    // Overwriting a block again before the next sync costs nothing: the place its last
    // version leaves is named by no synced record.
    st.fsync(id).unwrap();
    for round in 0..20 {
        st.write(id, 0, &[round; BS]).unwrap();
    }
    assert_eq!(st.stats().spare_syncs, 3);
}

/// A file of 4 blocks: block 0 and 3 clean in the store, 1 and 2 fsync'd dirty versions in
/// the cache. Returns the file's content.
pub(super) fn clean_and_dirty_blocks(st: &mut State, id: u64) -> Vec<u8> {
    let mut old: Vec<u8> = (0..4).flat_map(|b| pattern(0x40, b)).collect();
    st.write(id, 0, &old).unwrap();
    st.flush_all().unwrap();
    let dirty: Vec<u8> = (1..3).flat_map(|b| pattern(0x50, b)).collect();
    st.write(id, BS as u64, &dirty).unwrap();
    st.fsync(id).unwrap();
    old[BS..3 * BS].copy_from_slice(&dirty);
    old
}

#[test]
fn a_truncate_through_a_dirty_block_is_whole_or_not_at_all_after_a_power_loss() {
    // Cut inside dirty block 1, past dirty block 2 and clean block 3, then power loss.
    let (dir, mut st, id) = one_file(8);
    let old = clean_and_dirty_blocks(&mut st, id);
    let size = BS + BS / 3;
    powerloss::start(&cache_files(dir.path())).unwrap();
    st.truncate(id, size as u64).unwrap();
    drop(st);
    let rec = powerloss::stop();
    let new = old[..size].to_vec();
    check_images(dir.path(), &rec, 0, false, |back| {
        if back == old || back == new {
            Ok(())
        } else {
            Err(format!(
                "the file is neither before ({} bytes) nor after the truncate ({} bytes): {} \
                 bytes, first block {}, dirty bytes kept {}",
                old.len(),
                new.len(),
                back.len(),
                back.get(..BS) == Some(&old[..BS]),
                back.get(BS..size) == Some(&old[BS..size]),
            ))
        }
    });
}

/// Runs `before` (fsync'd state), then records `action` with the store file followed, and
/// checks every power-loss point and subset against `allowed` (per block of `f`).
fn check_write_back(
    capacity: u32,
    before: impl FnOnce(&mut State, u64),
    action: impl FnOnce(&mut State, u64),
    allowed: &[HashSet<Vec<u8>>],
) -> Recording {
    let (dir, mut st, id) = one_file(capacity);
    before(&mut st, id);
    powerloss::start(&cache_and_store_files(dir.path())).unwrap();
    action(&mut st, id);
    drop(st);
    let rec = powerloss::stop();
    check_images(dir.path(), &rec, 200, true, blocks_among(allowed));
    rec
}

#[test]
fn fsynced_dirty_blocks_written_back_survive_a_power_loss_at_every_point() {
    // A written-back block's `Clean` record must not be durable before its store write: the
    // kernel writes the journal and the store back in any order, and the fsync'd version of
    // the block is in the cache alone until then.
    let v1: Vec<Vec<u8>> = (0..16).map(|b| pattern(0x60, b)).collect();
    let v2: Vec<Vec<u8>> = (0..16).map(|b| pattern(0x70, b)).collect();
    let zero = vec![0u8; BS];
    let set = |vs: &[&Vec<u8>]| vs.iter().map(|v| (*v).clone()).collect::<HashSet<_>>();

    // A flush: six fsync'd dirty blocks, two of them overwritten since (not fsync'd).
    let mut allowed: Vec<HashSet<Vec<u8>>> = (0..6).map(|b| set(&[&v1[b]])).collect();
    for b in 0..2 {
        allowed[b].insert(v2[b].clone());
    }
    check_write_back(
        8,
        |st, id| {
            st.write(id, 0, &v1[..6].concat()).unwrap();
            st.fsync(id).unwrap();
            st.write(id, 0, &v2[..2].concat()).unwrap();
        },
        |st, _| {
            st.flush_all().unwrap();
        },
        &allowed,
    );

    // Evictions: eight fsync'd dirty blocks fill the cache; one request of four new blocks
    // evicts (writes back) four of them, then single writes evict the rest. Block 0 was
    // overwritten (not fsync'd) first, so it goes last, from its spare slot.
    let mut allowed: Vec<HashSet<Vec<u8>>> = (0..8).map(|b| set(&[&v1[b]])).collect();
    allowed[0].insert(v2[0].clone());
    allowed.extend((8..16).map(|b| set(&[&v2[b], &zero])));
    check_write_back(
        8,
        |st, id| {
            st.write(id, 0, &v1[..8].concat()).unwrap();
            st.fsync(id).unwrap();
            st.write(id, 0, &v2[0]).unwrap();
        },
        |st, id| {
            st.write(id, (8 * BS) as u64, &v2[8..12].concat()).unwrap();
            for (b, v) in v2.iter().enumerate().skip(12) {
                st.write(id, (b * BS) as u64, v).unwrap();
            }
            assert_eq!(
                st.stats().core.write_backs,
                8,
                "every old block was written back"
            );
        },
        &allowed,
    );
}

/// A second empty store file, `g`, known to `st`.
fn second_file(dir: &Path, st: &mut State) -> u64 {
    std::fs::write(dir.join("store/g"), b"").unwrap();
    let md = std::fs::metadata(dir.join("store/g")).unwrap();
    st.remember(PathBuf::from("g"), &md).unwrap()
}

#[test]
fn a_write_back_syncs_each_store_file_once_per_batch_and_only_for_fsynced_blocks() {
    let syncs = |st: &State| st.stats().store_syncs;
    // 64 fsync'd dirty blocks of f fill the cache (4 spare slots: no sync of the mount's
    // own while at most 4 evicted slots wait for one).
    let (dir, mut st, f) = one_file(64);
    let g = second_file(dir.path(), &mut st);
    st.write(f, 0, &vec![1; 64 * BS]).unwrap();
    st.fsync(f).unwrap();
    let at_fsync = syncs(&st);
    // One request evicting four of them: one fdatasync of f.
    st.write(g, 0, &vec![2; 4 * BS]).unwrap();
    assert_eq!(syncs(&st), at_fsync + 1);
    // The fsync has nothing left to sync in the store.
    st.fsync(g).unwrap();
    assert_eq!(syncs(&st), at_fsync + 1);
    // Four more, one request each: one each.
    for b in 4..8 {
        st.write(g, (b * BS) as u64, &[2; BS]).unwrap();
    }
    assert_eq!(syncs(&st), at_fsync + 5);
    assert_eq!(st.stats().spare_syncs, 0);
    // A flush of fsync'd blocks of two files syncs each once, as the flush's final sync did.
    st.fsync(g).unwrap();
    let before = syncs(&st);
    st.flush_all().unwrap();
    assert_eq!(syncs(&st), before + 2);

    // Evicting blocks never fsync'd (in the request that wrote them, or by later ones)
    // syncs nothing: losing such a write-back leaves what the store durably held.
    let (_dir, mut st, f) = one_file(8);
    st.write(f, 0, &vec![5; 16 * BS]).unwrap();
    for b in 16..32 {
        st.write(f, (b * BS) as u64, &[6; BS]).unwrap();
    }
    assert_eq!(st.stats().core.write_backs, 24);
    assert_eq!(syncs(&st), 0);

    // Records that the mount's own syncs made durable (here a truncate's, of the journal
    // alone) promise nothing either: evicting g's blocks then syncs nothing.
    let (dir, mut st, f) = one_file(256);
    let g = second_file(dir.path(), &mut st);
    st.write(g, 0, &vec![7; 8 * BS]).unwrap();
    st.truncate(g, (8 * BS - 100) as u64).unwrap();
    st.write(f, 0, &vec![8; 248 * BS]).unwrap();
    let before = syncs(&st);
    st.write(f, (248 * BS) as u64, &vec![9; 8 * BS]).unwrap();
    assert_eq!(st.stats().core.write_backs, 8);
    assert_eq!(st.stats().spare_syncs, 0);
    assert_eq!(syncs(&st), before);
}

#[test]
fn an_fsync_answered_by_a_later_sync_keeps_its_writes_across_a_power_loss() {
    // Group commit (`group_commit.rs`): fsync B arrives (its mark) after its write; another
    // fsync's sync begins after that, so B is answered without a journal sync of its own. An
    // fsync whose mark no completed sync follows syncs itself. After a power loss every
    // block holds its last version: each was fsynced, B's by the other fsync's sync.
    let (dir, mut st, id) = one_file(16);
    let counter = st.sync_counter();
    st.write(id, 0, &pattern(0x10, 0)).unwrap();
    st.fsync(id).unwrap();
    powerloss::start(&cache_and_store_files(dir.path())).unwrap();
    st.write(id, 0, &pattern(0x11, 0)).unwrap();
    let mark_b = counter.mark();
    st.write(id, BS as u64, &pattern(0x12, 1)).unwrap();
    st.fsync(id).unwrap();
    let before = st.stats();
    st.fsync_since(id, mark_b).unwrap();
    let after = st.stats();
    assert_eq!(after.journal_syncs, before.journal_syncs, "B synced again");
    assert_eq!(after.fsyncs_grouped, 1);
    assert_eq!(after.fsyncs, before.fsyncs + 1);
    st.write(id, 2 * BS as u64, &pattern(0x13, 2)).unwrap();
    let mark_c = counter.mark();
    st.fsync_since(id, mark_c).unwrap();
    let last = st.stats();
    assert_eq!(
        last.journal_syncs,
        after.journal_syncs + 1,
        "C must sync itself"
    );
    assert_eq!(last.fsyncs_grouped, 1);
    drop(st);
    let rec = powerloss::stop();
    let allowed: Vec<HashSet<Vec<u8>>> = [(0x11, 0), (0x12, 1), (0x13, 2)]
        .into_iter()
        .map(|(tag, b)| [pattern(tag, b)].into_iter().collect())
        .collect();
    check_images(dir.path(), &rec, 200, false, blocks_among(&allowed));
}
