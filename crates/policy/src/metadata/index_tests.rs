//! Tests of the tag index: both entry widths against a `HashMap` model (spread, crowded,
//! overflowing and short-fingerprint keys), the entry width, the groups' layout and spills.

use super::*;
use proptest::prelude::*;
use std::collections::HashMap;

/// Both entry widths for `slots` slots.
fn both(slots: usize) -> [SlotIndex; 2] {
    [SlotIndex::with_capacity(slots), SlotIndex::wide(slots)]
}

/// Runs `ops` (key of `universe` by position, insert?) against `idx` (for `slots` slots)
/// and a HashMap, checking every key of `universe` after each; returns the most entries
/// the index had outside their groups at once. A small table's memory never changes.
fn run_against_model(
    mut idx: SlotIndex,
    slots: usize,
    universe: &[u64],
    ops: &[(usize, bool)],
) -> usize {
    let mut keys: Vec<LineKey> = vec![LineKey(u64::MAX); slots];
    let mut free: Vec<u32> = (0..slots as u32).rev().collect();
    let bytes = idx.memory_bytes();
    let mut model: HashMap<u64, u32> = HashMap::new();
    let mut most_spilled = 0;
    for &(i, insert) in ops {
        let key = LineKey(universe[i]);
        if insert {
            if let std::collections::hash_map::Entry::Vacant(e) = model.entry(key.0) {
                let Some(s) = free.pop() else { continue };
                keys[s as usize] = key;
                idx.insert(key, s, |s| keys[s as usize]);
                e.insert(s);
            }
        } else if let Some(s) = model.remove(&key.0) {
            idx.remove(key, s, |s| keys[s as usize]);
            keys[s as usize] = LineKey(u64::MAX);
            free.push(s);
        }
        most_spilled = most_spilled.max(idx.spilled_count(&|s| keys[s as usize]));
        assert_eq!(idx.len(), model.len());
        if idx.is_small() {
            assert_eq!(idx.memory_bytes(), bytes, "a small table does not grow");
        }
        for &q in universe {
            assert_eq!(
                idx.get(LineKey(q), |s| keys[s as usize]),
                model.get(&q).copied(),
                "key {q}"
            );
        }
        // A guess, when there is one, is the slot of a key with the same fingerprint.
        for &k in model.keys() {
            if let Some(g) = idx.guess(LineKey(k)) {
                assert!(
                    model.values().any(|&s| s == g),
                    "a guess names an indexed slot"
                );
            }
        }
    }
    most_spilled
}

/// `n` keys spread over the key space.
fn spread_keys(n: usize) -> Vec<u64> {
    (0..n as u64).map(|k| k.wrapping_mul(7919)).collect()
}

/// `n` keys whose two groups in `idx` are groups 0 and 1.
fn crowding_keys(idx: &SlotIndex, n: usize) -> Vec<u64> {
    (0u64..)
        .map(|k| k.wrapping_mul(7919))
        .filter(|&k| {
            let (h, s) = idx.groups_of(LineKey(k));
            h.min(s) == 0 && h.max(s) == 1
        })
        .take(n)
        .collect()
}

proptest! {
    /// The index agrees with a HashMap under random inserts and removes, in both widths.
    #[test]
    fn agrees_with_hashmap(ops in proptest::collection::vec((0usize..64, any::<bool>()), 1..400)) {
        for idx in both(64) {
            run_against_model(idx, 64, &spread_keys(64), &ops);
        }
    }

    /// Tiny tables, always full, where groups overflow and kicks run long.
    #[test]
    fn agrees_with_hashmap_when_crowded(
        slots in 1usize..24,
        ops in proptest::collection::vec((0usize..48, prop::bool::weighted(0.7)), 1..300),
    ) {
        for idx in both(slots) {
            run_against_model(idx, slots, &spread_keys(48), &ops);
        }
    }

    /// Keys crowding two groups of a large table, among others: the overflow list takes
    /// what the groups cannot, and gives it back as room is made (a narrow table reading
    /// the moved entries' keys back through the line table).
    #[test]
    fn agrees_with_hashmap_when_a_large_table_overflows(
        ops in proptest::collection::vec((0usize..40, prop::bool::weighted(0.6)), 1..200),
    ) {
        for idx in both(200) {
            // Twelve keys on groups 0 and 1, then 28 others.
            let mut universe = crowding_keys(&idx, 12);
            universe.extend(spread_keys(28).iter().map(|k| k + 1));
            run_against_model(idx, 200, &universe, &ops);
        }
    }

    /// A narrow table of many slots (few fingerprint bits) among keys of every volume.
    #[test]
    fn agrees_with_hashmap_with_short_fingerprints(
        ops in proptest::collection::vec((0usize..300, prop::bool::weighted(0.6)), 1..300),
    ) {
        // 300 slots in entries laid out as a table of 2^26 slots' (6-bit fingerprints, the
        // fewest a narrow table has): fingerprints collide often.
        let idx = SlotIndex(Width::Narrow(Table::with_slot_bits(300, NARROW_SLOT_BITS)));
        let universe: Vec<u64> = (0..300u64)
            .map(|k| k.wrapping_mul(0x0001_0000_0000_0007) ^ (k << 48))
            .collect();
        run_against_model(idx, 300, &universe, &ops);
    }
}

/// Tables up to 2^26 slots are narrow (4-byte entries), larger ones wide.
#[test]
fn entry_width_follows_the_slot_count() {
    for (slots, narrow, bytes) in [(1usize << 17, true, 4), (1 << 18, true, 4)] {
        let idx = SlotIndex::with_capacity(slots);
        assert_eq!(idx.is_narrow(), narrow);
        let per = idx.memory_bytes() as f64 / slots as f64;
        assert!(
            per < bytes as f64 * 1.34 && per > bytes as f64 * 1.33,
            "{per}"
        );
    }
    assert_eq!(Table::<u32>::new((1 << 17) - 1).slot_bits, 17);
    assert_eq!(Table::<u32>::new(1 << 17).slot_bits, 18);
    assert_eq!(Table::<u64>::new(1 << 17).slot_bits, 32);
}

/// Every address an entry array can have (aligned to its entries) gets the same number of
/// groups, aligned to their size and inside the array, for small and large tables.
#[test]
fn the_group_count_depends_on_the_size_alone() {
    for size in [4, 8] {
        for n in (8..600).chain([4_000, 4_001, 4_002, 4_003, 87_383]) {
            let counts: Vec<usize> = (0..WAYS)
                .map(|k| {
                    let addr = 0x1000 + size * k;
                    let (first, groups) = group_layout(n, addr, size);
                    assert!(
                        groups >= 2 && first + groups * WAYS <= n,
                        "{n} at {addr:#x}"
                    );
                    if n >= SMALL {
                        assert_eq!((addr + size * first) % (WAYS * size), 0, "{n} at {addr:#x}");
                    }
                    groups
                })
                .collect();
            assert!(counts.windows(2).all(|w| w[0] == w[1]), "{n}: {counts:?}");
        }
    }
}

/// The same keys make the same table wherever the allocator puts it: only the aligning
/// offset moves with the address, never the number of groups or a key's place in them.
#[test]
fn a_table_does_not_depend_on_its_address() {
    // 2,999 keys: 4,000 entries, so an aligning offset of 2 or 3 would cost a group.
    let keys = spread_keys(2_999);
    for wide in [false, true] {
        let mut layouts = Vec::new();
        // Odd-sized allocations held in between move the tables to differently aligned
        // addresses.
        let mut padding = Vec::new();
        let mut offsets = std::collections::HashSet::new();
        for pad in 1..=12usize {
            padding.push(vec![0u8; pad * 4 + 1]);
            let mut idx = if wide {
                SlotIndex::wide(keys.len())
            } else {
                SlotIndex::with_capacity(keys.len())
            };
            for (slot, &k) in keys.iter().enumerate() {
                idx.insert(LineKey(k), slot as Slot, |s| LineKey(keys[s as usize]));
            }
            let (grouped, overflow, groups, first) = idx.layout();
            offsets.insert(first);
            layouts.push((groups, grouped, overflow));
        }
        assert!(layouts.windows(2).all(|w| w[0] == w[1]), "layouts differ");
        // Not a proof that addresses varied, but the check above is moot if they never did.
        eprintln!("aligning offsets seen: {offsets:?}");
    }
}

/// Keys sharing two groups beyond their room spill, stay found, and are removed; a small
/// table spills into itself, a large one into its overflow list; a full large table of
/// ordinary keys needs neither.
#[test]
fn what_two_groups_cannot_hold_spills() {
    for slots in [10, 200] {
        for probe in both(slots) {
            assert_eq!(probe.is_small(), slots == 10);
            // Two groups hold eight entries: the ninth and tenth key spill.
            let crowd = crowding_keys(&probe, 10);
            let mut ops: Vec<(usize, bool)> = (0..10).map(|i| (i, true)).collect();
            ops.extend((0..10).map(|i| (i, false)));
            let most = run_against_model(probe, slots, &crowd, &ops);
            assert_eq!(most, 2, "{slots} slots");
        }
    }

    let slots = 1 << 16;
    for mut idx in both(slots) {
        let mut keys: Vec<LineKey> = Vec::with_capacity(slots);
        for s in 0..slots as u32 {
            keys.push(LineKey(u64::from(s) * 3 + 5));
            idx.insert(keys[s as usize], s, |s| keys[s as usize]);
        }
        assert_eq!(idx.spilled_count(&|s| keys[s as usize]), 0);
        for (s, &k) in keys.iter().enumerate() {
            assert_eq!(idx.get(k, |s| keys[s as usize]), Some(s as u32));
        }
    }
}
