//! A request much longer than the cache evicts lines it filled itself, each eviction adding
//! stages (the victim's write-back after the write that dirtied it, the slot's reuse after
//! that). With 8-bit stages such a plan overflowed past about 85 times the cache's line count:
//! a panic in debug builds, and in release a wrap that could order a write-back before the
//! write it carries.

use std::collections::HashMap;
use tiercache_core::{Device, Plan, Request};
use tiercache_policy::{Cache, CacheConfig, CleaningConfig, EvictionKind, WritePolicy};

#[test]
fn a_request_far_longer_than_the_cache_keeps_every_slots_ops_in_order() {
    for eviction in [EvictionKind::Lru, EvictionKind::Fifo, EvictionKind::S3Fifo] {
        let mut cache = Cache::new(&CacheConfig {
            capacity: 4 * 4096,
            line_size: 4096,
            write_policy: WritePolicy::WriteBack,
            cleaning: CleaningConfig::None,
            eviction,
            ..CacheConfig::default()
        })
        .unwrap();
        for req in [Request::write(0, 2 << 20), Request::read(4 << 20, 4 << 20)] {
            let mut plan = Plan::new();
            cache.access(&req, Some(&mut plan)).unwrap();
            assert!(
                plan.stages() > 256,
                "{eviction:?} {:?}: {} stages (more than 8 bits hold)",
                req.op,
                plan.stages()
            );
            // Ops of one stage run together: two on one cache slot in one stage would race.
            let mut seen: HashMap<(u64, u32), usize> = HashMap::new();
            for (i, o) in plan.ops.iter().enumerate() {
                if o.device != Device::Cache {
                    continue;
                }
                for slot in o.offset / 4096..=(o.offset + o.len - 1) / 4096 {
                    if let Some(j) = seen.insert((slot, o.stage), i) {
                        panic!(
                            "{eviction:?}: ops {j} and {i} both use slot {slot} in stage {}",
                            o.stage
                        );
                    }
                }
            }
        }
    }
}
