//! Property tests of the policy core against simple models.
//!
//! - conservation: line hits + partial hits + misses = line accesses; metadata audits hold after
//!   every step;
//! - dirty data: every sub-block written back was made dirty by the application (and not
//!   discarded by a trim since); after a final flush nothing dirty is left and every sub-block the
//!   application dirtied was written back or superseded;
//! - replacement: with aligned single-line requests, the core's hits equal a reference LRU's.

use proptest::prelude::*;
use std::collections::{HashSet, VecDeque};
use tiercache_core::{Device, IoKind, OpCause, Plan, Request, VolumeId};
use tiercache_policy::{
    Cache, CacheConfig, CleaningConfig, DirtyFullPolicy, EvictionKind, ExecutorState, FlushJob,
    PromotionConfig, WritePolicy,
};

const VOLUME_BYTES: u64 = 256 * 1024;

#[derive(Debug, Clone)]
enum Step {
    Req(Request),
    /// Poll the cleaner with an idle cache device.
    Clean,
    /// Complete the oldest flush job.
    Complete,
    /// Switch the write policy (as load balancing does).
    Mode(WritePolicy),
}

fn mode_strategy() -> impl Strategy<Value = WritePolicy> {
    prop_oneof![
        Just(WritePolicy::WriteBack),
        Just(WritePolicy::WriteThrough),
        Just(WritePolicy::WriteAround),
        Just(WritePolicy::WriteOnly),
        Just(WritePolicy::ReadOnly),
        Just(WritePolicy::PassThrough),
        Just(WritePolicy::WriteBackAround),
    ]
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let req = (0u32..2, 0u8..10, 0u64..VOLUME_BYTES / 512, 1u64..40).prop_map(
        |(vol, kind, sector, sectors)| {
            let op = match kind {
                0..=4 => tiercache_core::Op::Read,
                5..=8 => tiercache_core::Op::Write,
                _ => tiercache_core::Op::Trim,
            };
            // Mostly sector-aligned, sometimes byte-unaligned requests.
            let offset = sector * 512 + if sector % 7 == 3 { 100 } else { 0 };
            let len = sectors * 512 - if sectors % 5 == 2 { 37 } else { 0 };
            Request {
                time_ns: 0,
                volume: VolumeId(vol),
                op,
                offset,
                len,
            }
        },
    );
    prop_oneof![
        20 => req.prop_map(Step::Req),
        2 => Just(Step::Clean),
        2 => Just(Step::Complete),
        1 => mode_strategy().prop_map(Step::Mode),
    ]
}

fn config_strategy() -> impl Strategy<Value = CacheConfig> {
    (
        prop_oneof![Just(512u64), Just(4096), Just(16384), Just(65536)],
        2u64..24,
        prop_oneof![
            Just(EvictionKind::Lru),
            Just(EvictionKind::Mru),
            Just(EvictionKind::Fifo),
            Just(EvictionKind::Clock),
            Just(EvictionKind::Arc),
            Just(EvictionKind::S3Fifo),
            Just(EvictionKind::Sieve),
            // Policies researchers compare against (issue 35).
            Just(EvictionKind::Slru),
            Just(EvictionKind::TwoQ),
            Just(EvictionKind::Lfu),
            Just(EvictionKind::Lfuda),
            Just(EvictionKind::LruK),
            Just(EvictionKind::Lirs),
        ],
        prop_oneof![
            Just(PromotionConfig::Always),
            Just(PromotionConfig::Nhit {
                n: 2,
                table_ratio: 1.0,
                occupancy_threshold: 0.0
            }),
            Just(PromotionConfig::Smq { hotspot_lines: 4 }),
        ],
        mode_strategy(),
        prop_oneof![
            Just(DirtyFullPolicy::EvictThenWrite),
            Just(DirtyFullPolicy::Bypass)
        ],
        any::<bool>(),
    )
        .prop_map(
            |(line_size, lines, eviction, promotion, write_policy, dirty_full, partitioned)| {
                CacheConfig {
                    capacity: line_size * lines,
                    line_size,
                    eviction,
                    promotion,
                    write_policy,
                    cleaning: CleaningConfig::Lazy {
                        idle_ns: 0,
                        batch: 3,
                    },
                    dirty_full,
                    partitions: if partitioned {
                        vec![tiercache_policy::PartitionConfig {
                            volume: 1,
                            bytes: line_size * (lines / 2).max(1),
                        }]
                    } else {
                        Vec::new()
                    },
                    shards: 1,
                    ..CacheConfig::default()
                }
            },
        )
}

/// Sub-block identity: (volume, sub-block index in the volume).
type Sub = (u32, u64);

struct Shadow {
    sub: u64,
    /// Sub-blocks made dirty by the application and not discarded by a trim.
    ever_dirty: HashSet<Sub>,
    /// Sub-blocks whose newest data is only in the cache.
    pending: HashSet<Sub>,
}

impl Shadow {
    fn subs(&self, vol: u32, offset: u64, len: u64, whole_only: bool) -> impl Iterator<Item = Sub> {
        let sub = self.sub;
        let (first, end) = if whole_only {
            (offset.div_ceil(sub), (offset + len) / sub)
        } else {
            (offset / sub, (offset + len).div_ceil(sub))
        };
        (first..end.max(first)).map(move |i| (vol, i))
    }

    /// Applies the plan of one application request.
    fn request(&mut self, cache: &Cache, req: &Request, plan: &Plan) {
        let geo = cache.geometry();
        let through = |a: u64, b: u64| {
            plan.ops.iter().any(|o| {
                o.device == Device::Backend
                    && o.kind == IoKind::Write
                    && o.cause == OpCause::Write
                    && o.volume == req.volume
                    && o.offset <= a
                    && o.offset + o.len >= b
            })
        };
        for sl in geo.split(req.offset, req.len) {
            let base = geo.line_start(sl.index);
            let (a, b) = (base + sl.start, base + sl.end);
            match req.op {
                tiercache_core::Op::Write => {
                    if through(a, b) {
                        for s in self.subs(req.volume.0, a, b - a, true).collect::<Vec<_>>() {
                            self.pending.remove(&s);
                        }
                    } else {
                        // Not written through: the data must now be dirty in the cache.
                        let touched = geo.touched_mask(sl.start, sl.end);
                        let evicted_here = plan.ops.iter().any(|o| {
                            o.cause == OpCause::EvictFlush
                                && o.device == Device::Backend
                                && o.offset <= a
                                && o.offset + o.len >= b
                        });
                        let dirty_now = cache
                            .line_state(req.volume, sl.index)
                            .is_some_and(|st| st.dirty & touched == touched);
                        assert!(
                            dirty_now || evicted_here,
                            "write neither dirty in cache nor written anywhere: {req:?}"
                        );
                        for s in self.subs(req.volume.0, a, b - a, false).collect::<Vec<_>>() {
                            self.ever_dirty.insert(s);
                            self.pending.insert(s);
                        }
                    }
                }
                tiercache_core::Op::Trim => {
                    // Trim discards the whole sub-blocks it covers.
                    for s in self.subs(req.volume.0, a, b - a, true).collect::<Vec<_>>() {
                        self.pending.remove(&s);
                        self.ever_dirty.remove(&s);
                    }
                }
                _ => {}
            }
        }
        // Victims written back by this request (after its own writes: a request may evict a
        // line it dirtied itself).
        for o in &plan.ops {
            match (o.device, o.kind, o.cause) {
                (Device::Backend, IoKind::Write, OpCause::EvictFlush) => {
                    self.written_back(o.volume.0, o.offset, o.len)
                }
                (Device::Backend, IoKind::Write, OpCause::Write) => {}
                (Device::Backend, IoKind::Write, c) => {
                    panic!("unexpected backend write cause {c:?}")
                }
                _ => {}
            }
        }
    }

    fn written_back(&mut self, vol: u32, offset: u64, len: u64) {
        assert_eq!(offset % self.sub, 0, "write-back not sub-block aligned");
        assert_eq!(len % self.sub, 0, "write-back not whole sub-blocks");
        for s in self.subs(vol, offset, len, true).collect::<Vec<_>>() {
            assert!(
                self.ever_dirty.contains(&s),
                "wrote back sub-block {s:?} that was never dirty"
            );
            self.pending.remove(&s);
        }
    }

    fn job(&mut self, job: &FlushJob) {
        for o in &job.plan.ops {
            assert!(o.cause == OpCause::Clean);
            if o.device == Device::Backend {
                assert_eq!(o.kind, IoKind::Write);
                assert_eq!(o.stage, 1, "backend writes follow the cache reads");
                self.written_back(o.volume.0, o.offset, o.len);
            } else {
                assert_eq!((o.kind, o.stage), (IoKind::Read, 0));
            }
        }
    }
}

fn idle() -> ExecutorState {
    ExecutorState {
        now: 0,
        cache_idle_ns: u64::MAX / 2,
        ..ExecutorState::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn dirty_data_is_conserved(cfg in config_strategy(), steps in proptest::collection::vec(step_strategy(), 1..250)) {
        let mut cache = Cache::new(&cfg).unwrap();
        let mut shadow = Shadow { sub: cache.geometry().sub_size(), ever_dirty: HashSet::new(), pending: HashSet::new() };
        let mut plan = Plan::new();
        let mut jobs: VecDeque<FlushJob> = VecDeque::new();
        let mut new_jobs = Vec::new();
        for step in steps {
            match step {
                Step::Req(req) => {
                    let before = cache.stats().line_accesses;
                    let out = cache.access(&req, Some(&mut plan)).unwrap();
                    let lines = cache.stats().line_accesses - before;
                    prop_assert_eq!((out.line_hits + out.line_partial_hits + out.line_misses) as u64, lines);
                    // Stages never decrease and every request with data has a critical op.
                    prop_assert!(plan.ops.windows(2).all(|w| w[0].stage <= w[1].stage));
                    if req.op != tiercache_core::Op::Trim {
                        prop_assert!(plan.ops.iter().any(|o| o.critical));
                    }
                    // No two ops of one stage touch overlapping cache bytes when one writes:
                    // the executor runs a stage's ops concurrently.
                    let cache_ops: Vec<_> = plan.ops.iter().filter(|o| o.device == Device::Cache && o.len > 0).collect();
                    for (i, x) in cache_ops.iter().enumerate() {
                        for y in &cache_ops[i + 1..] {
                            let overlap = x.offset < y.offset + y.len && y.offset < x.offset + x.len;
                            let writes = x.kind == IoKind::Write || y.kind == IoKind::Write;
                            prop_assert!(!(overlap && writes && x.stage == y.stage), "hazard in {:?}", plan);
                        }
                    }
                    shadow.request(&cache, &req, &plan);
                }
                Step::Clean => {
                    cache.clean(&idle(), &mut new_jobs);
                    for j in new_jobs.drain(..) {
                        shadow.job(&j);
                        jobs.push_back(j);
                    }
                }
                Step::Complete => {
                    if let Some(j) = jobs.pop_front() {
                        cache.flush_done(j);
                    }
                }
                Step::Mode(m) => cache.set_write_policy(None, m),
            }
            cache.audit();
        }
        for j in jobs.drain(..) {
            cache.flush_done(j);
        }
        cache.flush_all(&mut new_jobs);
        for j in new_jobs.drain(..) {
            shadow.job(&j);
            cache.flush_done(j);
        }
        cache.audit();
        prop_assert_eq!(cache.dirty_lines(), 0);
        prop_assert!(shadow.pending.is_empty(), "dirty data never written back: {:?}", shadow.pending);
        let s = cache.stats();
        prop_assert_eq!(s.line_hits + s.line_partial_hits + s.line_misses, s.line_accesses);
        prop_assert!(s.evictions >= s.dirty_evictions);
    }

    /// Aligned single-line requests in write-back with always-promotion: the core's hit/miss
    /// sequence equals a reference LRU over line keys.
    #[test]
    fn lru_core_matches_reference(lines in 1usize..20, keys in proptest::collection::vec((0u64..40, any::<bool>()), 1..500)) {
        let cfg = CacheConfig {
            capacity: 4096 * lines as u64,
            line_size: 4096,
            eviction: EvictionKind::Lru,
            promotion: PromotionConfig::Always,
            write_policy: WritePolicy::WriteBack,
            cleaning: CleaningConfig::None,
            dirty_full: DirtyFullPolicy::EvictThenWrite,
            partitions: Vec::new(),
            shards: 1,
            ..CacheConfig::default()
        };
        let mut cache = Cache::new(&cfg).unwrap();
        let mut model: VecDeque<u64> = VecDeque::new();
        for (k, write) in keys {
            let req = if write { Request::write(k * 4096, 4096) } else { Request::read(k * 4096, 4096) };
            let out = cache.access(&req, None).unwrap();
            let expect_hit = if let Some(pos) = model.iter().position(|&x| x == k) {
                model.remove(pos);
                true
            } else {
                if model.len() == lines {
                    model.pop_back();
                }
                false
            };
            model.push_front(k);
            prop_assert_eq!(out.line_hits == 1, expect_hit, "key {}", k);
        }
        cache.audit();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// Hit-ratio-only mode (no plan, with its fast path) and planned mode make the same
    /// decisions and keep the same counters on the same stream.
    #[test]
    fn planned_and_unplanned_runs_agree(cfg in config_strategy(), steps in proptest::collection::vec(step_strategy(), 1..200)) {
        let mut planned = Cache::new(&cfg).unwrap();
        let mut untimed = Cache::new(&cfg).unwrap();
        let mut plan = Plan::new();
        for step in steps {
            if let Step::Req(req) = step {
                let a = planned.access(&req, Some(&mut plan)).unwrap();
                let b = untimed.access(&req, None).unwrap();
                prop_assert_eq!(a, b);
            } else if let Step::Mode(m) = step {
                planned.set_write_policy(None, m);
                untimed.set_write_policy(None, m);
            }
        }
        prop_assert_eq!(planned.stats(), untimed.stats());
        untimed.audit();
    }
}

/// Requests reach a little past `VOLUME_BYTES`, and whole-line fetches past them.
const MODEL_BYTES: usize = VOLUME_BYTES as usize + 3 * 65536;

/// A serial executor that moves real bytes: the reference the real engine must equal. Every op
/// carries data routed by its volume address (`DevOp::vaddr`).
struct DataModel {
    line: u64,
    cache: Vec<u8>,
    backend: [Vec<u8>; 2],
    /// What the application may read back: `None` where a trim left it unspecified.
    truth: [Vec<Option<u8>>; 2],
    /// Slot table as persisted from `drain_meta_updates` (what a journal would hold).
    persisted: std::collections::BTreeMap<u32, tiercache_policy::MetaUpdate>,
}

impl DataModel {
    /// Executes `plan` (stages in order). `client` is the data of a write request. Returns the
    /// bytes a read request receives. Panics if a write op's data was not produced by an
    /// earlier stage of the same plan or by the client.
    fn run(&mut self, plan: &Plan, req: Option<(&Request, &[u8])>) -> Vec<Option<u8>> {
        // (volume, vaddr) -> (byte, stage it was read at)
        let mut scratch: std::collections::HashMap<(u32, u64), (u8, tiercache_core::Stage)> =
            Default::default();
        for o in &plan.ops {
            let vol = o.volume.0 as usize;
            match (o.device, o.kind) {
                (_, IoKind::Read) => {
                    for i in 0..o.len {
                        let b = match o.device {
                            Device::Cache => self.cache[(o.offset + i) as usize],
                            Device::Backend => self.backend[vol][(o.offset + i) as usize],
                        };
                        scratch.insert((o.volume.0, o.vaddr + i), (b, o.stage));
                    }
                }
                (_, IoKind::Write) => {
                    for i in 0..o.len {
                        let v = o.vaddr + i;
                        let from_client = req.and_then(|(r, data)| {
                            (r.op == tiercache_core::Op::Write
                                && r.volume == o.volume
                                && v >= r.offset
                                && v < r.offset + r.len)
                                .then(|| data[(v - r.offset) as usize])
                        });
                        let b = match from_client {
                            Some(b) => b,
                            None => {
                                let &(b, st) = scratch.get(&(o.volume.0, v)).unwrap_or_else(|| {
                                    panic!("no data for {o:?} at vaddr {v} in {plan:?}")
                                });
                                assert!(st < o.stage, "data of {o:?} read in the same stage");
                                b
                            }
                        };
                        match o.device {
                            Device::Cache => self.cache[(o.offset + i) as usize] = b,
                            Device::Backend => self.backend[vol][(o.offset + i) as usize] = b,
                        }
                    }
                }
                (Device::Backend, IoKind::Trim) => {
                    self.backend[vol][o.offset as usize..(o.offset + o.len) as usize].fill(0)
                }
                _ => {}
            }
        }
        match req {
            Some((r, _)) if r.op == tiercache_core::Op::Read => (r.offset..r.offset + r.len)
                .map(|v| scratch.get(&(r.volume.0, v)).map(|x| x.0))
                .collect(),
            _ => Vec::new(),
        }
    }

    fn persist(&mut self, cache: &mut Cache) {
        let mut ups = Vec::new();
        cache.drain_meta_updates(&mut ups);
        for u in ups {
            self.persisted.insert(u.slot, u);
        }
    }

    /// A crash: a new core rebuilt from the persisted slot table over the same device bytes.
    fn recover(&self, cfg: &CacheConfig, mode: WritePolicy) -> Cache {
        let mut cache = Cache::new(cfg).unwrap();
        cache.set_journal(true);
        cache.set_write_policy(None, mode);
        for u in self.persisted.values() {
            if let Some((vol, index)) = u.line {
                cache
                    .restore_line(u.slot, vol, index, u.valid, u.dirty)
                    .unwrap();
            }
        }
        cache.audit();
        cache
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    /// Plans executed serially on real bytes, routed by `vaddr`, give every read the newest
    /// data; after a final flush the backend alone holds it; a crash at any step, recovered from
    /// the journal updates, loses nothing.
    #[test]
    fn plans_move_the_right_bytes_and_recovery_keeps_them(
        cfg in config_strategy(),
        steps in proptest::collection::vec(step_strategy(), 1..200),
        crash_every in 5usize..60,
        seed in any::<u8>(),
    ) {
        let mut cache = Cache::new(&cfg).unwrap();
        cache.set_journal(true);
        let mut mode = cfg.write_policy;
        let line = cache.geometry().line_size();
        let mut m = DataModel {
            line,
            cache: vec![0; (cache.capacity_lines() * line) as usize],
            backend: [vec![0; MODEL_BYTES], vec![0; MODEL_BYTES]],
            truth: [vec![Some(0); MODEL_BYTES], vec![Some(0); MODEL_BYTES]],
            persisted: Default::default(),
        };
        let mut plan = Plan::new();
        let mut jobs: VecDeque<FlushJob> = VecDeque::new();
        let mut new_jobs = Vec::new();
        for (n, step) in steps.into_iter().enumerate() {
            match step {
                Step::Req(req) => {
                    let data: Vec<u8> = (0..req.len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(n as u8 ^ seed)).collect();
                    cache.access(&req, Some(&mut plan)).unwrap();
                    let got = m.run(&plan, Some((&req, &data)));
                    let vol = req.volume.0 as usize;
                    let range = req.offset as usize..(req.offset + req.len) as usize;
                    match req.op {
                        tiercache_core::Op::Read => {
                            for (i, (g, t)) in got.iter().zip(&m.truth[vol][range]).enumerate() {
                                prop_assert!(g.is_some(), "read byte {} of {:?} not produced by {:?}", i, req, plan);
                                if let Some(t) = t {
                                    prop_assert_eq!(g.unwrap(), *t, "byte {} of {:?}", i, req);
                                }
                            }
                        }
                        tiercache_core::Op::Write => {
                            for (t, d) in m.truth[vol][range].iter_mut().zip(&data) {
                                *t = Some(*d);
                            }
                        }
                        tiercache_core::Op::Trim => m.truth[vol][range].fill(None),
                        tiercache_core::Op::Flush => {}
                    }
                }
                Step::Clean => {
                    cache.clean(&idle(), &mut new_jobs);
                    for j in new_jobs.drain(..) {
                        m.run(&j.plan, None);
                        jobs.push_back(j);
                    }
                }
                Step::Complete => {
                    if let Some(j) = jobs.pop_front() {
                        cache.flush_done(j);
                    }
                }
                Step::Mode(w) => {
                    mode = w;
                    cache.set_write_policy(None, w);
                }
            }
            m.persist(&mut cache);
            if n % crash_every == crash_every - 1 {
                // Jobs in flight die with the process; their data already reached the backend.
                jobs.clear();
                cache = m.recover(&cfg, mode);
            }
        }
        for j in jobs.drain(..) {
            cache.flush_done(j);
        }
        cache.flush_all(&mut new_jobs);
        for j in new_jobs.drain(..) {
            m.run(&j.plan, None);
            cache.flush_done(j);
        }
        prop_assert_eq!(cache.dirty_lines(), 0);
        for vol in 0..2 {
            for (i, t) in m.truth[vol].iter().enumerate() {
                if let Some(t) = t {
                    prop_assert_eq!(m.backend[vol][i], *t, "volume {} byte {} after the final flush", vol, i);
                }
            }
        }
        let _ = m.line;
    }
}
