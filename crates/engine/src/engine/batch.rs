//! Cache hits of several requests at once: a connection's waiting reads are planned one by
//! one (each under its shard's lock, as any request), and the cache reads of the plans that
//! are nothing but one cache read go to the device together ([`BlockDevice::read_many`](tiercache_blockdev::BlockDevice::read_many): one
//! io_uring submission for a file device with io_uring on); any other plan runs as usual.

use super::degraded::predecessor_failed;
use super::*;

/// A read decided and registered, waiting for its ops to run.
struct Decided {
    /// Its index in the caller's list.
    at: usize,
    shard: usize,
    req: Request,
    plan: Plan,
    updates: Vec<MetaUpdate>,
    ticket: Ticket,
    pieces: RequestPieces,
    started: Instant,
}

impl Decided {
    /// Whether the plan is one cache read of exactly the request's bytes, with no records to
    /// write: the read can join the batch.
    fn single_cache_read(&self) -> bool {
        self.updates.is_empty()
            && matches!(&self.plan.ops[..], [o] if o.device == Dev::Cache
                && o.kind == IoKind::Read
                && o.volume == self.req.volume
                && o.vaddr == self.req.offset
                && o.len == self.req.len)
    }
}

impl<C: EngineCore> Inner<C> {
    /// Runs the reads of `reads` (`(offset, buffer)`) the cache alone serves, as
    /// [`request_on_cache_alone`](Self::request_on_cache_alone) does one, their cache reads
    /// batched. `None` for a read not served here (a miss, a read across shards, one behind a
    /// plan in flight on its lines): nothing was done for it.
    pub(super) fn read_hits(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<Option<io::Result<()>>> {
        let mut out: Vec<Option<io::Result<()>>> = (0..reads.len()).map(|_| None).collect();
        if self.lookup == Lookup::Lt {
            return out;
        }
        // The batched path serves the primary volume (the engine's own export); other
        // volumes' reads go through their handles one at a time.
        let volume = self.volumes[0].id;
        let mut decided: Vec<Decided> = Vec::with_capacity(reads.len());
        for (at, (offset, buf)) in reads.iter().enumerate() {
            let len = buf.len() as u64;
            if len == 0 || !self.in_volume(volume, *offset, len) {
                continue;
            }
            let mut pieces = self.pieces(volume, *offset, len);
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
                offset: *offset,
                len,
            };
            match self.decide_hit(k, &req) {
                None => {}
                Some(Err(e)) => out[at] = Some(Err(e)),
                Some(Ok((plan, updates, ticket, pieces))) => decided.push(Decided {
                    at,
                    shard: k,
                    req,
                    plan,
                    updates,
                    ticket,
                    pieces,
                    started: Instant::now(),
                }),
            }
        }
        for d in &mut decided {
            if d.ticket.wait_turn() > 0 {
                Counters::add(&self.counters.ordering_waits, 1);
            }
        }
        // The batch: one cache read per plan that is nothing else.
        let batched: Vec<usize> = (0..decided.len())
            .filter(|&j| decided[j].single_cache_read() && !decided[j].ticket.predecessor_failed())
            .collect();
        let mut results: Vec<Option<io::Result<()>>> = (0..decided.len()).map(|_| None).collect();
        if !batched.is_empty() {
            let slot_end = self.layout.slots;
            let mut busy = Vec::with_capacity(batched.len());
            let mut addrs = Vec::with_capacity(batched.len());
            for &j in &batched {
                let d = &decided[j];
                let o = &d.plan.ops[0];
                let base = self.shards[d.shard].base;
                let addr = self.device_addr(base, o);
                self.check_op(base, slot_end, o, addr);
                busy.push(self.cache_load.enter(o.cause));
                addrs.push((decided[j].at, addr));
            }
            Counters::add(&self.counters.cache_ops, batched.len() as u64);
            // Each batched read fills its own caller buffer (distinct requests).
            let mut ios: Vec<(u64, &mut [u8])> = Vec::with_capacity(batched.len());
            let mut rest: &mut [(u64, &mut [u8])] = reads;
            let mut consumed = 0;
            for &(at, addr) in &addrs {
                let (_, tail) = std::mem::take(&mut rest).split_at_mut(at - consumed);
                let (this, tail) = tail.split_first_mut().expect("read in range");
                ios.push((addr, &mut this.1[..]));
                rest = tail;
                consumed = at + 1;
            }
            let rs = self.cache_dev.read_many(&mut ios);
            drop(busy);
            for (&j, r) in batched.iter().zip(rs) {
                results[j] = Some(r);
            }
        }
        for (j, d) in decided.into_iter().enumerate() {
            let Decided {
                at,
                shard: k,
                req,
                plan,
                updates,
                ticket,
                pieces,
                started,
            } = d;
            let shard = &self.shards[k];
            let result = match results[j].take() {
                Some(r) => r,
                None if ticket.predecessor_failed() => Err(predecessor_failed()),
                None => {
                    let (offset, buf) = &mut reads[at];
                    let client = Client::Read {
                        volume,
                        offset: *offset,
                        buf,
                    };
                    self.execute(shard, &plan, &updates, client, false)
                        .map(|_| ())
                }
            };
            if let Err(e) = &result {
                // The request's error is the one to report; forgetting is best effort.
                let _ = self.forget_failed(shard, &req, &plan, &[], ticket.seq(), e);
            }
            {
                let mut core = self.core(shard);
                core.order.end(ticket, result.is_ok());
            }
            let result = match result {
                Err(e) if self.may_serve_past_cache(&e) => {
                    let (offset, buf) = &mut reads[at];
                    let client = Client::Read {
                        volume,
                        offset: *offset,
                        buf,
                    };
                    self.serve_past_cache(k, &req, client, &e)
                }
                r => r,
            };
            self.tally(&req, pieces);
            self.account(volume, Op::Read, req.len, false, started, &result);
            out[at] = Some(result);
        }
        out
    }

    /// Plans read `req` on shard `k` if the cache alone serves it at once (as
    /// [`run_request`](Self::run_request) with `only_on_cache`) and registers its ticket.
    /// `None`: not such a read, nothing done. Counts the request in flight when planned.
    #[allow(clippy::type_complexity)]
    pub(super) fn decide_hit(
        &self,
        k: usize,
        req: &Request,
    ) -> Option<io::Result<(Plan, Vec<MetaUpdate>, Ticket, RequestPieces)>> {
        if let Err(e) = self.check_halted() {
            return Some(Err(e));
        }
        let _decide =
            (self.lookup == Lookup::HtCg && self.shards.len() > 1).then(|| lock(&self.decide));
        let mut core = self.core(&self.shards[k]);
        if let Err(e) = self.check_halted() {
            return Some(Err(e));
        }
        if !core.cache.would_hit(req) {
            return None;
        }
        let line = self.geo.line_size();
        let busy = !core.order.is_empty()
            && (req.offset / line..=(req.offset + req.len - 1) / line).any(|i| {
                core.cache
                    .line_state(req.volume, i)
                    .is_some_and(|l| core.order.would_wait(cache_slot(l.slot), false))
            });
        if busy {
            return None;
        }
        self.in_flight.fetch_add(1, Relaxed);
        let vol = self.volume(req.volume.0);
        if let Some(v) = vol {
            v.in_flight.fetch_add(1, Relaxed);
        }
        let mut plan = Plan::new();
        let mut pieces = RequestPieces::new();
        if let Err(e) = pieces.access(&mut core.cache, req, Some(&mut plan)) {
            self.in_flight.fetch_sub(1, Relaxed);
            if let Some(v) = vol {
                v.in_flight.fetch_sub(1, Relaxed);
            }
            return Some(Err(io_err(e)));
        }
        let mut updates = Vec::new();
        core.cache.drain_meta_updates(&mut updates);
        let base = self.shards[k].base;
        let ticket = self.register_plan(base, &mut core.order, &plan, &updates);
        Some(Ok((plan, updates, ticket, pieces)))
    }
}
