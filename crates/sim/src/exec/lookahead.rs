//! Drawing closed-loop requests ahead, so the policy core's metadata for them is in cache when
//! they arrive.
//!
//! A closed-loop request arrives the instant its predecessor is acknowledged, so a prefetch
//! issued when it is drawn has no time to land: the index bucket, the line entry and the
//! replacement list node are each a cache miss on the request's path. When the source promises
//! that each job's requests are fixed in advance ([`RequestSource::streams_independent`]), the
//! executor keeps the next [`DEPTH`] requests of every job drawn: the newest gets its index
//! bucket loaded, the one after it (whose bucket has landed by then) its line entry, and the
//! one issued the hint for the replacement victim. The requests issued, and so every result,
//! are those of drawing at issue time: the only difference is `time_ns`, which is raised to
//! the clock when the request is issued, as drawing then would have set it.

use tiercache_core::{Nanos, Request, RequestSource};
use tiercache_policy::PolicyCore;

/// Requests kept drawn per job.
pub(super) const DEPTH: usize = 2;

/// Per job, its next requests, oldest first; `None` once the source has no more for it.
#[derive(Debug)]
pub(super) struct Lookahead {
    jobs: Vec<JobAhead>,
}

#[derive(Debug, Clone, Copy, Default)]
struct JobAhead {
    drawn: [Option<Request>; DEPTH],
    /// Requests in `drawn` (the first `len` are meaningful, `None` marking the stream's end).
    len: u8,
}

impl Lookahead {
    /// Lookahead for `jobs` jobs, if `source` allows it.
    pub(super) fn new(source: &dyn RequestSource, jobs: u32) -> Option<Self> {
        source.streams_independent().then(|| Self {
            jobs: vec![JobAhead::default(); jobs as usize],
        })
    }

    /// The next request of `job` as the source would give it at `now`, keeping the following
    /// ones drawn and hinted to `cache`.
    pub(super) fn next(
        &mut self,
        job: u32,
        now: Nanos,
        source: &mut dyn RequestSource,
        cache: &dyn PolicyCore,
    ) -> Option<Request> {
        let j = &mut self.jobs[job as usize];
        let next = if j.len == 0 {
            source.next_request_at(job, now)
        } else if j.drawn[0].is_none() {
            // The stream ended: it stays ended, never drawn past.
            return None;
        } else {
            let r = j.drawn[0];
            j.drawn.copy_within(1.., 0);
            j.len -= 1;
            r
        };
        let mut r = next?;
        r.time_ns = r.time_ns.max(now);
        // Refill behind it; the stream's end is kept as a `None`.
        let ended = j.len > 0 && j.drawn[j.len as usize - 1].is_none();
        if !ended {
            while (j.len as usize) < DEPTH {
                let d = source.next_request_at(job, now);
                j.drawn[j.len as usize] = d;
                j.len += 1;
                match d {
                    Some(d) => cache.prefetch(&d, 1),
                    None => break,
                }
            }
        }
        // The oldest drawn had its bucket hinted one call ago: now its line entry.
        if let Some(soon) = j.drawn[0] {
            cache.prefetch(&soon, 2);
        }
        cache.prefetch(&r, 3);
        Some(r)
    }
}
