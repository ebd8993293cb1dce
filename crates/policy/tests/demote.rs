//! The receiving side of DEMOTE (docs/design.md §4.7): outcomes and resident lines against a simple
//! model (a recency list with dirty flags), the insertion points of LRU and MRU, partial
//! lines, plans, sharded caches and the conservation of demote counters.

use proptest::prelude::*;
use tiercache_core::{Device, IoKind, OpCause, Plan, Request, VolumeId};
use tiercache_policy::{
    Cache, CacheConfig, CleaningConfig, Decide, DemoteOutcome, EvictionKind, MetaUpdate, Report,
    ShardedCache, WritePolicy,
};

const LINE: u64 = 4096;

fn cfg(lines: u64, eviction: EvictionKind) -> CacheConfig {
    CacheConfig {
        capacity: lines * LINE,
        line_size: LINE,
        eviction,
        write_policy: WritePolicy::WriteBack,
        cleaning: CleaningConfig::None,
        ..CacheConfig::default()
    }
}

fn demote(line: u64) -> Request {
    Request::write(line * LINE, LINE)
}

/// The reference: lines newest first, each with its dirty flag. LRU evicts the back and
/// inserts (reads, writes, demotes) at the front; MRU evicts the front, inserts reads and
/// writes at the front and demotes at the back. Hits move to the front; a demote of a held
/// line moves it to the demote position.
struct Model {
    lines: Vec<(u64, bool)>,
    cap: usize,
    mru: bool,
}

impl Model {
    fn pos(&self, l: u64) -> Option<usize> {
        self.lines.iter().position(|&(x, _)| x == l)
    }

    /// Index of the victim among candidates passing `ok`.
    fn victim(&self, ok: impl Fn(bool) -> bool) -> Option<usize> {
        let mut it = self.lines.iter().enumerate().filter(|(_, &(_, d))| ok(d));
        if self.mru {
            it.next().map(|(i, _)| i)
        } else {
            it.last().map(|(i, _)| i)
        }
    }

    fn access(&mut self, l: u64, write: bool) {
        let dirty = match self.pos(l) {
            Some(i) => self.lines.remove(i).1 || write,
            None => {
                if self.lines.len() == self.cap {
                    let v = self.victim(|_| true).unwrap();
                    self.lines.remove(v);
                }
                write
            }
        };
        self.lines.insert(0, (l, dirty));
    }

    fn demote(&mut self, l: u64) -> DemoteOutcome {
        let (entry, out) = match self.pos(l) {
            Some(i) => (self.lines.remove(i), DemoteOutcome::AlreadyHeld),
            None => {
                if self.lines.len() == self.cap {
                    match self.victim(|dirty| !dirty) {
                        Some(v) => {
                            self.lines.remove(v);
                        }
                        None => return DemoteOutcome::Rejected,
                    }
                }
                ((l, false), DemoteOutcome::Accepted)
            }
        };
        if self.mru {
            self.lines.push(entry);
        } else {
            self.lines.insert(0, entry);
        }
        out
    }
}

#[derive(Debug, Clone, Copy)]
enum Step {
    Read(u64),
    Write(u64),
    Demote(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u64..24).prop_map(Step::Read),
        (0u64..24).prop_map(Step::Write),
        (0u64..24).prop_map(Step::Demote),
    ]
}

proptest! {
    /// Every outcome and, after every step, the resident lines with their dirty state, as the
    /// model says; demote counters conserve; demotes never write back or demote further.
    #[test]
    fn demotes_follow_the_model(
        steps in proptest::collection::vec(step(), 1..300),
        mru in any::<bool>(),
        cap in 1u64..10,
    ) {
        let kind = if mru { EvictionKind::Mru } else { EvictionKind::Lru };
        let mut c = Cache::new(&cfg(cap, kind)).unwrap();
        let mut m = Model { lines: Vec::new(), cap: cap as usize, mru };
        let mut plan = Plan::new();
        for s in steps {
            match s {
                Step::Read(l) => {
                    c.access(&Request::read(l * LINE, LINE), Some(&mut plan)).unwrap();
                    m.access(l, false);
                }
                Step::Write(l) => {
                    c.access(&Request::write(l * LINE, LINE), Some(&mut plan)).unwrap();
                    m.access(l, true);
                }
                Step::Demote(l) => {
                    let before = c.stats().clone();
                    let out = c.accept_demote(&demote(l), Some(&mut plan)).unwrap();
                    prop_assert_eq!(out, m.demote(l), "demote of line {}", l);
                    let after = c.stats();
                    // A demote never writes back, never sends anything further down.
                    prop_assert_eq!(after.backend_bytes_written, before.backend_bytes_written);
                    prop_assert_eq!(after.demotions, before.demotions);
                    prop_assert!(plan.ops.iter().all(|o| o.device == Device::Cache
                        && o.kind == IoKind::Write && o.cause == OpCause::Demote));
                    let written: u64 = plan.ops.iter().map(|o| o.len).sum();
                    let expect = if out == DemoteOutcome::Accepted { LINE } else { 0 };
                    prop_assert_eq!(written, expect);
                    prop_assert_eq!(after.demoted_in_bytes - before.demoted_in_bytes, expect);
                }
            }
            let mut have: Vec<(u64, bool)> = (0..24)
                .filter_map(|l| c.line_state(VolumeId(0), l).map(|s| (l, s.dirty != 0)))
                .collect();
            let mut want = m.lines.clone();
            want.sort();
            have.sort();
            prop_assert_eq!(have, want);
        }
        let s = c.stats();
        prop_assert_eq!(
            s.demotes_received,
            s.demotes_accepted + s.demotes_already_held + s.demotes_rejected
        );
        c.audit();
    }

    /// A sharded cache routes demotes (several lines, any alignment) to their shards and
    /// counts each demote once, with outcomes that conserve.
    #[test]
    fn sharded_demotes_conserve(
        demotes in proptest::collection::vec((0u64..200, 1u64..40), 1..100),
        reads in proptest::collection::vec(0u64..200, 0..100),
    ) {
        let mut c = ShardedCache::new(&CacheConfig { shards: 4, ..cfg(32, EvictionKind::Lru) }).unwrap();
        let mut plan = Plan::new();
        for (i, (line, n)) in demotes.iter().enumerate() {
            if let Some(&r) = reads.get(i) {
                c.access(&Request::read(r * LINE, LINE), Some(&mut plan)).unwrap();
            }
            let req = Request::write(line * LINE, n * LINE);
            let out = c.accept_demote(&req, Some(&mut plan)).unwrap();
            // Every cache-device write of the plan is inside the cache.
            for o in &plan.ops {
                prop_assert!(o.offset + o.len <= 32 * LINE);
            }
            if out == DemoteOutcome::AlreadyHeld {
                prop_assert!(plan.ops.is_empty());
            }
        }
        let s = c.stats_snapshot();
        prop_assert_eq!(s.demotes_received, demotes.len() as u64);
        prop_assert_eq!(
            s.demotes_received,
            s.demotes_accepted + s.demotes_already_held + s.demotes_rejected
        );
        c.audit();
    }
}

#[test]
fn lru_demotes_enter_at_the_recent_end() {
    let mut c = Cache::new(&cfg(3, EvictionKind::Lru)).unwrap();
    for l in [0, 1, 2] {
        c.access(&Request::read(l * LINE, LINE), None).unwrap();
    }
    // Full: the demote of 9 drops the least recent line (0) and is evicted last.
    assert_eq!(
        c.accept_demote(&demote(9), None).unwrap(),
        DemoteOutcome::Accepted
    );
    assert!(c.line_state(VolumeId(0), 0).is_none());
    for l in [3, 4] {
        c.access(&Request::read(l * LINE, LINE), None).unwrap();
    }
    assert!(c.line_state(VolumeId(0), 9).is_some(), "demoted line kept");
    assert!(c.line_state(VolumeId(0), 1).is_none());
    assert!(c.line_state(VolumeId(0), 2).is_none());
}

#[test]
fn mru_demotes_enter_at_the_end_evicted_last() {
    let mut c = Cache::new(&cfg(3, EvictionKind::Mru)).unwrap();
    c.access(&Request::read(0, LINE), None).unwrap();
    c.accept_demote(&demote(8), None).unwrap();
    c.accept_demote(&demote(9), None).unwrap();
    // Full (0, 8, 9). Read misses evict the line read last (0, then 5): the demoted ones stay.
    for l in [5, 6, 7] {
        c.access(&Request::read(l * LINE, LINE), None).unwrap();
        assert!(c.line_state(VolumeId(0), 8).is_some());
        assert!(c.line_state(VolumeId(0), 9).is_some());
    }
    // The next demote takes the place of the last line read (7), not of a demoted one.
    assert_eq!(
        c.accept_demote(&demote(10), None).unwrap(),
        DemoteOutcome::Accepted
    );
    assert!(c.line_state(VolumeId(0), 7).is_none());
    assert!(c.line_state(VolumeId(0), 8).is_some());
}

#[test]
fn held_line_moves_to_the_evict_last_end_without_data() {
    let mut c = Cache::new(&cfg(2, EvictionKind::Mru)).unwrap();
    let mut plan = Plan::new();
    c.access(&Request::read(0, LINE), None).unwrap();
    c.access(&Request::read(LINE, LINE), None).unwrap();
    // 1 is at the evict-next end; its demote moves no data but moves it away from there.
    assert_eq!(
        c.accept_demote(&demote(1), Some(&mut plan)).unwrap(),
        DemoteOutcome::AlreadyHeld
    );
    assert!(plan.ops.is_empty());
    c.access(&Request::read(2 * LINE, LINE), None).unwrap();
    assert!(c.line_state(VolumeId(0), 1).is_some());
    assert!(c.line_state(VolumeId(0), 0).is_none());
}

#[test]
fn partial_lines_take_only_missing_sub_blocks_and_keep_dirty_data() {
    let mut c = Cache::new(&cfg(4, EvictionKind::Lru)).unwrap();
    c.set_journal(true);
    let mut updates: Vec<MetaUpdate> = Vec::new();
    c.drain_meta_updates(&mut updates);
    // Sub-blocks 0..2 dirty (a write-back write of 1 KiB), the rest not valid.
    c.access(&Request::write(0, 1024), None).unwrap();
    let sub = c.geometry().sub_size();
    let st = c.line_state(VolumeId(0), 0).unwrap();
    assert_eq!(st.valid, st.dirty);
    let mut plan = Plan::new();
    assert_eq!(
        c.accept_demote(&demote(0), Some(&mut plan)).unwrap(),
        DemoteOutcome::Accepted
    );
    let after = c.line_state(VolumeId(0), 0).unwrap();
    assert_eq!(after.dirty, st.dirty, "dirty data kept");
    assert_eq!(after.valid, c.geometry().full_mask());
    let written: u64 = plan.ops.iter().map(|o| o.len).sum();
    assert_eq!(written, LINE - 1024);
    assert!(plan.ops.iter().all(|o| o.vaddr >= 1024 && o.len % sub == 0));
    updates.clear();
    c.drain_meta_updates(&mut updates);
    assert!(updates
        .iter()
        .any(|u| u.line == Some((VolumeId(0), 0)) && u.valid == after.valid));
    // Now held: a second demote moves nothing.
    assert_eq!(
        c.accept_demote(&demote(0), Some(&mut plan)).unwrap(),
        DemoteOutcome::AlreadyHeld
    );
    assert!(plan.ops.is_empty());
    // A demote smaller than a sub-block carries nothing whole: rejected.
    assert_eq!(
        c.accept_demote(&Request::write(8 * LINE, 100), None)
            .unwrap(),
        DemoteOutcome::Rejected
    );
}

#[test]
fn full_of_dirty_data_rejects_and_changes_nothing() {
    let mut c = Cache::new(&cfg(2, EvictionKind::Lru)).unwrap();
    c.access(&Request::write(0, LINE), None).unwrap();
    c.access(&Request::write(LINE, LINE), None).unwrap();
    let before = c.stats().clone();
    assert_eq!(
        c.accept_demote(&demote(5), None).unwrap(),
        DemoteOutcome::Rejected
    );
    assert!(c.line_state(VolumeId(0), 5).is_none());
    assert!(c.line_state(VolumeId(0), 0).is_some() && c.line_state(VolumeId(0), 1).is_some());
    assert_eq!(c.stats().evictions, before.evictions);
    assert_eq!(c.stats().demotes_rejected, 1);
    // A pass-through cache serves no reads: it takes no demote.
    let mut pt = Cache::new(&CacheConfig {
        write_policy: WritePolicy::PassThrough,
        ..cfg(2, EvictionKind::Lru)
    })
    .unwrap();
    assert_eq!(
        pt.accept_demote(&demote(5), None).unwrap(),
        DemoteOutcome::Rejected
    );
}

/// A line under write-back that is written again is dirty and pinned at once: counted once,
/// the clean line beside it is still a victim, and the demote is taken. (Counted as dirty and
/// as pinned, the cache looked full of dirty data and rejected it.)
#[test]
fn a_line_under_write_back_written_again_leaves_the_clean_line_to_a_demote() {
    let mut c = Cache::new(&CacheConfig {
        cleaning: CleaningConfig::Lazy {
            idle_ns: 1,
            batch: 1,
        },
        ..cfg(3, EvictionKind::Lru)
    })
    .unwrap();
    c.access(&Request::write(0, LINE), None).unwrap();
    c.access(&Request::write(LINE, LINE), None).unwrap();
    c.access(&Request::read(2 * LINE, LINE), None).unwrap();
    let mut jobs = Vec::new();
    let idle = tiercache_policy::ExecutorState {
        cache_idle_ns: u64::MAX / 2,
        ..Default::default()
    };
    c.clean(&idle, &mut jobs);
    assert_eq!(
        jobs.len(),
        1,
        "line 0, least recently written, under write-back"
    );
    c.access(&Request::write(0, LINE), None).unwrap();
    assert_eq!(c.dirty_lines(), 2);
    assert_eq!(
        c.accept_demote(&demote(5), None).unwrap(),
        DemoteOutcome::Accepted
    );
    assert!(
        c.line_state(VolumeId(0), 2).is_none(),
        "the clean line made room"
    );
    c.audit();
}

/// Hits of a client cache over an array cache on a stream of whole-line reads: the client's
/// misses are read through the array, its demotes (the backend writes of its plans marked
/// `Demote`) offered to the array after the array served the miss. Returns (client hits,
/// array hits).
fn two_levels(client: &mut Cache, array: &mut Cache, reads: &[u64]) -> (u64, u64) {
    let (mut ch, mut ah) = (0, 0);
    let mut plan = Plan::new();
    let mut below = Plan::new();
    for &l in reads {
        let req = Request::read(l * LINE, LINE);
        if client.access(&req, Some(&mut plan)).unwrap().full_hit {
            ch += 1;
        } else if array.access(&req, Some(&mut below)).unwrap().full_hit {
            ah += 1;
        }
        for o in &plan.ops {
            if o.device == Device::Backend && o.cause == OpCause::Demote {
                array
                    .accept_demote(&Request::write(o.offset, o.len), None)
                    .unwrap();
            }
        }
    }
    (ch, ah)
}

proptest! {
    /// docs/design.md §4.7: an LRU client demoting to an MRU array is one LRU cache of the summed
    /// size (same hits on any stream); LRU over LRU without demote never does better.
    #[test]
    fn lru_over_mru_demote_is_one_lru(
        reads in proptest::collection::vec(0u64..40, 1..400),
        c_lines in 1u64..8,
        a_lines in 1u64..12,
    ) {
        let mut client = Cache::new(&CacheConfig {
            victim: tiercache_policy::VictimConfig::Demote,
            ..cfg(c_lines, EvictionKind::Lru)
        }).unwrap();
        let mut array = Cache::new(&cfg(a_lines, EvictionKind::Mru)).unwrap();
        let (ch, ah) = two_levels(&mut client, &mut array, &reads);
        let mut one = Cache::new(&cfg(c_lines + a_lines, EvictionKind::Lru)).unwrap();
        let mut hits = 0;
        for &l in &reads {
            hits += u64::from(one.access(&Request::read(l * LINE, LINE), None).unwrap().full_hit);
        }
        prop_assert_eq!(ch + ah, hits);
        let s = array.stats();
        prop_assert_eq!(s.demotes_received, client.stats().demotions);
        let mut c2 = Cache::new(&cfg(c_lines, EvictionKind::Lru)).unwrap();
        let mut a2 = Cache::new(&cfg(a_lines, EvictionKind::Lru)).unwrap();
        let (ch2, ah2) = two_levels(&mut c2, &mut a2, &reads);
        prop_assert!(ch2 + ah2 <= hits, "LRU-LRU {} beats one LRU {}", ch2 + ah2, hits);
    }
}
