//! The generator: a validated [`WorkloadSpec`] compiled into per-job samplers.

use rand_distr::{Distribution, Exp1, StandardNormal};
use rand_xoshiro::rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use tiercache_core::{Arrival, Nanos, Op, Request, RequestSource, VolumeId};

use crate::dist::{below, splitmix64, unit_f64, Permutation, Zipf};
use crate::error::WorkloadError;
use crate::spec::{AddressDist, ArrivalProcess, Bursts, WorkloadSpec, SUM_EPS};

/// A compiled address distribution over slots `0..slots` (slot `s` starts at byte `s · align`).
#[derive(Debug, Clone)]
enum Sampler {
    Uniform {
        slots: u64,
    },
    Zipf {
        zipf: Zipf,
        perm: Option<Permutation>,
    },
    Pareto {
        slots: u64,
        /// `1 − (slots+1)^−α`: the CDF mass of the bounded range.
        mass: f64,
        /// `mass / α`, which tends to `ln(slots+1)` as α → 0 (computed without dividing by α).
        mass_over_shape: f64,
        perm: Option<Permutation>,
    },
    Normal {
        slots: f64,
        /// Last slot (`slots − 1`), exactly.
        last: u64,
        mean: f64,
        stddev: f64,
    },
    Zoned {
        /// Cumulative access fractions, last one forced to +∞ so a draw always lands.
        cumulative: Vec<f64>,
        /// (first slot, slot count) of each zone.
        ranges: Vec<(u64, u64)>,
    },
    /// Sequential streams over slots `0..slots` (cursor per job).
    Sequential {
        slots: u64,
    },
}

impl Sampler {
    fn compile(
        spec: &WorkloadSpec,
        name: &str,
        d: &AddressDist,
        align: u64,
        max_size: u64,
        slots: u64,
        key: u64,
    ) -> Result<Self, WorkloadError> {
        Ok(match d {
            AddressDist::Uniform => Sampler::Uniform { slots },
            AddressDist::Zipf { theta, scramble } => Sampler::Zipf {
                zipf: Zipf::new(slots, *theta),
                perm: scramble.then(|| Permutation::new(slots, key)),
            },
            AddressDist::Pareto { shape, scramble } => {
                let ln_range = (slots as f64 + 1.0).ln();
                let e = shape * ln_range;
                // mass / α = ln_range · (1 − e^−e) / e; the ratio is 1 to double precision
                // below 1e-17 (and undefined at e = 0, which a subnormal α may give).
                let ratio = if e > 1e-17 { -(-e).exp_m1() / e } else { 1.0 };
                Sampler::Pareto {
                    slots,
                    mass: -(-e).exp_m1(),
                    mass_over_shape: ln_range * ratio,
                    perm: scramble.then(|| Permutation::new(slots, key)),
                }
            }
            AddressDist::Normal {
                mean_fraction,
                stddev_fraction,
            } => Sampler::Normal {
                slots: slots as f64,
                last: slots - 1,
                mean: mean_fraction * slots as f64,
                stddev: stddev_fraction * slots as f64,
            },
            AddressDist::Zoned { zones } => {
                let mut cumulative = Vec::with_capacity(zones.len() + 1);
                let mut ranges = Vec::with_capacity(zones.len() + 1);
                let mut acc = 0.0;
                let mut start_byte = 0u64;
                let mut push = |i: Option<usize>, access: f64, start: u64, end: u64| {
                    // Slots whose whole largest block fits in [start, end).
                    let first = start.div_ceil(align);
                    let last_plus_one = (end - max_size) / align + 1;
                    if last_plus_one <= first {
                        let field = match i {
                            Some(i) => format!("{name}.zones[{i}]"),
                            None => format!("{name}.zones"),
                        };
                        return Err(WorkloadError::invalid(
                            field,
                            format!(
                                "bytes {start}..{end} hold no {align}-aligned block of {max_size} bytes"
                            ),
                        ));
                    }
                    acc += access;
                    cumulative.push(acc);
                    ranges.push((first, last_plus_one - first));
                    Ok(())
                };
                for (i, z) in zones.iter().enumerate() {
                    let bytes = spec.zone_bytes(&format!("{name}.zones[{i}]"), z)?;
                    if z.access_fraction > 0.0 {
                        push(Some(i), z.access_fraction, start_byte, start_byte + bytes)?;
                    }
                    start_byte += bytes;
                }
                let sum: f64 = zones.iter().map(|z| z.access_fraction).sum();
                if sum < 1.0 - SUM_EPS {
                    push(None, 1.0 - sum, start_byte, spec.footprint)?;
                }
                if let Some(last) = cumulative.last_mut() {
                    *last = f64::INFINITY;
                }
                Sampler::Zoned { cumulative, ranges }
            }
            AddressDist::Sequential => Sampler::Sequential { slots },
            AddressDist::Loop {
                size,
                size_fraction,
            } => {
                let ws = spec.sized(name, *size, *size_fraction)?;
                Sampler::Sequential {
                    slots: (ws - max_size) / align + 1,
                }
            }
        })
    }

    /// Cursor a job starts at (sequential streams start at distinct offsets).
    fn start_cursor(&self, job: u32, jobs: u32) -> u64 {
        match self {
            Sampler::Sequential { slots } => (*slots as u128 * job as u128 / jobs as u128) as u64,
            _ => 0,
        }
    }

    /// Slot of the next request; `step` is its size in slots (rounded up), for sequential ones.
    #[inline]
    fn sample(&self, rng: &mut Xoshiro256PlusPlus, cursor: &mut u64, step: u64) -> u64 {
        match self {
            Sampler::Uniform { slots } => below(rng, *slots),
            Sampler::Zipf { zipf, perm } => {
                let rank0 = zipf.sample(rng) - 1;
                match perm {
                    Some(p) => p.apply(rank0),
                    None => rank0,
                }
            }
            Sampler::Pareto {
                slots,
                mass,
                mass_over_shape,
                perm,
            } => {
                // Inverse CDF of the bounded Pareto on [1, slots+1): x = (1 − u·mass)^(−1/α),
                // i.e. ln x = −ln(1 − y)/α with y = u·mass. `1 − y` loses y near 1e-16 (a tiny
                // α: the draws collapsed onto a few ranks), and 1/α overflows for a subnormal
                // α, so ln x = u · (mass/α) · g(y), with g(y) = −ln_1p(−y)/y (→ 1 as y → 0).
                let u = unit_f64(rng);
                let y = u * mass;
                let g = if y > 1e-300 { -(-y).ln_1p() / y } else { 1.0 };
                let x = (u * mass_over_shape * g).exp();
                let rank0 = (x as u64).saturating_sub(1).min(slots - 1);
                match perm {
                    Some(p) => p.apply(rank0),
                    None => rank0,
                }
            }
            Sampler::Normal {
                slots,
                last,
                mean,
                stddev,
            } => {
                // Validation keeps the mean inside the footprint and stddev at most its size,
                // so in exact arithmetic at least a third of the draws land (worst: mean at an
                // edge, stddev = footprint: P(0 ≤ z < 1) ≈ 0.34), and 64 misses in a row
                // (chance < 1e-11) would not happen. In floating point a stddev below the
                // precision of a mean at the end (mean_fraction = 1) gives `mean + stddev·z ==
                // slots` every time, and nothing lands. Misses that many mean the
                // distribution lies within rounding of an edge, so the last draw is clamped
                // into range: bounded time, and the edge slot is where its mass is.
                let mut v = 0.0;
                for _ in 0..64 {
                    let z: f64 = StandardNormal.sample(rng);
                    v = mean + stddev * z;
                    if v >= 0.0 && v < *slots {
                        return v as u64;
                    }
                }
                // `as` saturates (negative → 0); `last` is exact where `slots` may be rounded.
                (v as u64).min(*last)
            }
            Sampler::Zoned { cumulative, ranges } => {
                let u = unit_f64(rng);
                let i = cumulative
                    .iter()
                    .position(|&c| u < c)
                    .unwrap_or(ranges.len() - 1);
                let (first, count) = ranges[i];
                first + below(rng, count)
            }
            Sampler::Sequential { slots } => {
                let slot = *cursor;
                let next = slot.saturating_add(step);
                *cursor = if next >= *slots { 0 } else { next };
                slot
            }
        }
    }
}

/// State of one job (submitter or open-loop stream).
#[derive(Debug, Clone)]
struct Job {
    rng: Xoshiro256PlusPlus,
    /// Requests still to generate (`u64::MAX`: unbounded).
    remaining: u64,
    /// Sequential cursors of the read and write distributions.
    cursors: [u64; 2],
    /// Volume when volumes are assigned by job.
    volume: u32,
    /// Writes since this job's last flush.
    writes_since_flush: u64,
    /// The next request of this job is a flush of this volume (that of the write that made it
    /// due).
    flush_due: Option<u32>,
}

/// Open-loop arrival process.
#[derive(Debug, Clone)]
struct OpenLoop {
    rng: Xoshiro256PlusPlus,
    process: ArrivalProcess,
    /// Mean (Poisson) or exact (uniform) gap between arrivals, ns of on-time.
    gap_ns: f64,
    /// Arrivals generated so far.
    count: u64,
    /// Active (on-period) time of the next arrival, ns.
    next_active_ns: f64,
    /// Arrivals left (`u64::MAX`: unbounded).
    remaining: u64,
    done: bool,
}

/// How a request's op is chosen.
#[derive(Debug, Clone, Copy)]
enum OpMix {
    AllReads,
    AllWrites,
    /// Cumulative thresholds: read below the first, trim below the second, write above.
    Mixed(f64, f64),
}

/// A synthetic workload: implements [`RequestSource`] (per-job streams for closed loop, one
/// time-ordered stream for open loop) and turns into a single interleaved [`Iterator`] with
/// [`SyntheticWorkload::into_stream`].
///
/// Every job draws from its own xoshiro256++ stream (the seed's stream advanced by `job` jumps of
/// 2^128), so job `j`'s requests are the same whatever order an executor asks the jobs in.
#[derive(Debug, Clone)]
pub struct SyntheticWorkload {
    spec: WorkloadSpec,
    align: u64,
    slots: u64,
    sizes: Vec<u64>,
    /// Sizes in slots, rounded up: how far a sequential stream advances.
    steps: Vec<u64>,
    /// Cumulative size weights (last = +∞); empty when there is a single size.
    size_cumulative: Vec<f64>,
    ops: OpMix,
    /// Cumulative volume weights (last = +∞); empty when volumes are assigned by job.
    volume_cumulative: Vec<f64>,
    reads: Sampler,
    /// Separate sampler for writes and trims, if the spec gives one.
    writes: Option<Sampler>,
    jobs: Vec<Job>,
    open: Option<OpenLoop>,
    bursts: Option<Bursts>,
    duration_ns: Option<Nanos>,
    iodepth: u32,
    flush_every: Option<u64>,
}

fn cumulative(weights: impl Iterator<Item = f64>) -> Vec<f64> {
    let w: Vec<f64> = weights.collect();
    let total: f64 = w.iter().sum();
    let mut acc = 0.0;
    let mut c: Vec<f64> = w
        .iter()
        .map(|x| {
            acc += x / total;
            acc
        })
        .collect();
    if let Some(last) = c.last_mut() {
        *last = f64::INFINITY;
    }
    c
}

#[inline]
fn pick(cumulative: &[f64], u: f64) -> usize {
    cumulative
        .iter()
        .position(|&c| u < c)
        .unwrap_or(cumulative.len() - 1)
}

impl SyntheticWorkload {
    /// Validates `spec` and compiles it into a generator.
    pub fn new(spec: &WorkloadSpec) -> Result<Self, WorkloadError> {
        spec.validate()?;
        let align = spec.effective_alignment();
        let (_, max_size) = spec.size_range();
        // Valid starting slots for the largest block: every request fits in the footprint.
        let slots = (spec.footprint - max_size) / align + 1;
        let mut key_state = spec.seed ^ 0x05CA_77E1_20FB_10C5;
        let read_key = splitmix64(&mut key_state);
        let write_key = splitmix64(&mut key_state);
        let reads = Sampler::compile(
            spec,
            "distribution",
            &spec.distribution,
            align,
            max_size,
            slots,
            read_key,
        )?;
        let writes = match &spec.write_distribution {
            Some(d) => Some(Sampler::compile(
                spec,
                "write_distribution",
                d,
                align,
                max_size,
                slots,
                write_key,
            )?),
            None => None,
        };
        let sizes: Vec<u64> = spec.block_sizes.iter().map(|b| b.size).collect();
        let steps = sizes.iter().map(|s| s.div_ceil(align)).collect();
        let size_cumulative = if sizes.len() > 1 {
            cumulative(spec.block_sizes.iter().map(|b| b.weight))
        } else {
            Vec::new()
        };
        let ops = if spec.read_fraction >= 1.0 {
            OpMix::AllReads
        } else if spec.read_fraction <= 0.0 && spec.trim_fraction <= 0.0 {
            OpMix::AllWrites
        } else {
            OpMix::Mixed(spec.read_fraction, spec.read_fraction + spec.trim_fraction)
        };
        let volume_cumulative = match &spec.volume_weights {
            Some(w) if w.len() > 1 => cumulative(w.iter().copied()),
            _ => Vec::new(),
        };

        let base = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
        let mut arrival_rng = base.clone();
        arrival_rng.long_jump();
        let jobs_n = spec.jobs;
        let mut rng = base;
        let mut jobs = Vec::with_capacity(jobs_n as usize);
        let open_loop = spec.is_open_loop();
        for j in 0..jobs_n {
            let remaining = match spec.requests {
                // Open loop: the arrival process holds the limit.
                Some(_) if open_loop => u64::MAX,
                Some(r) => r / jobs_n as u64 + u64::from((j as u64) < r % jobs_n as u64),
                None => u64::MAX,
            };
            let read_cursor = reads.start_cursor(j, jobs_n);
            let write_cursor = writes
                .as_ref()
                .map_or(read_cursor, |w| w.start_cursor(j, jobs_n));
            jobs.push(Job {
                rng: rng.clone(),
                remaining,
                cursors: [read_cursor, write_cursor],
                volume: j % spec.volumes,
                writes_since_flush: 0,
                flush_due: None,
            });
            rng.jump();
        }
        let open = spec.rate_iops.map(|rate| {
            let gap_ns = 1e9 / rate;
            let mut o = OpenLoop {
                rng: arrival_rng,
                process: spec.arrival,
                gap_ns,
                count: 0,
                next_active_ns: 0.0,
                remaining: spec.requests.unwrap_or(u64::MAX),
                done: false,
            };
            o.next_active_ns = o.gap_after(0.0);
            o
        });
        Ok(SyntheticWorkload {
            spec: spec.clone(),
            align,
            slots,
            sizes,
            steps,
            size_cumulative,
            ops,
            volume_cumulative,
            reads,
            writes,
            jobs,
            open,
            bursts: spec.bursts,
            duration_ns: spec.duration_ns,
            iodepth: spec.iodepth.unwrap_or(1),
            flush_every: spec.flush_every,
        })
    }

    /// The spec this generator was built from.
    pub fn spec(&self) -> &WorkloadSpec {
        &self.spec
    }

    /// Alignment of every offset, bytes.
    pub fn alignment(&self) -> u64 {
        self.align
    }

    /// Number of addressable slots: request offsets are `slot · alignment` for slot in
    /// `0..slots()`.
    pub fn slots(&self) -> u64 {
        self.slots
    }

    /// Closed loop: the next request of `job` knowing the executor's clock `now_ns` (the time the
    /// slot became free). Its `time_ns` is `now_ns`, or the start of the next on period if
    /// `now_ns` falls in an off period; `None` once the job has issued its share of `requests`
    /// or that issue time reaches `duration_ns`. Prefer this over
    /// [`RequestSource::next_request`] whenever the executor knows the time: only this honours
    /// bursts and the duration limit in a closed loop. Open loop: same as `next_request`.
    pub fn next_request_at(&mut self, job: u32, now_ns: Nanos) -> Option<Request> {
        if self.open.is_some() {
            return self.next_open(job);
        }
        let t = match self.bursts {
            Some(b) => next_on(b, now_ns),
            None => now_ns,
        };
        if self.duration_ns.is_some_and(|d| t >= d) {
            if let Some(j) = self.jobs.get_mut(job as usize) {
                j.remaining = 0;
            }
            return None;
        }
        self.next_closed(job, t)
    }

    /// Requests still to come if the count is bounded by `requests` (`None` when unbounded).
    /// With `duration_ns` as well this is an upper bound: the time limit may end jobs earlier.
    pub fn remaining(&self) -> Option<u64> {
        match &self.open {
            Some(o) if o.done => Some(0),
            Some(o) => (o.remaining != u64::MAX).then_some(o.remaining),
            None => self.jobs.iter().try_fold(0u64, |acc, j| {
                (j.remaining != u64::MAX).then(|| acc.saturating_add(j.remaining))
            }),
        }
    }

    /// A single interleaved stream of requests (for hit-ratio-only runs): closed loop, jobs in
    /// round-robin order (one request each in turn, skipping finished jobs); open loop, the
    /// arrival stream in time order.
    pub fn into_stream(self) -> WorkloadStream {
        WorkloadStream {
            workload: self,
            next_job: 0,
        }
    }

    fn next_closed(&mut self, job: u32, time_ns: Nanos) -> Option<Request> {
        let j = self.jobs.get_mut(job as usize)?;
        if j.remaining == 0 {
            return None;
        }
        if j.remaining != u64::MAX {
            j.remaining -= 1;
        }
        Some(self.generate(job as usize, time_ns))
    }

    fn next_open(&mut self, job: u32) -> Option<Request> {
        let jobs = self.jobs.len() as u64;
        let o = self.open.as_mut()?;
        if job != 0 || o.done || o.remaining == 0 {
            return None;
        }
        let active = o.next_active_ns as u64;
        let t = match self.bursts {
            // Arrivals happen in on-time only: map on-time to wall time.
            Some(b) => {
                let cycles = (active / b.on_ns) as u128;
                let wall = cycles * (b.on_ns + b.off_ns) as u128 + (active % b.on_ns) as u128;
                // Saturate: an absurdly low rate must end the stream, not wrap time around.
                wall.min(u64::MAX as u128) as u64
            }
            None => active,
        };
        if self.duration_ns.is_some_and(|d| t >= d) {
            o.done = true;
            return None;
        }
        let which = (o.count % jobs) as usize;
        o.count += 1;
        if o.remaining != u64::MAX {
            o.remaining -= 1;
        }
        o.next_active_ns = o.gap_after(o.next_active_ns);
        Some(self.generate(which, t))
    }

    /// Draws op, size, volume and address from job `j`'s stream, in that fixed order.
    #[inline]
    fn generate(&mut self, j: usize, time_ns: Nanos) -> Request {
        let job = &mut self.jobs[j];
        if let Some(volume) = job.flush_due.take() {
            return Request {
                time_ns,
                volume: VolumeId(volume),
                op: Op::Flush,
                offset: 0,
                len: 0,
            };
        }
        let op = match self.ops {
            OpMix::AllReads => Op::Read,
            OpMix::AllWrites => Op::Write,
            OpMix::Mixed(read, trim) => {
                let u = unit_f64(&mut job.rng);
                if u < read {
                    Op::Read
                } else if u < trim {
                    Op::Trim
                } else {
                    Op::Write
                }
            }
        };
        let size_index = if self.size_cumulative.is_empty() {
            0
        } else {
            pick(&self.size_cumulative, unit_f64(&mut job.rng))
        };
        let volume = if self.volume_cumulative.is_empty() {
            job.volume
        } else {
            pick(&self.volume_cumulative, unit_f64(&mut job.rng)) as u32
        };
        let (sampler, cursor) = match (&self.writes, op) {
            (Some(w), Op::Write | Op::Trim) => (w, &mut job.cursors[1]),
            _ => (&self.reads, &mut job.cursors[0]),
        };
        let slot = sampler.sample(&mut job.rng, cursor, self.steps[size_index]);
        if op == Op::Write {
            if let Some(every) = self.flush_every {
                job.writes_since_flush += 1;
                if job.writes_since_flush == every {
                    job.writes_since_flush = 0;
                    job.flush_due = Some(volume);
                }
            }
        }
        Request {
            time_ns,
            volume: VolumeId(volume),
            op,
            offset: slot * self.align,
            len: self.sizes[size_index],
        }
    }
}

/// `t` if it is in an on period, else the start of the next on period.
#[inline]
fn next_on(b: Bursts, t: Nanos) -> Nanos {
    let period = b.on_ns + b.off_ns;
    let phase = t % period;
    if phase < b.on_ns {
        t
    } else {
        (t - phase).saturating_add(period)
    }
}

impl OpenLoop {
    /// Active time of the arrival after one at `t` (the first arrival is `gap_after(0)`).
    fn gap_after(&mut self, t: f64) -> f64 {
        match self.process {
            // Exponential gaps by rand_distr's ziggurat (cheaper than a logarithm).
            ArrivalProcess::Poisson => {
                let e: f64 = Exp1.sample(&mut self.rng);
                t + e * self.gap_ns
            }
            // Multiply rather than accumulate so rounding does not drift over long runs; the
            // first arrival is at time 0.
            ArrivalProcess::Uniform => self.count as f64 * self.gap_ns,
        }
    }
}

impl RequestSource for SyntheticWorkload {
    fn arrival(&self) -> Arrival {
        if self.open.is_some() {
            Arrival::Open
        } else {
            Arrival::Closed {
                jobs: self.jobs.len() as u32,
                iodepth: self.iodepth,
            }
        }
    }

    /// Closed loop without a clock: requests carry `time_ns = 0` (issue as soon as a slot is
    /// free). Open loop: `job` must be 0; arrivals in non-decreasing `time_ns`.
    fn next_request(&mut self, job: u32) -> Option<Request> {
        if self.open.is_some() {
            self.next_open(job)
        } else {
            self.next_closed(job, 0)
        }
    }

    /// Closed loop with the executor's clock: bursts push issue times to the next on period and
    /// `duration_ns` ends the job.
    fn next_request_at(&mut self, job: u32, now_ns: Nanos) -> Option<Request> {
        SyntheticWorkload::next_request_at(self, job, now_ns)
    }

    /// Closed loop without bursts or a duration: each job draws from its own generator, and
    /// the clock only sets `time_ns`.
    fn streams_independent(&self) -> bool {
        self.open.is_none() && self.bursts.is_none() && self.duration_ns.is_none()
    }
}

/// Iterator over a [`SyntheticWorkload`] as one interleaved stream (see
/// [`SyntheticWorkload::into_stream`]).
#[derive(Debug, Clone)]
pub struct WorkloadStream {
    workload: SyntheticWorkload,
    next_job: u32,
}

impl WorkloadStream {
    /// The underlying workload.
    pub fn workload(&self) -> &SyntheticWorkload {
        &self.workload
    }
}

impl Iterator for WorkloadStream {
    type Item = Request;

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self.workload.remaining() {
            Some(n) => {
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                // A time limit can end the stream before the count does.
                let exact = self.workload.duration_ns.is_none();
                (if exact { n } else { 0 }, Some(n))
            }
            None => (0, None),
        }
    }

    #[inline]
    fn next(&mut self) -> Option<Request> {
        if self.workload.open.is_some() {
            return self.workload.next_open(0);
        }
        let jobs = self.workload.jobs.len() as u32;
        // At most one full turn: if every job is finished, so is the stream.
        for _ in 0..jobs {
            let j = self.next_job;
            self.next_job = if j + 1 == jobs { 0 } else { j + 1 };
            if let Some(r) = self.workload.next_closed(j, 0) {
                return Some(r);
            }
        }
        None
    }
}

/// Validates `spec` and returns its single interleaved request stream.
pub fn stream(spec: &WorkloadSpec) -> Result<WorkloadStream, WorkloadError> {
    Ok(SyntheticWorkload::new(spec)?.into_stream())
}
