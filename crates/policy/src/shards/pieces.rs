//! One request cut into shard pieces and counted once: the one helper both executors use
//! (docs/design.md §4.1). The simulator's [`ShardedCache`](super::ShardedCache) runs every
//! piece under `&mut`; the engine runs each under its shard's lock; both plan a piece with
//! [`Decide::access_piece`] through [`RequestPieces::access`] and count the request with
//! [`RequestPieces::finish`].

use super::ShardLayout;
use crate::cache::{AccessOutcome, PolicyError};
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
        let empty = (req.len == 0).then_some((0, *req));
        let cut = self
            .pieces(req.volume, req.offset, req.len)
            .map(move |(k, offset, len)| {
                (
                    k,
                    Request {
                        offset,
                        len,
                        ..*req
                    },
                )
            });
        empty.into_iter().chain(cut)
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
    use super::RequestPieces;
    use crate::cache::Cache;
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
