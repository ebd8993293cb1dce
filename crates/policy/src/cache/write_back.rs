//! Write-back of chosen lines: a flush job over the lines the caller names, in its order
//! (docs/design.md §4.9: a file-level cache flushes one file's dirty blocks on fsync, delete or
//! unmount, in store order). The cleaner's jobs (`jobs.rs`) pick lines themselves; this one
//! shares their plan and completion (`Cache::flush_done`).

use super::counters::Event;
use super::{Cache, FlushJob};
use tiercache_core::{LineKey, OpCause, VolumeId};
use tiercache_eviction::Slot;

impl Cache {
    /// A flush job writing back those of `lines` (volume, line index) that are resident, dirty
    /// and not already under write-back, in the order given (`None` if there is none). The
    /// lines are marked clean and pinned until [`Cache::flush_done`], as the cleaner's are;
    /// they count as cleaned lines.
    pub fn write_back_lines(
        &mut self,
        lines: impl IntoIterator<Item = (VolumeId, u64)>,
    ) -> Option<FlushJob> {
        let slots: Vec<Slot> = lines
            .into_iter()
            .filter(|&(v, index)| v.0 < tiercache_core::MAX_VOLUMES && index < LineKey::MAX_INDEX)
            .filter_map(|(v, index)| self.table.lookup(LineKey::new(v, index)))
            .filter(|&s| {
                let m = self.table.meta(s);
                m.dirty != 0 && !m.pinned
            })
            .collect();
        if slots.is_empty() {
            return None;
        }
        self.record(Event::CleanJob {
            lines: slots.len() as u64,
        });
        Some(self.write_back_job(slots, OpCause::Clean))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{CacheConfig, CleaningConfig};
    use crate::Cache;
    use tiercache_core::{IoKind, Request, VolumeId};

    #[test]
    fn writes_back_the_named_dirty_lines_in_order() {
        let cfg = CacheConfig {
            capacity: 8 * 4096,
            cleaning: CleaningConfig::None,
            ..CacheConfig::default()
        };
        let mut c = Cache::new(&cfg).unwrap();
        for i in [3u64, 1, 2] {
            c.access(&Request::write(i * 4096, 4096), None).unwrap();
        }
        c.access(&Request::read(5 * 4096, 4096), None).unwrap();
        let v = VolumeId(0);
        // Line 5 is clean and line 7 absent: skipped.
        let job = c
            .write_back_lines([(v, 2), (v, 5), (v, 7), (v, 1)])
            .unwrap();
        let written: Vec<u64> = job
            .plan
            .ops
            .iter()
            .filter(|o| o.kind == IoKind::Write)
            .map(|o| o.offset / 4096)
            .collect();
        assert_eq!(written, vec![2, 1]);
        assert_eq!(c.dirty_lines(), 1);
        assert!(c.write_back_lines([(v, 2)]).is_none(), "pinned and clean");
        c.flush_done(job);
        assert_eq!(c.stats().cleaned_lines, 2);
        c.audit();
    }
}
