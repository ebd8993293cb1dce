//! Metadata memory per slot, reported by `memory_bytes`, stays within the per-line budget
//! (the project allows 64 bytes per line for everything; the policies take their share).

use tiercache_eviction::{build, EvictionKind};

#[test]
fn memory_per_slot_is_small_and_reported() {
    let slots = 100_000;
    for kind in EvictionKind::ALL {
        let p = build(kind, slots, slots);
        let per_slot = p.memory_bytes() as f64 / slots as f64;
        println!("{kind}: {per_slot:.1} bytes per slot");
        let bound = match kind {
            // Two u32 links.
            EvictionKind::Lru | EvictionKind::Mru | EvictionKind::Fifo => 8.1,
            // Links and a counter or visited byte.
            EvictionKind::Clock | EvictionKind::Sieve => 9.1,
            // Links, flags, the resident key and a ghost entry per line (0.9 for S3-FIFO).
            EvictionKind::Arc | EvictionKind::S3Fifo => 50.0,
        };
        assert!(per_slot >= 8.0, "{kind} reports {per_slot} bytes per slot");
        assert!(per_slot <= bound, "{kind} uses {per_slot} bytes per slot");
    }
}
