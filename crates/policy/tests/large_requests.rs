//! Requests over many more lines than the cache holds: their plans stay short and well
//! ordered (a request never evicts lines it used itself), and the data stays right.

mod common;

use std::collections::HashMap;
use tiercache_core::{Device, IoKind, Plan, Request, VolumeId};
use tiercache_policy::victim::VictimConfig;
use tiercache_policy::{
    BypassReason, Cache, CacheConfig, CleaningConfig, DirtyFullPolicy, EvictionKind,
    PromotionConfig, WritePolicy,
};

fn cfg(lines: u64, mode: WritePolicy, eviction: EvictionKind) -> CacheConfig {
    CacheConfig {
        capacity: lines * 4096,
        line_size: 4096,
        eviction,
        promotion: PromotionConfig::Always,
        write_policy: mode,
        cleaning: CleaningConfig::None,
        dirty_full: DirtyFullPolicy::EvictThenWrite,
        ..CacheConfig::default()
    }
}

/// Every cache slot's ops come in strictly increasing stages, in emission order (an op on a
/// slot must follow the one before it), and the plan is short.
fn assert_slots_ordered(plan: &Plan, line: u64) {
    let mut last: HashMap<u64, u8> = HashMap::new();
    for o in plan
        .ops
        .iter()
        .filter(|o| o.device == Device::Cache && o.len > 0)
    {
        for slot in o.offset / line..(o.offset + o.len).div_ceil(line) {
            if let Some(&before) = last.get(&slot) {
                assert!(
                    o.stage > before,
                    "slot {slot}: op at stage {} after one at stage {before}: {o:?}",
                    o.stage
                );
            }
            last.insert(slot, o.stage);
        }
    }
    assert!(plan.stages() <= 5, "{} stages", plan.stages());
}

#[test]
fn a_write_of_512_lines_over_4_lines_does_not_overflow_stages() {
    for eviction in EvictionKind::ALL {
        let mut c = Cache::new(&cfg(4, WritePolicy::WriteBack, eviction)).unwrap();
        // Fill the cache with dirty lines first, so victims are written back.
        let mut plan = Plan::new();
        c.access(&Request::write(16 << 20, 4 * 4096), Some(&mut plan))
            .unwrap();
        c.access(&Request::write(0, 2 << 20), Some(&mut plan))
            .unwrap();
        c.audit();
        assert_slots_ordered(&plan, 4096);
        // The four dirty lines were evicted (written back first), then the request's own
        // lines were kept: the other 508 lines were written around the cache.
        let s = c.stats();
        assert_eq!(s.dirty_evictions, 4, "{eviction}");
        assert_eq!(s.bypasses_for(BypassReason::OwnLines), 508, "{eviction}");
        assert_eq!(
            plan.bytes(|o| o.device == Device::Backend && o.kind == IoKind::Write),
            4 * 4096 + 508 * 4096
        );
        assert_eq!(c.dirty_lines(), 4);
    }
}

#[test]
fn a_read_of_512_lines_over_4_lines_does_not_overflow_stages() {
    for eviction in EvictionKind::ALL {
        for victim in [VictimConfig::Drop, VictimConfig::Demote] {
            let mut c = Cache::new(&CacheConfig {
                victim,
                ..cfg(4, WritePolicy::WriteBack, eviction)
            })
            .unwrap();
            let mut plan = Plan::new();
            c.access(&Request::write(16 << 20, 4 * 4096), Some(&mut plan))
                .unwrap();
            c.access(&Request::read(0, 2 << 20), Some(&mut plan))
                .unwrap();
            c.audit();
            assert_slots_ordered(&plan, 4096);
            assert_eq!(c.stats().bypasses_for(BypassReason::OwnLines), 508);
            assert_eq!(c.resident_lines(), 4);
        }
    }
}

/// The same requests without a plan (hit-ratio-only runs) make the same decisions.
#[test]
fn untimed_runs_decide_as_timed_ones() {
    let reqs = [
        Request::write(16 << 20, 3 * 4096),
        Request::read(0, 40 * 4096),
        Request::write(8 * 4096, 40 * 4096),
        Request::read(4096, 4096),
        Request::read(0, 8 << 20),
    ];
    for eviction in EvictionKind::ALL {
        let config = cfg(8, WritePolicy::WriteBack, eviction);
        let (mut timed, mut untimed) = (Cache::new(&config).unwrap(), Cache::new(&config).unwrap());
        let mut plan = Plan::new();
        for r in &reqs {
            let a = timed.access(r, Some(&mut plan)).unwrap();
            assert_slots_ordered(&plan, 4096);
            let b = untimed.access(r, None).unwrap();
            assert_eq!(a, b, "{eviction} {r:?}");
        }
        assert_eq!(timed.stats(), untimed.stats(), "{eviction}");
    }
}

/// Requests a few times the cache's size, run on real bytes: every read returns the newest
/// data and the final flush leaves it all on the backend.
#[test]
fn long_requests_keep_the_data_right() {
    use common::{Bytes, VOLUME_BYTES};
    for eviction in EvictionKind::ALL {
        for mode in [WritePolicy::WriteBack, WritePolicy::WriteThrough] {
            let mut c = Cache::new(&cfg(4, mode, eviction)).unwrap();
            let mut b = Bytes::new(4 * 4096);
            let mut plan = Plan::new();
            let reqs = [
                Request::write(0, 6 * 4096),
                Request::read(2048, 10 * 4096),
                Request::write(4096 + 512, 9 * 4096),
                Request::read(0, VOLUME_BYTES),
                Request::write(0, VOLUME_BYTES),
                Request::read(0, VOLUME_BYTES),
            ];
            for (i, r) in reqs.iter().enumerate() {
                let data: Vec<u8> = (0..r.len).map(|j| (i as u64 * 7 + j / 512) as u8).collect();
                c.access(r, Some(&mut plan)).unwrap();
                assert_slots_ordered(&plan, 4096);
                let got = b.run(&plan, Some((r, &data)));
                b.check_and_record(r, &got, &data)
                    .unwrap_or_else(|e| panic!("{eviction} {mode:?}: {e}"));
                c.audit();
            }
            let mut jobs = Vec::new();
            c.flush_all(&mut jobs);
            for job in jobs {
                b.run(&job.plan, None);
                c.flush_done(job);
            }
            assert_eq!(b.first_lost_byte(), None, "{eviction} {mode:?}");
        }
    }
}

/// A demote over more lines than the cache holds takes what fits and never reuses a slot it
/// has just written (both writes would run in the same stage).
#[test]
fn a_long_demote_does_not_reuse_its_own_slots() {
    for eviction in EvictionKind::ALL {
        let mut c = Cache::new(&cfg(4, WritePolicy::WriteBack, eviction)).unwrap();
        let mut plan = Plan::new();
        c.access(&Request::read(1 << 20, 4 * 4096), Some(&mut plan))
            .unwrap();
        c.accept_demote(&Request::write(0, 16 * 4096), Some(&mut plan))
            .unwrap();
        c.audit();
        assert_slots_ordered(&plan, 4096);
        assert_eq!(plan.bytes(|o| o.device == Device::Cache), 4 * 4096);
        for i in 0..4 {
            assert!(
                c.line_state(VolumeId(0), i).is_some(),
                "{eviction}: line {i}"
            );
        }
    }
}
