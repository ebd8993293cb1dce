//! The file cache's mirror of the core's slots (docs/design.md §14): which block each slot
//! holds and whether it is dirty, and per file its cached blocks, its count of dirty ones and
//! its content version, kept exactly as blocks are admitted, evicted, dirtied, cleaned and
//! dropped (the core's slot updates, `Cache::drain_meta_updates`). The counts make a file's
//! questions O(1) or O(log blocks) that a walk over its blocks answered before: whether the
//! cache holds it whole (every passthrough open) and whether it has dirty blocks (delete,
//! fsync, flush of one file).

use super::{versions, FileCache, FileId};

impl FileCache {
    /// Brings the slot and file mirrors up to the core's slot updates since the last call;
    /// files left with no cached block give their extent back.
    pub(super) fn sync(&mut self) {
        let Some(core) = self.core.as_mut() else {
            return;
        };
        self.updates.clear();
        core.drain_meta_updates(&mut self.updates);
        let mut emptied = Vec::new();
        // Old contents first: a slot taken from one block of a file and another slot given a
        // block of the same file must not unmap it in between.
        for u in &self.updates {
            let Some(old) = self.slots[u.slot as usize] else {
                continue;
            };
            // A slot keeping its block (its dirty state changed: a write-back) changes no
            // file's content, and keeps its entry (its dirty count is set below).
            if u.line.and_then(|(v, i)| self.extents.key_of(v, i)) == Some(old) {
                continue;
            }
            self.slots[u.slot as usize] = None;
            let was_dirty = std::mem::take(&mut self.slot_dirty[u.slot as usize]);
            if let Some(f) = self.files.get_mut(&old.file) {
                f.blocks.remove(&old.block);
                f.dirty -= was_dirty as u64;
                f.version = versions::next(&mut self.last_version);
                if f.blocks.is_empty() {
                    emptied.push(old.file);
                }
            }
        }
        for u in &self.updates {
            let slot = u.slot as usize;
            if let Some((volume, index)) = u.line {
                let key = self
                    .extents
                    .key_of(volume, index)
                    .expect("a resident line belongs to a mapped file");
                let dirty = u.dirty != 0;
                // The same block again (its dirty state changed) counts its old state out.
                let was_dirty = self.slots[slot] == Some(key) && self.slot_dirty[slot];
                self.slots[slot] = Some(key);
                self.slot_dirty[slot] = dirty;
                let f = self.files.entry(key.file).or_default();
                if f.blocks.insert(key.block) {
                    f.version = versions::next(&mut self.last_version);
                }
                f.dirty = f.dirty + dirty as u64 - was_dirty as u64;
            }
        }
        for file in emptied {
            if self.files.get(&file).is_some_and(|f| f.blocks.is_empty()) {
                self.files.remove(&file);
                self.extents.unmap(file);
            }
        }
        #[cfg(debug_assertions)]
        if self.slots.len() <= 256 {
            // Small caches (every test's) are recounted after every change.
            self.check_mirror();
        }
    }

    /// Cached blocks of `file`.
    pub fn cached_blocks(&self, file: FileId) -> u64 {
        self.files.get(&file).map_or(0, |f| f.blocks.len() as u64)
    }

    /// The cached blocks of `file`, in block order (a store change behind the mount drops
    /// the clean ones, docs/design.md §14 "Changes to the store").
    pub fn cached_blocks_of(&self, file: FileId) -> Vec<u64> {
        self.files
            .get(&file)
            .map_or_else(Vec::new, |f| f.blocks.iter().copied().collect())
    }

    /// Dirty blocks of `file`, counted as they change (no walk over its blocks).
    pub fn dirty_blocks_of(&self, file: FileId) -> u64 {
        self.files.get(&file).map_or(0, |f| f.dirty)
    }

    /// Whether every block `0..blocks` of `file` is cached: O(log blocks) from the count of
    /// its cached blocks and the highest one (a walk only where blocks past `blocks` are
    /// cached too, which a truncate leaves none of).
    pub fn holds_blocks(&self, file: FileId, blocks: u64) -> bool {
        let Some(f) = self.files.get(&file) else {
            return blocks == 0;
        };
        let n = f.blocks.len() as u64;
        match f.blocks.last() {
            _ if n < blocks => false,
            Some(&last) if last < blocks => true,
            _ => f.blocks.range(..blocks).count() as u64 == blocks,
        }
    }

    /// Whether every block in `blocks` of `file` is cached: O(log cached blocks + the
    /// range's length), a walk over the file's cached blocks in the range only.
    pub fn holds_range(&self, file: FileId, blocks: std::ops::Range<u64>) -> bool {
        let want = blocks.end.saturating_sub(blocks.start);
        if want == 0 {
            return true;
        }
        self.files
            .get(&file)
            .is_some_and(|f| f.blocks.range(blocks).count() as u64 == want)
    }

    /// Recounts the mirror from the core's own line states and panics where it differs:
    /// every slot's block and dirty state, every file's blocks and dirty count, no empty file
    /// entry. The property tests and (on small caches) every debug build's sync call it.
    pub fn check_mirror(&self) {
        let Some(core) = self.core.as_ref() else {
            return;
        };
        let mut blocks = std::collections::HashMap::<FileId, (u64, u64)>::new();
        for (slot, key) in self.slots.iter().enumerate() {
            let Some(key) = *key else {
                assert!(!self.slot_dirty[slot], "free slot {slot} counted dirty");
                continue;
            };
            let extent = self.extents.get(key.file).expect("a cached file is mapped");
            let (volume, index) = self.extents.line(extent, key.block);
            let state = core
                .line_state(volume, index)
                .unwrap_or_else(|| panic!("slot {slot} mirrors {key:?}, not resident"));
            assert_eq!(state.slot as usize, slot, "{key:?} is in another slot");
            assert_eq!(
                state.dirty != 0,
                self.slot_dirty[slot],
                "dirty state of {key:?}"
            );
            let e = blocks.entry(key.file).or_default();
            e.0 += 1;
            e.1 += self.slot_dirty[slot] as u64;
            let f = self
                .files
                .get(&key.file)
                .expect("a cached file has an entry");
            assert!(
                f.blocks.contains(&key.block),
                "{key:?} missing from its file"
            );
        }
        assert_eq!(
            blocks.len(),
            self.files.len(),
            "file entries without blocks"
        );
        for (file, f) in &self.files {
            let (n, dirty) = blocks[file];
            assert_eq!(f.blocks.len() as u64, n, "cached blocks of file {file}");
            assert_eq!(f.dirty, dirty, "dirty blocks of file {file}");
        }
    }
}
