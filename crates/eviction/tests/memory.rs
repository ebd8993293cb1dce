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
            // Two links of 17 bits (100 000 slots and a sentinel), packed: 4.25.
            EvictionKind::Lru | EvictionKind::Mru | EvictionKind::Fifo => 4.26,
            // Links and a counter or visited byte.
            EvictionKind::Clock | EvictionKind::Sieve => 5.26,
            // Links, flags and the resident key (17), and a ghost entry per line (0.9 for
            // S3-FIFO): key 8, links 8, owner 1 and 16 of table (an 8-byte bucket, at most
            // half full), plus the lists' sentinels.
            EvictionKind::Arc | EvictionKind::S3Fifo => 50.1,
            // As ARC, the links replaced by two rings of one packed slot entry each (ring.rs):
            // rings, flag byte, key (17) and up to c ghost keys (33 each: no owner byte for
            // CLOCK-Pro's one list).
            EvictionKind::Car | EvictionKind::ClockPro => 50.1,
            // Links, segment byte, key (17) and the sketch: 4 rows × 4 bits × a power-of-two
            // width below 2c, at most 4 bytes per line.
            EvictionKind::WTinyLfu => 21.1,
            // Recency links 8, frequency links 8, group 4, key 8, a frequency group (20) and
            // its free-stack entry (4) per slot, and a history node per slot: key 8, links 8,
            // owner 1, table 16, eviction time 8.
            EvictionKind::LeCaR => 93.1,
            // Policies researchers compare against (issue 35).
            // Links and a segment byte.
            EvictionKind::Slru => 5.26,
            // Links, queue byte, key (17) and 0.5 ghost entries of 33 B, plus sentinels.
            EvictionKind::TwoQ => 34.1,
            // Links 8, bucket index 4, one pool bucket 16.
            EvictionKind::Lfu => 28.1,
            // Order links 8, bucket index and count 8, one pool bucket (priority 8, lowest
            // and highest line 8).
            EvictionKind::Lfuda => 32.1,
            // Heap entry (rank key 8 and slot 4, padded to 16), position 4, last access 8.
            EvictionKind::LruK => 28.1,
            // Stack links over slots and entries 16, queue links 8, state 1, key 8, and per
            // non-resident entry key 8, links 8, index 8.
            EvictionKind::Lirs => 57.1,
            // Resident entry 32 (last access 8, key 8, slot 4, two hit ages 4, explorer flag,
            // padding) and position 4, plus a fixed 3.84 MB of class statistics (16 classes ×
            // 20 000 ages × 3 `f32`), whatever the size: 38.4 more per slot at 100 000 slots.
            EvictionKind::Lhd => 36.1 + 3_840_000.0 / slots as f64,
            EvictionKind::Belady => unreachable!("offline, not in ALL"),
        };
        assert!(per_slot >= 4.25, "{kind} reports {per_slot} bytes per slot");
        assert!(per_slot <= bound, "{kind} uses {per_slot} bytes per slot");
    }
}

/// LHD's class statistics are fixed (libCacheSim's 16 classes × 20 000 ages); what grows with
/// the cache is 36 bytes per line.
#[test]
fn lhd_memory_is_fixed_statistics_and_36_bytes_per_line() {
    let at = |slots: usize| build(EvictionKind::Lhd, slots, slots).memory_bytes();
    assert_eq!(at(200_000) - at(100_000), 100_000 * 36);
    assert_eq!(at(0), 3_840_000);
}

/// LRU's links are packed at the width its slots need (docs/design.md §13): 2 × 18 bits a
/// slot at 2^17 slots (an engine shard of an 8 GiB cache of 4 KiB lines), 2 × 26 bits at
/// 2^25 (2 TB), where two `u32` took 8 bytes.
#[test]
fn lru_links_take_the_bits_the_slots_need() {
    for (slots, bits) in [(1usize << 17, 18), (1 << 20, 21)] {
        let p = build(EvictionKind::Lru, slots, slots);
        let links = slots as u64 * 2 * bits / 8;
        let reported = p.memory_bytes() as u64;
        assert!(
            reported >= links && reported <= links + 16,
            "{slots} slots: {reported} bytes, links {links}"
        );
    }
}
