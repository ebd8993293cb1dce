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
