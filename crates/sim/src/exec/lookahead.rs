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

/// Per job, its next requests; `None` once the source has no more for it.
#[derive(Debug)]
pub(super) struct Lookahead {
    jobs: Vec<JobAhead>,
}

/// One job's drawn requests: a ring of [`DEPTH`], oldest at `head` (so taking one moves no
/// request). A `None` marks the stream's end: nothing is drawn after it.
#[derive(Debug, Clone, Copy, Default)]
struct JobAhead {
    drawn: [Option<Request>; DEPTH],
    head: u8,
    /// The ring has been filled (the job's first call draws its request and fills it).
    filled: bool,
}

impl Lookahead {
    /// Lookahead for `jobs` jobs, if `source` allows it.
    pub(super) fn new(source: &dyn RequestSource, jobs: u32) -> Option<Self> {
        source.streams_independent().then(|| Self {
            jobs: vec![JobAhead::default(); jobs as usize],
        })
    }

    /// The next request of `job` as the source would give it at `now`, written to `out`,
    /// keeping the following ones drawn and hinted to `cache`; false (`out` unchanged) when
    /// the job has no more.
    #[inline]
    pub(super) fn next_into(
        &mut self,
        job: u32,
        now: Nanos,
        source: &mut dyn RequestSource,
        cache: &dyn PolicyCore,
        out: &mut Request,
    ) -> bool {
        let j = &mut self.jobs[job as usize];
        if !j.filled {
            let Some(mut r) = source.next_request_at(job, now) else {
                return false;
            };
            j.filled = true;
            for slot in 0..DEPTH {
                let d = source.next_request_at(job, now);
                j.drawn[slot] = d;
                match &d {
                    Some(d) => cache.prefetch(d, 1),
                    None => break,
                }
            }
            r.time_ns = r.time_ns.max(now);
            if let Some(soon) = &j.drawn[0] {
                cache.prefetch(soon, 2);
            }
            cache.prefetch(&r, 3);
            *out = r;
            return true;
        }
        let h = j.head as usize;
        // The stream ended: it stays ended, never drawn past.
        let Some(r) = &j.drawn[h] else {
            return false;
        };
        *out = *r;
        out.time_ns = out.time_ns.max(now);
        // Refill the slot taken, now the newest, unless the stream's end is drawn.
        let refill = j.drawn[(h + DEPTH - 1) % DEPTH].is_some();
        if refill {
            j.drawn[h] = source.next_request_at(job, now);
        }
        j.head = ((h + 1) % DEPTH) as u8;
        // The newest gets its bucket hinted, the oldest drawn (its bucket hinted one call ago)
        // its line entry, and the request taken the coming victim.
        let newest = if refill { j.drawn[h].as_ref() } else { None };
        cache.prefetch_ahead(newest, j.drawn[j.head as usize].as_ref(), out);
        true
    }
}
