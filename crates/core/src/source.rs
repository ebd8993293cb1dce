//! Request sources: the one interface through which synthetic workloads and trace replays feed an
//! executor.

use crate::request::Request;

/// How requests arrive at the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Closed loop: `jobs` submitters each keep `iodepth` requests in flight; a slot issues its
    /// next request when the previous one completes, but not before that request's `time_ns`
    /// (so on/off bursts and think times are expressed as earliest-issue times).
    Closed {
        /// Independent submitters.
        jobs: u32,
        /// Requests in flight per submitter.
        iodepth: u32,
    },
    /// Open loop: each request arrives at its own `time_ns`, whatever the cache's progress.
    Open,
}

/// A deterministic stream of requests for one or more submitters.
pub trait RequestSource {
    /// Arrival model of this source.
    fn arrival(&self) -> Arrival;
    /// Next request for submitter `job` (`0..jobs`; always 0 for open loop), or `None` when that
    /// submitter is done. Open-loop sources return requests in non-decreasing `time_ns`.
    fn next_request(&mut self, job: u32) -> Option<Request>;

    /// Next request for submitter `job` when the executor's clock reads `now_ns`. Closed-loop
    /// sources with on/off bursts or a duration limit need the clock; the default ignores it.
    fn next_request_at(&mut self, job: u32, now_ns: crate::Nanos) -> Option<Request> {
        let _ = now_ns;
        self.next_request(job)
    }

    /// True when each closed-loop job's requests are fixed in advance: `next_request_at(job,
    /// now)` gives the same request whatever `now` is and whichever jobs drew before, except
    /// that its `time_ns` may be the `now` it was drawn at. An executor may then draw a job's
    /// next requests early (to prefetch the metadata they will touch), issuing each with
    /// `time_ns` raised to the clock. The default, `false`, promises nothing.
    fn streams_independent(&self) -> bool {
        false
    }

    /// Why the stream ended before its data did, if it did (a trace record that could not be
    /// read). Executors stop at the end of the stream either way; whoever runs one must take
    /// this afterwards and fail the run, so that no result is computed silently from part of
    /// the input. The default source never fails.
    fn take_error(&mut self) -> Option<SourceError> {
        None
    }

    /// What the source left out or changed while reading its input (malformed records skipped
    /// under a skip-bad option, records with unknown opcodes, times clamped), one message each,
    /// so a run can say it did not use all of its input as it was. The default source changes
    /// nothing.
    fn input_notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The error that ended a request stream early.
pub type SourceError = Box<dyn std::error::Error + Send + Sync + 'static>;

impl<S: RequestSource + ?Sized> RequestSource for Box<S> {
    fn arrival(&self) -> Arrival {
        (**self).arrival()
    }
    fn next_request(&mut self, job: u32) -> Option<Request> {
        (**self).next_request(job)
    }
    fn next_request_at(&mut self, job: u32, now_ns: crate::Nanos) -> Option<Request> {
        (**self).next_request_at(job, now_ns)
    }
    fn streams_independent(&self) -> bool {
        (**self).streams_independent()
    }
    fn take_error(&mut self) -> Option<SourceError> {
        (**self).take_error()
    }
    fn input_notes(&self) -> Vec<String> {
        (**self).input_notes()
    }
}
