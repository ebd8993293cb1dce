//! The fuzz targets' entry points under stable, in the normal suite: every corpus input
//! (`fuzz/corpus/TARGET/`, seeded from the protocol's sessions) and every crash a fuzzer
//! found (`fuzz/regressions/TARGET/`) runs through its target; the seeds do what they were
//! written to do (so the harness is shown to reach the code); and proptest throws random
//! bytes and bit-flipped seeds at each target. The contract: no panic, no hang, malformed
//! input ends only its own connection.

mod common;

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use tiercache_nbd::fuzzing::{client_input, serve_input, ClientOutcome};
use tiercache_nbd::{ServerTls, TlsMode};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The inputs of `target`: its corpus and its regressions, by name.
fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for sub in ["corpus", "regressions"] {
        let dir = fuzz_dir().join(sub).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            out.push((
                format!(
                    "{sub}/{target}/{}",
                    p.file_name().unwrap().to_string_lossy()
                ),
                std::fs::read(&p).unwrap(),
            ));
        }
    }
    out.sort();
    out
}

fn seed(target: &str, name: &str) -> Vec<u8> {
    std::fs::read(fuzz_dir().join("corpus").join(target).join(name)).unwrap()
}

fn tls() -> Arc<ServerTls> {
    static TLS: OnceLock<(Arc<ServerTls>, common::pki::Pki)> = OnceLock::new();
    TLS.get_or_init(|| {
        let pki = common::pki::Pki::new("fuzz CA");
        let dir = pki.server_dir("server", false);
        let tls = Arc::new(pki.server_tls(&dir, TlsMode::Require, false, None));
        (tls, pki)
    })
    .0
    .clone()
}

#[test]
fn every_corpus_input_and_regression_runs_clean() {
    let mut ran = 0;
    for (name, bytes) in inputs("nbd_server_options") {
        serve_input(&bytes, None, false);
        eprintln!("{name}");
        ran += 1;
    }
    for (_, bytes) in inputs("nbd_server_tls") {
        serve_input(&bytes, Some(tls()), false);
        ran += 1;
    }
    for (_, bytes) in inputs("nbd_server_transmission") {
        serve_input(&bytes, None, true);
        ran += 1;
    }
    for (_, bytes) in inputs("nbd_client_replies") {
        client_input(&bytes);
        ran += 1;
    }
    assert!(ran >= 14, "the corpus is missing: {ran} inputs");
}

#[test]
fn the_seeds_reach_what_they_were_written_for() {
    let o = serve_input(&seed("nbd_server_options", "list_info_go"), None, false);
    assert!(o.transmission && o.requests == 2, "{o:?}");
    let o = serve_input(&seed("nbd_server_options", "export_name"), None, false);
    assert!(o.transmission && o.requests == 1, "{o:?}");
    // Structured replies: the READs' replies are chunks (16 + 4 + 8 + data, or + 6 for the
    // out-of-range one), longer than simple replies (16 + data) would be.
    let o = serve_input(&seed("nbd_server_options", "structured"), None, false);
    assert!(o.transmission && o.requests == 12, "{o:?}");
    let options = 20 + 20 + (20 + 14) + (20 + 12) + 20; // two STRUCTURED_REPLY, GO's three
    let chunks = 16 + (20 + 8 + 4) + (20 + 6) + 8 * (20 + 8 + 4096);
    assert_eq!(o.reply_bytes, 18 + options + chunks, "{o:?}");
    // Metadata contexts, block status and fast zero; extended headers (every command).
    let o = serve_input(
        &seed("nbd_server_options", "meta_block_status"),
        None,
        false,
    );
    assert!(
        o.transmission && o.requests == 4 && o.protocol_errors == 0,
        "{o:?}"
    );
    let o = serve_input(&seed("nbd_server_options", "extended_headers"), None, false);
    assert!(
        o.transmission && o.requests == 6 && o.protocol_errors == 0,
        "{o:?}"
    );
    let o = serve_input(&seed("nbd_server_options", "too_big"), None, false);
    assert!(!o.transmission && o.protocol_errors == 1, "{o:?}");
    let o = serve_input(
        &seed("nbd_server_transmission", "every_command"),
        None,
        true,
    );
    assert!(o.transmission && o.requests == 9, "{o:?}");
    let o = serve_input(
        &seed("nbd_server_transmission", "reads_batched"),
        None,
        true,
    );
    assert_eq!(o.requests, 40, "{o:?}");
    assert!(o.reply_bytes >= 40 * (16 + 4096), "{o:?}");
    let o = serve_input(&seed("nbd_server_transmission", "bad_magic"), None, true);
    assert_eq!(o.protocol_errors, 1, "{o:?}");
    // With TLS required, the plaintext session gets nowhere.
    let o = serve_input(&seed("nbd_server_tls", "plain_refused"), Some(tls()), false);
    assert!(!o.transmission, "{o:?}");
    let good = client_input(&seed("nbd_client_replies", "good"));
    assert_eq!(
        good,
        ClientOutcome {
            size: Some(1 << 20),
            answered: 3
        }
    );
    let errors = client_input(&seed("nbd_client_replies", "error_replies"));
    assert_eq!(errors.answered, 3, "{errors:?}");
    let fallback = client_input(&seed("nbd_client_replies", "export_name_fallback"));
    assert_eq!(fallback.size, Some(1 << 20), "{fallback:?}");
    let stray = client_input(&seed("nbd_client_replies", "unknown_handle"));
    assert_eq!(stray.answered, 0, "{stray:?}");
    // Extended headers taken: replies in chunks (a READ as a hole and a data chunk, out of
    // order with the others), then error chunks (with a message, with an offset).
    let extended = client_input(&seed("nbd_client_replies", "extended"));
    assert_eq!(
        extended,
        ClientOutcome {
            size: Some(1 << 20),
            answered: 3
        }
    );
    let errors = client_input(&seed("nbd_client_replies", "extended_errors"));
    assert_eq!(errors.answered, 3, "{errors:?}");
}

/// `seed` with bits flipped at `flips` (positions taken modulo its length).
fn flipped(mut seed: Vec<u8>, flips: &[(usize, u8)]) -> Vec<u8> {
    if !seed.is_empty() {
        for &(at, bit) in flips {
            let n = seed.len();
            seed[at % n] ^= 1 << (bit % 8);
        }
    }
    seed
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn the_server_survives_random_option_haggling(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut input = 3u32.to_be_bytes().to_vec();
        input.extend_from_slice(&bytes);
        serve_input(&input, None, false);
        serve_input(&input, Some(tls()), false);
    }

    #[test]
    fn the_server_survives_flipped_sessions(
        which in 0usize..4,
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
    ) {
        let (target, name, greeted) = [
            ("nbd_server_options", "list_info_go", false),
            ("nbd_server_options", "demote_then_go", false),
            ("nbd_server_transmission", "every_command", true),
            ("nbd_server_transmission", "reads_batched", true),
        ][which];
        serve_input(&flipped(seed(target, name), &flips), None, greeted);
    }

    #[test]
    fn the_server_survives_random_requests(bytes in proptest::collection::vec(any::<u8>(), 0..1024)) {
        serve_input(&bytes, None, true);
    }

    #[test]
    fn the_client_survives_flipped_servers(
        which in 0usize..5,
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
    ) {
        let name = ["good", "error_replies", "export_name_fallback", "extended", "extended_errors"][which];
        client_input(&flipped(seed("nbd_client_replies", name), &flips));
    }

    #[test]
    fn the_client_survives_random_servers(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        // Everything at once (the split covers it all).
        let mut input = (18 + bytes.len() as u16).to_be_bytes().to_vec();
        input.extend_from_slice(b"NBDMAGIC");
        input.extend_from_slice(&0x4948_4156_454F_5054u64.to_be_bytes());
        input.extend_from_slice(&3u16.to_be_bytes());
        input.extend_from_slice(&bytes);
        client_input(&input);
    }
}
