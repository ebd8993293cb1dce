//! The cache's caps (docs/design.md §15): its bytes are its slots, fixed at mount (the blocks
//! file is taken whole then), and the files with cached blocks are capped by the user,
//! checked by the core at every admission of a new file: a request the cap refuses is served
//! from the store instead.

use std::io;

use super::State;

impl State {
    /// Caps the files with cached blocks at `max` from now on (at least 1). Files cached
    /// already past the cap (a warm restart's) lose their clean blocks until the cap holds;
    /// if dirty blocks keep more files than that cached, it is an error and nothing changes.
    pub fn set_max_files(&mut self, max: u64) -> io::Result<()> {
        if max == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the cap on cached files must be at least 1 (use a cache size of 0 for none)",
            ));
        }
        let surplus = (self.core.cached_files() as u64).saturating_sub(max);
        if surplus > 0 {
            let dirty: std::collections::HashSet<_> =
                self.core.dirty_all().iter().map(|(k, _)| k.file).collect();
            let mut clean_files: Vec<_> = self
                .core
                .clean_all()
                .iter()
                .map(|k| k.file)
                .filter(|f| !dirty.contains(f))
                .collect();
            clean_files.sort_unstable();
            clean_files.dedup();
            if (clean_files.len() as u64) < surplus {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} files have cached blocks, {} of them dirty: a cap of {max} files \
                         cannot hold",
                        self.core.cached_files(),
                        dirty.len()
                    ),
                ));
            }
            let mut ops = Vec::new();
            for file in clean_files.into_iter().take(surplus as usize) {
                self.core.delete_file(file, &mut ops);
                self.warm.remove(&file);
            }
            self.execute(&ops, 0, &mut [], None)?;
        }
        self.core.set_max_files(max);
        Ok(())
    }

    /// Whether the cap on cached files refuses a request of file `id` (it has no cached
    /// block and the cap is reached): it is then served from the store, uncached. Checked
    /// before any block of the request goes to the core, so no plan is left half made.
    pub(super) fn refused_by_files_cap(&mut self, id: u64) -> bool {
        if self.core.admits(id) {
            return false;
        }
        self.stats.files_cap_refused += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::{Arc, Mutex};

    use super::State;

    use crate::{MountConfig, Variant};

    const BS: u64 = 512;
    const SLOTS: u32 = 24;
    const MAX_FILES: u64 = 5;

    fn open(dir: &std::path::Path, variant: Variant) -> State {
        std::fs::create_dir_all(dir.join("store")).unwrap();
        State::open(MountConfig::new(
            dir.join("store"),
            dir.join("cache"),
            SLOTS,
            BS as u32,
            variant,
        ))
        .unwrap()
    }

    /// Writer threads create, write, read and delete files through one state (as the mount's
    /// request threads do) while a sampler checks, between every two requests it can see,
    /// that neither the cached blocks nor the cached files pass their caps; every read gets
    /// what was written.
    #[test]
    fn the_caps_hold_under_concurrent_writers() {
        for variant in [Variant::WB, Variant::WT] {
            let dir = tempfile::tempdir().unwrap();
            let st = Arc::new(Mutex::new(open(dir.path(), variant)));
            st.lock().unwrap().set_max_files(MAX_FILES).unwrap();
            let blocks_len = std::fs::metadata(dir.path().join("cache/blocks"))
                .unwrap()
                .len();
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let sampler = {
                let (st, stop) = (st.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut samples = 0u64;
                    let mut most_files = 0;
                    loop {
                        // Read before the sample: the last sample follows the last write.
                        let last = stop.load(std::sync::atomic::Ordering::SeqCst);
                        let s = st.lock().unwrap();
                        let files = s.core.cached_files();
                        assert!(files as u64 <= MAX_FILES, "{files} files cached");
                        assert!(s.core.len() <= SLOTS as usize);
                        most_files = most_files.max(files);
                        samples += 1;
                        drop(s);
                        if last {
                            break;
                        }
                        std::thread::yield_now();
                    }
                    (samples, most_files)
                })
            };
            let writers: Vec<_> = (0..4u64)
                .map(|t| {
                    let (st, root) = (st.clone(), dir.path().join("store"));
                    std::thread::spawn(move || {
                        for i in 0..40u64 {
                            let name = format!("t{t}-{i}");
                            std::fs::write(root.join(&name), b"").unwrap();
                            let md = std::fs::metadata(root.join(&name)).unwrap();
                            let data: Vec<u8> = (0..(1 + (i % 4)) * BS - 3)
                                .map(|b| (b as u8) ^ (t as u8) ^ (i as u8))
                                .collect();
                            let mut s = st.lock().unwrap();
                            let id = s.remember(PathBuf::from(&name), &md).unwrap();
                            s.write(id, 0, &data).unwrap();
                            drop(s);
                            let mut s = st.lock().unwrap();
                            assert_eq!(s.read(id, 0, data.len() as u32).unwrap(), data);
                            if i % 3 == 0 {
                                s.file_deleted(id).unwrap();
                                drop(s);
                                std::fs::remove_file(root.join(&name)).unwrap();
                            }
                        }
                    })
                })
                .collect();
            for w in writers {
                w.join().unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            let (samples, most_files) = sampler.join().unwrap();
            assert!(samples > 0);
            assert_eq!(most_files as u64, MAX_FILES, "the cap was reached");
            let mut s = st.lock().unwrap();
            assert!(s.stats().files_cap_refused > 0);
            // The bytes cap: the blocks file never grew.
            assert_eq!(
                std::fs::metadata(dir.path().join("cache/blocks"))
                    .unwrap()
                    .len(),
                blocks_len
            );
            // Files served past the cap reached the store whole.
            s.flush_all().unwrap();
            for t in 0..4u64 {
                for i in (0..40u64).filter(|i| i % 3 != 0) {
                    let data: Vec<u8> = (0..(1 + (i % 4)) * BS - 3)
                        .map(|b| (b as u8) ^ (t as u8) ^ (i as u8))
                        .collect();
                    let path = dir.path().join(format!("store/t{t}-{i}"));
                    assert_eq!(std::fs::read(path).unwrap(), data, "{variant} t{t}-{i}");
                }
            }
        }
    }

    #[test]
    fn a_lower_cap_drops_clean_files_and_refuses_what_dirty_ones_keep() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = open(dir.path(), Variant::WB);
        let mut ids = Vec::new();
        for i in 0..4 {
            let path = dir.path().join(format!("store/f{i}"));
            std::fs::write(&path, vec![i as u8; 700]).unwrap();
            let md = std::fs::metadata(&path).unwrap();
            let id = st.remember(PathBuf::from(format!("f{i}")), &md).unwrap();
            st.read(id, 0, 700).unwrap();
            ids.push(id);
        }
        st.write(ids[0], 0, b"dirty").unwrap();
        st.write(ids[1], 0, b"dirty").unwrap();
        assert!(st.set_max_files(1).is_err());
        assert_eq!(st.core.cached_files(), 4);
        st.set_max_files(2).unwrap();
        assert_eq!(st.core.cached_files(), 2);
        assert!(st.set_max_files(0).is_err());
    }
}
