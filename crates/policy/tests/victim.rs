//! Victim handling: a clean victim is dropped, or demoted to the level below with exactly its
//! valid bytes, read from its slot before the slot is reused; dirty victims are written back
//! as before, never demoted.

use proptest::prelude::*;
use tiercache_core::{Device, IoKind, OpCause, Plan, Request};
use tiercache_policy::{Cache, CacheConfig, CleaningConfig, VictimConfig, WritePolicy};

fn cache(victim: VictimConfig, mode: WritePolicy) -> Cache {
    Cache::new(&CacheConfig {
        capacity: 8 * 4096,
        line_size: 4096,
        write_policy: mode,
        cleaning: CleaningConfig::None,
        victim,
        ..CacheConfig::default()
    })
    .unwrap()
}

proptest! {
    #[test]
    fn clean_victims_are_demoted_with_their_valid_bytes(
        reqs in proptest::collection::vec((0u64..64, 1u64..=8, any::<bool>()), 1..400),
        write_through in any::<bool>(),
    ) {
        let mode = if write_through { WritePolicy::WriteThrough } else { WritePolicy::WriteBack };
        let mut c = cache(VictimConfig::Demote, mode);
        let mut d = cache(VictimConfig::Drop, mode);
        let mut plan = Plan::new();
        let mut dplan = Plan::new();
        for (line, sectors, write) in reqs {
            let off = line * 4096 + (8 - sectors) * 512;
            let len = sectors * 512;
            let r = if write { Request::write(off, len) } else { Request::read(off, len) };
            let before = c.stats().clone();
            // Each victim's state, as it was before this request.
            let states: Vec<_> = (0..64).map(|i| c.line_state(r.volume, i)).collect();
            c.access(&r, Some(&mut plan)).unwrap();
            d.access(&r, Some(&mut dplan)).unwrap();
            let after = c.stats().clone();
            let clean_evictions =
                (after.evictions - before.evictions) - (after.dirty_evictions - before.dirty_evictions);
            let demote_reads: Vec<_> = plan.ops.iter()
                .filter(|o| o.cause == OpCause::Demote && o.device == Device::Cache).collect();
            let demote_writes: Vec<_> = plan.ops.iter()
                .filter(|o| o.cause == OpCause::Demote && o.device == Device::Backend).collect();
            prop_assert_eq!(after.demotions - before.demotions, clean_evictions);
            // Same bytes read from the victim's slot as sent down, none on the critical path,
            // the send a stage after the read.
            let bytes = |v: &[&tiercache_core::DevOp]| v.iter().map(|o| o.len).sum::<u64>();
            prop_assert_eq!(bytes(&demote_reads), bytes(&demote_writes));
            prop_assert_eq!(after.demoted_bytes - before.demoted_bytes, bytes(&demote_writes));
            for w in &demote_writes {
                prop_assert_eq!(w.kind, IoKind::Write);
                prop_assert!(!w.critical);
                let line = w.offset / 4096;
                let st = states[line as usize].expect("a demoted line was resident");
                prop_assert_eq!(st.dirty, 0, "a dirty line is written back, not demoted");
                let subs = c.geometry().sub_size();
                let first = (w.offset % 4096) / subs;
                let n = w.len / subs;
                let mask = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << first };
                prop_assert_eq!(st.valid & mask, mask, "only valid bytes are sent down");
                prop_assert!(demote_reads.iter().any(|r| r.vaddr == w.offset && r.len == w.len && r.stage + 1 == w.stage));
            }
            // Nothing else changes: the same decisions as a cache that drops its victims.
            prop_assert!(!dplan.ops.iter().any(|o| o.cause == OpCause::Demote));
            let strip = |p: &Plan| p.ops.iter().filter(|o| o.cause != OpCause::Demote)
                .map(|o| (o.device, o.kind, o.offset, o.len, o.cause)).collect::<Vec<_>>();
            prop_assert_eq!(strip(&plan), strip(&dplan));
        }
        prop_assert_eq!(c.stats().evictions, d.stats().evictions);
        if write_through {
            // Every line is clean: every eviction demotes.
            prop_assert_eq!(c.stats().demotions, c.stats().evictions);
        }
        c.audit();
    }
}
