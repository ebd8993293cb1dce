//! WRITE_ZEROES through the cache over a file backend that zeroes fast (fallocate): the
//! engine reports fast zeroing, zeroes without writing the zeroes (the cache drops its copies,
//! dirty ones included; the backend file gets a hole), keeps the bytes around the range, and
//! agrees with a reference model under random reads, writes, zeroes and flushes. A backend
//! without fast zeroing keeps the engine's zeroes written as data (and fast zero refused).

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::Arc;
use tiercache_blockdev::{BlockDevice, FileDevice, MemDevice};
use tiercache_engine::slot_table::Layout;
use tiercache_engine::{Engine, EngineConfig};
use tiercache_policy::{CacheConfig, CleaningConfig, WritePolicy};

const LINE: u64 = 16384;
const VOLUME: u64 = 256 * LINE;

fn cache_config(lines: u64) -> CacheConfig {
    CacheConfig {
        capacity: lines * LINE,
        line_size: LINE,
        write_policy: WritePolicy::WriteBack,
        cleaning: CleaningConfig::None,
        ..CacheConfig::default()
    }
}

fn cache_device(cfg: &CacheConfig) -> Arc<MemDevice> {
    let len = Layout::new((cfg.capacity / cfg.line_size) as u32, cfg.line_size).device_len();
    Arc::new(MemDevice::new(len as usize))
}

/// An engine of `lines` lines over a file backend of [`VOLUME`] bytes in `dir`.
fn engine_over_file(dir: &std::path::Path, lines: u64) -> (Engine, Arc<FileDevice>) {
    let backend = Arc::new(FileDevice::open(&dir.join("backend.img"), VOLUME).unwrap());
    assert!(
        backend.fast_zeroes(),
        "the test directory's file system punches holes (ext4, XFS, tmpfs all do)"
    );
    let cfg = cache_config(lines);
    let e = Engine::with_devices(
        &cfg,
        &EngineConfig::default(),
        cache_device(&cfg),
        backend.clone(),
    )
    .unwrap();
    (e, backend)
}

#[test]
fn zeroes_drop_the_cached_copies_and_zero_the_backend_file() {
    let dir = tempfile::tempdir().unwrap();
    let (e, backend) = engine_over_file(dir.path(), 64);
    assert!(
        e.fast_zeroes(),
        "a file backend that punches holes zeroes fast"
    );
    // 16 lines dirty in the cache (write-back, no cleaning), the backend still old.
    let data: Vec<u8> = (0..16 * LINE).map(|i| (i % 251 + 1) as u8).collect();
    e.write(&data, 8 * LINE, false).unwrap();
    let before = e.stats();
    assert_eq!(before.dirty_lines, 16);
    // Zero all but 100 bytes at each end of them (partial sub-blocks: written as zeroes).
    let (from, len) = (8 * LINE + 100, 16 * LINE - 200);
    e.write_zeroes(from, len, true).unwrap();
    let after = e.stats();
    let mut back = vec![1u8; 16 * LINE as usize];
    e.read(&mut back, 8 * LINE).unwrap();
    let mut want = data.clone();
    want[100..100 + len as usize].fill(0);
    assert!(back == want, "zeroed inside, kept at the ends");
    // The whole sub-blocks were not written as zeroes anywhere: dropped from the cache,
    // zeroed in the backend file.
    let written = (after.cache.cache_bytes_written - before.cache.cache_bytes_written)
        + (after.cache.backend_bytes_written - before.cache.backend_bytes_written);
    assert!(
        written < 2 * LINE,
        "{written} bytes written to zero {len}: the zeroes went through as data"
    );
    assert!(after.dirty_lines <= 2, "{} dirty lines", after.dirty_lines);
    // Written back (the ends were dirty in the cache): the backend file holds it all, with
    // holes where the whole lines were.
    e.flush_all().unwrap();
    let file = std::fs::read(dir.path().join("backend.img")).unwrap();
    assert!(file[(8 * LINE) as usize..(24 * LINE) as usize] == want[..]);
    let holes = backend.allocation(9 * LINE, 14 * LINE).unwrap();
    assert!(
        holes.iter().all(|x| x.flags & 1 != 0),
        "the zeroed lines are a hole of the backend file: {holes:?}"
    );
}

#[test]
fn zeroes_agree_with_a_model_under_random_traffic() {
    let dir = tempfile::tempdir().unwrap();
    // A cache of a quarter of the volume: lines are evicted and written back meanwhile.
    let (e, _backend) = engine_over_file(dir.path(), 64);
    let mut model = vec![0u8; VOLUME as usize];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(36);
    let mut buf = vec![0u8; 4 * LINE as usize];
    for n in 0..1500u32 {
        let len = 512 * rng.gen_range(1..=(8 * LINE / 512));
        let off = 512 * rng.gen_range(0..(VOLUME - len) / 512);
        let (o, l) = (off as usize, len as usize);
        match rng.gen_range(0..10) {
            0..=3 => {
                let l = l.min(buf.len());
                for (i, b) in buf[..l].iter_mut().enumerate() {
                    *b = (n as u8).wrapping_mul(13) ^ (i as u8) | 1;
                }
                e.write(&buf[..l], off, rng.gen_bool(0.05)).unwrap();
                model[o..o + l].copy_from_slice(&buf[..l]);
            }
            4..=5 => {
                e.write_zeroes(off, len, rng.gen_bool(0.1)).unwrap();
                model[o..o + l].fill(0);
            }
            6 => e.flush().unwrap(),
            _ => {
                let l = l.min(buf.len());
                e.read(&mut buf[..l], off).unwrap();
                assert!(buf[..l] == model[o..o + l], "read #{n} of {l} at {off}");
            }
        }
    }
    e.flush().unwrap();
    let mut all = vec![0u8; VOLUME as usize];
    e.read(&mut all, 0).unwrap();
    assert!(all == model, "the whole volume");
    e.flush_all().unwrap();
    let file = std::fs::read(dir.path().join("backend.img")).unwrap();
    assert!(file == model, "the backend file alone, once written back");
}

#[test]
fn a_backend_without_fast_zeroing_keeps_zeroes_written() {
    let cfg = cache_config(16);
    let backend = Arc::new(MemDevice::from_bytes(vec![9; VOLUME as usize]));
    struct Slow(Arc<MemDevice>);
    impl BlockDevice for Slow {
        fn size(&self) -> u64 {
            self.0.size()
        }
        fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
            self.0.read_at(buf, off)
        }
        fn write_at(&self, d: &[u8], off: u64, fua: bool) -> std::io::Result<()> {
            self.0.write_at(d, off, fua)
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let e = Engine::with_devices(
        &cfg,
        &EngineConfig::default(),
        cache_device(&cfg),
        Arc::new(Slow(backend.clone())),
    )
    .unwrap();
    assert!(!e.fast_zeroes());
    e.write_zeroes(LINE, 4 * LINE, false).unwrap();
    let mut b = vec![1u8; 4 * LINE as usize];
    e.read(&mut b, LINE).unwrap();
    assert_eq!(b, vec![0u8; 4 * LINE as usize]);
    assert!(
        e.stats().dirty_lines >= 4,
        "written as data into the write-back cache"
    );
}
