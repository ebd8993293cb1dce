//! Recovery from a damaged cache image, under stable: the `engine_recovery` fuzz target's
//! corpus and regressions (`fuzz/corpus/engine_recovery/`, `fuzz/regressions/...`) replayed,
//! and proptest's random flips and overwrites of the metadata of a real image. The property
//! (see `tiercache_engine::fuzzing`): a named refusal, or every line reads what was last
//! written or, where recovery dropped what it could not trust, the backend's: never other
//! data.

use proptest::prelude::*;
use std::path::Path;
use tiercache_engine::fuzzing::{damaged_image_recovers, Outcome};

fn replay(sub: &str) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(sub)
        .join("engine_recovery");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).into_iter().flatten() {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        damaged_image_recovers(&data).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        n += 1;
    }
    n
}

#[test]
fn corpus_and_regressions_recover_or_refuse() {
    assert!(replay("corpus") > 0, "the corpus is in the repository");
    replay("regressions");
}

#[test]
fn an_undamaged_image_recovers_exactly_and_a_damaged_superblock_is_refused() {
    assert_eq!(damaged_image_recovers(&[]), Ok(Outcome::Exact));
    // Flip one bit of the superblock's first bytes (its magic): refused by name.
    match damaged_image_recovers(&[0, 0, 0, 0, 0, 1]).unwrap() {
        Outcome::Refused(e) => assert!(e.contains("offset 0"), "{e}"),
        o => panic!("{o:?}"),
    }
}

/// One bit flipped at each 16th byte of the metadata: some flips are refused (superblock),
/// others recovered from (a record's checksum fails: its other copy, or the line dropped to
/// the backend's data), none serves other data. Both kinds are reached, so the property is
/// tested where it can fail.
#[test]
fn single_flips_across_the_metadata_are_refused_or_recovered() {
    let len = tiercache_engine::fuzzing::Image::get().metadata_len();
    let (mut refused, mut recovered) = (0, 0);
    for at in (0..len as u32).step_by(16) {
        let mut data = vec![0u8];
        data.extend_from_slice(&at.to_le_bytes());
        data.push(0x10);
        match damaged_image_recovers(&data) {
            Ok(Outcome::Refused(_)) => refused += 1,
            Ok(_) => recovered += 1,
            Err(e) => panic!("flip at {at}: {e}"),
        }
    }
    assert!(
        refused > 0 && recovered > 0,
        "{refused} refused, {recovered} recovered"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random flips anywhere in the metadata.
    #[test]
    fn flips_recover_or_refuse(flips in proptest::collection::vec((any::<u32>(), 1u8..), 1..8)) {
        let mut data = vec![0u8];
        for (at, x) in flips {
            data.extend_from_slice(&at.to_le_bytes());
            data.push(x);
        }
        prop_assert!(damaged_image_recovers(&data).is_ok(), "{:?}", damaged_image_recovers(&data));
    }

    /// Random bytes written over a stretch of the metadata.
    #[test]
    fn overwrites_recover_or_refuse(at in any::<u32>(), bytes in proptest::collection::vec(any::<u8>(), 1..256)) {
        let mut data = vec![1u8];
        data.extend_from_slice(&at.to_le_bytes());
        data.extend_from_slice(&bytes);
        let r = damaged_image_recovers(&data);
        prop_assert!(r.is_ok(), "{r:?}");
    }
}
