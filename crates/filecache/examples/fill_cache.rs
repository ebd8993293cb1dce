//! Fills a file cache with many small files quickly, for the warm-restart benchmark
//! (`bench/warm_restart.sh`): creates `--files` files of `--size` bytes in STORE (1000 a
//! directory, `d<k>/f<i>`), reads each once through the library's mount state (so every file
//! has its blocks cached, as reads through `tiercache mount` would leave them, without paying
//! FUSE a million times), and unmounts cleanly (journal synced, checkpoint written).
//!
//! Usage: fill_cache STORE CACHE_DIR --files N [--size BYTES] [--block-size BYTES]
//! [--cache-size BYTES] (defaults: 100-byte files, 512-byte blocks, a cache of one block a
//! file plus 1/16). Prints what it did and how long each step took.

use std::path::{Path, PathBuf};
use std::time::Instant;

use tiercache_filecache::{MountConfig, State, Variant};

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: Option<T>) -> T {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} needs a number")),
        None => default.unwrap_or_else(|| panic!("{name} is required")),
    }
}

/// The relative path of file `i`.
fn rel(i: u64) -> PathBuf {
    PathBuf::from(format!("d{}/f{i}", i / 1000))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: fill_cache STORE CACHE_DIR --files N [--size B] [--block-size B] [--cache-size B]");
        std::process::exit(2);
    }
    let (store, cache) = (Path::new(&args[1]), Path::new(&args[2]));
    let files: u64 = arg(&args, "--files", None);
    let size: usize = arg(&args, "--size", Some(100));
    let block: u64 = arg(&args, "--block-size", Some(512));
    let blocks_per_file = (size as u64).div_ceil(block).max(1);
    let cache_size: u64 = arg(
        &args,
        "--cache-size",
        Some(files * blocks_per_file * block * 17 / 16),
    );

    let t = Instant::now();
    let content: Vec<u8> = (0..size).map(|b| (b % 251) as u8).collect();
    for i in 0..files {
        if i % 1000 == 0 {
            std::fs::create_dir_all(store.join(format!("d{}", i / 1000))).expect("mkdir");
        }
        std::fs::write(store.join(rel(i)), &content).expect("create");
    }
    eprintln!(
        "created {files} files of {size} B in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    let mut st = State::open(MountConfig {
        cleaning: tiercache_filecache::CleaningConfig::None,
        ..MountConfig::new(
            store.to_path_buf(),
            cache.to_path_buf(),
            (cache_size / block) as u32,
            block as u32,
            Variant::WB,
        )
    })
    .expect("open the cache");
    for i in 0..files {
        let path = store.join(rel(i));
        let md = std::fs::metadata(&path).expect("stat");
        let id = st.remember(rel(i), &md).expect("remember");
        let got = st.read(id, 0, size as u32).expect("read");
        assert_eq!(got, content);
    }
    eprintln!(
        "read them through the cache in {:.1} s: {} blocks cached",
        t.elapsed().as_secs_f64(),
        st.stats().cached_blocks
    );
    let t = Instant::now();
    st.sync_journal().expect("clean unmount");
    eprintln!(
        "clean unmount (checkpoint) in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    println!("cache_size={cache_size} block_size={block}");
}
