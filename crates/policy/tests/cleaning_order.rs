//! The cleaning order (docs/design.md §4.6): which dirty lines a flush batch takes and the
//! order it writes them back in: least recently written (the old behaviour), the same batch in
//! ascending backend address, or bcache's address-order sweep.

mod common;

use proptest::prelude::*;
use std::collections::BTreeSet;
use tiercache_core::{Device, IoKind, Request};
use tiercache_policy::{
    Cache, CacheConfig, CleaningConfig, CleaningOrder, EvictionKind, FlushJob, WritePolicy,
};

const LINE: u64 = 4096;

fn cache(order: CleaningOrder, batch: u32, lines: u64) -> Cache {
    Cache::new(&CacheConfig {
        capacity: lines * LINE,
        line_size: LINE,
        eviction: EvictionKind::Lru,
        write_policy: WritePolicy::WriteBack,
        cleaning: CleaningConfig::Lazy { idle_ns: 0, batch },
        cleaning_order: order,
        ..CacheConfig::default()
    })
    .unwrap()
}

fn write(c: &mut Cache, line: u64) {
    c.access(&Request::write(line * LINE, LINE), None).unwrap();
}

/// The backend lines a job writes, in plan order (adjacent lines of a job merge into one
/// write; it counts for each of them).
fn backend_lines(job: &FlushJob) -> Vec<u64> {
    job.plan
        .ops
        .iter()
        .filter(|o| o.device == Device::Backend && o.kind == IoKind::Write)
        .flat_map(|o| o.offset / LINE..(o.offset + o.len) / LINE)
        .collect()
}

/// One cleaning job (the lazy cleaner on an idle cache), done at once.
fn clean_once(c: &mut Cache) -> Option<Vec<u64>> {
    let mut jobs = Vec::new();
    c.clean(&common::idle(), &mut jobs);
    assert!(jobs.len() <= 1);
    let job = jobs.pop()?;
    let lines = backend_lines(&job);
    c.flush_done(job);
    c.audit();
    Some(lines)
}

#[test]
fn written_order_is_least_recently_written_first() {
    let mut c = cache(CleaningOrder::Written, 3, 16);
    for l in [9, 3, 7, 1, 5] {
        write(&mut c, l);
    }
    assert_eq!(clean_once(&mut c), Some(vec![9, 3, 7]));
    assert_eq!(clean_once(&mut c), Some(vec![1, 5]));
    assert_eq!(clean_once(&mut c), None);
}

#[test]
fn address_order_sorts_the_same_batch_by_backend_address() {
    let mut c = cache(CleaningOrder::Address, 3, 16);
    for l in [9, 3, 7, 1, 5] {
        write(&mut c, l);
    }
    assert_eq!(clean_once(&mut c), Some(vec![3, 7, 9]));
    assert_eq!(clean_once(&mut c), Some(vec![1, 5]));
    assert_eq!(clean_once(&mut c), None);
}

#[test]
fn sweep_order_walks_addresses_from_a_cursor_and_wraps() {
    let mut c = cache(CleaningOrder::Sweep, 2, 16);
    for l in [9, 3, 7, 1, 5] {
        write(&mut c, l);
    }
    assert_eq!(clean_once(&mut c), Some(vec![1, 3]));
    // A line written behind the cursor waits for the sweep to wrap.
    write(&mut c, 2);
    assert_eq!(clean_once(&mut c), Some(vec![5, 7]));
    assert_eq!(clean_once(&mut c), Some(vec![9, 2]));
    assert_eq!(clean_once(&mut c), None);
}

#[test]
fn final_flush_under_an_address_order_is_ascending_across_jobs() {
    for order in [CleaningOrder::Address, CleaningOrder::Sweep] {
        let mut c = cache(order, 4, 512);
        // 300 lines written in a scrambled order: more than two 128-line jobs.
        let lines: Vec<u64> = (0..300u64).map(|i| (i * 7919) % 300).collect();
        for &l in &lines {
            write(&mut c, l);
        }
        let mut jobs = Vec::new();
        c.flush_all(&mut jobs);
        assert_eq!(jobs.len(), 3, "{order:?}");
        let all: Vec<u64> = jobs.iter().flat_map(backend_lines).collect();
        assert_eq!(all, (0..300).collect::<Vec<_>>(), "{order:?}");
        for j in jobs {
            c.flush_done(j);
        }
        assert_eq!(c.dirty_lines(), 0);
        c.audit();
    }
}

#[test]
fn the_order_parses_and_defaults_to_written() {
    let c: CacheConfig = serde_json::from_str(r#"{"cleaning_order": "sweep"}"#).unwrap();
    assert_eq!(c.cleaning_order, CleaningOrder::Sweep);
    let c: CacheConfig = serde_json::from_str("{}").unwrap();
    assert_eq!(c.cleaning_order, CleaningOrder::Written);
    let e = serde_json::from_str::<CacheConfig>(r#"{"cleaning_order": "elevator"}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("elevator") && e.contains("sweep"), "{e}");
}

/// Writes (lines) and cleaning polls interleaved, then a drain: the written-back lines.
fn drive(order: CleaningOrder, batch: u32, steps: &[(bool, u64)]) -> Vec<Vec<u64>> {
    let mut c = cache(order, batch, 64);
    let mut out = Vec::new();
    for &(clean, line) in steps {
        if clean {
            out.extend(clean_once(&mut c));
        } else {
            write(&mut c, line);
        }
    }
    while let Some(j) = clean_once(&mut c) {
        out.push(j);
    }
    assert_eq!(c.dirty_lines(), 0);
    out
}

proptest! {
    /// Every order writes each dirty line back exactly once per time it was made dirty
    /// (conservation against the written order's count), an address order's jobs are
    /// ascending, `address` takes the same lines per job as `written`, and every run is
    /// deterministic.
    #[test]
    fn orders_write_back_every_line_and_sort_their_batches(
        batch in 1u32..9,
        steps in proptest::collection::vec((proptest::bool::weighted(0.2), 0u64..40), 1..150),
    ) {
        let written = drive(CleaningOrder::Written, batch, &steps);
        let count = |jobs: &[Vec<u64>]| jobs.iter().map(Vec::len).sum::<usize>();
        for order in [CleaningOrder::Address, CleaningOrder::Sweep] {
            let jobs = drive(order, batch, &steps);
            prop_assert_eq!(&jobs, &drive(order, batch, &steps), "deterministic");
            for j in &jobs {
                prop_assert!(j.windows(2).all(|w| w[0] < w[1]) || order == CleaningOrder::Sweep,
                    "{:?} job not ascending: {:?}", order, j);
                prop_assert!(j.len() <= batch as usize);
                // A sweep job is ascending but for one wrap.
                let descents = j.windows(2).filter(|w| w[0] >= w[1]).count();
                prop_assert!(descents <= 1, "{:?}", j);
            }
            let lines = |js: &[Vec<u64>]| js.iter().flatten().copied().collect::<BTreeSet<u64>>();
            prop_assert_eq!(lines(&jobs), lines(&written));
            if order == CleaningOrder::Address {
                prop_assert_eq!(count(&jobs), count(&written));
                for (a, w) in jobs.iter().zip(&written) {
                    let (a, w): (BTreeSet<_>, BTreeSet<_>) =
                        (a.iter().collect(), w.iter().collect());
                    prop_assert_eq!(a, w, "same batch as written");
                }
            }
        }
    }
}

/// Backend write ops of one cleaning job over lines written in a scrambled order.
fn backend_ops_of_one_job(order: CleaningOrder) -> usize {
    let mut c = cache(order, 16, 64);
    for l in [5u64, 2, 7, 0, 3, 6, 1, 4] {
        write(&mut c, l);
    }
    let mut jobs = Vec::new();
    c.clean(&common::idle(), &mut jobs);
    jobs[0]
        .plan
        .ops
        .iter()
        .filter(|o| o.device == Device::Backend && o.kind == IoKind::Write)
        .count()
}

#[test]
fn an_address_ordered_batch_of_adjacent_lines_is_one_backend_write() {
    assert_eq!(backend_ops_of_one_job(CleaningOrder::Written), 8);
    assert_eq!(backend_ops_of_one_job(CleaningOrder::Address), 1);
    assert_eq!(backend_ops_of_one_job(CleaningOrder::Sweep), 1);
}

/// The backend lines the shrink of volume 0's partition writes back, job by job: 40 dirty
/// lines written in a scattered order into a 64-line partition shrunk to 8.
fn shrink_write_back(order: CleaningOrder) -> Vec<Vec<u64>> {
    let mut c = Cache::new(&CacheConfig {
        capacity: 128 * LINE,
        line_size: LINE,
        eviction: EvictionKind::Lru,
        write_policy: WritePolicy::WriteBack,
        cleaning: CleaningConfig::None,
        cleaning_order: order,
        ..CacheConfig::default()
    })
    .unwrap();
    let mut jobs = Vec::new();
    c.set_partition(tiercache_core::VolumeId(0), 64, &mut jobs)
        .unwrap();
    assert!(jobs.is_empty());
    for i in 0..40u64 {
        write(&mut c, (i * 37) % 41);
    }
    c.set_partition(tiercache_core::VolumeId(0), 8, &mut jobs)
        .unwrap();
    let lines = jobs.iter().map(backend_lines).collect();
    for job in jobs {
        c.flush_done(job);
    }
    c.audit();
    lines
}

/// The eviction write-back of a shrink is batched: under an address order each batch writes
/// ascending backend address; the same lines leave as under `written`.
#[test]
fn a_shrinks_write_back_follows_the_cleaning_order() {
    let written = shrink_write_back(CleaningOrder::Written);
    let flat = |jobs: &[Vec<u64>]| jobs.iter().flatten().copied().collect::<BTreeSet<u64>>();
    assert_eq!(flat(&written).len(), 32, "40 dirty lines, 8 stay");
    assert!(
        written.iter().any(|j| j.windows(2).any(|w| w[0] > w[1])),
        "written order is not ascending here: {written:?}"
    );
    for order in [CleaningOrder::Address, CleaningOrder::Sweep] {
        let jobs = shrink_write_back(order);
        assert_eq!(flat(&jobs), flat(&written), "{order:?}: the same lines");
        for j in &jobs {
            assert!(j.windows(2).all(|w| w[0] < w[1]), "{order:?}: {j:?}");
        }
    }
}
