//! Which block-path requests the reading thread may serve itself (docs/design.md §14
//! "Served inline"): those that complete on the fast device alone, with no store I/O to
//! wait for, so that handing them to a request thread would only add the hand-off's latency.

use super::State;

impl State {
    /// Whether a read of `size` bytes at `offset` of file `id` is served from the cache
    /// alone: the file is cached, the mount is not degraded, and every block of the range
    /// (cut at the file's size) is cached and not stranded (a hit plans no store I/O and
    /// evicts nothing). A read at or past the end needs nothing. O(log blocks + the
    /// request's blocks), from the core's per-file mirror.
    pub fn read_is_cached(&self, id: u64, offset: u64, size: u32) -> bool {
        let Some(node) = self.nodes.get(&id) else {
            return false;
        };
        if !node.regular || !self.cached(id) || self.health.degraded {
            return false;
        }
        if offset >= node.size || size == 0 {
            return true;
        }
        let end = (offset + size as u64).min(node.size);
        self.blocks_served_by_cache(id, offset, end)
    }

    /// Whether a write of `len` bytes at `offset` of file `id` is served from the cache
    /// alone: write-back (a write-through variant writes the store), every block it touches
    /// cached already (nothing admitted: no fill, no eviction of a dirty victim), and no
    /// store file waiting for a sync and the journal not due for compaction (a sync the
    /// write may need — a spare slot, a compaction — then touches the fast device only).
    pub fn write_is_cached(&self, id: u64, offset: u64, len: usize) -> bool {
        let Some(node) = self.nodes.get(&id) else {
            return false;
        };
        if len == 0
            || !node.regular
            || !self.cached(id)
            || self.health.degraded
            || !self.cfg.variant.is_write_back()
            || !self.unsynced_store.is_empty()
        {
            return false;
        }
        let end = offset + len as u64;
        let blocks = end.div_ceil(self.bs()) - offset / self.bs();
        let limit = 4 * self.cfg.capacity_blocks as u64 + 4096;
        let records = self.journal.as_ref().map_or(0, |j| j.records());
        records + blocks < limit && self.blocks_served_by_cache(id, offset, end)
    }

    /// Every block of bytes `offset..end` of file `id` is cached and none is stranded.
    fn blocks_served_by_cache(&self, id: u64, offset: u64, end: u64) -> bool {
        let bs = self.bs();
        let blocks = offset / bs..end.div_ceil(bs);
        blocks.end <= crate::core::MAX_BLOCKS_PER_FILE
            && self.core.holds_range(id, blocks.clone())
            && !self.past_cache(id, blocks)
    }

    /// A request was served on the reading thread.
    pub fn note_inline(&mut self) {
        self.stats.served_inline += 1;
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::State;
    use crate::core::BlockKey;

    use crate::{MountConfig, Variant};

    const BS: u64 = 512;

    fn state(variant: Variant) -> (tempfile::TempDir, State, u64) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("store")).unwrap();
        std::fs::write(dir.path().join("store/f"), vec![3u8; 6 * BS as usize]).unwrap();
        let mut st = State::open(MountConfig::new(
            dir.path().join("store"),
            dir.path().join("cache"),
            8,
            BS as u32,
            variant,
        ))
        .unwrap();
        let md = std::fs::metadata(dir.path().join("store/f")).unwrap();
        let id = st.remember(PathBuf::from("f"), &md).unwrap();
        (dir, st, id)
    }

    /// Random reads and writes over a file twice the cache's size: a read is called cached
    /// exactly when every block of its range (cut at the file's size) is resident, as a
    /// block-by-block lookup says; and a request called cached does no store I/O and
    /// admits nothing (the store's and the core's counters stay put).
    #[test]
    fn requests_called_cached_match_a_lookup_and_touch_no_store() {
        for variant in [Variant::WB, Variant::WT] {
            let (_dir, mut st, id) = state(variant);
            let mut seed = 0x9e37_79b9_7f4a_7c15u64;
            let mut next = |n: u64| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (seed >> 33) % n
            };
            let (mut inline_reads, mut inline_writes) = (0, 0);
            for i in 0..3000 {
                if i % 16 == 0 {
                    // Syncs the store files written back (a write needs none pending).
                    st.fsync(id).unwrap();
                }
                let offset = next(16 * BS);
                let len = 1 + next(3 * BS);
                let size = st.file_size(id).unwrap();
                let before = st.stats();
                if next(3) == 0 {
                    let cached = st.write_is_cached(id, offset, len as usize);
                    st.write(id, offset, &vec![next(256) as u8; len as usize])
                        .unwrap();
                    if cached {
                        inline_writes += 1;
                        assert_eq!(variant, Variant::WB);
                        let after = st.stats();
                        assert_eq!(after.store_writes, before.store_writes);
                        assert_eq!(after.store_bytes_written, before.store_bytes_written);
                        assert_eq!(after.core.admissions, before.core.admissions);
                    }
                } else {
                    let cached = st.read_is_cached(id, offset, len as u32);
                    let end = (offset + len).min(size);
                    let reference = offset >= size
                        || (offset / BS..end.div_ceil(BS))
                            .all(|b| st.core.lookup(BlockKey::new(id, b)).is_some());
                    assert_eq!(cached, reference, "read {offset}+{len} of {size}");
                    st.read(id, offset, len as u32).unwrap();
                    if cached {
                        inline_reads += 1;
                        let after = st.stats();
                        assert_eq!(after.store_reads, before.store_reads);
                        assert_eq!(after.core.read_misses, before.core.read_misses);
                        assert_eq!(after.core.admissions, before.core.admissions);
                    }
                }
            }
            // Both outcomes were seen (the test exercised what it checks).
            assert!(inline_reads > 100, "{variant:?}: {inline_reads}");
            if variant == Variant::WB {
                assert!(inline_writes > 10, "{inline_writes}");
            } else {
                assert_eq!(inline_writes, 0);
            }
        }
    }
}
