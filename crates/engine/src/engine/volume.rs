//! Several volumes on one cache: each served volume has its own backend (laid out in a
//! [`crate::device::VolumeSet`]), its own counters, and (when partitioned) its own share of
//! every shard's lines. Partition sizes are journaled on the cache device
//! ([`crate::partition_log`]) so a warm restart puts each volume's lines back in its partition.

use super::*;
use crate::partition_log::PartitionEntry;
use crate::stats::LatencyBuckets;
use serde::Serialize;
use tiercache_policy::shards::{split_lines, ShardShare};

/// One served volume: where its backend sits on the backend device, its size, its counters.
pub(crate) struct VolumeState {
    /// Volume id (requests carry it).
    pub id: u32,
    /// Address of its byte 0 on the backend device.
    pub base: u64,
    /// Its size in bytes.
    pub size: u64,
    /// Requests in flight now.
    pub in_flight: AtomicU64,
    reads: AtomicU64,
    writes: AtomicU64,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    errors: AtomicU64,
    read_line_hits: AtomicU64,
    read_line_misses: AtomicU64,
    write_line_hits: AtomicU64,
    write_line_misses: AtomicU64,
    latency: Latencies,
}

impl VolumeState {
    pub(crate) fn new(id: u32, base: u64, size: u64) -> Self {
        Self {
            id,
            base,
            size,
            in_flight: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
            write_bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            read_line_hits: AtomicU64::new(0),
            read_line_misses: AtomicU64::new(0),
            write_line_hits: AtomicU64::new(0),
            write_line_misses: AtomicU64::new(0),
            latency: Latencies::new(),
        }
    }

    /// Counts a finished request of `len` bytes that took `us` µs.
    pub(crate) fn account(&self, op: Op, len: u64, us: u64, failed: bool) {
        self.in_flight.fetch_sub(1, Relaxed);
        match op {
            Op::Read => {
                Counters::add(&self.reads, 1);
                Counters::add(&self.read_bytes, len);
                Latencies::record(&self.latency.read, us);
            }
            Op::Write => {
                Counters::add(&self.writes, 1);
                Counters::add(&self.write_bytes, len);
                Latencies::record(&self.latency.write, us);
            }
            _ => {}
        }
        Counters::add(&self.errors, failed as u64);
    }

    /// Counts the lines a request found and missed (partial hits count as misses: the
    /// backend was read).
    pub(crate) fn count_lines(&self, op: Op, out: &AccessOutcome) {
        let (hits, misses) = (
            u64::from(out.line_hits),
            u64::from(out.line_misses + out.line_partial_hits),
        );
        match op {
            Op::Read => {
                Counters::add(&self.read_line_hits, hits);
                Counters::add(&self.read_line_misses, misses);
            }
            Op::Write => {
                Counters::add(&self.write_line_hits, hits);
                Counters::add(&self.write_line_misses, misses);
            }
            _ => {}
        }
    }
}

/// Live counters of one served volume.
#[derive(Debug, Clone, Serialize)]
pub struct VolumeStats {
    /// Volume id.
    pub volume: u32,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Reads served.
    pub reads: u64,
    /// Writes served.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Requests answered with an error.
    pub errors: u64,
    /// Requests in flight now (the volume's queue depth at the cache).
    pub in_flight: u64,
    /// Read line accesses served by the cache.
    pub read_line_hits: u64,
    /// Read line accesses that went to the backend (misses and partial hits).
    pub read_line_misses: u64,
    /// Write line accesses finding their line resident.
    pub write_line_hits: u64,
    /// Write line accesses not finding it.
    pub write_line_misses: u64,
    /// Lines of the volume's own partition over all shards (`None`: it shares the shared
    /// partition with every volume without one).
    pub partition_lines: Option<u64>,
    /// Lines its partition holds now.
    pub resident_lines: Option<u64>,
    /// Dirty lines its partition holds now.
    pub dirty_lines: Option<u64>,
    /// Read latency.
    pub read_latency: LatencySummary,
    /// Write latency.
    pub write_latency: LatencySummary,
    /// Read latency as cumulative buckets (Prometheus histograms).
    pub read_latency_buckets: LatencyBuckets,
    /// Write latency as cumulative buckets.
    pub write_latency_buckets: LatencyBuckets,
}

impl VolumeStats {
    /// Read line hits over read line accesses (0 before any).
    pub fn read_hit_ratio(&self) -> f64 {
        let n = self.read_line_hits + self.read_line_misses;
        if n == 0 {
            0.0
        } else {
            self.read_line_hits as f64 / n as f64
        }
    }
}

/// One volume of an engine, as an NBD export.
#[derive(Clone)]
pub struct VolumeHandle {
    engine: Arc<Engine>,
    volume: u32,
    size: u64,
}

impl VolumeHandle {
    /// The volume's id.
    pub fn volume(&self) -> u32 {
        self.volume
    }
}

impl Engine {
    /// The volumes this engine serves, in order: (id, size in bytes).
    pub fn volumes(&self) -> Vec<(u32, u64)> {
        self.inner.volumes.iter().map(|v| (v.id, v.size)).collect()
    }

    /// Volume `volume` as a block device (an NBD export), if it is served.
    pub fn volume_handle(self: &Arc<Self>, volume: u32) -> Option<VolumeHandle> {
        let size = self.inner.volume(volume)?.size;
        Some(VolumeHandle {
            engine: self.clone(),
            volume,
            size,
        })
    }

    /// Reads `buf.len()` bytes at `offset` of `volume`.
    pub fn read_volume(&self, volume: u32, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let len = buf.len() as u64;
        let client = Client::Read {
            volume,
            offset,
            buf,
        };
        self.inner
            .request(volume, Op::Read, offset, len, client, false)
    }

    /// Writes `data` at `offset` of `volume` (durable on return with `fua`).
    pub fn write_volume(&self, volume: u32, data: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        let client = Client::Write {
            volume,
            offset,
            data,
        };
        self.inner
            .request(volume, Op::Write, offset, data.len() as u64, client, fua)
    }

    /// Read and write latency of every request, as cumulative buckets.
    pub fn latency_buckets(&self) -> (LatencyBuckets, LatencyBuckets) {
        (
            LatencyBuckets::of(&self.inner.latency.read),
            LatencyBuckets::of(&self.inner.latency.write),
        )
    }

    /// What the cache's tenancy mode decided at its last interval end, and what each volume
    /// did in the interval before (`None`: no mode, or before its first decision).
    pub fn tenancy_report(&self) -> Option<tiercache_policy::TenancyReport> {
        // Every shard's share added to the leader's (docs/design.md §4.10, "On shards").
        tiercache_policy::shards::merge_reports(
            self.inner
                .shards
                .iter()
                .map(|sh| self.inner.core(sh).cache.tenancy_report()),
        )
    }

    /// Polls the cache's tenancy mode as if the engine's clock read `now_ns` (its flusher
    /// polls on the engine's own clock, from 0 at open): the decision due by then is made and
    /// applied, its shrinks' write-backs run and the layout journaled before this returns.
    /// Returns when the mode wants its next poll. For a driver replaying a stream on a
    /// virtual clock (the differential tests): decisions at the same points of the stream
    /// as the simulator's.
    pub fn repartition_at(&self, now_ns: u64) -> Option<u64> {
        let state = ExecutorState {
            now: now_ns,
            ..self.inner.executor_state()
        };
        self.inner.repartition_at(&state)
    }

    /// Counters of every served volume, in order.
    pub fn volume_stats(&self) -> Vec<VolumeStats> {
        let mut parts: Vec<(u32, u64, u64, u64)> = Vec::new();
        for sh in &self.inner.shards {
            let core = self.inner.core(sh);
            for p in core.cache.partition_stats() {
                if let Some(v) = p.volume {
                    match parts.iter_mut().find(|e| e.0 == v.0) {
                        Some(e) => {
                            e.1 += p.capacity_lines;
                            e.2 += p.used_lines;
                            e.3 += p.dirty_lines;
                        }
                        None => parts.push((v.0, p.capacity_lines, p.used_lines, p.dirty_lines)),
                    }
                }
            }
        }
        let g = |a: &AtomicU64| a.load(Relaxed);
        self.inner
            .volumes
            .iter()
            .map(|v| {
                let part = parts.iter().find(|p| p.0 == v.id);
                VolumeStats {
                    volume: v.id,
                    size_bytes: v.size,
                    reads: g(&v.reads),
                    writes: g(&v.writes),
                    read_bytes: g(&v.read_bytes),
                    write_bytes: g(&v.write_bytes),
                    errors: g(&v.errors),
                    in_flight: g(&v.in_flight),
                    read_line_hits: g(&v.read_line_hits),
                    read_line_misses: g(&v.read_line_misses),
                    write_line_hits: g(&v.write_line_hits),
                    write_line_misses: g(&v.write_line_misses),
                    partition_lines: part.map(|p| p.1),
                    resident_lines: part.map(|p| p.2),
                    dirty_lines: part.map(|p| p.3),
                    read_latency: LatencySummary::of(&v.latency.read),
                    write_latency: LatencySummary::of(&v.latency.write),
                    read_latency_buckets: LatencyBuckets::of(&v.latency.read),
                    write_latency_buckets: LatencyBuckets::of(&v.latency.write),
                }
            })
            .collect()
    }

    /// The partitions of every shard now: (shard, volume, lines), volumes with their own
    /// partition only.
    pub fn partition_layout(&self) -> Vec<PartitionEntry> {
        self.inner.partition_layout()
    }

    /// Gives each listed volume (served ones only) a partition of about `lines` lines, split
    /// over the shards by their lines with [`split_lines`], as the tenancy leader's targets
    /// and static partitions are (docs/design.md §4.10, "On shards"); the sizes must sum to
    /// at most the cache's lines. Shrinking partitions write their dirty lines back first (the call
    /// returns once they are on the backend) and drop the rest; growing ones take the freed
    /// lines. The new layout is journaled on the cache device before this returns.
    pub fn set_volume_partitions(&self, sizes: &[(u32, u64)]) -> io::Result<()> {
        let inner = &self.inner;
        inner.check_halted()?;
        let bad = |m: String| Err(io::Error::new(io::ErrorKind::InvalidInput, m));
        for (i, &(v, _)) in sizes.iter().enumerate() {
            if inner.volume(v).is_none() {
                return bad(format!("partition {i}: no volume {v} is served"));
            }
            if sizes[..i].iter().any(|&(o, _)| o == v) {
                return bad(format!("partition {i}: volume {v} listed twice"));
            }
        }
        let total: u64 = sizes.iter().map(|s| s.1).sum();
        let cap = u64::from(inner.shard_layout.total_lines());
        if total > cap {
            return bad(format!(
                "partitions of {total} lines in all; the cache has {cap}"
            ));
        }
        let _one_at_a_time = lock(&inner.resizing);
        // The one rule that splits the tenancy leader's targets and static partitions over
        // the shards (docs/design.md §4.10, "On shards").
        let room: Vec<u64> = (0..inner.shards.len())
            .map(|k| u64::from(inner.shard_layout.lines(k)))
            .collect();
        let targets: Vec<u64> = sizes.iter().map(|s| s.1).collect();
        let shares = split_lines(&targets, &room);
        let per_shard: Vec<(u32, Vec<u64>)> = sizes
            .iter()
            .enumerate()
            .map(|(i, &(v, _))| (v, shares.iter().map(|shard| shard[i]).collect()))
            .collect();
        inner.apply_layout(&per_shard)
    }
}

/// Records a resize left to write (lines it dropped), under their ordering ticket.
pub(super) struct ResizeRecords {
    pub(super) updates: Vec<MetaUpdate>,
    pub(super) ticket: Option<Ticket>,
}

impl<C: EngineCore> Inner<C> {
    /// Sets each listed volume's partition in every shard to its listed lines (shrinks
    /// first), runs the flush jobs of the shrinks, writes the records of dropped lines, and
    /// journals the layout.
    pub(super) fn apply_layout(&self, per_shard: &[(u32, Vec<u64>)]) -> io::Result<()> {
        let inner = self;
        let mut result = Ok(());
        for (k, sh) in inner.shards.iter().enumerate() {
            let (work, records) = {
                let mut core = inner.core(sh);
                let mut jobs = Vec::new();
                let current = |core: &Core<C>, v: u32| {
                    let p = core.cache.partition_of(VolumeId(v));
                    core.cache
                        .partition_info(p)
                        .filter(|i| i.volume == Some(VolumeId(v)))
                        .map_or(0, |i| i.capacity_lines)
                };
                // Shrinks first: the lines they free are what the growing partitions take.
                'steps: for grow in [false, true] {
                    for (v, lines) in per_shard {
                        let (now, want) = (current(&core, *v), lines[k]);
                        if (want > now) == grow && want != now {
                            if let Err(e) = core.cache.set_partition(VolumeId(*v), want, &mut jobs)
                            {
                                // Jobs of the steps taken must still run (their lines are
                                // pinned): stop here, run them, report the error.
                                result = Err(io::Error::other(e));
                                break 'steps;
                            }
                        }
                    }
                }
                inner.register_resize(k, &mut core, jobs)
            };
            for w in work {
                result = result.and(inner.run_job(w));
            }
            result = result.and(inner.write_records(k, records));
            result = result.and(inner.write_frees(k));
            if result.is_err() {
                break;
            }
        }
        // The layout in force is journaled even after an error (some shards resized).
        let journaled = inner.journal_partitions();
        result.and(journaled)
    }

    /// Polls the cache's tenancy mode (`cache.tenancy`) as the simulator does: at each
    /// interval end it resizes the partitions and sets per-volume write policies; the flush
    /// jobs of its shrinks run here, before the flusher goes on, and the new layout is
    /// journaled. Returns when to poll next (`None`: a shared cache, never).
    pub(super) fn repartition(&self) -> Option<u64> {
        self.repartition_at(&self.executor_state())
    }

    /// [`Self::repartition`] as at `state.now`. A sharded cache's shard 0 leads
    /// (docs/design.md §4.10, "On shards"): when its decision is due, every shard's lines
    /// and partitions are gathered, it decides for the whole cache, and every other shard
    /// then applies its share of the split, as the simulator's [`ShardedCache`] runs it.
    ///
    /// [`ShardedCache`]: tiercache_policy::ShardedCache
    pub(super) fn repartition_at(&self, state: &ExecutorState) -> Option<u64> {
        let leads = self.core(&self.shards[0]).cache.leads_tenancy();
        // One resize at a time: the shares gathered stay those the leader splits over.
        let _one_at_a_time = leads.then(|| lock(&self.resizing));
        let mut next: Option<u64> = None;
        let mut result = Ok(());
        let mut decided = false;
        let mut split = None;
        let shares: Vec<ShardShare> =
            if leads && self.core(&self.shards[0]).cache.tenancy_due(state.now) {
                self.shards
                    .iter()
                    .map(|sh| self.core(sh).cache.shard_share())
                    .collect()
            } else {
                Vec::new()
            };
        for (k, sh) in self.shards.iter().enumerate() {
            let (work, records) = {
                let mut core = self.core(sh);
                if self.halted.get().is_some() {
                    return None;
                }
                let before = core.cache.tenancy_report().map(|r| r.decisions);
                let polled = if !leads {
                    core.cache.repartition(state)
                } else if k == 0 {
                    let t = core.cache.lead_repartition(state, &shares);
                    split = core.cache.tenancy_split();
                    t
                } else {
                    if let Some(s) = &split {
                        core.cache.follow_tenancy(s, state.now);
                    }
                    None
                };
                if let Some(t) = polled {
                    next = Some(next.map_or(t, |n| n.min(t)));
                }
                decided |= core.cache.tenancy_report().map(|r| r.decisions) != before;
                let mut jobs = Vec::new();
                core.cache.take_resize_jobs(&mut jobs);
                if jobs.is_empty() && !decided {
                    continue;
                }
                self.register_resize(k, &mut core, jobs)
            };
            for w in work {
                result = result.and(self.run_job(w));
            }
            result = result.and(self.write_records(k, records));
            result = result.and(self.write_frees(k));
        }
        if decided {
            result = result.and(self.journal_partitions());
        }
        // A failed write-back left its lines dirty and is counted (the flusher retries them);
        // a journal that could not be written is written at the next decision.
        let _ = result;
        next
    }

    /// Every shard's own-volume partitions now.
    pub(super) fn partition_layout(&self) -> Vec<PartitionEntry> {
        let mut out = Vec::new();
        for (k, sh) in self.shards.iter().enumerate() {
            let core = self.core(sh);
            for p in core.cache.partition_stats() {
                if let Some(v) = p.volume {
                    out.push(PartitionEntry {
                        shard: k as u16,
                        volume: v.0,
                        lines: p.capacity_lines as u32,
                    });
                }
            }
        }
        out
    }

    /// The volumes with a write policy of their own, and that policy.
    pub(super) fn volume_write_policies(&self) -> Vec<(u32, tiercache_policy::WritePolicy)> {
        // Every shard holds the same (set on all of them at once).
        let core = self.core(&self.shards[0]);
        self.volumes
            .iter()
            .filter_map(|v| {
                core.cache
                    .volume_write_policy(VolumeId(v.id))
                    .map(|p| (v.id, p))
            })
            .collect()
    }

    /// Journals the partition layout and the volumes' own write policies if they changed
    /// since last journaled.
    pub(super) fn journal_partitions(&self) -> io::Result<()> {
        let held = lock(&self.journal_policies_held).clone();
        let write_policies = held.unwrap_or_else(|| self.volume_write_policies());
        let layout = crate::partition_log::Journaled {
            partitions: self.partition_layout(),
            write_policies,
        };
        let mut log = lock(&self.partition_log);
        if log.1 == layout {
            return Ok(());
        }
        log.0.write(&*self.cache_dev, &layout)?;
        log.1 = layout;
        Ok(())
    }

    /// Registers a resize's flush jobs (each with its lines' records) and a ticket for the
    /// records of the lines it dropped, which must land after plans in flight on their slots.
    pub(super) fn register_resize(
        &self,
        k: usize,
        core: &mut Core<C>,
        jobs: Vec<FlushJob>,
    ) -> (Vec<Job>, ResizeRecords) {
        let mut ups = Vec::new();
        core.cache.drain_meta_updates(&mut ups);
        let (in_jobs, dropped): (Vec<MetaUpdate>, Vec<MetaUpdate>) = ups
            .into_iter()
            .partition(|u| jobs.iter().any(|j| j.slots().contains(&u.slot)));
        let work = jobs
            .into_iter()
            .map(|job| {
                let mine: Vec<MetaUpdate> = in_jobs
                    .iter()
                    .filter(|u| job.slots().contains(&u.slot))
                    .copied()
                    .collect();
                let base = self.shards[k].base;
                let ticket = self.register_plan(base, &mut core.order, &job.plan, &mine);
                Job {
                    shard: k,
                    job,
                    updates: mine,
                    ticket,
                }
            })
            .collect();
        let ticket = (!dropped.is_empty()).then(|| {
            // Their lines' backend ranges too: a request putting one of them in another slot
            // waits for these records (docs/design.md §11, "A line in one slot").
            self.register_plan(self.shards[k].base, &mut core.order, &Plan::new(), &dropped)
        });
        (
            work,
            ResizeRecords {
                updates: dropped,
                ticket,
            },
        )
    }

    /// Writes the records of slots flush jobs of shard `k` freed (see `Core::frees`) once
    /// plans on their slots are done. Called by a thread once every job it registered on the
    /// shard ran: the plans those records wait for then wait on no job of its own.
    pub(super) fn write_frees(&self, k: usize) -> io::Result<()> {
        let frees = std::mem::take(&mut self.core(&self.shards[k]).frees);
        let mut out = Ok(());
        for r in frees {
            out = out.and(self.write_records(k, r));
        }
        out
    }

    /// Writes a resize's records of dropped lines once plans on their slots are done.
    pub(super) fn write_records(&self, k: usize, r: ResizeRecords) -> io::Result<()> {
        let Some(mut ticket) = r.ticket else {
            return Ok(());
        };
        ticket.wait_turn();
        let base = self.shards[k].base;
        let mut out = Ok(());
        for u in &r.updates {
            out = out.and(
                self.table
                    .write(&*self.cache_dev, base + u.slot, &record_of(u)),
            );
        }
        self.core(&self.shards[k]).order.complete(ticket);
        out
    }
}

impl tiercache_blockdev::BlockDevice for VolumeHandle {
    fn size(&self) -> u64 {
        self.size
    }
    fn allocation(&self, off: u64, len: u64) -> io::Result<Vec<tiercache_blockdev::Extent>> {
        self.engine.inner.allocation(self.volume, off, len)
    }
    fn cache_state(
        &self,
        off: u64,
        len: u64,
    ) -> Option<io::Result<Vec<tiercache_blockdev::Extent>>> {
        Some(self.engine.inner.cache_state(self.volume, off, len))
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.engine.read_volume(self.volume, buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        self.engine.write_volume(self.volume, data, off, fua)
    }
    fn flush(&self) -> io::Result<()> {
        // Syncs both devices whole: every volume's completed writes become durable.
        self.engine.flush()
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        self.engine
            .inner
            .request(self.volume, Op::Trim, off, len, Client::None, false)
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> io::Result<()> {
        self.engine.zero_volume(self.volume, off, len, fua)
    }
    fn fast_zeroes(&self) -> bool {
        self.engine.zeroes_fast()
    }
    fn read_fast(&self, buf: &mut [u8], off: u64) -> Option<io::Result<()>> {
        let inner = &self.engine.inner;
        if inner.cache_is_slow {
            return None;
        }
        let len = buf.len() as u64;
        let client = Client::Read {
            volume: self.volume,
            offset: off,
            buf,
        };
        inner.request_on_cache_alone(self.volume, Op::Read, off, len, client)
    }
    fn write_fast(&self, data: &[u8], off: u64) -> Option<io::Result<()>> {
        let inner = &self.engine.inner;
        if inner.cache_is_slow {
            return None;
        }
        let client = Client::Write {
            volume: self.volume,
            offset: off,
            data,
        };
        inner.request_on_cache_alone(self.volume, Op::Write, off, data.len() as u64, client)
    }
    fn multi_conn(&self) -> bool {
        true
    }
}
