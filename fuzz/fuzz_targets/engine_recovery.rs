//! Recovery from a real cache image whose metadata the input damages: a named refusal, or
//! every line serves what was last written or the backend's data, never other bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(e) = tiercache_engine::fuzzing::damaged_image_recovers(data) {
        panic!("{e}");
    }
});
