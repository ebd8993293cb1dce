//! The journal's replay under the `filecache_journal` fuzz target's entry point, under
//! stable: its corpus (`fuzz/corpus/filecache_journal/`) and any regressions replayed, and
//! proptest's random operation runs with random flips and cuts. The property (see
//! `tiercache_filecache::fuzzing`): replay never panics, returns consistent versions, and an
//! undamaged journal's last Map is its block's newest version.

use proptest::prelude::*;
use std::path::Path;
use tiercache_filecache::fuzzing::replay_input;

fn inputs(sub: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(sub)
        .join("filecache_journal");
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .map(|e| {
            let p = e.unwrap().path();
            (p.display().to_string(), std::fs::read(&p).unwrap())
        })
        .collect()
}

#[test]
fn corpus_and_regressions_replay_consistently() {
    let corpus = inputs("corpus");
    assert!(corpus.len() >= 3, "the corpus is in the repository");
    for (name, data) in corpus.iter().chain(&inputs("regressions")) {
        replay_input(data).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_runs_flips_and_cuts_replay_consistently(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let r = replay_input(&data);
        prop_assert!(r.is_ok(), "{r:?}");
    }
}
