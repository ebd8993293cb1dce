//! Crash tests of deletes: an unlink, or a rename over a file, of a file with fsync'd dirty
//! blocks, killed (kill -9) at every journal record it makes. Recovery must start, must not
//! write the deleted file's blocks anywhere (a file created afterwards may reuse its inode
//! number), and must keep every other file's fsync'd data.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::State;
use crate::recovery::recover;
use crate::store::CacheDir;
use crate::{MountConfig, Variant};

const BS: usize = 512;

fn open(dir: &Path) -> State {
    State::open(MountConfig::new(
        dir.join("store"),
        dir.join("cache"),
        8,
        BS as u32,
        Variant::WB,
    ))
    .unwrap()
}

/// Creates store file `name`, writes `data` through the cache and fsyncs it; returns its id.
fn fsynced(st: &mut State, store: &Path, name: &str, data: &[u8]) -> u64 {
    std::fs::write(store.join(name), b"").unwrap();
    let md = std::fs::metadata(store.join(name)).unwrap();
    let id = st.remember(PathBuf::from(name), &md).unwrap();
    st.write(id, 0, data).unwrap();
    st.fsync(id).unwrap();
    id
}

#[derive(Debug, Clone, Copy)]
enum Delete {
    Unlink,
    RenameOver,
}

#[test]
fn a_crash_at_any_record_of_a_delete_recovers_without_the_deleted_files_blocks() {
    let victim: Vec<u8> = vec![0xDD; 3 * BS];
    let other: Vec<u8> = (0..2 * BS).map(|i| (i % 251) as u8).collect();
    let moved: Vec<u8> = vec![0x4D; BS + 100];
    let mut reused = 0;
    for how in [Delete::Unlink, Delete::RenameOver] {
        // The delete makes at most 4 records (`Deleted`, then a `Clean` per dirty block);
        // one more point lets it finish.
        for appends in 0..=5u64 {
            let dir = tempfile::tempdir().unwrap();
            let store = dir.path().join("store");
            std::fs::create_dir(&store).unwrap();
            let mut st = open(dir.path());
            let f = fsynced(&mut st, &store, "f", &victim);
            fsynced(&mut st, &store, "g", &other);
            fsynced(&mut st, &store, "h", &moved);
            let f_ino = std::fs::metadata(store.join("f")).unwrap().ino();

            st.journal.as_mut().unwrap().appends_before_crash = Some(appends);
            let (from, to) = (store.join("h"), store.join("f"));
            let done = match how {
                Delete::Unlink => st.delete_file_with(f, || std::fs::remove_file(&to)),
                Delete::RenameOver => st.delete_file_with(f, || std::fs::rename(&from, &to)),
            }
            .is_ok();
            drop(st); // the process is gone; what it wrote stays (kill -9)

            // A file made after the delete, which may get the deleted file's inode number.
            let gone = !store.join("f").exists()
                || std::fs::metadata(store.join("f")).unwrap().ino() != f_ino;
            std::fs::write(store.join("new"), b"").unwrap();
            if std::fs::metadata(store.join("new")).unwrap().ino() == f_ino {
                reused += 1;
            }

            let case = format!("{how:?}, crash after {appends} records (done: {done})");
            let cache = CacheDir::new(&dir.path().join("cache"));
            recover(&store, &cache).unwrap_or_else(|e| panic!("{case}: recovery failed: {e}"));
            assert_eq!(
                std::fs::read(store.join("new")).unwrap(),
                b"",
                "{case}: the deleted file's blocks were written into a new file"
            );
            assert_eq!(std::fs::read(store.join("g")).unwrap(), other, "{case}");
            let moved_to = match how {
                Delete::RenameOver if gone => "f",
                _ => "h",
            };
            assert_eq!(
                std::fs::read(store.join(moved_to)).unwrap(),
                moved,
                "{case}: the moved file"
            );
            if !gone {
                // The delete never reached the store: the file keeps its fsync'd data.
                assert_eq!(std::fs::read(store.join("f")).unwrap(), victim, "{case}");
            }
            // The cache starts again over the recovered store.
            drop(open(dir.path()));
        }
    }
    eprintln!("inode number reused by the new file in {reused} of 12 cases");
}

#[test]
fn a_refused_delete_keeps_the_files_dirty_blocks_journaled() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let mut st = open(dir.path());
    let data = vec![0x5A; 2 * BS];
    let f = fsynced(&mut st, &store, "f", &data);
    let refused = st.delete_file_with(f, || Err(std::io::Error::from_raw_os_error(libc::EACCES)));
    assert!(refused.is_err());
    drop(st); // a crash now must still recover the file's fsync'd data
    let cache = CacheDir::new(&dir.path().join("cache"));
    assert_eq!(recover(&store, &cache).unwrap(), 2);
    assert_eq!(std::fs::read(store.join("f")).unwrap(), data);
}

/// A power loss right after a delete keeps what was synced and any subset of the rest; the
/// store keeps the unlink (the worst case: the kernel may write the directory back first).
/// Two files: `f` with fsync'd dirty blocks, `e` whose fsync'd blocks were written back by
/// evictions (their `Clean` records not synced, so a power loss may bring back its `Map`s).
#[test]
fn a_power_loss_after_a_delete_recovers_without_the_deleted_files_blocks() {
    use crate::powerloss;
    for victim in ["f", "e"] {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        std::fs::create_dir(&store).unwrap();
        let mut st = open(dir.path());
        let id = fsynced(&mut st, &store, victim, &[0xDD; 3 * BS]);
        let other = vec![0x33; 2 * BS];
        fsynced(&mut st, &store, "g", &other);
        let cache = CacheDir::new(&dir.path().join("cache"));
        powerloss::start(&[cache.blocks(), cache.journal()]).unwrap();
        if victim == "e" {
            // Written back (as an eviction does) and recorded `Clean`, not synced.
            let mut ops = Vec::new();
            st.core.flush(Some(id), &mut ops);
            st.execute(&ops, 0, &mut [], None).unwrap();
            assert!(st.core.dirty_of_file(id).is_empty(), "e was written back");
            assert!(st.cleaned_unsynced.contains(&id));
        }
        st.delete_file_with(id, || std::fs::remove_file(store.join(victim)))
            .unwrap();
        drop(st);
        let rec = powerloss::stop();
        std::fs::write(store.join("new"), b"").unwrap();
        let unsynced = rec.unsynced();
        assert!(unsynced.len() <= 12, "{} unsynced writes", unsynced.len());
        for mask in 0..1u32 << unsynced.len() {
            let image = rec.image(|i| {
                unsynced
                    .binary_search(&i)
                    .is_ok_and(|at| mask >> at & 1 == 1)
            });
            for (path, bytes) in &image {
                std::fs::write(path, bytes).unwrap();
            }
            let case = format!("{victim} deleted, power loss keeping unsynced mask {mask:b}");
            recover(&store, &cache).unwrap_or_else(|e| panic!("{case}: recovery failed: {e}"));
            assert_eq!(std::fs::read(store.join("new")).unwrap(), b"", "{case}");
            assert_eq!(std::fs::read(store.join("g")).unwrap(), other, "{case}");
        }
    }
}
