//! The NBD server's transmission phase: requests after a valid handshake.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tiercache_nbd::fuzzing::serve_input(data, None, true);
});
