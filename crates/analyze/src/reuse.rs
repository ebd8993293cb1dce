//! Exact LRU miss-ratio curves and reuse distances: traditional (TRD, every reuse) and useful
//! (URD, reuses whose later access is a read), reuse types, and ECI-style sizing advice
//! (docs/design.md §4.10).
//!
//! Definitions. The *stack distance* `d` of an access is the number of distinct lines touched
//! since the previous access to its line, itself included (1 = immediate reuse); an LRU cache of
//! `C` lines hits it iff `d <= C`. The *reuse distance* of docs/design.md §4.10 counts the other
//! lines in between, `d - 1`: in W1 W2 R1 R3 R5 R6 R2 the reuse of 2 has reuse distance 4 (lines 1,
//! 3, 5, 6), and a cache of `max URD + 1` = 5 lines captures every useful reuse.

use crate::stack::StackDistance;
use serde::Serialize;

/// Kind of a reuse: the earlier and the later access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ReuseType {
    /// Read after read.
    Rar,
    /// Read after write.
    Raw,
    /// Write after read.
    War,
    /// Write after write.
    Waw,
}

/// Counts of accesses by stack distance (index `d`, 1-based; index 0 unused).
#[derive(Debug, Clone, Default, Serialize)]
pub struct DistanceHistogram {
    /// Accesses with each stack distance.
    pub counts: Vec<u64>,
    /// First accesses (infinite distance).
    pub cold: u64,
    /// All accesses counted.
    pub total: u64,
}

impl DistanceHistogram {
    /// Miss ratio of an LRU cache of `lines` lines over the counted accesses.
    pub fn miss_ratio(&self, lines: u64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        // Saturating: a size beyond every distance (up to u64::MAX) holds every reuse.
        let take = usize::try_from(lines)
            .unwrap_or(usize::MAX)
            .saturating_add(1);
        let hits: u64 = self.counts.iter().take(take).sum();
        (self.total - hits) as f64 / self.total as f64
    }

    /// Largest finite stack distance (0 when there is no reuse).
    pub fn max_distance(&self) -> u64 {
        self.counts.iter().rposition(|&c| c > 0).unwrap_or(0) as u64
    }

    /// Reuses counted (finite distances).
    pub fn reuses(&self) -> u64 {
        self.total - self.cold
    }

    /// Smallest cache (lines) capturing at least `share` of the reuses.
    pub fn size_for_share(&self, share: f64) -> u64 {
        let want = (self.reuses() as f64 * share).ceil() as u64;
        let mut acc = 0;
        for (d, &c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= want && want > 0 {
                return d as u64;
            }
        }
        0
    }
}

/// Reuses whose later access falls in one interval of trace time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IntervalReuse {
    /// Reuses (accesses to a line seen before).
    pub reuses: u64,
    /// Useful reuses: those whose later access is a read.
    pub useful_reuses: u64,
    /// Max URD + 1 over the useful reuses: the lines capturing all of them (0 without any).
    pub urd_demand_lines: u64,
    /// Max TRD + 1 over all reuses (0 without any).
    pub trd_demand_lines: u64,
}

/// Reuse analysis of one stream (a volume, or the whole trace).
///
/// One LRU stack serves every figure: per access, one hash lookup gives the stack distance and
/// the previous access's kind, and one histogram slot counts it by kind. The all-access,
/// read, write and useful histograms are derived from that when asked for (the useful
/// histogram *is* the read one: a useful reuse is a reuse whose later access is a read).
#[derive(Debug, Clone)]
pub struct ReuseAnalyzer {
    stack: StackDistance,
    /// Accesses by stack distance `d` (index; 0 unused): `[reads, writes]`.
    counts: Vec<[u64; 2]>,
    /// First accesses: `[reads, writes]`.
    cold: [u64; 2],
    /// Reuse counts: RAR, RAW, WAR, WAW.
    pub types: [u64; 4],
    /// Reuses of the current interval.
    interval: IntervalReuse,
}

impl Default for ReuseAnalyzer {
    fn default() -> Self {
        Self {
            stack: StackDistance::with_layout(crate::stack::LAYOUT),
            counts: Vec::new(),
            cold: [0; 2],
            types: [0; 4],
            interval: IntervalReuse::default(),
        }
    }
}

impl ReuseAnalyzer {
    /// Records one line access.
    #[inline]
    pub fn access(&mut self, key: u64, is_write: bool) {
        let (d, prev) = self.stack.access_flagged(key, is_write);
        let kind = is_write as usize;
        match d {
            None => self.cold[kind] += 1,
            Some(d) => {
                let i = d as usize;
                if self.counts.len() <= i {
                    self.counts.resize(i + 1, [0; 2]);
                }
                self.counts[i][kind] += 1;
                let iv = &mut self.interval;
                iv.reuses += 1;
                iv.trd_demand_lines = iv.trd_demand_lines.max(d);
                if !is_write {
                    iv.useful_reuses += 1;
                    iv.urd_demand_lines = iv.urd_demand_lines.max(d);
                }
            }
        }
        if let Some(prev_write) = prev {
            let t = match (prev_write, is_write) {
                (false, false) => ReuseType::Rar,
                (true, false) => ReuseType::Raw,
                (false, true) => ReuseType::War,
                (true, true) => ReuseType::Waw,
            };
            self.types[t as usize] += 1;
        }
    }

    /// Forgets a line (trimmed): its next access is a first access, not a reuse.
    pub fn remove(&mut self, key: u64) {
        self.stack.remove(key);
    }

    fn histogram(&self, kinds: &[usize]) -> DistanceHistogram {
        let mut counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| kinds.iter().map(|&k| c[k]).sum())
            .collect();
        let last = counts.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
        counts.truncate(last);
        let cold: u64 = kinds.iter().map(|&k| self.cold[k]).sum();
        DistanceHistogram {
            total: cold + counts.iter().sum::<u64>(),
            counts,
            cold,
        }
    }

    /// Stack distances of every access (the all-access LRU MRC).
    pub fn all(&self) -> DistanceHistogram {
        self.histogram(&[0, 1])
    }

    /// Stack distances of read accesses in the shared LRU stack (hit ratio of reads).
    pub fn reads(&self) -> DistanceHistogram {
        self.histogram(&[0])
    }

    /// Stack distances of write accesses in the same LRU stack.
    pub fn writes(&self) -> DistanceHistogram {
        self.histogram(&[1])
    }

    /// Useful reuses, those whose later access is a read (URD = distance − 1); first reads
    /// count as cold so `total` is all reads. The same counts as [`reads`](Self::reads).
    pub fn useful(&self) -> DistanceHistogram {
        self.reads()
    }

    /// Accesses recorded.
    pub fn accesses(&self) -> u64 {
        self.cold[0] + self.cold[1] + self.counts.iter().map(|c| c[0] + c[1]).sum::<u64>()
    }

    /// Distinct lines seen.
    pub fn distinct(&self) -> u64 {
        self.stack.distinct()
    }

    /// Ends the current interval: its reuses, and the distinct lines accessed in it.
    pub fn take_interval(&mut self) -> (IntervalReuse, u64) {
        (std::mem::take(&mut self.interval), self.stack.take_epoch())
    }

    /// Heap bytes (approximate).
    pub fn memory_bytes(&self) -> usize {
        self.stack.memory_bytes() + self.counts.capacity() * 16
    }
}

/// ECI-style advice for one volume.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Advice {
    /// Largest useful reuse distance.
    pub max_urd: u64,
    /// Largest traditional reuse distance.
    pub max_trd: u64,
    /// Lines capturing every useful reuse: max URD + 1.
    pub urd_demand_lines: u64,
    /// Lines capturing every reuse: max TRD + 1 (the TRD-based baseline).
    pub trd_demand_lines: u64,
    /// Knee of the URD hit curve: smallest cache capturing 95% of useful reuses.
    pub urd_knee_lines: u64,
    /// Share of reuses that are WAR or WAW.
    pub write_reuse_share: f64,
    /// `write-back`; `read-only` when write reuses dominate (caching writes earns no hits);
    /// `no-cache` when no access is a useful reuse (caching the volume earns no hits at all).
    pub write_policy: &'static str,
}

impl ReuseAnalyzer {
    /// Sizing and write-policy advice; `threshold` is the WAR+WAW share above which cache
    /// writes are disabled.
    pub fn advice(&self, threshold: f64) -> Advice {
        let (all, useful) = (self.all(), self.useful());
        let max_trd = all.max_distance().saturating_sub(1);
        let max_urd = useful.max_distance().saturating_sub(1);
        let reuses: u64 = self.types.iter().sum();
        let write_reuse_share = if reuses == 0 {
            0.0
        } else {
            (self.types[ReuseType::War as usize] + self.types[ReuseType::Waw as usize]) as f64
                / reuses as f64
        };
        Advice {
            max_urd,
            max_trd,
            urd_demand_lines: if useful.reuses() == 0 { 0 } else { max_urd + 1 },
            trd_demand_lines: if all.reuses() == 0 { 0 } else { max_trd + 1 },
            urd_knee_lines: useful.size_for_share(0.95),
            write_reuse_share,
            write_policy: if useful.reuses() == 0 {
                "no-cache"
            } else if write_reuse_share > threshold {
                "read-only"
            } else {
                "write-back"
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seq: &[(bool, u64)]) -> ReuseAnalyzer {
        let mut a = ReuseAnalyzer::default();
        for &(w, k) in seq {
            a.access(k, w);
        }
        a
    }

    #[test]
    fn a_cache_of_any_size_up_to_u64_max_holds_every_reuse() {
        let h = DistanceHistogram {
            counts: vec![0, 3, 1],
            cold: 2,
            total: 6,
        };
        let cold_only = 2.0 / 6.0;
        for lines in [2, 1 << 40, u64::MAX - 1, u64::MAX] {
            assert_eq!(h.miss_ratio(lines), cold_only, "{lines} lines");
        }
        assert_eq!(h.miss_ratio(1), 3.0 / 6.0);
    }

    #[test]
    fn spec_example_max_urd_is_4() {
        // W1 W2 R1 R3 R5 R6 R2
        let a = run(&[
            (true, 1),
            (true, 2),
            (false, 1),
            (false, 3),
            (false, 5),
            (false, 6),
            (false, 2),
        ]);
        let adv = a.advice(0.5);
        assert_eq!(adv.max_urd, 4);
        assert_eq!(adv.urd_demand_lines, 5);
        assert_eq!(a.types, [0, 2, 0, 0], "two reads after writes");
        // A 5-line LRU cache captures both useful reuses; a 4-line one loses the second.
        assert_eq!(a.useful().counts.iter().take(6).sum::<u64>(), 2);
        assert_eq!(a.useful().counts.iter().take(5).sum::<u64>(), 1);
    }

    #[test]
    fn each_reuse_type_is_classified() {
        let a = run(&[
            (false, 1),
            (false, 1),
            (true, 2),
            (false, 2),
            (false, 3),
            (true, 3),
            (true, 4),
            (true, 4),
        ]);
        assert_eq!(a.types, [1, 1, 1, 1]);
        assert_eq!(a.advice(0.5).write_reuse_share, 0.5);
        assert_eq!(a.advice(0.4).write_policy, "read-only");
        assert_eq!(a.advice(0.5).write_policy, "write-back");
    }

    #[test]
    fn write_reuses_inflate_trd_demand_not_urd() {
        // Line 9 is rewritten after a long gap (WAW), line 1 re-read at once (RAR).
        let mut seq = vec![(true, 9u64), (false, 1), (false, 1)];
        seq.extend((100..150).map(|k| (false, k)));
        seq.push((true, 9));
        let adv = run(&seq).advice(0.5);
        assert_eq!(adv.max_urd, 0);
        assert_eq!(adv.urd_demand_lines, 1);
        assert_eq!(adv.max_trd, 51);
        assert_eq!(adv.trd_demand_lines, 52);
    }
}
