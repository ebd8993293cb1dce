//! Entry points for coverage-guided fuzzing of recovery (the cargo-fuzz target
//! `engine_recovery` in `fuzz/`, replayed under stable by `tests/fuzz_recovery.rs`): a real
//! cache image, written by an engine and shut down with dirty and clean lines recorded, is
//! damaged as the input says (bit flips and overwrites in its metadata: superblock, partition
//! log, slot records), and an engine opened on it must either refuse with a named error or
//! serve, for every line, the data last written or (where recovery dropped what it could not
//! trust) the backend's: never anything else.
//!
//! Only the metadata area is damaged: the data area carries no checksums, so a flip there is
//! served as written (a device's own checksums are what catch that).

use crate::slot_table::Layout;
use crate::{Engine, EngineConfig};
use std::sync::{Arc, OnceLock};
use tiercache_blockdev::MemDevice;
use tiercache_policy::{CacheConfig, CleaningConfig, EvictionKind, WritePolicy};

const LINE: u64 = 4096;
const CACHE_LINES: u64 = 32;
const VOLUME_LINES: u64 = 96;

/// The cache configuration of the image.
fn config() -> CacheConfig {
    CacheConfig {
        capacity: CACHE_LINES * LINE,
        line_size: LINE,
        eviction: EvictionKind::Lru,
        write_policy: WritePolicy::WriteBack,
        cleaning: CleaningConfig::None,
        ..CacheConfig::default()
    }
}

/// The bytes of line `i` after write `n` (0: the backend's initial contents).
fn pattern(i: u64, n: u8) -> Vec<u8> {
    let mut v = vec![n; LINE as usize];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

/// A cache image, its backend, what each line must read, and the metadata area's length.
pub struct Image {
    cache: Vec<u8>,
    backend: Vec<u8>,
    expected: Vec<Vec<u8>>,
    metadata_len: usize,
}

impl Image {
    /// Bytes of metadata (superblock, partition log, slot records) before the data area.
    pub fn metadata_len(&self) -> usize {
        self.metadata_len
    }

    /// Built once per process (an engine run): lines written twice, some evicted (written
    /// back), some dirty at the shutdown, some clean; every line's latest data known.
    pub fn get() -> &'static Image {
        static IMAGE: OnceLock<Image> = OnceLock::new();
        IMAGE.get_or_init(|| {
            let cfg = config();
            let layout = Layout::new(CACHE_LINES as u32, LINE);
            let cache = Arc::new(MemDevice::new(layout.device_len() as usize));
            let mut backend0 = Vec::with_capacity((VOLUME_LINES * LINE) as usize);
            for i in 0..VOLUME_LINES {
                backend0.extend_from_slice(&pattern(i, 0));
            }
            let backend = Arc::new(MemDevice::from_bytes(backend0));
            let engine = Engine::with_devices(
                &cfg,
                &EngineConfig::default(),
                cache.clone(),
                backend.clone(),
            )
            .expect("a blank image opens");
            let mut expected: Vec<Vec<u8>> = (0..VOLUME_LINES).map(|i| pattern(i, 0)).collect();
            for round in 1..=2u8 {
                for i in (0..VOLUME_LINES).filter(|i| i % (round as u64 + 1) == 0) {
                    let d = pattern(i, round);
                    engine.write(&d, i * LINE, false).expect("write");
                    expected[i as usize] = d;
                }
            }
            // Reads make clean resident lines too.
            let mut b = vec![0u8; LINE as usize];
            for i in (1..VOLUME_LINES).step_by(7) {
                engine.read(&mut b, i * LINE).expect("read");
            }
            engine.shutdown().expect("clean shutdown");
            drop(engine);
            Image {
                cache: cache.snapshot(),
                backend: backend.snapshot(),
                expected,
                metadata_len: layout.data_offset as usize,
            }
        })
    }
}

/// What one damaged image gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The engine refused the image with this error.
    Refused(String),
    /// The engine opened it; every line read what was last written.
    Exact,
    /// The engine opened it and dropped what it could not trust: these lines read the
    /// backend's (older) data.
    Dropped(usize),
}

/// The image damaged as `data` says, opened: the outcome, or what broke the contract (a line
/// reading something neither last written nor the backend's, a panic is the fuzzer's).
///
/// `data`: a first byte choosing flips (even) or overwrites (odd), then for flips 5-byte
/// items (32-bit offset into the metadata, byte to xor), for overwrites a 32-bit offset and
/// the bytes to put there.
pub fn damaged_image_recovers(data: &[u8]) -> Result<Outcome, String> {
    let img = Image::get();
    let mut cache = img.cache.clone();
    let meta = img.metadata_len;
    let at = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap()) as usize % meta;
    let mut changed = false;
    match data.split_first() {
        Some((mode, rest)) if mode % 2 == 0 => {
            for item in rest.chunks_exact(5) {
                cache[at(&item[..4])] ^= item[4];
                changed |= item[4] != 0;
            }
        }
        Some((_, rest)) if rest.len() >= 4 => {
            let start = at(&rest[..4]);
            let bytes = &rest[4..][..(rest.len() - 4).min(meta - start)];
            changed = cache[start..start + bytes.len()] != *bytes;
            cache[start..start + bytes.len()].copy_from_slice(bytes);
        }
        _ => {}
    }
    let engine = match Engine::with_devices(
        &config(),
        &EngineConfig::default(),
        Arc::new(MemDevice::from_bytes(cache)),
        Arc::new(MemDevice::from_bytes(img.backend.clone())),
    ) {
        Ok(e) => e,
        // Every refusal is named (the error says which structure, at which offset).
        Err(e) => return Ok(Outcome::Refused(e.to_string())),
    };
    let mut dropped = 0;
    let mut b = vec![0u8; LINE as usize];
    for i in 0..VOLUME_LINES {
        engine
            .read(&mut b, i * LINE)
            .map_err(|e| format!("line {i}: read failed after recovery: {e}"))?;
        let backend = &img.backend[(i * LINE) as usize..((i + 1) * LINE) as usize];
        if b == img.expected[i as usize] {
            continue;
        }
        if b != backend {
            return Err(format!(
                "line {i}: served data neither last written nor the backend's (first bytes {:?})",
                &b[..12]
            ));
        }
        dropped += 1;
    }
    let _ = engine.shutdown();
    if dropped > 0 && !changed {
        return Err(format!("{dropped} lines lost from an undamaged image"));
    }
    Ok(if dropped == 0 {
        Outcome::Exact
    } else {
        Outcome::Dropped(dropped)
    })
}
