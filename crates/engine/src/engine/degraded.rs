//! Serving past a failing cache device (docs/design.md §11): a request a cache-device error
//! failed is planned again in pass-through (the backend serves it; only dirty data the cache
//! alone holds is read from it), and past `engine.on_error.threshold` errors the whole engine
//! serves in pass-through (or halts, with `action = "fail"`) until an operator returns it to
//! service.

use super::*;
use crate::health::{is_cache_error, OnErrorAction};
use tiercache_policy::WritePolicy;

/// A plan failed because an earlier one on the same cache lines did (its ordering ticket
/// says so): what that earlier one was to leave there is not there.
#[derive(Debug, thiserror::Error)]
#[error("an earlier request on the same cache lines failed")]
pub(super) struct PredecessorFailed;

/// How many times a request piece is planned past the cache before its error is the
/// client's: a plan failed by a predecessor is planned again (it then waits only on plans made
/// before it, which a few retries outlast), and a write once more after the dirty data was
/// written back.
const PAST_CACHE_ATTEMPTS: usize = 4;

/// Whether `e` says a plan failed because an earlier one on its lines did.
fn is_predecessor_failure(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.is::<PredecessorFailed>())
}

/// The error of a plan run after a failed predecessor.
pub(super) fn predecessor_failed() -> io::Error {
    io::Error::other(PredecessorFailed)
}

impl<C: EngineCore> Inner<C> {
    /// Whether a request piece that failed with `e` may be planned again past the cache: a
    /// cache-device error, or a failed predecessor on its lines once the cache device has
    /// failed ops or a failed eviction has put its dirty victim back (`Inner::keep_evicted`:
    /// a read planned as a miss on the victim meanwhile ran nothing and must not fail for
    /// it), while the engine serves. The ticket does not say why the predecessor failed; a
    /// backend failure alone fails its followers as before.
    pub(super) fn may_serve_past_cache(&self, e: &io::Error) -> bool {
        let predecessor = is_predecessor_failure(e);
        let trouble = self.health.cache_trouble() || self.health.evictions_kept() > 0;
        (is_cache_error(e) || (predecessor && trouble)) && self.halted.get().is_none()
    }

    /// The write policy forced on every core now: pass-through while degraded.
    pub(super) fn forced_mode(&self) -> Option<WritePolicy> {
        self.health
            .is_degraded()
            .then_some(WritePolicy::PassThrough)
    }

    /// Plans request piece `req` (on shard `k`) again in pass-through, after `failure` (a
    /// cache-device error) failed it: the backend serves it unless the cache holds the only
    /// copy of some of its data (dirty sub-blocks, read from the cache device). The piece's
    /// first plan has ended (its ticket too), and what it left undefined is forgotten.
    pub(super) fn serve_past_cache(
        &self,
        k: usize,
        req: &Request,
        client: Client<'_>,
        failure: &io::Error,
    ) -> io::Result<()> {
        self.check_degrade();
        self.mark_pass_through();
        // Counted once per request, in the request's own pieces: this plan's are dropped.
        let mut pieces = RequestPieces::new();
        let req = Request {
            time_ns: self.now_ns(),
            ..*req
        };
        let mut client = client;
        let (off, len) = (req.offset, req.len);
        let mut out = self
            .run_request_past_cache(k, &req, sub_client(&mut client, off, len), &mut pieces)
            .unwrap_or_else(|| Err(io::Error::other("not planned")));
        let mut wrote_back = false;
        for _ in 1..PAST_CACHE_ATTEMPTS {
            match &out {
                // A plan in flight before this one (a read's fill finishing in the background,
                // a flush job) failed on the same lines: this plan ran nothing. Planned again,
                // it comes after that one and sees what its failure left.
                Err(e) if is_predecessor_failure(e) && self.halted.get().is_none() => {}
                // A write landing inside dirty sub-blocks without covering them merges into
                // the cache even in pass-through (only the cache holds the rest of them):
                // write the dirty data back first (what can be read), then the write goes to
                // the backend.
                Err(e) if req.op == Op::Write && !wrote_back && self.may_serve_past_cache(e) => {
                    let _ = self.write_back_all();
                    wrote_back = true;
                }
                _ => break,
            }
            let mut pieces = RequestPieces::new();
            let again = Request {
                time_ns: self.now_ns(),
                ..req
            };
            out = self
                .run_request_past_cache(k, &again, sub_client(&mut client, off, len), &mut pieces)
                .unwrap_or_else(|| Err(io::Error::other("not planned")));
        }
        match &out {
            Ok(()) => self.health.served_past_cache(),
            Err(e) => {
                self.check_degrade();
                self.health.log(format!(
                    "{:?} of {} bytes at {} (volume {}) failed on the cache device ({failure}) \
                     and again past it ({e})",
                    req.op, req.len, req.offset, req.volume.0
                ));
            }
        }
        out
    }

    /// Makes the pass-through mark durable on the cache device, once, before requests go
    /// past the cache: a restart then drops the clean data the records name, which may be
    /// older than what those requests write to the backend (see [`crate::pass_through_mark`]).
    /// If the device cannot take it, that is logged (and tried again next time).
    pub(super) fn mark_pass_through(&self) {
        let mut marked = lock(&self.pass_through_marked);
        if *marked {
            return;
        }
        match crate::pass_through_mark::write(&*self.cache_dev) {
            Ok(()) => *marked = true,
            Err(e) => self.health.log(format!(
                "the pass-through mark could not be written to the cache device ({e}): a \
                 restart may recover clean lines older than the backend; run `tiercache \
                 flush` and reformat the cache (engine.format) before using it again"
            )),
        }
    }

    /// Degrades the engine if the cache device's errors passed the threshold since the last
    /// look.
    pub(super) fn check_degrade(&self) {
        if !self.degrade_due.swap(false, Relaxed) {
            return;
        }
        let c = self.health.config();
        let reason = format!(
            "cache-device error score {:.1} reached engine.on_error.threshold {} (half-life \
             {} ms)",
            self.health.error_score().max(c.threshold as f64),
            c.threshold,
            c.halflife_ns / 1_000_000
        );
        match c.action {
            OnErrorAction::PassThrough => self.enter_degraded(reason),
            OnErrorAction::Fail => {
                let why = format!("{reason}, and engine.on_error.action = \"fail\"");
                self.health.log(format!("HALTED: {why}"));
                if self.halted.set(why).is_ok() {
                    self.kick();
                }
            }
        }
    }

    /// Serves every request in pass-through from now on; the flusher writes back the dirty
    /// lines it can read.
    pub(super) fn enter_degraded(&self, reason: String) {
        // Before any request is forced past the cache.
        self.mark_pass_through();
        if self.health.enter_degraded(reason) {
            for sh in &self.shards {
                self.core(sh)
                    .cache
                    .force_write_policy(Some(WritePolicy::PassThrough));
            }
            self.kick();
        }
    }

    /// Returns the cache to service (the configured write policies again); `false` if it was
    /// not degraded.
    pub(super) fn leave_degraded(&self) -> bool {
        if !self.health.leave_degraded() {
            return false;
        }
        self.degrade_due.store(false, Relaxed);
        for sh in &self.shards {
            self.core(sh).cache.force_write_policy(None);
        }
        true
    }
}

impl Engine {
    /// The device-error counters and the degraded state.
    pub fn health(&self) -> crate::health::HealthStats {
        self.inner.health.stats()
    }

    /// Whether the engine serves in pass-through after cache-device errors.
    pub fn degraded(&self) -> bool {
        self.inner.health.is_degraded()
    }

    /// Puts the engine in degraded mode now (an operator taking a failing cache device out of
    /// service): pass-through.
    pub fn degrade(&self, reason: &str) {
        self.inner
            .enter_degraded(format!("operator request: {reason}"));
    }

    /// Returns the cache device to service once it is fixed; `false` if the engine was not
    /// degraded.
    pub fn return_to_service(&self) -> bool {
        self.inner.leave_degraded()
    }

    /// Sends the engine's health log lines (first errors of each kind, transitions) to `sink`
    /// (standard error by default).
    pub fn set_log(&self, sink: crate::health::LogSink) {
        self.inner.health.set_log(sink);
    }
}
