//! A tiny seeded workload for tests, examples and benchmarks of the simulator. Real workloads
//! (block-size mixes, zipf, zones, bursts) live in `tiercache-workload`.

use tiercache_core::{Arrival, Nanos, Op, Request, RequestSource, VolumeId};

/// Uniform random (or hot-set skewed) fixed-size requests, closed or open loop.
#[derive(Debug, Clone)]
pub struct UniformSource {
    /// Arrival model.
    pub arrival: Arrival,
    /// Requests per job (closed) or in total (open).
    pub per_job: u64,
    /// Bytes addressed: requests fall in `0..span`.
    pub span: u64,
    /// Request size (and alignment).
    pub block: u64,
    /// Fraction of reads (the rest are writes).
    pub read_fraction: f64,
    /// Fraction of requests going to the first `hot_span` bytes.
    pub hot_fraction: f64,
    /// Size of the hot region.
    pub hot_span: u64,
    /// Open loop: mean gap between arrivals (exponential); closed loop: 0 (as fast as possible).
    pub mean_gap_ns: Nanos,
    /// Volumes the requests are spread over (round-robin by request).
    pub volumes: u32,
    issued: Vec<u64>,
    /// One xorshift state per job: each job's requests are its own stream, whatever order
    /// the executor asks for them in (see [`RequestSource::streams_independent`]).
    state: Vec<u64>,
    clock: Nanos,
}

impl UniformSource {
    /// A closed-loop source of `per_job` requests for each of `jobs` submitters.
    pub fn closed(
        seed: u64,
        jobs: u32,
        iodepth: u32,
        per_job: u64,
        span: u64,
        block: u64,
        read_fraction: f64,
    ) -> Self {
        Self {
            arrival: Arrival::Closed { jobs, iodepth },
            per_job,
            span,
            block,
            read_fraction,
            hot_fraction: 0.0,
            hot_span: 0,
            mean_gap_ns: 0,
            volumes: 1,
            issued: vec![0; jobs as usize],
            state: (0..u64::from(jobs.max(1)))
                .map(|job| job_state(seed, job))
                .collect(),
            clock: 0,
        }
    }

    /// An open-loop source of `total` requests with exponential gaps of mean `mean_gap_ns`.
    pub fn open(
        seed: u64,
        total: u64,
        mean_gap_ns: Nanos,
        span: u64,
        block: u64,
        read_fraction: f64,
    ) -> Self {
        Self {
            arrival: Arrival::Open,
            mean_gap_ns,
            ..Self::closed(seed, 1, 1, total, span, block, read_fraction)
        }
    }

    /// Sends `fraction` of the requests to the first `span` bytes.
    pub fn with_hot_set(mut self, fraction: f64, span: u64) -> Self {
        self.hot_fraction = fraction;
        self.hot_span = span;
        self
    }

    /// Spreads requests over `n` volumes.
    pub fn with_volumes(mut self, n: u32) -> Self {
        self.volumes = n.max(1);
        self
    }

    fn next_u64(&mut self, job: usize) -> u64 {
        // xorshift64*: tiny, seeded, deterministic.
        let mut x = self.state[job];
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state[job] = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn unit(&mut self, job: usize) -> f64 {
        (self.next_u64(job) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The seed of `job`'s stream: job 0 keeps the single-stream seed (so open-loop streams are
/// those of earlier versions); the others are split off with SplitMix64, fed
/// `seed ^ job·φ` (its step adds φ first).
fn job_state(seed: u64, job: u64) -> u64 {
    const PHI: u64 = 0x9E37_79B9_7F4A_7C15;
    if job == 0 {
        return seed.wrapping_mul(PHI) | 1;
    }
    let mut state = (seed ^ job.wrapping_mul(PHI)).wrapping_sub(PHI);
    tiercache_core::splitmix::splitmix64(&mut state) | 1
}

impl RequestSource for UniformSource {
    fn arrival(&self) -> Arrival {
        self.arrival
    }

    /// Closed loop: each job has its own stream and the clock is not read.
    fn streams_independent(&self) -> bool {
        matches!(self.arrival, Arrival::Closed { .. })
    }

    fn next_request(&mut self, job: u32) -> Option<Request> {
        let n = self.issued.get_mut(job as usize)?;
        if *n >= self.per_job {
            return None;
        }
        *n += 1;
        let seq = *n;
        let j = job as usize;
        let span = if self.hot_span > 0 && self.unit(j) < self.hot_fraction {
            self.hot_span
        } else {
            self.span
        };
        let blocks = (span / self.block).max(1);
        let offset = (self.next_u64(j) % blocks) * self.block;
        let op = if self.unit(j) < self.read_fraction {
            Op::Read
        } else {
            Op::Write
        };
        if self.mean_gap_ns > 0 {
            let u = self.unit(j).max(1e-12);
            self.clock += (-u.ln() * self.mean_gap_ns as f64) as Nanos;
        }
        let volume = VolumeId((seq % self.volumes as u64) as u32);
        Some(Request {
            time_ns: self.clock,
            volume,
            op,
            offset,
            len: self.block,
        })
    }
}
