//! The NBD client fed a server's bytes: greeting, option replies, transmission replies.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tiercache_nbd::fuzzing::client_input(data);
});
