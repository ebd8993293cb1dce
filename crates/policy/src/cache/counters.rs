//! The cache's counters at their three levels (the cache, each partition, each volume) and
//! the one place they move: [`Counters::record`] of an [`Event`]. The cache's and the
//! volumes' counters live here; each partition's lives in its partition (the request path
//! indexes the partition anyway, so its counters cost no bounds check of their own).
//!
//! The request path records one event where the decision is taken (a read hit, a miss, an
//! eviction, bytes written to the cache device); `record` is an `#[inline(always)]` match, so
//! an event built with a constant kind compiles to the increments it stands for, as the
//! hand-written ones did.

use super::AccessOutcome;
use super::DemoteOutcome;
use crate::partition::Partitions;
use crate::stats::{BypassReason, CacheStats};
use crate::tenancy::VolumeStats;
use tiercache_core::{DevOp, Device, IoKind, Op, OpCause, VolumeId};

/// Something the cache counts. `p` is the partition of the line concerned.
#[derive(Debug, Clone, Copy)]
pub(super) enum Event {
    /// A read line access that found every needed sub-block valid.
    ReadHit { p: usize },
    /// A read line access that found the line with some needed sub-blocks not valid.
    ReadPartialHit { p: usize },
    /// A read line access that did not find the line, or passed it by.
    ReadMiss { p: usize },
    /// A write line access that found the line.
    WriteHit { p: usize },
    /// A write line access that did not find the line.
    WriteMiss { p: usize },
    /// A line inserted after a read miss.
    Promotion { p: usize },
    /// A line inserted for a write miss.
    WriteAllocation { p: usize },
    /// A line access served around the cache.
    Bypass(BypassReason),
    /// A line evicted (to make room or by a shrink); `dirty`: written back first.
    Eviction { p: usize, dirty: bool },
    /// A clean victim handed to the level below.
    Demotion,
    /// Bytes written to the cache device for a line of partition `p` and of `volume`.
    CacheWrite {
        p: usize,
        volume: VolumeId,
        len: u64,
    },
    /// Dirty bytes of a line of partition `p` written back (cleaning, dirty evictions,
    /// shrinks).
    WrittenBack { p: usize, bytes: u64 },
    /// Bytes of a demoted line (from the level above) taken into partition `p`.
    DemotedIn { p: usize, bytes: u64 },
    /// Bytes an application write made dirty.
    Dirtied { bytes: u64 },
    /// Dirty bytes a trim discarded.
    TrimmedDirty { bytes: u64 },
    /// A line dropped because nothing in it was valid any more.
    Invalidation,
    /// A cleaner's flush job of `lines` lines.
    CleanJob { lines: u64 },
    /// A poll of the load balancer; `changed`: its decision changed.
    BalancerPoll { changed: bool },
    /// A request the balancer sent past the cache.
    BalancerBypass,
    /// A demote from the level above, with what became of it.
    Demote(DemoteOutcome),
    /// A device op planned: its bytes, by device and kind (cache writes are counted by
    /// [`Event::CacheWrite`], where the partition is at hand; write-backs by
    /// [`Event::WrittenBack`]).
    Op(DevOp),
    /// A whole request of `lines` lines, with its outcome.
    Request {
        volume: VolumeId,
        op: Op,
        out: AccessOutcome,
        lines: u32,
    },
    /// One piece of a request cut by shard; `first` counts the request for its volume.
    Piece {
        volume: VolumeId,
        op: Op,
        out: AccessOutcome,
        first: bool,
    },
    /// A hit-ratio-only read inside one line, found whole in partition `p`: a request, a
    /// line access and a hit at once.
    UntimedReadHit {
        p: usize,
        volume: VolumeId,
        len: u64,
    },
}

/// The counters of one cache: its own and each volume's (each partition's are in `parts`,
/// given to [`Counters::record`]).
#[derive(Debug, Clone, Default)]
pub(super) struct Counters {
    /// The cache's counters.
    pub(super) global: CacheStats,
    /// Each volume's (index = volume id), made on first use.
    pub(super) volumes: Vec<VolumeStats>,
}

impl Counters {
    /// Counts `e` at every level it concerns: here, and in the partition of `parts` it
    /// names.
    #[inline(always)]
    pub(super) fn record(&mut self, parts: &mut Partitions, e: Event) {
        let g = &mut self.global;
        match e {
            Event::ReadHit { p } => {
                g.line_accesses += 1;
                g.read_line_accesses += 1;
                g.line_hits += 1;
                g.read_line_hits += 1;
                parts[p].stats.read_line_hits += 1;
            }
            Event::ReadPartialHit { p } => {
                g.line_accesses += 1;
                g.read_line_accesses += 1;
                g.line_partial_hits += 1;
                parts[p].stats.read_line_partial_hits += 1;
            }
            Event::ReadMiss { p } => {
                g.line_accesses += 1;
                g.read_line_accesses += 1;
                g.line_misses += 1;
                parts[p].stats.read_line_misses += 1;
            }
            Event::WriteHit { p } => {
                g.line_accesses += 1;
                g.write_line_accesses += 1;
                g.line_hits += 1;
                g.write_line_hits += 1;
                parts[p].stats.write_line_hits += 1;
            }
            Event::WriteMiss { p } => {
                g.line_accesses += 1;
                g.write_line_accesses += 1;
                g.line_misses += 1;
                parts[p].stats.write_line_misses += 1;
            }
            Event::Promotion { p } => {
                g.promotions += 1;
                parts[p].stats.promotions += 1;
            }
            Event::WriteAllocation { p } => {
                g.promotions += 1;
                g.write_allocations += 1;
                parts[p].stats.promotions += 1;
            }
            Event::Bypass(r) => g.bypass(r),
            Event::Eviction { p, dirty } => {
                let s = &mut parts[p].stats;
                g.evictions += 1;
                s.evictions += 1;
                // Added rather than tested: no branch beyond the caller's own on `dirty`.
                g.dirty_evictions += u64::from(dirty);
                s.dirty_evictions += u64::from(dirty);
            }
            Event::Demotion => g.demotions += 1,
            Event::CacheWrite { p, volume, len } => {
                g.cache_bytes_written += len;
                parts[p].stats.cache_bytes_written += len;
                self.volume(volume).cache_bytes_written += len;
            }
            Event::WrittenBack { p, bytes } => {
                g.written_back_bytes += bytes;
                parts[p].stats.written_back_bytes += bytes;
            }
            Event::DemotedIn { p, bytes } => {
                g.demoted_in_bytes += bytes;
                parts[p].stats.demoted_in_bytes += bytes;
            }
            Event::Dirtied { bytes } => g.dirtied_bytes += bytes,
            Event::TrimmedDirty { bytes } => g.trimmed_dirty_bytes += bytes,
            Event::Invalidation => g.invalidations += 1,
            Event::CleanJob { lines } => {
                g.cleaned_lines += lines;
                g.clean_jobs += 1;
            }
            Event::BalancerPoll { changed } => {
                g.balancer_changes += u64::from(changed);
                g.balancer_polls += 1;
            }
            Event::BalancerBypass => g.balancer_bypassed += 1,
            Event::Demote(out) => g.count_demote(out),
            Event::Op(o) => match (o.device, o.kind) {
                (Device::Cache, IoKind::Read) => g.cache_bytes_read += o.len,
                (Device::Backend, IoKind::Read) => g.backend_bytes_read += o.len,
                (Device::Backend, IoKind::Write) if o.cause == OpCause::Demote => {
                    // Clean data handed down, not written to the backend.
                    g.demoted_bytes += o.len;
                }
                (Device::Backend, IoKind::Write) => g.backend_bytes_written += o.len,
                _ => {}
            },
            Event::Request {
                volume,
                op,
                out,
                lines,
            } => {
                self.count_volume(volume, op, &out, true);
                self.global.count_request(op, &out, lines);
            }
            Event::Piece {
                volume,
                op,
                out,
                first,
            } => self.count_volume(volume, op, &out, first),
            Event::UntimedReadHit { p, volume, len } => {
                parts[p].stats.read_line_hits += 1;
                g.requests += 1;
                g.read_requests += 1;
                g.read_hit_requests += 1;
                g.full_hit_requests += 1;
                g.line_accesses += 1;
                g.read_line_accesses += 1;
                g.line_hits += 1;
                g.read_line_hits += 1;
                g.cache_bytes_read += len;
                let out = AccessOutcome {
                    line_hits: 1,
                    full_hit: true,
                    ..AccessOutcome::default()
                };
                self.count_volume(volume, Op::Read, &out, true);
            }
        }
    }

    /// The counters of `volume`, made on first use (inlined: it runs once per request).
    #[inline(always)]
    fn volume(&mut self, volume: VolumeId) -> &mut VolumeStats {
        let v = volume.0 as usize;
        if self.volumes.len() <= v {
            self.grow_volumes(v);
        }
        &mut self.volumes[v]
    }

    /// Makes counters up to volume `v` (once per volume: kept out of line so the counting
    /// paths stay small enough to inline).
    #[cold]
    #[inline(never)]
    fn grow_volumes(&mut self, v: usize) {
        self.volumes.resize(v + 1, VolumeStats::default());
    }

    /// Counts the lines of one request (or piece) for its volume, and the request itself if
    /// `request`: one look-up of the volume's counters. Volumes count reads and writes only.
    #[inline(always)]
    fn count_volume(&mut self, volume: VolumeId, op: Op, out: &AccessOutcome, request: bool) {
        if !matches!(op, Op::Read | Op::Write) {
            return;
        }
        let s = self.volume(volume);
        if request {
            match op {
                Op::Read => s.read_requests += 1,
                _ => s.write_requests += 1,
            }
        }
        s.line_hits += u64::from(out.line_hits);
        s.line_partial_hits += u64::from(out.line_partial_hits);
        s.line_misses += u64::from(out.line_misses);
        s.line_bypasses += u64::from(out.line_bypasses);
    }
}
