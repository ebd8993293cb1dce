//! The file cache's journal: operations written through the real journal, the file damaged,
//! replayed; replay's answer must be consistent (never a panic).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(e) = tiercache_filecache::fuzzing::replay_input(data) {
        panic!("{e}");
    }
});
