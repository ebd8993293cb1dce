//! Bulk recovery: many lines recovered from a journal put back at once, as
//! [`Cache::restore_line`] one by one would, without looking each line up in the index first
//! (docs/design.md §13: at start-up that lookup was a quarter of the CPU).

use super::{config_error, Cache, PolicyError};
use tiercache_core::{LineKey, VolumeId};
use tiercache_eviction::Slot;

/// One line recovered from a journal, for [`Cache::restore_lines`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestoredLine {
    /// The slot holding it.
    pub slot: Slot,
    /// Its volume.
    pub volume: VolumeId,
    /// Its line index in the volume.
    pub index: u64,
    /// Sub-blocks holding valid data.
    pub valid: u64,
    /// Sub-blocks newer than the backend's (a subset of `valid`).
    pub dirty: u64,
}

/// Lines ahead of the one restored whose index groups are loaded meanwhile: the groups are
/// random reads of a table larger than the caches, the rest of a restore sequential.
const PREFETCH_AHEAD: usize = 16;

impl Cache {
    /// [`restore_line`](Self::restore_line) for lines `0..n` (`line(i)` the `i`-th), in that
    /// order: the same cache afterwards and the same first error, the lines before it
    /// restored (docs/design.md §13). Slots ascending and a cache holding no line yet (a
    /// recovery's case) take the bulk path: a line named twice is found by sorting the keys
    /// rather than by probing the index before every insert; otherwise the lines go one by
    /// one.
    pub fn restore_lines(
        &mut self,
        n: usize,
        line: impl Fn(usize) -> RestoredLine,
    ) -> Result<(), PolicyError> {
        let one_by_one = |c: &mut Self| {
            (0..n).try_for_each(|i| {
                let l = line(i);
                c.restore_line(l.slot, l.volume, l.index, l.valid, l.dirty)
            })
        };
        if self.table.resident_count() != 0 || self.counters.global.requests != 0 {
            return one_by_one(self);
        }
        let bad = |reason: String| Err(config_error("restore", reason));
        // The first line restore_line would refuse, and why. Its checks in its order: the
        // slot's range, the line's range, the masks (all the line's own), then a line named
        // twice, then the partition's room (which counts the lines before it).
        let mut first: Option<(usize, String)> = None;
        let mut used: Vec<u32> = (0..self.parts.len()).map(|p| self.parts[p].used).collect();
        let mut keys: Vec<u64> = Vec::with_capacity(n);
        let mut room_fails: Option<(usize, String)> = None;
        // One pass reads each line once here (a recovery's lines are many megabytes, read
        // from memory), and once more to restore them.
        let mut last: Option<Slot> = None;
        for i in 0..n {
            let RestoredLine {
                slot,
                volume,
                index,
                valid,
                dirty,
            } = line(i);
            // Not ascending (nothing is changed yet): one by one, which finds a slot named
            // twice.
            if last.is_some_and(|s| slot <= s) {
                return one_by_one(self);
            }
            last = Some(slot);
            let own = if slot >= self.table.slots() {
                Some(format!("slot {slot} beyond {} slots", self.table.slots()))
            } else if volume.0 >= tiercache_core::MAX_VOLUMES || index >= LineKey::MAX_INDEX {
                Some(format!(
                    "slot {slot}: line {index} of volume {} is out of range",
                    volume.0
                ))
            } else if valid == 0 || dirty & !valid != 0 || (valid & !self.geo.full_mask()) != 0 {
                Some(format!(
                    "slot {slot}: masks valid {valid:#x} dirty {dirty:#x}"
                ))
            } else {
                None
            };
            if let Some(reason) = own {
                first = Some((i, reason));
                break;
            }
            keys.push(LineKey::new(volume, index).0);
            if room_fails.is_none() {
                let p = self.partition(volume);
                if used[p] >= self.parts[p].capacity {
                    room_fails = Some((i, format!("slot {slot}: partition {p} is full")));
                } else {
                    used[p] += 1;
                }
            }
        }
        // A line named twice: where its second naming is, the lines before it all distinct.
        if let Some(at) = first_repeat(&keys) {
            let l = line(at);
            let twice = (at, format!("slot {}: slot or line restored twice", l.slot));
            // Its own checks passed (its key is in `keys`); the partition's come after it.
            first = Some(twice);
            room_fails = room_fails.filter(|(i, _)| *i < at);
        }
        if let Some((i, _)) = &room_fails {
            if first.as_ref().is_none_or(|(f, _)| i < f) {
                first = room_fails;
            }
        }
        let upto = first.as_ref().map_or(n, |(i, _)| *i);
        for i in 0..upto {
            if i + PREFETCH_AHEAD < upto {
                let ahead = line(i + PREFETCH_AHEAD);
                self.table
                    .prefetch_bucket(LineKey::new(ahead.volume, ahead.index));
            }
            let l = line(i);
            let key = LineKey::new(l.volume, l.index);
            let p = self.partition(l.volume);
            self.table.restore(l.slot, key, p as u16, l.valid, l.dirty);
            self.parts[p].used += 1;
            if l.dirty != 0 {
                self.parts[p].dirty += 1;
            }
            self.parts.order(p).insert(l.slot, key, l.dirty != 0);
        }
        match first {
            Some((_, reason)) => bad(reason),
            None => Ok(()),
        }
    }
}

/// The lowest position of `keys` holding a key an earlier position holds, if any. A sort
/// finds whether any key repeats (the rule: none does); only then are positions compared.
fn first_repeat(keys: &[u64]) -> Option<usize> {
    let mut sorted = keys.to_vec();
    sorted.sort_unstable();
    if sorted.windows(2).all(|w| w[0] != w[1]) {
        return None;
    }
    let mut seen = std::collections::HashSet::with_capacity(keys.len());
    keys.iter().position(|k| !seen.insert(*k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CacheConfig, WritePolicy};
    use proptest::prelude::*;

    /// 64 lines of 4 KiB (8 sub-blocks) or 512 bytes (one); volume 1 in a partition of 16
    /// lines or not.
    fn config(subs: bool, partitions: bool) -> CacheConfig {
        let line_size = if subs { 4096 } else { 512 };
        let mut cfg = CacheConfig {
            capacity: 64 * line_size,
            line_size,
            write_policy: WritePolicy::WriteBack,
            ..CacheConfig::default()
        };
        if partitions {
            cfg.partitions = vec![crate::config::PartitionConfig {
                volume: 1,
                bytes: 16 * line_size,
            }];
        }
        cfg
    }

    /// Everything of a cache a restore sets: every line's state, the counts, and what the
    /// cache does next (its next victims).
    fn state(c: &mut Cache, lines: &[RestoredLine], line_size: u64) -> String {
        let mut s = format!(
            "resident {} dirty {} |",
            c.resident_lines(),
            c.dirty_lines()
        );
        for l in lines {
            s += &format!(" {:?}", c.line_state(l.volume, l.index));
        }
        // Reading new lines evicts in the policy's order, dirty lines written back first.
        for i in 0..8u64 {
            let req = tiercache_core::Request {
                time_ns: 0,
                volume: VolumeId(0),
                op: tiercache_core::Op::Read,
                offset: (1000 + i) * line_size,
                len: line_size,
            };
            s += &format!(" {:?}", c.access(&req, None));
        }
        s
    }

    proptest! {
        /// Lines from a few volumes, some repeated, some with bad masks, some beyond the
        /// slots, a partition that fills: `restore_lines` leaves the cache `restore_line` one
        /// by one leaves, with the same first error.
        #[test]
        fn restores_as_one_by_one(
            picks in proptest::collection::vec(
                (0u32..2, 0u64..80, 0u8..40, any::<bool>()), 0..64),
            subs in any::<bool>(),
            parts in any::<bool>(),
            shuffled in 0u8..8,
        ) {
            let cfg = config(subs, parts);
            let full: u64 = if subs { 0xff } else { 1 };
            let mut lines = Vec::new();
            let mut slot = 0u32;
            for (vol, index, odd, dirty) in picks {
                slot += 1 + u32::from(odd % 3 == 0);
                let (valid, dirty) = match odd {
                    0 => (0, 0),
                    1 => (full, full << 1),
                    _ => (full, if dirty { full & 0x3 } else { 0 }),
                };
                // odd == 2: beyond the slots.
                let s = if odd == 2 { 64 + slot } else { slot };
                lines.push(RestoredLine { slot: s, volume: VolumeId(vol), index, valid, dirty });
            }
            // Sometimes not ascending: the one-by-one path.
            if shuffled == 0 && lines.len() > 2 {
                lines.swap(0, 1);
            }
            // Sometimes a slot named twice in a row.
            if shuffled == 1 && lines.len() > 3 {
                lines[3].slot = lines[2].slot;
            }
            let mut one = Cache::new(&cfg).unwrap();
            let mut bulk = Cache::new(&cfg).unwrap();
            let want = lines
                .iter()
                .try_for_each(|l| one.restore_line(l.slot, l.volume, l.index, l.valid, l.dirty))
                .map_err(|e| e.to_string());
            let got = bulk.restore_lines(lines.len(), |i| lines[i]).map_err(|e| e.to_string());
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(
                state(&mut bulk, &lines, cfg.line_size),
                state(&mut one, &lines, cfg.line_size)
            );
        }
    }

    /// A line named twice, the second time after a line with bad masks: the masks are the
    /// first error; before it, the repeat is.
    #[test]
    fn the_first_error_in_order_is_reported() {
        let cfg = config(false, false);
        let l = |slot, index, valid| RestoredLine {
            slot,
            volume: VolumeId(0),
            index,
            valid,
            dirty: 0,
        };
        let masks_first = [l(0, 5, 1), l(1, 6, 0), l(2, 5, 1)];
        let twice_first = [l(0, 5, 1), l(1, 5, 1), l(2, 6, 0)];
        for (lines, says) in [
            (masks_first, "slot 1: masks"),
            (twice_first, "slot 1: slot or line restored twice"),
        ] {
            let mut c = Cache::new(&cfg).unwrap();
            let e = c.restore_lines(3, |i| lines[i]).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
            // The line before the error is restored, the rest not.
            assert_eq!(c.resident_lines(), 1);
        }
    }
}
