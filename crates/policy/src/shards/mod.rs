//! Policy shards: one cache's lines split among independent policy cores.
//!
//! A production cache that takes one lock per request cannot scale with cores
//! (docs/design.md §4.1), so it shards: each shard is a whole policy core (replacement list,
//! promotion table, cleaner) over its own share of the slots, owning the lines whose 64 KiB chunk
//! hashes to it. That changes the policy (replacement is per shard, each shard cleans by itself),
//! so it is a property of the cache (`cache.shards`), not of an executor: [`ShardLayout`] is the
//! one description both executors use. The engine puts a lock on each shard; the simulator runs
//! [`ShardedCache`], the same shards in one thread. Same config, same decisions: both cut a
//! request with [`ShardLayout::request_pieces`] and plan and count it through
//! [`RequestPieces`].
//!
//! Chunks rather than lines are hashed so that a sequential run stays in one shard for a
//! chunk (one lock, contiguous device ops); the hash mixes the chunk number so neighbouring
//! chunks spread.

use crate::cache::PolicyError;
use crate::config::CacheConfig;
use tiercache_core::{LineGeometry, VolumeId};

mod pieces;
mod sharded;
mod tenancy;

/// Re-exported at its old path (the trait lives in [`crate::executor`]).
pub use crate::executor::PolicyCore;
pub use pieces::{DemotePieces, RequestPieces};
pub use sharded::ShardedCache;
pub use tenancy::{link_tenancy, merge_reports, split_lines, ShardShare, TenancySplit};

/// Bytes of a sharding chunk: every line of a chunk belongs to one shard.
pub const CHUNK_BYTES: u64 = 64 * 1024;

/// Most shards a cache may have.
pub const MAX_SHARDS: u32 = 4096;

/// How a cache's lines and slots are split among its shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardLayout {
    geo: LineGeometry,
    /// Lines per chunk (64 KiB of lines, at least one).
    chunk_lines: u64,
    /// First slot of each shard, then the total: shard k owns slots `bases[k]..bases[k + 1]`.
    bases: Vec<u32>,
}

impl ShardLayout {
    /// The layout of `cfg`: `cfg.shards` shards (fewer when the cache has fewer lines), the
    /// lines dealt out evenly, the first shards taking one more when they do not divide.
    pub fn new(cfg: &CacheConfig) -> Result<Self, PolicyError> {
        let geo = LineGeometry::new(cfg.line_size).map_err(|e| PolicyError::Config {
            field: "line_size",
            reason: e.to_string(),
        })?;
        if cfg.shards == 0 || cfg.shards > MAX_SHARDS {
            return Err(PolicyError::Config {
                field: "shards",
                reason: format!("{} must be in 1..={MAX_SHARDS}", cfg.shards),
            });
        }
        let total = cfg.capacity / geo.line_size();
        if total >= u64::from(u32::MAX / 2) {
            // Said here, with the configured count (the shards' own check sees a clamped one).
            return Err(PolicyError::Config {
                field: "capacity",
                reason: format!(
                    "{} bytes are {total} lines of {} bytes, more than the limit of {} lines",
                    cfg.capacity,
                    geo.line_size(),
                    u32::MAX / 2 - 1
                ),
            });
        }
        if cfg.shards > 1 {
            // Checked for the whole cache here: each shard sees only its split of them.
            check_split_sizes(cfg, total)?;
        }
        let n = u64::from(cfg.shards).min(total.max(1));
        let mut bases = Vec::with_capacity(n as usize + 1);
        let mut base = 0u64;
        for k in 0..n {
            bases.push(base as u32);
            base += total / n + u64::from(k < total % n);
        }
        bases.push(base as u32);
        Ok(Self {
            geo,
            chunk_lines: (CHUNK_BYTES / geo.line_size()).max(1),
            bases,
        })
    }

    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.bases.len() - 1
    }

    /// Lines per sharding chunk.
    pub fn chunk_lines(&self) -> u64 {
        self.chunk_lines
    }

    /// First slot of shard `k`: its slot `s` is the cache's slot `base(k) + s`.
    pub fn base(&self, k: usize) -> u32 {
        self.bases[k]
    }

    /// Lines of shard `k`.
    pub fn lines(&self, k: usize) -> u32 {
        self.bases[k + 1] - self.bases[k]
    }

    /// Lines of every shard together.
    pub fn total_lines(&self) -> u32 {
        *self.bases.last().expect("bases end with the total")
    }

    /// The shard holding cache slot `slot` (of the whole cache).
    pub fn shard_of_slot(&self, slot: u32) -> usize {
        debug_assert!(slot < self.total_lines());
        self.bases.partition_point(|&b| b <= slot) - 1
    }

    /// The config of shard `k`'s policy core: the cache's, with the shard's lines, and its
    /// share of every static partition (`cache.partitions`), split over the shards by their
    /// lines with [`split_lines`] (docs/design.md §4.10, "On shards"). A partition with no
    /// line in this shard is left out of it (its volume's lines there go to the shared
    /// partition until a decision gives it one). Fixed sizes (`tenancy.fixed`) are left out:
    /// the leader applies them to the whole cache.
    pub fn shard_config(&self, cfg: &CacheConfig, k: usize) -> CacheConfig {
        let line = self.geo.line_size();
        let mut out = CacheConfig {
            capacity: u64::from(self.lines(k)) * line,
            shards: 1,
            ..cfg.clone()
        };
        if self.shards() == 1 {
            return out;
        }
        let room: Vec<u64> = (0..self.shards())
            .map(|j| u64::from(self.lines(j)))
            .collect();
        let statics: Vec<u64> = cfg.partitions.iter().map(|p| p.bytes / line).collect();
        let statics = &split_lines(&statics, &room)[k];
        out.partitions = cfg
            .partitions
            .iter()
            .zip(statics)
            .filter(|(_, &lines)| lines > 0)
            .map(|(p, &lines)| crate::config::PartitionConfig {
                volume: p.volume,
                bytes: lines * line,
            })
            .collect();
        // Fixed sizes are the leader's to apply, for the whole cache (see
        // `tenancy::link_tenancy`): the shards' own configs leave them out.
        for f in &mut out.tenancy.fixed {
            f.bytes = None;
        }
        out
    }

    /// The shard owning line `index` of `volume`.
    #[inline]
    pub fn shard_of(&self, volume: VolumeId, index: u64) -> usize {
        let n = self.shards();
        if n == 1 {
            return 0;
        }
        // A volume's lines lie 2^48 apart, as in `LineKey`: volume 0 hashes as its index.
        let key = (u64::from(volume.0) << 48) | index;
        let h = (key / self.chunk_lines).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ((h >> 32) % n as u64) as usize
    }

    /// `len` bytes at `offset` of `volume` cut where the owning shard changes:
    /// `(shard, offset, len)` in address order, one piece with one shard.
    pub fn pieces(
        &self,
        volume: VolumeId,
        offset: u64,
        len: u64,
    ) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
        let line = self.geo.line_size();
        let chunk = self.chunk_lines * line;
        let end = offset.saturating_add(len);
        let one = self.shards() == 1;
        let mut at = offset;
        std::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let k = self.shard_of(volume, at / line);
            let start = at;
            if one {
                at = end;
            } else {
                while at < end && self.shard_of(volume, at / line) == k {
                    at = ((at / chunk) + 1) * chunk;
                }
                at = at.min(end);
            }
            Some((k, start, at - start))
        })
    }
}

/// The whole cache's static partitions and fixed sizes, which its shards see split: each
/// static partition holds a line, and each list fits the cache's `total` lines (so that its
/// split fits every shard).
fn check_split_sizes(cfg: &CacheConfig, total: u64) -> Result<(), PolicyError> {
    let line = cfg.line_size;
    let mut statics = 0u64;
    for (i, p) in cfg.partitions.iter().enumerate() {
        if p.bytes / line == 0 {
            return Err(PolicyError::Config {
                field: "partitions",
                reason: format!("partition {i} (volume {}) holds no line", p.volume),
            });
        }
        statics = statics.saturating_add(p.bytes / line);
    }
    if statics > total {
        return Err(PolicyError::Config {
            field: "partitions",
            reason: format!("partitions need {statics} lines, the cache has {total}"),
        });
    }
    let fixed = cfg.tenancy.fixed_lines(line);
    let others = cfg.static_lines_beside_fixed(line);
    if fixed > 0 && fixed.saturating_add(others) > total {
        return Err(PolicyError::Config {
            field: "tenancy.fixed",
            reason: format!(
                "fixed sizes need {fixed} lines and the static partitions of other volumes \
                 {others}: more than the cache's {total}"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(lines: u64, shards: u32) -> CacheConfig {
        CacheConfig {
            capacity: lines * 4096,
            shards,
            ..CacheConfig::default()
        }
    }

    #[test]
    fn lines_are_dealt_evenly_and_slots_map_back_to_their_shard() {
        let l = ShardLayout::new(&cfg(100, 16)).unwrap();
        assert_eq!(l.shards(), 16);
        assert_eq!(l.total_lines(), 100);
        assert_eq!((0..16).map(|k| l.lines(k)).sum::<u32>(), 100);
        assert_eq!(l.lines(0), 7);
        assert_eq!(l.lines(15), 6);
        for slot in 0..100 {
            let k = l.shard_of_slot(slot);
            assert!(l.base(k) <= slot && slot < l.base(k) + l.lines(k));
        }
        // Fewer lines than shards: one line each.
        assert_eq!(ShardLayout::new(&cfg(3, 16)).unwrap().shards(), 3);
    }

    /// Tenancy modes that partition the cache and static partitions load on shards (they
    /// were refused with more than one); their sizes are checked for the whole cache.
    #[test]
    fn partitioning_configs_load_on_shards_and_whole_sizes_are_checked() {
        use crate::tenancy::{FixedVolume, TenancyModeKind};
        for mode in [
            TenancyModeKind::Eci,
            TenancyModeKind::Trd,
            TenancyModeKind::Static,
        ] {
            let mut c = cfg(100, 4);
            c.tenancy.mode = mode;
            c.partitions = vec![crate::config::PartitionConfig {
                volume: 3,
                bytes: 2 * 4096,
            }];
            let l = ShardLayout::new(&c).unwrap();
            assert_eq!(l.shards(), 4);
            let split: u64 = (0..4)
                .flat_map(|k| l.shard_config(&c, k).partitions)
                .map(|p| p.bytes / 4096)
                .sum();
            assert_eq!(split, 2, "{mode:?}: two lines over four shards");
            c.tenancy.fixed = vec![FixedVolume {
                volume: 1,
                bytes: Some(99 * 4096),
                write_policy: None,
            }];
            let e = ShardLayout::new(&c).unwrap_err().to_string();
            assert!(e.contains("cache.tenancy.fixed"), "{e}");
        }
    }

    #[test]
    fn bad_shard_counts_are_named() {
        for n in [0, MAX_SHARDS + 1] {
            let e = ShardLayout::new(&cfg(100, n)).unwrap_err().to_string();
            assert!(e.contains("cache.shards"), "{e}");
        }
    }

    /// A capacity past the line limit is named with its own line count (it was said to be
    /// the clamped limit itself).
    #[test]
    fn a_capacity_past_the_limit_names_its_line_count() {
        let e = ShardLayout::new(&cfg(1 << 34, 4)).unwrap_err().to_string();
        assert!(e.contains("cache.capacity"), "{e}");
        assert!(e.contains("17179869184 lines"), "{e}");
    }

    #[test]
    fn pieces_cover_the_range_and_change_shard_at_each_cut() {
        let l = ShardLayout::new(&cfg(1024, 16)).unwrap();
        for (off, len) in [
            (0u64, 1u64 << 20),
            (4096 * 7 + 512, 300_000),
            (65536, 65536),
        ] {
            let p: Vec<_> = l.pieces(VolumeId(0), off, len).collect();
            assert_eq!(p[0].1, off);
            assert_eq!(p.iter().map(|x| x.2).sum::<u64>(), len);
            for w in p.windows(2) {
                assert_eq!(w[0].1 + w[0].2, w[1].1, "contiguous");
                assert_ne!(w[0].0, w[1].0, "a cut changes shard");
                assert_eq!(w[1].1 % CHUNK_BYTES, 0, "cuts fall on chunk boundaries");
            }
            for &(k, o, n) in &p {
                for b in (o..o + n).step_by(4096) {
                    assert_eq!(l.shard_of(VolumeId(0), b / 4096), k);
                }
            }
        }
    }

    #[test]
    fn shards_spread_chunks() {
        let l = ShardLayout::new(&cfg(1 << 16, 16)).unwrap();
        let mut n = [0u32; 16];
        for chunk in 0..16_000u64 {
            n[l.shard_of(VolumeId(0), chunk * 16)] += 1;
        }
        assert!(n.iter().all(|&c| c > 700 && c < 1300), "{n:?}");
    }
}
