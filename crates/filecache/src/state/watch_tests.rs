//! The watch's state side without FUSE: batches of events built by hand against a real store
//! directory (an overflow, a rename pair, a directory that cannot be watched).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Invalidation;
use crate::inotify::{Event, Inotify};
use crate::state::{State, ROOT};
use crate::{MountConfig, Variant};

const BS: u32 = 512;

/// A watched write-back state over `dir/store`.
fn watched(dir: &Path) -> State {
    let mut st = State::open(MountConfig::new(
        dir.join("store"),
        dir.join("cache"),
        64,
        BS,
        Variant::WB,
    ))
    .unwrap();
    st.watch_store(Arc::new(Inotify::new().unwrap()));
    st
}

/// Meets `name` in the root as a lookup would (the node, and its name in the listing).
fn meet(st: &mut State, store: &Path, name: &str) -> u64 {
    let md = std::fs::symlink_metadata(store.join(name)).unwrap();
    let id = st.remember(PathBuf::from(name), &md).unwrap();
    st.dir_names(ROOT).unwrap();
    st.name_added(ROOT, OsStr::new(name), Some(id));
    id
}

fn root_wd(st: &State) -> i32 {
    *st.watch
        .dirs
        .iter()
        .find(|(_, &dir)| dir == ROOT)
        .expect("the root is watched")
        .0
}

fn event(wd: i32, mask: u32, cookie: u32, name: &str) -> Event {
    Event {
        wd,
        mask,
        cookie,
        name: OsString::from(name),
    }
}

#[test]
fn an_overflow_checks_every_listed_name_and_known_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    std::fs::write(store.join("a"), vec![1u8; 3 * BS as usize]).unwrap();
    std::fs::write(store.join("b"), vec![2u8; BS as usize]).unwrap();
    let mut st = watched(dir.path());
    let a = meet(&mut st, &store, "a");
    let b = meet(&mut st, &store, "b");
    assert_eq!(st.read(a, 0, 3 * BS).unwrap(), vec![1u8; 3 * BS as usize]);
    assert_eq!(st.stats().cached_blocks, 3);
    // Behind the state: a rewritten (another size), b removed, c created.
    std::fs::write(store.join("a"), vec![3u8; 2 * BS as usize]).unwrap();
    std::fs::remove_file(store.join("b")).unwrap();
    std::fs::write(store.join("c"), b"c").unwrap();
    st.store_events(&[event(-1, libc::IN_Q_OVERFLOW, 0, "")]);
    let s = st.stats();
    assert_eq!(s.store_watch_overflows, 1);
    assert_eq!(s.store_changes_seen, 3, "{s:?}");
    assert_eq!(s.cached_blocks, 0, "a's stale blocks stay cached");
    assert_eq!(st.file_size(a).unwrap(), 2 * BS as u64);
    assert_eq!(st.read(a, 0, 2 * BS).unwrap(), vec![3u8; 2 * BS as usize]);
    assert!(!st.nodes.contains_key(&b), "the removed file's node stays");
    let names = &st.dirs[&ROOT];
    assert!(names.contains_key(OsStr::new("c")) && !names.contains_key(OsStr::new("b")));
    let (inval, changed) = st.take_store_changes();
    for want in [
        Invalidation::Inode(a),
        Invalidation::Inode(b),
        Invalidation::Entry {
            parent: ROOT,
            name: "b".into(),
        },
        Invalidation::Entry {
            parent: ROOT,
            name: "c".into(),
        },
    ] {
        assert!(inval.contains(&want), "{want:?} not in {inval:?}");
    }
    assert!(changed.contains(&a) && changed.contains(&b));
    // Nothing more to apply: the same overflow again sees no change.
    st.store_events(&[event(-1, libc::IN_Q_OVERFLOW, 0, "")]);
    assert_eq!(st.stats().store_changes_seen, 3);
}

#[test]
fn a_rename_pair_moves_the_node_and_a_lone_removal_of_a_dirty_file_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    std::fs::write(store.join("a"), vec![1u8; BS as usize]).unwrap();
    std::fs::write(store.join("d"), vec![4u8; BS as usize]).unwrap();
    let mut st = watched(dir.path());
    let a = meet(&mut st, &store, "a");
    let d = meet(&mut st, &store, "d");
    st.write(d, 0, &[9u8; 16]).unwrap();
    assert_eq!(st.stats().dirty_blocks, 1);
    let wd = root_wd(&st);
    std::fs::rename(store.join("a"), store.join("z")).unwrap();
    st.store_events(&[
        event(wd, libc::IN_MOVED_FROM, 7, "a"),
        event(wd, libc::IN_MOVED_TO, 7, "z"),
    ]);
    assert_eq!(
        st.nodes[&a].path,
        PathBuf::from("z"),
        "the node follows the rename"
    );
    assert_eq!(st.stats().store_conflicts, 0);
    // The dirty file removed in the store: nothing to write its block to.
    std::fs::remove_file(store.join("d")).unwrap();
    st.store_events(&[event(wd, libc::IN_DELETE, 0, "d")]);
    let s = st.stats();
    assert_eq!((s.store_conflicts, s.dirty_blocks), (1, 0), "{s:?}");
    assert!(!st.nodes.contains_key(&d));
}

#[test]
fn a_directory_that_cannot_be_watched_is_counted_and_the_state_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir_all(store.join("gone")).unwrap();
    let md = std::fs::metadata(store.join("gone")).unwrap();
    std::fs::remove_dir(store.join("gone")).unwrap();
    let mut st = watched(dir.path());
    st.remember(PathBuf::from("gone"), &md).unwrap();
    assert_eq!(st.stats().store_dirs_unwatched, 1);
    std::fs::create_dir(store.join("here")).unwrap();
    meet(&mut st, &store, "here");
    assert_eq!(st.stats().store_dirs_unwatched, 1);
    assert_eq!(st.watch.dirs.len(), 2, "the root and `here`");
}

#[test]
fn a_change_just_before_a_write_back_is_not_hidden_by_the_stamp_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    std::fs::write(store.join("a"), vec![1u8; 2 * BS as usize]).unwrap();
    let mut st = watched(dir.path());
    let a = meet(&mut st, &store, "a");
    assert_eq!(st.read(a, 0, 2 * BS).unwrap(), vec![1u8; 2 * BS as usize]);
    st.write(a, 0, &[7u8; BS as usize]).unwrap();
    // Someone else rewrites it, and the mount writes its dirty block back before the
    // watcher has looked: the stamp taken after the write-back matches the store.
    std::fs::write(store.join("a"), vec![5u8; 2 * BS as usize]).unwrap();
    st.flush_all().unwrap();
    let wd = root_wd(&st);
    st.store_events(&[event(wd, libc::IN_MODIFY, 0, "a")]);
    assert_eq!(st.stats().store_changes_seen, 1);
    // Block 0 is the mount's (written back over theirs), block 1 theirs, not the stale copy.
    let mut want = vec![7u8; BS as usize];
    want.extend(vec![5u8; BS as usize]);
    assert_eq!(st.read(a, 0, 2 * BS).unwrap(), want);
}
