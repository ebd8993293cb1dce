//! Behaviour of the policy core on hand-built cases: what each write mode does, partial hits,
//! line-size effects on promotion, the full-of-dirty answers, trims, partitions, cleaning.

mod common;

use tiercache_core::{Device, IoKind, OpCause, Plan, Request, VolumeId};
use tiercache_policy::{
    BypassReason, Cache, CacheConfig, CleaningConfig, DirtyFullPolicy, EvictionKind, ExecutorState,
    PartitionConfig, PromotionConfig, WritePolicy,
};

fn cfg(lines: u64, line: u64, mode: WritePolicy) -> CacheConfig {
    CacheConfig {
        capacity: lines * line,
        line_size: line,
        eviction: EvictionKind::Lru,
        promotion: PromotionConfig::Always,
        write_policy: mode,
        cleaning: CleaningConfig::None,
        dirty_full: DirtyFullPolicy::EvictThenWrite,
        partitions: Vec::new(),
        shards: 1,
        ..CacheConfig::default()
    }
}

fn run(cache: &mut Cache, req: Request) -> Plan {
    let mut plan = Plan::new();
    cache.access(&req, Some(&mut plan)).unwrap();
    cache.audit();
    plan
}

fn bytes(plan: &Plan, dev: Device, kind: IoKind) -> u64 {
    plan.bytes(|o| o.device == dev && o.kind == kind)
}

#[test]
fn write_back_absorbs_writes_and_flushes_on_eviction() {
    let mut c = Cache::new(&cfg(2, 4096, WritePolicy::WriteBack)).unwrap();
    let p = run(&mut c, Request::write(0, 4096));
    assert_eq!(bytes(&p, Device::Cache, IoKind::Write), 4096);
    assert_eq!(bytes(&p, Device::Backend, IoKind::Write), 0);
    assert_eq!(c.dirty_lines(), 1);
    run(&mut c, Request::write(4096, 4096));
    // Third line evicts the dirty LRU line 0: read from cache, write to backend, then write.
    let p = run(&mut c, Request::write(8192, 4096));
    let evict: Vec<_> = p
        .ops
        .iter()
        .filter(|o| o.cause == OpCause::EvictFlush)
        .collect();
    assert_eq!(evict.len(), 2);
    assert_eq!(
        (evict[0].device, evict[0].kind, evict[0].stage),
        (Device::Cache, IoKind::Read, 0)
    );
    assert_eq!(
        (evict[1].device, evict[1].kind, evict[1].offset),
        (Device::Backend, IoKind::Write, 0)
    );
    let w = p.ops.iter().find(|o| o.cause == OpCause::Write).unwrap();
    assert!(
        w.stage > evict[1].stage,
        "the write waits for the victim's write-back"
    );
    assert!(evict.iter().all(|o| o.critical));
    assert_eq!(c.stats().dirty_evictions, 1);
    assert_eq!(c.stats().written_back_bytes, 4096);
}

#[test]
fn write_through_writes_both_and_stays_clean() {
    let mut c = Cache::new(&cfg(4, 4096, WritePolicy::WriteThrough)).unwrap();
    let p = run(&mut c, Request::write(0, 8192));
    assert_eq!(bytes(&p, Device::Cache, IoKind::Write), 8192);
    assert_eq!(bytes(&p, Device::Backend, IoKind::Write), 8192);
    assert_eq!(c.dirty_lines(), 0);
    assert_eq!(c.resident_lines(), 2);
    let p = run(&mut c, Request::read(0, 8192));
    assert_eq!(bytes(&p, Device::Cache, IoKind::Read), 8192);
    assert_eq!(bytes(&p, Device::Backend, IoKind::Read), 0);
}

#[test]
fn write_around_does_not_allocate_on_write_miss() {
    let mut c = Cache::new(&cfg(4, 4096, WritePolicy::WriteAround)).unwrap();
    let p = run(&mut c, Request::write(0, 4096));
    assert_eq!(bytes(&p, Device::Cache, IoKind::Write), 0);
    assert_eq!(c.resident_lines(), 0);
    assert_eq!(c.stats().bypasses_for(BypassReason::Mode), 1);
    run(&mut c, Request::read(0, 4096));
    let p = run(&mut c, Request::write(0, 4096));
    assert_eq!(
        bytes(&p, Device::Cache, IoKind::Write),
        4096,
        "write hit updates the cache"
    );
    assert_eq!(bytes(&p, Device::Backend, IoKind::Write), 4096);
}

#[test]
fn write_only_does_not_promote_reads() {
    let mut c = Cache::new(&cfg(4, 4096, WritePolicy::WriteOnly)).unwrap();
    let p = run(&mut c, Request::read(0, 4096));
    assert_eq!(bytes(&p, Device::Cache, IoKind::Write), 0);
    assert_eq!(c.resident_lines(), 0);
    run(&mut c, Request::write(0, 4096));
    assert_eq!(c.dirty_lines(), 1);
    let p = run(&mut c, Request::read(0, 4096));
    assert_eq!(bytes(&p, Device::Cache, IoKind::Read), 4096);
}

#[test]
fn read_only_invalidates_on_write() {
    let mut c = Cache::new(&cfg(4, 4096, WritePolicy::ReadOnly)).unwrap();
    run(&mut c, Request::read(0, 4096));
    assert_eq!(c.resident_lines(), 1);
    let p = run(&mut c, Request::write(0, 4096));
    assert_eq!(bytes(&p, Device::Backend, IoKind::Write), 4096);
    assert_eq!(bytes(&p, Device::Cache, IoKind::Write), 0);
    assert_eq!(c.resident_lines(), 0, "stale copy invalidated");
    assert_eq!(c.stats().invalidations, 1);
}

#[test]
fn pass_through_serves_everything_from_the_backend() {
    let mut c = Cache::new(&cfg(4, 4096, WritePolicy::WriteBack)).unwrap();
    run(&mut c, Request::read(0, 4096));
    c.set_write_policy(None, WritePolicy::PassThrough);
    let p = run(&mut c, Request::read(0, 4096));
    assert_eq!(bytes(&p, Device::Backend, IoKind::Read), 4096);
    assert_eq!(bytes(&p, Device::Cache, IoKind::Read), 0);
    let p = run(&mut c, Request::read(8192, 4096));
    assert_eq!(
        bytes(&p, Device::Cache, IoKind::Write),
        0,
        "no promotion in PT"
    );
}

#[test]
fn dirty_data_is_read_from_the_cache_even_in_pass_through() {
    let mut c = Cache::new(&cfg(4, 4096, WritePolicy::WriteBack)).unwrap();
    run(&mut c, Request::write(0, 4096));
    c.set_write_policy(None, WritePolicy::PassThrough);
    let p = run(&mut c, Request::read(0, 4096));
    assert_eq!(
        bytes(&p, Device::Cache, IoKind::Read),
        4096,
        "only the cache has the data"
    );
}

#[test]
fn larger_lines_make_promotion_fetch_more() {
    for line in [4096u64, 32768] {
        let mut c = Cache::new(&cfg(8, line, WritePolicy::WriteBack)).unwrap();
        let p = run(&mut c, Request::read(0, 4096));
        assert_eq!(bytes(&p, Device::Backend, IoKind::Read), line);
        let promo = p
            .ops
            .iter()
            .find(|o| o.cause == OpCause::Promotion)
            .unwrap();
        assert_eq!(promo.len, line);
        assert!(
            !promo.critical,
            "promotion write happens after the data is returned"
        );
        // The rest of the line is now a hit.
        let out = c.access(&Request::read(line - 4096, 4096), None).unwrap();
        assert_eq!(out.line_hits, 1);
    }
}

#[test]
fn partial_hits_read_valid_parts_from_cache_and_fill_the_rest() {
    let mut c = Cache::new(&cfg(4, 4096, WritePolicy::WriteBack)).unwrap();
    run(&mut c, Request::write(0, 1024)); // sub-blocks 0-1 valid and dirty
    let mut plan = Plan::new();
    let out = c.access(&Request::read(0, 4096), Some(&mut plan)).unwrap();
    assert_eq!(out.line_partial_hits, 1);
    assert_eq!(bytes(&plan, Device::Cache, IoKind::Read), 1024);
    assert_eq!(bytes(&plan, Device::Backend, IoKind::Read), 3072);
    assert_eq!(plan.bytes(|o| o.cause == OpCause::Promotion), 3072);
    let out = c.access(&Request::read(0, 4096), None).unwrap();
    assert_eq!(out.line_hits, 1);
}

#[test]
fn unaligned_dirty_write_fills_its_edge_sub_blocks() {
    let mut c = Cache::new(&cfg(4, 4096, WritePolicy::WriteBack)).unwrap();
    let p = run(&mut c, Request::write(100, 1000)); // touches sub-blocks 0..=2, covers only 1
    let fills: Vec<_> = p
        .ops
        .iter()
        .filter(|o| o.cause == OpCause::Fill && o.device == Device::Backend)
        .collect();
    // Sub-blocks 0 and 2 are completed from the backend: bytes 0..100 and 1100..1536.
    assert_eq!(
        fills.iter().map(|o| (o.offset, o.len)).collect::<Vec<_>>(),
        vec![(0, 100), (1100, 436)]
    );
    let w = p.ops.iter().find(|o| o.cause == OpCause::Write).unwrap();
    assert!(w.stage > fills[0].stage);
}

#[test]
fn full_of_dirty_bypass_sends_writes_to_the_backend() {
    let mut base = cfg(2, 4096, WritePolicy::WriteBack);
    base.dirty_full = DirtyFullPolicy::Bypass;
    let mut c = Cache::new(&base).unwrap();
    run(&mut c, Request::write(0, 4096));
    run(&mut c, Request::write(4096, 4096));
    let p = run(&mut c, Request::write(8192, 4096));
    assert_eq!(bytes(&p, Device::Backend, IoKind::Write), 4096);
    assert_eq!(bytes(&p, Device::Cache, IoKind::Write), 0);
    assert_eq!(c.stats().bypasses_for(BypassReason::DirtyFull), 1);
    assert_eq!(c.stats().dirty_evictions, 0);
    // With a clean line available, the bypass policy evicts it instead of a dirty one.
    run(&mut c, Request::read(1 << 20, 4096)); // bypassed too: still full of dirty
    assert_eq!(c.stats().bypasses_for(BypassReason::DirtyFull), 2);
}

#[test]
fn nhit_promotes_on_the_nth_miss() {
    let mut base = cfg(8, 4096, WritePolicy::WriteBack);
    base.promotion = PromotionConfig::Nhit {
        n: 3,
        table_ratio: 1.0,
        occupancy_threshold: 0.0,
    };
    let mut c = Cache::new(&base).unwrap();
    for i in 0..2 {
        let p = run(&mut c, Request::read(0, 4096));
        assert_eq!(bytes(&p, Device::Cache, IoKind::Write), 0, "access {i}");
    }
    let p = run(&mut c, Request::read(0, 4096));
    assert_eq!(bytes(&p, Device::Cache, IoKind::Write), 4096);
    assert_eq!(c.stats().bypasses_for(BypassReason::NotHotYet), 2);
}

#[test]
fn trim_drops_dirty_data_without_writing_it_back() {
    let mut c = Cache::new(&cfg(4, 4096, WritePolicy::WriteBack)).unwrap();
    run(&mut c, Request::write(0, 8192));
    let p = run(&mut c, Request::trim(0, 4096));
    assert_eq!(p.ops.len(), 1);
    assert_eq!(p.ops[0].kind, IoKind::Trim);
    assert_eq!(c.resident_lines(), 1);
    assert_eq!(c.dirty_lines(), 1);
    assert_eq!(c.stats().trimmed_dirty_bytes, 4096);
    let mut jobs = Vec::new();
    c.flush_all(&mut jobs);
    assert_eq!(
        jobs.iter()
            .map(|j| j.plan.bytes(|o| o.device == Device::Backend))
            .sum::<u64>(),
        4096
    );
}

#[test]
fn partitions_isolate_volumes() {
    let mut base = cfg(4, 4096, WritePolicy::WriteBack);
    base.partitions = vec![PartitionConfig {
        volume: 1,
        bytes: 4096,
    }];
    let mut c = Cache::new(&base).unwrap();
    for i in 0..10 {
        c.access(&Request::read(i * 4096, 4096).on_volume(VolumeId(1)), None)
            .unwrap();
    }
    for i in 0..3 {
        c.access(&Request::read(i * 4096, 4096), None).unwrap();
    }
    c.audit();
    assert_eq!(
        c.resident_lines(),
        4,
        "volume 1 holds 1 line, volume 0 the other 3"
    );
    let out = c.access(&Request::read(0, 4096), None).unwrap();
    assert_eq!(
        out.line_hits, 1,
        "volume 0 was not disturbed by volume 1's scan"
    );
}

#[test]
fn cleaning_writes_back_oldest_dirty_first_and_pins() {
    let mut base = cfg(4, 4096, WritePolicy::WriteBack);
    base.cleaning = CleaningConfig::Lazy {
        idle_ns: 1000,
        batch: 2,
    };
    let mut c = Cache::new(&base).unwrap();
    for i in [3u64, 1, 2] {
        run(&mut c, Request::write(i * 4096, 4096));
    }
    let mut jobs = Vec::new();
    let busy = ExecutorState {
        now: 10,
        cache_idle_ns: 10,
        ..ExecutorState::default()
    };
    c.clean(&busy, &mut jobs);
    assert!(jobs.is_empty(), "not idle long enough");
    assert_eq!(c.next_clean_poll(&busy), Some(1000));
    let idle = ExecutorState {
        now: 2000,
        cache_idle_ns: 2000,
        ..ExecutorState::default()
    };
    c.clean(&idle, &mut jobs);
    assert_eq!(jobs.len(), 1);
    let offs: Vec<u64> = jobs[0]
        .plan
        .ops
        .iter()
        .filter(|o| o.device == Device::Backend)
        .map(|o| o.offset)
        .collect();
    assert_eq!(offs, vec![3 * 4096, 4096], "least recently written first");
    assert_eq!(c.dirty_lines(), 1);
    c.clean(&idle, &mut jobs);
    assert_eq!(jobs.len(), 1, "lazy cleaning keeps one job in flight");
    c.flush_done(jobs.pop().unwrap());
    c.clean(&idle, &mut jobs);
    assert_eq!(jobs.len(), 1);
    c.audit();
}

#[test]
fn bad_configs_name_the_field() {
    let mut b = cfg(4, 4096, WritePolicy::WriteBack);
    b.line_size = 3000;
    assert!(Cache::new(&b)
        .unwrap_err()
        .to_string()
        .contains("line_size"));
    let mut b = cfg(4, 4096, WritePolicy::WriteBack);
    b.capacity = 100;
    assert!(Cache::new(&b).unwrap_err().to_string().contains("capacity"));
    let mut b = cfg(4, 4096, WritePolicy::WriteBack);
    b.promotion = PromotionConfig::Nhit {
        n: 0,
        table_ratio: 1.0,
        occupancy_threshold: 0.0,
    };
    assert!(Cache::new(&b)
        .unwrap_err()
        .to_string()
        .contains("promotion.n"));
    let mut b = cfg(4, 4096, WritePolicy::WriteBack);
    b.partitions = vec![PartitionConfig {
        volume: 0,
        bytes: 1 << 20,
    }];
    assert!(Cache::new(&b)
        .unwrap_err()
        .to_string()
        .contains("partitions"));
    let mut b = cfg(4, 4096, WritePolicy::WriteBack);
    b.cleaning = CleaningConfig::Threshold {
        high: 0.2,
        low: 0.5,
        batch: 1,
    };
    assert!(Cache::new(&b).unwrap_err().to_string().contains("cleaning"));
}

#[test]
fn bad_requests_are_errors_not_panics() {
    let mut c = Cache::new(&cfg(4, 4096, WritePolicy::WriteBack)).unwrap();
    assert!(c.access(&Request::read(u64::MAX - 10, 100), None).is_err());
    assert!(c
        .access(&Request::read(0, 10).on_volume(VolumeId(1 << 20)), None)
        .is_err());
    assert_eq!(c.stats().requests, 0);
}

/// A failed plan asks to drop the clean copy of a line whose write-back is in flight: the
/// job's sub-blocks are the only copy of their data, so the drop waits for the job; if the
/// job fails the line is dirty again and still resident; once a job succeeds the drop happens.
#[test]
fn dropping_a_line_under_write_back_waits_for_its_job() {
    let mut c = Cache::new(&cfg(4, 4096, WritePolicy::WriteBack)).unwrap();
    run(&mut c, Request::write(4096, 4096));
    let mut jobs = Vec::new();
    c.flush_all(&mut jobs);
    assert_eq!(
        (jobs.len(), c.dirty_lines()),
        (1, 0),
        "marked clean while in flight"
    );
    assert!(c.drop_clean(VolumeId(0), 1));
    assert!(
        c.line_state(VolumeId(0), 1).is_some(),
        "kept while the job runs"
    );
    c.flush_failed(jobs.pop().unwrap());
    c.audit();
    assert_eq!(
        c.dirty_lines(),
        1,
        "the failed job's data is dirty again, not dropped"
    );
    assert!(c.line_state(VolumeId(0), 1).is_some());
    c.flush_all(&mut jobs);
    assert!(c.drop_clean(VolumeId(0), 1));
    c.flush_done(jobs.pop().unwrap());
    c.audit();
    assert!(
        c.line_state(VolumeId(0), 1).is_none(),
        "dropped once written back"
    );
    assert_eq!(c.dirty_lines(), 0);
}

/// A write-back cache of three 4 KiB lines whose lazy cleaner writes back `batch` lines as soon
/// as it is polled idle.
fn three_lines_lazily_cleaned(dirty_full: DirtyFullPolicy, batch: u32) -> Cache {
    let mut base = cfg(3, 4096, WritePolicy::WriteBack);
    base.dirty_full = dirty_full;
    base.cleaning = CleaningConfig::Lazy { idle_ns: 1, batch };
    Cache::new(&base).unwrap()
}

/// Under bypass a request goes around the cache only when no clean, unpinned line is left. A
/// line under write-back that is written again is both dirty and pinned: counted as either
/// alone, the last clean line here would look taken and the read would go around the cache.
#[test]
fn a_line_under_write_back_written_again_is_not_counted_twice_against_the_clean_lines() {
    let mut c = three_lines_lazily_cleaned(DirtyFullPolicy::Bypass, 1);
    let (a, b, cc, d) = (0u64, 4096, 8192, 12288);
    run(&mut c, Request::write(a, 4096));
    run(&mut c, Request::write(b, 4096));
    run(&mut c, Request::read(cc, 4096));
    let mut jobs = Vec::new();
    c.clean(&common::idle(), &mut jobs);
    assert_eq!(
        jobs.len(),
        1,
        "one write-back job, of A (least recently written)"
    );
    assert_eq!(jobs[0].slots().len(), 1);
    // A is under write-back (pinned) and written again (dirty): B and A dirty, C clean.
    run(&mut c, Request::write(a, 4096));
    assert_eq!(c.dirty_lines(), 2);
    run(&mut c, Request::read(d, 4096));
    assert_eq!(
        c.stats().bypasses_for(BypassReason::DirtyFull),
        0,
        "C was clean and unpinned: D takes its slot"
    );
    assert!(c.line_state(VolumeId(0), d / 4096).is_some(), "D cached");
    assert!(c.line_state(VolumeId(0), cc / 4096).is_none(), "C evicted");
    c.flush_done(jobs.pop().unwrap());
    c.audit();
    // With D written too, every line is dirty: a miss goes around the cache.
    run(&mut c, Request::write(d, 4096));
    run(&mut c, Request::read(cc, 4096));
    assert_eq!(
        c.stats().bypasses_for(BypassReason::DirtyFull),
        1,
        "every line dirty: the read goes around the cache"
    );
}

/// Under `dirty_full = "bypass"` dirty lines are held out of the replacement policy and a
/// line re-enters it where new lines go once written back (Open CAS's clean and dirty LRU
/// lists): here B, written first and cleaned last, outlives A and C, which were read after
/// B was written. Under `evict-then-write` the one LRU order evicts B, the least recent.
#[test]
fn a_line_written_back_reenters_lru_as_recent_under_bypass() {
    let victim = |dirty_full| {
        let mut c = three_lines_lazily_cleaned(dirty_full, 8);
        let (a, b, cc, d) = (0u64, 4096, 8192, 12288);
        run(&mut c, Request::write(b, 4096));
        run(&mut c, Request::read(a, 4096));
        run(&mut c, Request::read(cc, 4096));
        let mut jobs = Vec::new();
        c.clean(&common::idle(), &mut jobs);
        assert_eq!(jobs.len(), 1);
        c.flush_done(jobs.pop().unwrap());
        assert_eq!(c.dirty_lines(), 0);
        run(&mut c, Request::read(d, 4096));
        let gone: Vec<u64> = [a, b, cc]
            .into_iter()
            .filter(|&o| c.line_state(VolumeId(0), o / 4096).is_none())
            .collect();
        assert_eq!(gone.len(), 1);
        gone[0]
    };
    assert_eq!(
        victim(DirtyFullPolicy::Bypass),
        0,
        "A, the least recent clean line"
    );
    assert_eq!(
        victim(DirtyFullPolicy::EvictThenWrite),
        4096,
        "B, least recently used"
    );
}
