//! The serve config loader under the `config_loader` fuzz target's entry point, under
//! stable: its corpus (`fuzz/corpus/config_loader/`, the shipped example configs) and any
//! regressions replayed, the examples shown to load (the harness reaches the setup), and
//! proptest's random text and byte-flipped examples. Contract: setups or an error, never a
//! panic.

use proptest::prelude::*;
use std::path::Path;
use tiercache_server::config::load_text;

fn inputs(sub: &str) -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(sub)
        .join("config_loader");
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn corpus_and_regressions_load_or_fail_cleanly() {
    let corpus = inputs("corpus");
    assert!(corpus.len() >= 3, "the corpus is in the repository");
    for (_, text) in corpus.iter().chain(&inputs("regressions")) {
        let _ = load_text(text);
    }
    let serve = corpus.iter().find(|(n, _)| n == "serve.toml").unwrap();
    let setups = load_text(&serve.1).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(setups.len(), 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_text_loads_or_fails_cleanly(text in "\\PC{0,400}") {
        let _ = load_text(&text);
    }

    #[test]
    fn flipped_examples_load_or_fail_cleanly(pick in any::<usize>(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let corpus = inputs("corpus");
        let mut bytes = corpus[pick % corpus.len()].1.clone().into_bytes();
        for (at, b) in flips {
            if !bytes.is_empty() {
                let i = at % bytes.len();
                bytes[i] = b;
            }
        }
        let _ = load_text(&String::from_utf8_lossy(&bytes));
    }
}
