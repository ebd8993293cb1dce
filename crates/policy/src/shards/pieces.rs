//! One request, or one demote, cut into shard pieces and counted once: the helpers both
//! executors use (docs/design.md §4.1). The simulator's [`ShardedCache`](super::ShardedCache)
//! runs every piece under `&mut`; the engine runs each under its shard's lock; both plan a
//! piece with [`Decide::access_piece`] through [`RequestPieces::access`] and count the request
//! with [`RequestPieces::finish`], and take a demote's pieces with
//! [`Decide::accept_demote_piece`] through [`DemotePieces::accept`], counting it with
//! [`DemotePieces::finish`].

use super::ShardLayout;
use crate::cache::{AccessOutcome, DemoteOutcome, PolicyError};
use crate::executor::Decide;
use crate::stats::CacheStats;
use tiercache_core::{LineGeometry, Plan, Request};

impl ShardLayout {
    /// `req` cut where the owning shard changes: `(shard, piece)` in address order. A request
    /// over no byte (a flush) is one piece, on shard 0: it covers no line but is planned once.
    #[inline]
    pub fn request_pieces<'a>(
        &'a self,
        req: &'a Request,
    ) -> impl Iterator<Item = (usize, Request)> + 'a {
        self.cut(req, true)
    }

    /// `req` cut where the owning shard changes; a request over no byte is one piece on
    /// shard 0 when `empty_is_a_piece` (a request), none otherwise (a demote).
    #[inline]
    pub(crate) fn cut<'a>(
        &'a self,
        req: &'a Request,
        empty_is_a_piece: bool,
    ) -> impl Iterator<Item = (usize, Request)> + 'a {
        let empty = (empty_is_a_piece && req.len == 0).then_some((0, *req));
        empty.into_iter().chain(self.demote_pieces(req))
    }

    /// A demote `req` cut where the owning shard changes: `(shard, piece)` in address order.
    /// An empty demote has no piece (unlike an empty request, it is planned nowhere).
    #[inline]
    pub fn demote_pieces<'a>(
        &'a self,
        req: &'a Request,
    ) -> impl Iterator<Item = (usize, Request)> + 'a {
        self.pieces(req.volume, req.offset, req.len)
            .map(move |(k, offset, len)| {
                (
                    k,
                    Request {
                        offset,
                        len,
                        ..*req
                    },
                )
            })
    }
}

/// The pieces of one demote as each shard takes or refuses its part, and the demote's
/// counting: once, in the executor's request counters ([`CacheStats::count_demote`]), never
/// per piece on the shards. The outcome combines as [`DemoteOutcome::combine`] does: rejected
/// if any piece was (each piece is a clean copy, kept or not on its own), already held only if
/// every piece was; a demote with no piece is rejected (it carried nothing to take).
#[derive(Debug, Clone, Copy, Default)]
pub struct DemotePieces {
    outcome: Option<DemoteOutcome>,
}

impl DemotePieces {
    /// A demote none of whose pieces is taken yet.
    #[inline]
    pub fn new() -> Self {
        Self::default()
    }

    /// Offers `piece` to `core` (the core of the shard owning it), filling `plan` unless
    /// `None`, and adds its outcome to the demote's.
    #[inline]
    pub fn accept<C: Decide + ?Sized>(
        &mut self,
        core: &mut C,
        piece: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<DemoteOutcome, PolicyError> {
        let o = core.accept_demote_piece(piece, plan)?;
        self.add(o);
        Ok(o)
    }

    /// Adds a piece the executor refused before its core decided (the bytes were overwritten
    /// meanwhile): rejected.
    #[inline]
    pub fn refuse(&mut self) {
        self.add(DemoteOutcome::Rejected);
    }

    fn add(&mut self, o: DemoteOutcome) {
        self.outcome = Some(self.outcome.map_or(o, |a| a.combine(o)));
    }

    /// The pieces' outcomes combined so far (rejected when no piece was offered).
    #[inline]
    pub fn outcome(&self) -> DemoteOutcome {
        self.outcome.unwrap_or(DemoteOutcome::Rejected)
    }

    /// Counts the whole demote once in `requests` and returns its outcome.
    #[inline]
    pub fn finish(self, requests: &mut CacheStats) -> DemoteOutcome {
        let out = self.outcome.unwrap_or(DemoteOutcome::Rejected);
        requests.count_demote(out);
        out
    }
}

/// The pieces of one request as they are planned, and the request's counting: each piece's
/// line-level counters move on its shard, the volume's request counters on the first piece's
/// shard, the request-level counters ([`CacheStats::count_request`]) once in the executor's
/// request counters. Costs no allocation.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestPieces {
    /// The pieces' outcomes combined (`None` before the first piece is planned).
    outcome: Option<AccessOutcome>,
}

impl RequestPieces {
    /// A request none of whose pieces is planned yet.
    #[inline]
    pub fn new() -> Self {
        Self::default()
    }

    /// Plans `piece` on `core` (the core of the shard owning it), filling `plan` unless
    /// `None`, and adds its outcome to the request's.
    #[inline]
    pub fn access<C: Decide + ?Sized>(
        &mut self,
        core: &mut C,
        piece: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<AccessOutcome, PolicyError> {
        let o = core.access_piece(piece, plan, self.outcome.is_none())?;
        self.outcome = Some(match self.outcome {
            Some(a) => a.combine(&o),
            None => o,
        });
        Ok(o)
    }

    /// The pieces of a piece (a request already cut by a caller, not its first piece):
    /// planned as pieces that do not count the request for its volume.
    #[inline]
    pub(crate) fn continuing() -> Self {
        Self {
            // The identity of `AccessOutcome::combine`: the first piece's outcome stays whole.
            outcome: Some(AccessOutcome {
                full_hit: true,
                ..AccessOutcome::default()
            }),
        }
    }

    /// The pieces' outcomes combined so far (`None`: no piece planned).
    #[inline]
    pub fn outcome(&self) -> Option<AccessOutcome> {
        self.outcome
    }

    /// Counts the whole request `req` once in `requests` (its request-level counters) and
    /// returns its outcome; `None` (nothing counted) when no piece was planned.
    #[inline]
    pub fn finish(
        self,
        req: &Request,
        geo: LineGeometry,
        requests: &mut CacheStats,
    ) -> Option<AccessOutcome> {
        let out = self.outcome?;
        let lines = if req.len == 0 {
            0
        } else {
            geo.split(req.offset, req.len).count() as u32
        };
        requests.count_request(req.op, &out, lines);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::{DemotePieces, RequestPieces};
    use crate::cache::{Cache, DemoteOutcome};
    use crate::config::CacheConfig;
    use crate::shards::{ShardLayout, CHUNK_BYTES};
    use crate::stats::CacheStats;
    use tiercache_core::{Op, Request, VolumeId};

    fn cfg(shards: u32) -> CacheConfig {
        CacheConfig {
            capacity: 1024 * 4096,
            shards,
            ..CacheConfig::default()
        }
    }

    /// A demote cut into pieces is counted once, in the executor's counters, and not by the
    /// shards; rejected if any piece is, already held only if every piece is.
    #[test]
    fn a_demote_cut_into_pieces_is_counted_once() {
        let c = cfg(8);
        let l = ShardLayout::new(&c).unwrap();
        let mut shards: Vec<Cache> = (0..l.shards())
            .map(|k| Cache::new(&l.shard_config(&c, k)).unwrap())
            .collect();
        let req = Request {
            op: Op::Write,
            ..Request::read(0, 4 * CHUNK_BYTES)
        };
        let take = |shards: &mut Vec<Cache>, refuse_last: bool| {
            let mut pieces = DemotePieces::new();
            let n = l.demote_pieces(&req).count();
            assert!(n > 1);
            for (i, (k, piece)) in l.demote_pieces(&req).enumerate() {
                if refuse_last && i == n - 1 {
                    pieces.refuse();
                } else {
                    pieces.accept(&mut shards[k], &piece, None).unwrap();
                }
            }
            let mut requests = CacheStats::default();
            (pieces.finish(&mut requests), requests)
        };
        let (out, requests) = take(&mut shards, false);
        assert_eq!(out, DemoteOutcome::Accepted);
        assert_eq!(
            (requests.demotes_received, requests.demotes_accepted),
            (1, 1)
        );
        assert!(shards.iter().all(|s| s.stats().demotes_received == 0));
        let (out, requests) = take(&mut shards, false);
        assert_eq!(out, DemoteOutcome::AlreadyHeld);
        assert_eq!(requests.demotes_already_held, 1);
        let (out, requests) = take(&mut shards, true);
        assert_eq!(out, DemoteOutcome::Rejected);
        assert_eq!(
            (requests.demotes_received, requests.demotes_rejected),
            (1, 1)
        );
        // An empty demote: no piece, rejected.
        let empty = Request { len: 0, ..req };
        assert_eq!(l.demote_pieces(&empty).count(), 0);
        assert_eq!(
            DemotePieces::new().finish(&mut CacheStats::default()),
            DemoteOutcome::Rejected
        );
    }

    #[test]
    fn pieces_cover_the_request_and_an_empty_one_is_one_piece_on_shard_0() {
        let l = ShardLayout::new(&cfg(8)).unwrap();
        let req = Request::read(CHUNK_BYTES / 2, 4 * CHUNK_BYTES);
        let p: Vec<_> = l.request_pieces(&req).collect();
        assert!(p.len() > 1);
        assert_eq!(p.iter().map(|(_, r)| r.len).sum::<u64>(), req.len);
        assert!(p
            .iter()
            .all(|(_, r)| r.op == Op::Read && r.volume == req.volume));
        let flush = Request {
            op: Op::Flush,
            offset: 0,
            len: 0,
            ..req
        };
        let p: Vec<_> = l.request_pieces(&flush).collect();
        assert_eq!(p, vec![(0, flush)]);
    }

    /// Pieces planned on their shards count the request once: in the request counters, and
    /// for its volume on the first piece's shard only.
    #[test]
    fn a_request_cut_into_pieces_is_counted_once() {
        let c = cfg(8);
        let l = ShardLayout::new(&c).unwrap();
        let mut shards: Vec<Cache> = (0..l.shards())
            .map(|k| Cache::new(&l.shard_config(&c, k)).unwrap())
            .collect();
        let req = Request::read(0, 4 * CHUNK_BYTES);
        let mut pieces = RequestPieces::new();
        let mut n = 0;
        for (k, piece) in l.request_pieces(&req) {
            pieces.access(&mut shards[k], &piece, None).unwrap();
            n += 1;
        }
        assert!(n > 1);
        let mut requests = CacheStats::default();
        let out = pieces.finish(&req, l.geo, &mut requests).unwrap();
        assert_eq!(out.line_misses as u64, 4 * CHUNK_BYTES / 4096);
        assert_eq!((requests.requests, requests.read_requests), (1, 1));
        let read_requests: u64 = shards
            .iter()
            .map(|s| {
                s.volume_stats()
                    .get(VolumeId(0).0 as usize)
                    .map_or(0, |v| v.read_requests)
            })
            .sum();
        assert_eq!(read_requests, 1);
        assert!(shards.iter().all(|s| s.stats().requests == 0));
    }
}
