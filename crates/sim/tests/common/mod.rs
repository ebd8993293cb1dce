//! The repository's fixture traces (`fixtures/traces`, provenance in its README) as the
//! simulator's tests read them: every request, and the footprint in lines.

use std::collections::HashSet;
use tiercache_core::Request;

/// Where the fixture traces are.
pub const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/traces");
/// Every fixture trace, one per format family.
pub const FIXTURES: [&str; 4] = [
    "msr-hm0-sample.csv",
    "cloudphysics-w.vscsi",
    "systor17-sample.csv.gz",
    "tencent-cbs-sample.csv.bz2",
];
/// The line size the tests split requests into.
pub const LINE: u64 = 4096;

/// Every request of fixture `name`, in order.
pub fn fixture(name: &str) -> Vec<Request> {
    let reader = tiercache_trace::open(&format!("{TRACES}/{name}"), None, &Default::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    reader
        .map(|r| r.unwrap_or_else(|e| panic!("{name}: {e}")))
        .collect()
}

/// Distinct (volume, line) pairs the requests touch.
pub fn footprint_lines(reqs: &[Request]) -> u64 {
    let mut lines = HashSet::new();
    for r in reqs.iter().filter(|r| r.len > 0) {
        for l in r.offset / LINE..=(r.offset + r.len - 1) / LINE {
            lines.insert((r.volume, l));
        }
    }
    lines.len() as u64
}
