//! Every trace reader (the format picked by the input's first byte, or detected), fed a file.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = tiercache_trace::fuzzing::read_input(data);
});
