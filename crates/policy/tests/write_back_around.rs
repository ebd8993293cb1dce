//! The write-back-around mode (WBA, docs/design.md §4.5): write hits stay in the cache, dirty;
//! write misses go to the backend only; read misses promote. The file-level cache's wb-around
//! variant runs it (§4.9).

use tiercache_core::{Device, Plan, Request};
use tiercache_policy::{Cache, CacheConfig, CleaningConfig, WritePolicy};

#[test]
fn hits_are_absorbed_misses_go_around_and_reads_promote() {
    let cfg = CacheConfig {
        capacity: 4 * 4096,
        write_policy: WritePolicy::WriteBackAround,
        cleaning: CleaningConfig::None,
        ..CacheConfig::default()
    };
    let mut c = Cache::new(&cfg).unwrap();
    let mut plan = Plan::new();
    let out = c.access(&Request::write(0, 4096), Some(&mut plan)).unwrap();
    assert_eq!(out.line_bypasses, 1);
    assert!(plan.ops.iter().all(|o| o.device == Device::Backend));
    assert_eq!(c.resident_lines(), 0);

    c.access(&Request::read(0, 4096), Some(&mut plan)).unwrap();
    assert_eq!(c.resident_lines(), 1);
    assert!(plan.ops.iter().any(|o| o.device == Device::Cache));

    let out = c.access(&Request::write(0, 4096), Some(&mut plan)).unwrap();
    assert!(out.full_hit);
    assert!(plan.ops.iter().all(|o| o.device == Device::Cache));
    assert_eq!(c.dirty_lines(), 1);
    assert!(c.would_absorb(&Request::write(0, 4096)));
    c.audit();
}

#[test]
fn config_name_is_write_back_around() {
    let p: WritePolicy = serde_json::from_str("\"write-back-around\"").unwrap();
    assert_eq!(p, WritePolicy::WriteBackAround);
    assert_eq!(p.short_name(), "WBA");
}
