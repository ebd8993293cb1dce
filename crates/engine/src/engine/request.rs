//! The request path: a request cut into pieces by shard, planned by its shard's policy core,
//! executed stage by stage in decision order, answered, and finished in the background.

use super::degraded::predecessor_failed;
use super::device_ops::slot_lines;
use super::failure::undefined_after_failure;
use super::*;
use tiercache_policy::WritePolicy;

impl<C: EngineCore> Inner<C> {
    /// Whether every shard `op` of `len` bytes at `offset` touches would run it on the cache
    /// alone ([`Decide::would_hit`] for reads, [`Decide::would_absorb`] for writes).
    pub(super) fn runs_on_cache_alone(&self, volume: u32, op: Op, offset: u64, len: u64) -> bool {
        if self.lookup == Lookup::Lt || !self.in_volume(volume, offset, len) {
            return false;
        }
        self.pieces(volume, offset, len).all(|(k, off, n)| {
            let req = Request {
                time_ns: 0,
                volume: VolumeId(volume),
                op,
                offset: off,
                len: n,
            };
            let core = self.core(&self.shards[k]);
            match op {
                Op::Read => core.cache.would_hit(&req),
                _ => core.cache.would_absorb(&req),
            }
        })
    }

    /// `len` bytes at `offset` cut where the owning shard changes: (shard, offset, len).
    pub(super) fn pieces(
        &self,
        volume: u32,
        offset: u64,
        len: u64,
    ) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
        self.shard_layout.pieces(VolumeId(volume), offset, len)
    }

    /// The served volume `volume`, if it is one.
    pub(super) fn volume(&self, volume: u32) -> Option<&VolumeState> {
        self.volumes.iter().find(|v| v.id == volume)
    }

    /// Whether `len` bytes at `offset` lie inside served volume `volume`.
    pub(super) fn in_volume(&self, volume: u32, offset: u64, len: u64) -> bool {
        self.volume(volume)
            .is_some_and(|v| offset.checked_add(len).is_some_and(|e| e <= v.size))
    }

    pub(super) fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Wakes the flusher after a write (new dirty data may cross a cleaning threshold), at
    /// most once per [`WRITE_KICK_INTERVAL_NS`]: a wake per write would have the flusher poll
    /// every shard tens of thousands of times a second, stealing the cores from the requests.
    pub(super) fn kick_after_write(&self) {
        let now = self.now_ns();
        let last = self.last_write_kick_ns.load(Relaxed);
        if now.saturating_sub(last) >= WRITE_KICK_INTERVAL_NS
            && self
                .last_write_kick_ns
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
        {
            self.kick();
        }
    }

    pub(super) fn kick(&self) {
        *lock(&self.wake.0) = true;
        self.wake.1.notify_one();
    }

    pub(super) fn request(
        &self,
        volume: u32,
        op: Op,
        offset: u64,
        len: u64,
        client: Client<'_>,
        fua: bool,
    ) -> io::Result<()> {
        if !self.in_volume(volume, offset, len) {
            Counters::add(&self.counters.errors, 1);
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                match self.volume(volume) {
                    Some(v) => format!("{offset}+{len} beyond volume {volume}'s {} bytes", v.size),
                    None => format!("no volume {volume} is served"),
                },
            ));
        }
        if len == 0 {
            return Ok(());
        }
        let started = Instant::now();
        let _serial = (self.lookup == Lookup::Lt).then(|| lock(&self.serial));
        self.in_flight.fetch_add(1, Relaxed);
        if let Some(v) = self.volume(volume) {
            v.in_flight.fetch_add(1, Relaxed);
        }
        let mut client = client;
        let mut out = Ok(());
        let whole = Request {
            time_ns: self.now_ns(),
            volume: VolumeId(volume),
            op,
            offset,
            len,
        };
        let mut pieces = RequestPieces::new();
        for (k, piece) in self.shard_layout.request_pieces(&whole) {
            // Each piece is stamped when its shard plans it.
            let req = Request {
                time_ns: self.now_ns(),
                ..piece
            };
            out = self
                .run_request(
                    k,
                    &req,
                    sub_client(&mut client, req.offset, req.len),
                    false,
                    &mut pieces,
                )
                .expect("unconditional requests always run");
            if let Err(e) = &out {
                if self.may_serve_past_cache(e) {
                    let sub = sub_client(&mut client, req.offset, req.len);
                    out = self.serve_past_cache(k, &req, sub, e);
                }
            }
            if out.is_err() {
                break;
            }
        }
        self.tally(&whole, pieces);
        if out.is_ok() && fua {
            out = self.sync_for_client();
        }
        self.account(volume, op, len, fua, started, &out);
        out
    }

    /// Runs a read or write only if the cache alone serves it (a hit, or a write-back write
    /// hit): checked and planned under one lock. `None`: not such a request; nothing was done.
    pub(super) fn request_on_cache_alone(
        &self,
        volume: u32,
        op: Op,
        offset: u64,
        len: u64,
        client: Client<'_>,
    ) -> Option<io::Result<()>> {
        if self.lookup == Lookup::Lt || len == 0 || !self.in_volume(volume, offset, len) {
            return None;
        }
        let mut pieces = self.pieces(volume, offset, len);
        let (k, _, _) = pieces.next()?;
        if pieces.next().is_some() {
            // Across shards: look first, then run it as any request.
            return self
                .runs_on_cache_alone(volume, op, offset, len)
                .then(|| self.request(volume, op, offset, len, client, false));
        }
        let started = Instant::now();
        self.in_flight.fetch_add(1, Relaxed);
        if let Some(v) = self.volume(volume) {
            v.in_flight.fetch_add(1, Relaxed);
        }
        let req = Request {
            time_ns: self.now_ns(),
            volume: VolumeId(volume),
            op,
            offset,
            len,
        };
        let mut pieces = RequestPieces::new();
        let mut client = client;
        let mut out = self.run_request(
            k,
            &req,
            sub_client(&mut client, offset, len),
            true,
            &mut pieces,
        );
        if let Some(Err(e)) = &out {
            if self.may_serve_past_cache(e) {
                out = Some(self.serve_past_cache(k, &req, client, e));
            }
        }
        self.tally(&req, pieces);
        match &out {
            Some(o) => self.account(volume, op, len, false, started, o),
            None => {
                self.in_flight.fetch_sub(1, Relaxed);
                if let Some(v) = self.volume(volume) {
                    v.in_flight.fetch_sub(1, Relaxed);
                }
            }
        }
        out
    }

    /// Counts a finished request and its latency.
    pub(super) fn account(
        &self,
        volume: u32,
        op: Op,
        len: u64,
        fua: bool,
        started: Instant,
        out: &io::Result<()>,
    ) {
        self.in_flight.fetch_sub(1, Relaxed);
        self.last_foreground_ns.store(self.now_ns(), Relaxed);
        let us = started.elapsed().as_micros() as u64;
        let c = &self.counters;
        match op {
            Op::Read => {
                Counters::add(&c.reads, 1);
                Counters::add(&c.read_bytes, len);
                Latencies::record(&self.latency.read, us);
            }
            Op::Write => {
                Counters::add(&c.writes, 1);
                Counters::add(&c.write_bytes, len);
                Counters::add(&c.fua_writes, fua as u64);
                Latencies::record(&self.latency.write, us);
                self.kick_after_write();
            }
            _ => Counters::add(&c.trims, 1),
        }
        if out.is_err() {
            Counters::add(&c.errors, 1);
        }
        if let Some(v) = self.volume(volume) {
            v.account(op, len, us, out.is_err());
        }
    }

    /// Plans `req` (a piece of a request, on shard `k`) through `pieces` and executes it;
    /// with `only_on_cache`, only if the cache alone serves it (else `None`, nothing done).
    pub(super) fn run_request(
        &self,
        k: usize,
        req: &Request,
        client: Client<'_>,
        only_on_cache: bool,
        pieces: &mut RequestPieces,
    ) -> Option<io::Result<()>> {
        self.run_request_as(k, req, client, only_on_cache, pieces, false)
    }

    /// As [`run_request`](Self::run_request), planned in pass-through whatever the write
    /// policy (see [`serve_past_cache`](Self::serve_past_cache)).
    pub(super) fn run_request_past_cache(
        &self,
        k: usize,
        req: &Request,
        client: Client<'_>,
        pieces: &mut RequestPieces,
    ) -> Option<io::Result<()>> {
        self.run_request_as(k, req, client, false, pieces, true)
    }

    fn run_request_as(
        &self,
        k: usize,
        req: &Request,
        client: Client<'_>,
        only_on_cache: bool,
        pieces: &mut RequestPieces,
        past_cache: bool,
    ) -> Option<io::Result<()>> {
        if let Err(e) = self.check_halted() {
            return Some(Err(e));
        }
        let shard = &self.shards[k];
        let (plan, updates, mut ticket, valid_before) = {
            // HT+CG: one lock over every shard while a core decides.
            let _decide =
                (self.lookup == Lookup::HtCg && self.shards.len() > 1).then(|| lock(&self.decide));
            let mut core = self.core(shard);
            if let Err(e) = self.check_halted() {
                // The lock was poisoned: nothing is decided from this core any more.
                return Some(Err(e));
            }
            if only_on_cache {
                let alone = match req.op {
                    Op::Read => core.cache.would_hit(req),
                    _ => core.cache.would_absorb(req),
                };
                if !alone {
                    return None;
                }
                // Run inline only what starts at once: a plan in flight on these lines' slots
                // (a flush job reading them, a fill) may take long, and the caller (a
                // connection's reader) would hold up every request behind it meanwhile.
                let line = self.geo.line_size();
                let writing = req.op != Op::Read;
                let busy = !core.order.is_empty()
                    && (req.offset / line..=(req.offset + req.len - 1) / line).any(|i| {
                        core.cache
                            .line_state(req.volume, i)
                            .is_some_and(|l| core.order.would_wait(cache_slot(l.slot), writing))
                    });
                if busy {
                    return None;
                }
            }
            // A write's sub-blocks valid before it: should it fail, the ones it made valid
            // hold nothing defined (see [`undefined_after_failure`]).
            let valid_before: Vec<u64> = if req.op == Op::Write {
                self.geo
                    .split(req.offset, req.len)
                    .map(|s| {
                        core.cache
                            .line_state(req.volume, s.index)
                            .map_or(0, |l| l.valid)
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let mut plan = Plan::new();
            if past_cache {
                // For this plan only (decided under this lock): then back to what is in force.
                core.cache
                    .force_write_policy(Some(WritePolicy::PassThrough));
            }
            let planned = pieces.access(&mut core.cache, req, Some(&mut plan));
            if past_cache {
                core.cache.force_write_policy(self.forced_mode());
            }
            if let Err(e) = planned {
                return Some(Err(io_err(e)));
            }
            let mut updates = std::mem::take(&mut core.updates);
            updates.clear();
            core.cache.drain_meta_updates(&mut updates);
            let ticket = self.register_plan(shard.base, &mut core.order, &plan, &updates);
            (plan, updates, ticket, valid_before)
        };
        if ticket.wait_turn() > 0 {
            Counters::add(&self.counters.ordering_waits, 1);
        }
        // A read is answered once its critical ops are done; the rest (filling the cache with
        // what was read) finishes in the background, still holding the plan's ordering ticket.
        let may_defer = req.op == Op::Read && self.lookup != Lookup::Lt && self.answer_reads_early;
        let executed = if ticket.predecessor_failed() {
            // Decided on what that plan was to leave (a fill, say) that is not there.
            Err(predecessor_failed())
        } else {
            self.execute(shard, &plan, &updates, client, may_defer)
        };
        let result = match executed {
            Ok(Executed::Deferred(progress)) => {
                let task = Box::new(Deferred {
                    shard: k,
                    req: *req,
                    plan,
                    updates,
                    ticket,
                    progress,
                });
                self.deferred_pending.fetch_add(1, Relaxed);
                match lock(&self.deferred_tx).as_ref().map(|tx| tx.send(task)) {
                    Some(Ok(())) => {
                        Counters::add(&self.counters.deferred_plans, 1);
                        return Some(Ok(()));
                    }
                    // Shutting down: finish it here.
                    Some(Err(mpsc::SendError(task))) => return Some(self.finish_deferred(task)),
                    None => unreachable!("the sender lives until shutdown"),
                }
            }
            Ok(Executed::Done) => Ok(()),
            Err(e) => {
                // The request's error is the one to report; forgetting is best effort.
                let _ = self.forget_failed(shard, req, &plan, &valid_before, ticket.seq(), &e);
                Err(e)
            }
        };
        let mut core = self.core(shard);
        core.order.end(ticket, result.is_ok());
        core.updates = updates;
        drop(core);
        Some(result)
    }

    /// Runs the rest of a plan whose request was already answered.
    pub(super) fn finish_deferred(&self, task: Box<Deferred>) -> io::Result<()> {
        let Deferred {
            shard: k,
            req,
            plan,
            updates,
            ticket,
            progress,
        } = *task;
        let shard = &self.shards[k];
        let result = self
            .resume(shard, &plan, &updates, progress, false)
            .map(|_| ());
        if let Err(e) = &result {
            Counters::add(&self.counters.errors, 1);
            // The plan's error is the one to report; forgetting is best effort.
            let _ = self.forget_failed(shard, &req, &plan, &[], ticket.seq(), e);
        }
        self.core(shard).order.end(ticket, result.is_ok());
        self.deferred_pending.fetch_sub(1, Relaxed);
        result
    }

    /// After a failed plan (decided as ticket `decided`): the sub-blocks it was to fill, and
    /// those a failed write made valid, hold nothing defined and go, dirty or not (see
    /// [`undefined_after_failure`]); of the other lines it touched only dirty data is kept;
    /// dirty lines it evicted and did not write back go back in their slots (see
    /// [`Inner::keep_evicted`]). `valid_before`: for a write, the valid sub-blocks of each of
    /// its lines before it was planned.
    pub(super) fn forget_failed(
        &self,
        shard: &Shard<C>,
        req: &Request,
        plan: &Plan,
        valid_before: &[u64],
        decided: u64,
        failure: &io::Error,
    ) -> io::Result<()> {
        if self.halted.get().is_some() {
            // Records written now could replace the one naming an evicted dirty line.
            return Ok(());
        }
        let line = self.geo.line_size();
        let undefined = undefined_after_failure(&self.geo, req.offset / line, plan, valid_before);
        let mut core = self.core(shard);
        for u in &undefined {
            self.invalidate_undefined(&mut core, u, decided);
        }
        for op in plan
            .ops
            .iter()
            .filter(|o| o.device == Dev::Backend && o.len > 0)
        {
            for i in op.offset / line..=(op.offset + op.len - 1) / line {
                core.cache.drop_clean(op.volume, i);
            }
        }
        let (line_size, last_req_line) = (line, (req.offset + req.len.max(1) - 1) / line);
        for i in req.offset / line..=last_req_line {
            core.cache.drop_clean(req.volume, i);
        }
        // Last: what the lines above left in a victim's slot came after it.
        self.keep_evicted(shard, &mut core, plan, failure);
        if self.halted.get().is_some() {
            return Ok(());
        }
        let mut ups = Vec::new();
        core.cache.drain_meta_updates(&mut ups);
        // The durable records stay as the last completed plans wrote them: they describe data
        // that landed. The core's state of a slot now may include what plans decided after
        // this one (waiting for it, bound to fail) made of it, which never landed, so only a
        // slot this forgetting emptied is written: empty, when its record names a line
        // forgotten here (else that line could be recovered twice, from two slots, once it is
        // read into another). A record naming another line is left alone: a later plan may be
        // evicting that line, dirty, with its data only in the slot.
        let forgotten = |line: (u32, u64)| {
            let (v, i) = (VolumeId(line.0), line.1);
            undefined.iter().any(|u| (u.volume, u.index) == (v, i))
                || (v == req.volume && (req.offset / line_size..=last_req_line).contains(&i))
                || plan.ops.iter().any(|o| {
                    o.device == Dev::Backend
                        && o.len > 0
                        && o.volume == v
                        && (o.offset / line_size..=(o.offset + o.len - 1) / line_size).contains(&i)
                })
        };
        for u in ups.iter().filter(|u| u.line.is_none()) {
            let slot = shard.base + u.slot;
            if self.table.persisted_line(slot).is_some_and(forgotten) {
                self.table
                    .write(&*self.cache_dev, slot, &SlotRecord::EMPTY)?;
            }
        }
        Ok(())
    }

    /// Runs `plan`'s ops stage by stage and persists its metadata updates.
    pub(super) fn execute(
        &self,
        shard: &Shard<C>,
        plan: &Plan,
        updates: &[MetaUpdate],
        client: Client<'_>,
        may_defer: bool,
    ) -> io::Result<Executed> {
        let base = shard.base;
        // Slots whose durable record names another line than one this plan writes into them
        // (or leaves in them): that record must be durably replaced before the other line's
        // data lands in the slot, or a crash would pair the old line's name with the new
        // line's bytes. The final state is not enough: a long request over a small cache may
        // evict a slot's line, fill the slot with another, and read the first line back into
        // it, all in one plan.
        let line = self.geo.line_size();
        let mut reassigned: Vec<u32> = updates
            .iter()
            .filter(|u| {
                let old = self.table.persisted_line(base + u.slot);
                old.is_some() && old != u.line.map(|(v, i)| (v.0, i))
            })
            .map(|u| u.slot)
            .collect();
        for o in plan
            .ops
            .iter()
            .filter(|o| o.device == Dev::Cache && o.kind == IoKind::Write && o.len > 0)
        {
            for (slot, want) in slot_lines(o, line) {
                if !reassigned.contains(&slot) && self.table.may_recover_other(base + slot, want) {
                    reassigned.push(slot);
                }
            }
        }
        let progress = Progress {
            next: 0,
            scratch: Scratch::new(client),
            reassigned,
            wrote_back: false,
            backend_epoch: self.backend.epoch(),
        };
        self.resume(shard, plan, updates, progress, may_defer)
    }

    /// Runs `plan` from where `p` stands to the end, or (with `may_defer`) until only ops the
    /// client need not wait for are left.
    pub(super) fn resume(
        &self,
        shard: &Shard<C>,
        plan: &Plan,
        updates: &[MetaUpdate],
        p: Progress<'_>,
        may_defer: bool,
    ) -> io::Result<Executed> {
        let line = self.geo.line_size();
        let base = shard.base;
        let Progress {
            next: mut i,
            mut scratch,
            mut reassigned,
            mut wrote_back,
            backend_epoch,
        } = p;
        let ops = &plan.ops;
        // The shard's slots: its cache ops stay inside them (O(shards): checked in debug).
        let slot_end = if cfg!(debug_assertions) {
            self.shard_slot_end(shard)
        } else {
            self.layout.slots
        };
        while i < ops.len() {
            if may_defer && ops[i..].iter().all(|o| !o.critical) {
                return Ok(Executed::Deferred(Progress {
                    next: i,
                    scratch: scratch.detach(),
                    reassigned,
                    wrote_back,
                    backend_epoch,
                }));
            }
            // Plans under way when the engine halts stop at their next stage.
            self.check_halted()?;
            let stage = ops[i].stage;
            // Stages never decrease along a plan (the core sorts them): a smaller one after a
            // larger would run an op before those it depends on.
            assert!(
                i == 0 || ops[i - 1].stage < stage,
                "plan stages decrease at op {i}"
            );
            let end = i + ops[i..].iter().take_while(|o| o.stage == stage).count();
            if !reassigned.is_empty() {
                // Due now: slots this stage writes a line's bytes into while a crash could
                // still recover a record naming another line there. Their newest record names
                // another: it is cleared (a record of the line written itself stays: it may be
                // dirty, its write-back still to come). Either way a sync makes it durable.
                let (mut due, mut to_clear) = (Vec::new(), Vec::new());
                for o in &ops[i..end] {
                    if o.device == Dev::Cache && o.kind == IoKind::Write && o.len > 0 {
                        for (slot, want) in slot_lines(o, line) {
                            if reassigned.contains(&slot)
                                && !due.contains(&slot)
                                && self.table.may_recover_other(base + slot, want)
                            {
                                due.push(slot);
                                if self
                                    .table
                                    .persisted_line(base + slot)
                                    .is_some_and(|l| l != want)
                                {
                                    to_clear.push(slot);
                                }
                            }
                        }
                    }
                }
                reassigned.retain(|s| !due.contains(s));
                if !due.is_empty() {
                    if wrote_back && !to_clear.is_empty() {
                        // The evicted line's data must be safe on the backend first.
                        self.backend.flush_since(backend_epoch)?;
                    }
                    for &s in &to_clear {
                        self.table.clear(&*self.cache_dev, base + s)?;
                    }
                    self.table.sync(&*self.cache_dev)?;
                    Counters::add(&self.counters.slot_invalidations, to_clear.len() as u64);
                }
            }
            for o in &ops[i..end] {
                let dev: &dyn BlockDevice = match o.device {
                    Dev::Cache => {
                        Counters::add(&self.counters.cache_ops, 1);
                        &*self.cache_dev
                    }
                    Dev::Backend => {
                        Counters::add(&self.counters.backend_ops, 1);
                        &*self.backend
                    }
                };
                let addr = self.device_addr(base, o);
                self.check_op(base, slot_end, o, addr);
                let _busy = match o.device {
                    Dev::Cache => self.cache_load.enter(o.cause),
                    Dev::Backend => self.backend_load.enter(o.cause),
                };
                match o.kind {
                    IoKind::Read => scratch.read(dev, o, addr)?,
                    // A clean victim handed to the level below: its answer changes nothing
                    // here, and its failure fails nothing (see `demote_down`).
                    IoKind::Write if o.device == Dev::Backend && o.cause == OpCause::Demote => {
                        self.demote_down(&scratch.data_for(o), addr)
                    }
                    IoKind::Write => {
                        dev.write_at(&scratch.data_for(o), addr, false)?;
                        if o.device == Dev::Backend {
                            wrote_back |= o.cause == OpCause::EvictFlush;
                            self.backend_unsynced.fetch_min(backend_epoch, Relaxed);
                        }
                    }
                    // A zeroing trim's backend op is a write (of zeroes): as a write, the
                    // records dropping dirty data wait for it to be durable (below).
                    IoKind::Trim if scratch.zeroes() && o.device == Dev::Backend => {
                        dev.write_zeroes(addr, o.len, false)?;
                        self.backend_unsynced.fetch_min(backend_epoch, Relaxed);
                    }
                    IoKind::Trim => dev.trim(addr, o.len)?,
                    // The cache device syncs through its table, which learns what is durable.
                    IoKind::Flush if o.device == Dev::Cache => self.table.sync(dev)?,
                    IoKind::Flush => dev.flush()?,
                }
            }
            i = end;
        }
        // Records describe data that landed: written only once every op ran.
        assert_eq!(i, ops.len(), "records written before the plan's last op");
        let zeroes = scratch.zeroes();
        scratch.finish();
        self.check_halted()?;
        // A record that drops dirty sub-blocks because this plan wrote their new data to the
        // backend (a write invalidating dirty data under read-only or pass-through) must not
        // be durable before that data is: a crash would leave neither the dirty data nor the
        // write. (Evictions flushed above; flush jobs are recorded once their writes are.)
        let wrote_backend = ops.iter().any(|o| {
            o.device == Dev::Backend
                && (o.kind == IoKind::Write || (zeroes && o.kind == IoKind::Trim))
                && o.cause != OpCause::Demote
        });
        if wrote_backend
            && updates
                .iter()
                .any(|u| self.table.drops_dirty(base + u.slot, &record_of(u)))
        {
            self.backend.flush_since(backend_epoch)?;
            Counters::add(&self.counters.backend_flushes_before_records, 1);
        }
        for u in updates {
            self.table
                .write(&*self.cache_dev, base + u.slot, &record_of(u))?;
        }
        Counters::add(&self.counters.records_written, updates.len() as u64);
        Ok(Executed::Done)
    }
}
