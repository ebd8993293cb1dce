//! The NBD server's option haggling (and whatever follows it), fed a client's bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tiercache_nbd::fuzzing::serve_input(data, None, false);
});
