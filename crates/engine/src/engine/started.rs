//! Cache hits started without waiting: a connection's reader plans its waiting reads, starts
//! their cache reads on its io_uring ring (each handed to the kernel as it is queued) and goes
//! back to its socket; it reaps the completions as they come and answers each then. Reads of
//! several batches are in flight at once, so the cache device sees the connection's whole
//! queue depth, not one batch at a time.
//!
//! Started reads belong to the thread that started them (its ring): they are reaped there.

use super::degraded::predecessor_failed;
use super::*;
use std::cell::RefCell;
use std::collections::HashMap;

/// A hit whose cache read is in flight.
struct Started {
    /// Which engine (its `Inner`'s address) and the caller's tag.
    engine: usize,
    tag: u64,
    shard: usize,
    req: Request,
    plan: Plan,
    ticket: Ticket,
    /// The read, planned as one piece (counted when it finishes).
    pieces: RequestPieces,
    started: Instant,
}

/// A read finished at once: (engine, tag, bytes or error).
type Ready = (usize, u64, io::Result<Vec<u8>>);

thread_local! {
    /// This thread's started hits, by ring tag.
    static STARTED: RefCell<HashMap<u64, Started>> = RefCell::new(HashMap::new());
    /// Reads finished at once (not a lone cache read), delivered by the next reap:
    /// (engine, tag, bytes or error).
    static READY: RefCell<Vec<Ready>> = const { RefCell::new(Vec::new()) };
    static NEXT_RING_TAG: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl<C: EngineCore> Inner<C> {
    fn key(&self) -> usize {
        self as *const Self as usize
    }

    /// Starts the reads `(tag, offset, len)` the cache alone serves. Per read: `None`, not
    /// served here (nothing done: run it as any read); `Some(Ok)`, started (its bytes come
    /// from [`reap_started`](Self::reap_started) on this thread); `Some(Err)`, failed.
    pub(super) fn start_reads(&self, reads: &[(u64, u64, u32)]) -> Vec<Option<io::Result<()>>> {
        let mut out: Vec<Option<io::Result<()>>> = (0..reads.len()).map(|_| None).collect();
        if self.lookup == Lookup::Lt || self.cache_is_slow {
            return out;
        }
        // Started reads serve the primary volume (the engine's own export).
        let volume = self.volumes[0].id;
        // (ring tag, cache device address, length) of each cache read to start.
        let mut to_start: Vec<(u64, u64, u32)> = Vec::new();
        let mut waiting: Vec<(usize, Started)> = Vec::new();
        for (at, &(tag, offset, len)) in reads.iter().enumerate() {
            let len = len as u64;
            if len == 0 || !self.in_volume(volume, offset, len) {
                continue;
            }
            let mut pieces = self.pieces(volume, offset, len);
            let Some((k, _, _)) = pieces.next() else {
                continue;
            };
            if pieces.next().is_some() {
                continue;
            }
            let req = Request {
                time_ns: self.now_ns(),
                volume: VolumeId(volume),
                op: Op::Read,
                offset,
                len,
            };
            let (plan, updates, mut ticket, pieces) = match self.decide_hit(k, &req) {
                None => continue,
                Some(Err(e)) => {
                    out[at] = Some(Err(e));
                    continue;
                }
                Some(Ok(d)) => d,
            };
            if ticket.wait_turn() > 0 {
                Counters::add(&self.counters.ordering_waits, 1);
            }
            let started = Instant::now();
            let lone_read = updates.is_empty()
                && matches!(&plan.ops[..], [o] if o.device == Dev::Cache
                    && o.kind == IoKind::Read
                    && o.vaddr == offset
                    && o.len == len);
            if lone_read && !ticket.predecessor_failed() {
                let o = &plan.ops[0];
                let base = self.shards[k].base;
                let addr = self.device_addr(base, o);
                self.check_op(base, self.layout.slots, o, addr);
                let ring_tag = NEXT_RING_TAG.with(|t| {
                    let v = t.get();
                    t.set(v + 1);
                    v
                });
                to_start.push((ring_tag, addr, len as u32));
                waiting.push((
                    at,
                    Started {
                        engine: self.key(),
                        tag,
                        shard: k,
                        req,
                        plan,
                        ticket,
                        pieces,
                        started,
                    },
                ));
                continue;
            }
            // Anything else runs now; its bytes are delivered by the next reap.
            let mut buf = vec![0u8; len as usize];
            let result = if ticket.predecessor_failed() {
                Err(predecessor_failed())
            } else {
                let client = Client::Read {
                    volume,
                    offset,
                    buf: &mut buf,
                };
                self.execute(&self.shards[k], &plan, &updates, client, false)
                    .map(|_| ())
            };
            let s = Started {
                engine: self.key(),
                tag,
                shard: k,
                req,
                plan,
                ticket,
                pieces,
                started,
            };
            let delivered = result.map(|()| buf);
            let delivered = self.finish_started(s, delivered);
            READY.with(|r| r.borrow_mut().push((self.key(), tag, delivered)));
            out[at] = Some(Ok(()));
        }
        if to_start.is_empty() {
            return out;
        }
        Counters::add(&self.counters.cache_ops, to_start.len() as u64);
        let results = self.cache_dev.start_reads(&to_start);
        let mut read_now: Vec<(usize, Started, u64, u32)> = Vec::new();
        for (((at, s), r), &(ring_tag, addr, len)) in
            waiting.into_iter().zip(results).zip(&to_start)
        {
            match r {
                Some(Ok(())) => {
                    STARTED.with(|m| m.borrow_mut().insert(ring_tag, s));
                    out[at] = Some(Ok(()));
                }
                Some(Err(e)) => {
                    // Served past the cache if it can be, delivered by the next reap.
                    let tag = s.tag;
                    let delivered = self.finish_started(s, Err(e));
                    READY.with(|q| q.borrow_mut().push((self.key(), tag, delivered)));
                    out[at] = Some(Ok(()));
                }
                None => read_now.push((at, s, addr, len)),
            }
        }
        if !read_now.is_empty() {
            // The device did not start these: read them now, delivered by the next reap.
            let mut bufs: Vec<Vec<u8>> = read_now.iter().map(|r| vec![0u8; r.3 as usize]).collect();
            let mut ios: Vec<(u64, &mut [u8])> = read_now
                .iter()
                .zip(bufs.iter_mut())
                .map(|(r, b)| (r.2, &mut b[..]))
                .collect();
            let rs = self.cache_dev.read_many(&mut ios);
            for ((at, s, _, _), (r, b)) in read_now.into_iter().zip(rs.into_iter().zip(bufs)) {
                let tag = s.tag;
                let delivered = self.finish_started(s, r.map(|()| b));
                READY.with(|q| q.borrow_mut().push((self.key(), tag, delivered)));
                out[at] = Some(Ok(()));
            }
        }
        out
    }

    /// Hands each finished started read of this engine on this thread to `f` (its tag, its
    /// bytes or its error), first waiting as `wait` says if none finished and some are in
    /// flight. Returns how many were handed over.
    pub(super) fn reap_started(
        &self,
        wait: ReapWait,
        f: &mut dyn FnMut(u64, io::Result<&[u8]>),
    ) -> usize {
        let me = self.key();
        let ready: Vec<_> = READY.with(|r| {
            let mut r = r.borrow_mut();
            let (mine, rest) = std::mem::take(&mut *r).into_iter().partition(|e| e.0 == me);
            *r = rest;
            mine
        });
        let mut n = ready.len();
        for (_, tag, res) in ready {
            f(tag, res.as_deref().map_err(copy_err));
        }
        let mine_in_flight = STARTED.with(|m| m.borrow().values().any(|s| s.engine == me));
        if !mine_in_flight {
            return n;
        }
        // Reads the cache device failed: served past it once the ring is reaped (not from
        // inside its completion callback).
        let mut failed: Vec<(Started, io::Error)> = Vec::new();
        n += self.cache_dev.reap_started(
            if n == 0 { wait } else { ReapWait::No },
            &mut |ring_tag, res| {
                let Some(s) = STARTED.with(|m| m.borrow_mut().remove(&ring_tag)) else {
                    return;
                };
                debug_assert_eq!(s.engine, me, "another engine's read reaped here");
                match res {
                    Ok(bytes) => {
                        let tag = s.tag;
                        let _ = self.finish_started(s, Ok(Vec::new()));
                        f(tag, Ok(bytes));
                    }
                    Err(e) => failed.push((s, e)),
                }
            },
        );
        for (s, e) in failed {
            let tag = s.tag;
            let delivered = self.finish_started(s, Err(e));
            f(tag, delivered.as_deref().map_err(copy_err));
        }
        n
    }

    /// Ends a started read's plan: its ticket, counters and latency; a failure forgets what
    /// the plan touched, as any failed read does, and a cache-device error has the read
    /// served past the cache. Returns the read's bytes (as given on success), or its error.
    fn finish_started(&self, s: Started, result: io::Result<Vec<u8>>) -> io::Result<Vec<u8>> {
        let shard = &self.shards[s.shard];
        if let Err(e) = &result {
            // The request's error is the one to report; forgetting is best effort.
            let _ = self.forget_failed(shard, &s.req, &s.plan, &[], s.ticket.seq(), e);
        }
        self.core(shard).order.end(s.ticket, result.is_ok());
        let result = match result {
            Err(e) if self.may_serve_past_cache(&e) => {
                let mut buf = vec![0u8; s.req.len as usize];
                let client = Client::Read {
                    volume: s.req.volume.0,
                    offset: s.req.offset,
                    buf: &mut buf,
                };
                self.serve_past_cache(s.shard, &s.req, client, &e)
                    .map(|()| buf)
            }
            r => r,
        };
        self.tally(&s.req, s.pieces);
        let volume = s.req.volume.0;
        let status = result.as_ref().map(|_| ()).map_err(copy_err);
        self.account(volume, Op::Read, s.req.len, false, s.started, &status);
        result
    }
}

/// A copy of an I/O error (kind and message) for a second owner.
fn copy_err(e: &io::Error) -> io::Error {
    io::Error::new(e.kind(), e.to_string())
}
