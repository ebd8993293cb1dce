//! The serve config loader (the TOML document, its variants, the setup each describes), fed
//! text: a setup or a named error, never a panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = tiercache_server::config::load_text(&String::from_utf8_lossy(data));
});
