//! Every trace reader under the `trace_readers` fuzz target's entry point, under stable: its
//! corpus (`fuzz/corpus/trace_readers/`, seeded with a sample of each format) and any
//! regressions replayed, the seeds shown to read records (the harness reaches the readers),
//! and proptest's random bytes and bit-flipped seeds. Contract: records or an error, never a
//! panic or a hang.

use proptest::prelude::*;
use std::path::Path;
use tiercache_trace::fuzzing::read_input;

fn inputs(sub: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(sub)
        .join("trace_readers");
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn corpus_and_regressions_read_clean() {
    let corpus = inputs("corpus");
    assert!(corpus.len() >= 10, "the corpus is in the repository");
    for (name, data) in corpus.iter().chain(&inputs("regressions")) {
        eprintln!("{name}: {:?}", read_input(data).map_err(|e| e.to_string()));
    }
    // The seeds of well-formed samples read records: the harness reaches each reader.
    for name in [
        "msr",
        "vscsi",
        "spc",
        "fiu",
        "alibaba",
        "blkparse",
        "fio-iolog",
    ] {
        let (_, data) = corpus.iter().find(|(n, _)| n == name).unwrap();
        let n = read_input(data).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(n > 0, "{name}: no records");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_read_or_fail_cleanly(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = read_input(&data);
    }

    #[test]
    fn bit_flipped_seeds_read_or_fail_cleanly(pick in any::<usize>(), flips in proptest::collection::vec((any::<usize>(), 0u8..8), 1..16)) {
        let corpus = inputs("corpus");
        let mut data = corpus[pick % corpus.len()].1.clone();
        for (at, bit) in flips {
            if data.len() > 2 {
                let i = 2 + at % (data.len() - 2);
                data[i] ^= 1 << bit;
            }
        }
        let _ = read_input(&data);
    }
}
