//! Background cleaning: the executor state the cleaners see, flush jobs run in decision
//! order, the flusher thread, a full flush (detach), and the counters.

use super::degraded::predecessor_failed;
use super::*;

impl<C: EngineCore> Inner<C> {
    pub(super) fn executor_state(&self) -> ExecutorState {
        let now = self.now_ns();
        let busy = self.in_flight.load(Relaxed);
        ExecutorState {
            now,
            cache_idle_ns: if busy > 0 {
                0
            } else {
                now.saturating_sub(self.last_foreground_ns.load(Relaxed))
            },
            cache: self.cache_load.load(),
            backend: self.backend_load.load(),
        }
    }

    /// Polls the cache's load balancer (shard 0's, which every shard follows, as the
    /// simulator runs it) if an interval ended; returns when to poll next.
    pub(super) fn balance(&self) -> Option<u64> {
        let state = self.executor_state();
        let (next, d) = {
            let mut core = self.core(&self.shards[0]);
            let next = core.cache.balance(&state);
            (next, core.cache.balance_decision())
        };
        for sh in &self.shards[1..] {
            self.core(sh).cache.follow_balancing(d);
        }
        next
    }

    /// Counts one whole request `req` once, from its planned pieces: in the request
    /// counters, and its lines in its volume's (nothing when no piece was planned).
    pub(super) fn tally(&self, req: &Request, pieces: RequestPieces) {
        if pieces.outcome().is_none() {
            return;
        }
        let out = pieces.finish(req, self.geo, &mut lock(&self.request_tally));
        if let (Some(o), Some(v)) = (out, self.volume(req.volume.0)) {
            v.count_lines(req.op, &o);
        }
    }

    /// Registers flush jobs with their share of the metadata updates.
    pub(super) fn register_jobs(
        &self,
        k: usize,
        core: &mut Core<C>,
        jobs: Vec<FlushJob>,
    ) -> Vec<Job> {
        let mut ups = Vec::new();
        core.cache.drain_meta_updates(&mut ups);
        jobs.into_iter()
            .map(|job| {
                let mine: Vec<MetaUpdate> = ups
                    .iter()
                    .filter(|u| job.slots().contains(&u.slot))
                    .copied()
                    .collect();
                let base = self.shards[k].base;
                let t = self.register_plan(base, &mut core.order, &job.plan, &mine);
                Job {
                    shard: k,
                    job,
                    updates: mine,
                    ticket: t,
                }
            })
            .collect()
    }

    /// Runs one flush job: cache reads, backend writes, backend sync, then the lines' clean
    /// records, then `flush_done`.
    pub(super) fn run_job(&self, work: Job) -> io::Result<()> {
        let Job {
            shard,
            job,
            updates,
            mut ticket,
        } = work;
        let shard = &self.shards[shard];
        let base = shard.base;
        // A job after a failed predecessor fails unrun: a sub-block it writes back may have
        // been dirtied by a write smaller than it, planned on a fill that never arrived (that
        // predecessor's failure invalidated it; see `undefined_after_failure`). A failed job
        // puts its lines back dirty as they were, so it completes its ticket without passing a
        // failure on.
        ticket.wait_turn();
        let lines = job.lines() as u64;
        let epoch = self.backend.epoch();
        // The job's clean records written so far (a failure after some of them must put
        // those lines' records back to dirty).
        let mut cleaned = 0;
        let mut result = (|| {
            if ticket.predecessor_failed() {
                return Err(predecessor_failed());
            }
            let mut scratch = Scratch::new(Client::None);
            // The job's backend writes (distinct lines) go to the backend together, pipelined
            // over a remote's connections, once the cache reads they need are done.
            let mut writes: Vec<(u64, &DevOp)> = Vec::new();
            let send = |scratch: &Scratch<'_>, writes: &mut Vec<(u64, &DevOp)>| {
                if writes.is_empty() {
                    return io::Result::Ok(());
                }
                let data: Vec<_> = writes.iter().map(|(_, o)| scratch.data_for(o)).collect();
                let batch: Vec<(u64, &[u8])> = writes
                    .iter()
                    .zip(&data)
                    .map(|((addr, _), d)| (*addr, &d[..]))
                    .collect();
                let _busy: Vec<_> = writes
                    .iter()
                    .map(|(_, o)| self.backend_load.enter(o.cause))
                    .collect();
                writes.clear();
                self.backend.write_many(&batch)
            };
            for o in &job.plan.ops {
                let addr = self.device_addr(base, o);
                match (o.device, o.kind) {
                    (Dev::Cache, IoKind::Read) => {
                        send(&scratch, &mut writes)?;
                        let _busy = self.cache_load.enter(o.cause);
                        scratch.read(&*self.cache_dev, o, addr)?
                    }
                    (Dev::Backend, IoKind::Write) => writes.push((addr, o)),
                    // A flush job reads the cache and writes the backend. Any other op would be
                    // a policy this executor does not know how to run: fail the job (its lines
                    // stay dirty) rather than skip the op and call the lines clean.
                    (device, kind) => {
                        debug_assert!(false, "flush job op {kind:?} on {device:?}");
                        return Err(io::Error::other(format!(
                            "flush job {} has a {kind:?} op on the {device:?} device, which the \
                             engine does not run in flush jobs",
                            job.id
                        )));
                    }
                }
            }
            send(&scratch, &mut writes)?;
            // Clean only once the backend acknowledged a flush covering these writes.
            self.backend.flush_since(epoch)?;
            for u in &updates {
                self.table
                    .write(&*self.cache_dev, base + u.slot, &record_of(u))?;
                cleaned += 1;
            }
            io::Result::Ok(())
        })();
        let mut core = self.core(shard);
        let failed = result.is_err();
        let job_slots: Vec<u32> = job.slots().to_vec();
        let written_back = failed.then(|| written_back_masks(&self.geo, &job, &updates));
        if failed {
            Counters::add(&self.counters.flush_job_failures, 1);
            core.cache.flush_failed(job);
        } else {
            core.cache.flush_done(job);
        }
        let mut ups = Vec::new();
        core.cache.drain_meta_updates(&mut ups);
        // The durable records describe data that landed, as `forget_failed` keeps them: the
        // core's state of a slot now may include what plans decided after this job (a write
        // waiting for the job to finish reading the slot) whose data has not landed, so the
        // core's records are not written as they stand. What this job must still write:
        // - after a failure, the clean records it wrote go back to what the job found (its
        //   lines dirty as the backend writes were to carry them): that data is in the slots;
        // - a slot the job's completion emptied (a trimmed or shrunk line dropped) is written
        //   empty when its record names the line it held, or, for another slot, when no plan
        //   in flight touches it (then the core's state is what landed): else that line could
        //   be recovered twice once it is read into another slot. A record naming another line
        //   is left alone: a plan in flight may be evicting that line, dirty, from the slot.
        // - a slot outside the job that no plan in flight touches: the core's state landed.
        let mut records: Vec<(u32, SlotRecord)> = Vec::new();
        if let Some(masks) = &written_back {
            for (u, dirty) in updates.iter().zip(masks).take(cleaned) {
                records.push((
                    u.slot,
                    SlotRecord {
                        dirty: *dirty,
                        ..record_of(u)
                    },
                ));
            }
        }
        // Slots outside the job it freed while plans are in flight on them: their records wait
        // for those plans, under a ticket of their own registered now, in decision order, so a
        // plan putting the line in another slot waits for them too (docs/design.md §11, "A
        // line in one slot"). Left unwritten, the record would name a line the core forgot.
        let mut frees = Vec::new();
        for u in &ups {
            let slot = base + u.slot;
            let quiet = || !core.order.would_wait(cache_slot(u.slot), true);
            if !job_slots.contains(&u.slot) && u.line.is_none() && !quiet() {
                frees.push(*u);
                continue;
            }
            let write = if job_slots.contains(&u.slot) {
                let held = updates
                    .iter()
                    .find(|j| j.slot == u.slot)
                    .and_then(|j| j.line)
                    .map(|(v, i)| (v.0, i));
                u.line.is_none() && held.is_some() && self.table.persisted_line(slot) == held
            } else {
                quiet()
            };
            if write && !records.iter().any(|(s, _)| *s == u.slot) {
                records.push((u.slot, record_of(u)));
            }
        }
        for (slot, rec) in &records {
            if let Err(e) = self.table.write(&*self.cache_dev, base + slot, rec) {
                result = result.and(Err(e));
            }
        }
        if !frees.is_empty() {
            let ticket = self.register_plan(base, &mut core.order, &Plan::new(), &frees);
            core.frees.push(super::volume::ResizeRecords {
                updates: frees,
                ticket: Some(ticket),
            });
        }
        // Once the cache device fails ops, a failed job (the cache failed it, or a job before
        // it whose lines it waited for) passes its failure on: plans decided on its lines
        // being on the backend (a pass-through read of them, planned while the job had them
        // marked clean) must not read the backend's stale copy. They fail, and are served
        // again past the cache, now seeing the lines dirty (docs/design.md §11). Without
        // cache trouble nothing plans such reads but a configured pass-through, and a job
        // the backend failed completes its ticket as before.
        core.order
            .end(ticket, !(failed && self.health.cache_trouble()));
        Counters::add(&self.counters.flush_jobs, 1);
        // Lines written back: a failed job's stay dirty, and are counted when written.
        if !failed {
            Counters::add(&self.counters.flushed_lines, lines);
        }
        result
    }

    pub(super) fn flusher_loop(&self) {
        // After a failed job (the backend is away), wait longer each time before trying again.
        let mut backoff = Duration::ZERO;
        while !self.stop.load(Relaxed) && self.halted.get().is_none() {
            let mut work = Vec::new();
            let mut next: Option<u64> = self.balance();
            if let Some(t) = self.repartition() {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
            // Degraded mode starts here when a flush job's errors passed the threshold; while
            // degraded, every dirty line goes back to the backend as soon as it can be read
            // (jobs failing on unreadable lines leave them dirty, retried after a backoff).
            self.check_degrade();
            let draining = self.health.is_degraded();
            for (k, sh) in self.shards.iter().enumerate() {
                let mut core = self.core(sh);
                if self.halted.get().is_some() {
                    break;
                }
                let state = self.executor_state();
                let mut jobs = Vec::new();
                if draining && core.cache.dirty_lines() > 0 {
                    core.cache.flush_all(&mut jobs);
                } else {
                    core.cache.clean(&state, &mut jobs);
                }
                if let Some(t) = core.cache.next_clean_poll(&state) {
                    next = Some(next.map_or(t, |n| n.min(t)));
                }
                work.extend(self.register_jobs(k, &mut core, jobs));
            }
            let busy = !work.is_empty();
            let mut failed = false;
            for w in work {
                failed |= self.run_job(w).is_err();
            }
            for k in 0..self.shards.len() {
                failed |= self.write_frees(k).is_err();
            }
            if failed {
                backoff = (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
            } else if busy {
                backoff = Duration::ZERO;
                continue;
            }
            let wait = if failed {
                backoff
            } else {
                next.map(|t| Duration::from_nanos(t.saturating_sub(self.now_ns())))
                    .unwrap_or(self.poll)
                    .clamp(Duration::from_micros(200), self.poll)
            };
            let mut woken = lock(&self.wake.0);
            if !*woken {
                woken = self
                    .wake
                    .1
                    .wait_timeout(woken, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            *woken = false;
        }
    }

    pub(super) fn flush_everything(&self) -> io::Result<()> {
        self.write_back_all()?;
        self.sync_for_client()
    }

    /// Writes every dirty line back (not synced).
    pub(super) fn write_back_all(&self) -> io::Result<()> {
        loop {
            self.check_halted()?;
            let mut work = Vec::new();
            // Lines in the flusher's jobs count as clean but are not on the backend yet, nor are
            // dirty lines evicted by reads whose plans finish in the background.
            let mut dirty = self.deferred_pending.load(Relaxed);
            for (k, sh) in self.shards.iter().enumerate() {
                let mut core = self.core(sh);
                self.check_halted()?;
                dirty += core.cache.dirty_lines() + u64::from(core.cache.jobs_in_flight());
                let mut jobs = Vec::new();
                core.cache.flush_all(&mut jobs);
                work.extend(self.register_jobs(k, &mut core, jobs));
            }
            if dirty == 0 {
                break;
            }
            if work.is_empty() {
                // Every dirty line is in a job of the flusher's: let it finish (or fail back to
                // dirty, to be taken up here).
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            // Every registered job must run (or fail back to dirty): a job dropped unrun would
            // leave its lines pinned, marked clean, and its ordering ticket open.
            let mut result = Ok(());
            for w in work {
                result = result.and(self.run_job(w));
            }
            for k in 0..self.shards.len() {
                result = result.and(self.write_frees(k));
            }
            result?;
        }
        Ok(())
    }

    pub(super) fn stats(&self) -> EngineStats {
        let mut cache = tiercache_policy::CacheStats::default();
        let (mut capacity_lines, mut resident_lines, mut dirty_lines) = (0, 0, 0);
        let mut write_backs_in_flight = self.deferred_pending.load(Relaxed);
        for sh in &self.shards {
            let core = lock(&sh.core);
            write_backs_in_flight += u64::from(core.cache.jobs_in_flight());
            cache.merge(&core.cache.stats_snapshot());
            capacity_lines += core.cache.capacity_lines();
            resident_lines += core.cache.resident_lines();
            dirty_lines += core.cache.dirty_lines();
        }
        let (balancer, balanced_write_policy) = {
            let core = lock(&self.shards[0].core);
            (
                core.cache.balance_report(),
                core.cache.balanced_write_policy(),
            )
        };
        // The cores counted lines; whole requests are counted once, here.
        cache.take_request_counters(&lock(&self.request_tally));
        let c = &self.counters;
        let g = |a: &AtomicU64| a.load(Relaxed);
        EngineStats {
            cache,
            executor: self.executor_state(),
            balancer,
            balanced_write_policy,
            capacity_lines,
            resident_lines,
            dirty_lines,
            reads: g(&c.reads),
            writes: g(&c.writes),
            read_bytes: g(&c.read_bytes),
            write_bytes: g(&c.write_bytes),
            fua_writes: g(&c.fua_writes),
            flushes: g(&c.flushes),
            trims: g(&c.trims),
            errors: g(&c.errors),
            ordering_waits: g(&c.ordering_waits),
            records_written: g(&c.records_written),
            backend_flushes_before_records: g(&c.backend_flushes_before_records),
            slot_invalidations: g(&c.slot_invalidations),
            flush_jobs: g(&c.flush_jobs),
            flush_job_failures: g(&c.flush_job_failures),
            deferred_plans: g(&c.deferred_plans),
            flushed_lines: g(&c.flushed_lines),
            cache_ops: g(&c.cache_ops),
            backend_ops: g(&c.backend_ops),
            in_flight: self.in_flight.load(Relaxed),
            backend_in_flight: u64::from(self.backend_load.queued()),
            write_backs_in_flight,
            recovery: self.recovery.clone(),
            halted: self.halted.get().cloned(),
            health: self.health.stats(),
            backend_link: self.backend.link_stats(),
            demotes: c.demotes.snapshot(),
            read_latency: LatencySummary::of(&self.latency.read),
            write_latency: LatencySummary::of(&self.latency.write),
        }
    }
}

/// For each of a flush job's metadata updates (one per line, in `updates`' order), the
/// sub-blocks the job's backend writes carry: the line's dirty sub-blocks when the job was made.
fn written_back_masks(geo: &LineGeometry, job: &FlushJob, updates: &[MetaUpdate]) -> Vec<u64> {
    let line = geo.line_size();
    updates
        .iter()
        .map(|u| {
            let Some((v, index)) = u.line else { return 0 };
            let start = index * line;
            job.plan
                .ops
                .iter()
                .filter(|o| o.device == Dev::Backend && o.volume == v && o.len > 0)
                .filter(|o| o.offset < start + line && o.offset + o.len > start)
                .map(|o| {
                    let (a, b) = (
                        o.offset.max(start) - start,
                        (o.offset + o.len).min(start + line) - start,
                    );
                    geo.touched_mask(a, b)
                })
                .fold(0, |m, x| m | x)
                & u.valid
        })
        .collect()
}
