//! Entry point for coverage-guided fuzzing of the journal's replay (the cargo-fuzz target
//! `filecache_journal` in `fuzz/`, replayed under stable by `tests/fuzz_journal.rs`): the
//! input is a run of journal operations, written through the real [`Journal`], then bit
//! flips and a cut applied to the file, then [`replay`]. Contract: replay never panics and
//! what it returns is consistent (each block's versions share its key, newest first; no slot
//! in two versions; a block's versions non-empty); and on an undamaged journal the last
//! `Map` recorded is the newest version of its block unless a later `Clean` or `Deleted`
//! gave the block up.

use crate::core::BlockKey;
use crate::journal::{replay, Journal};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Runs `data` (see the module doc): `Err` names the broken property.
///
/// Layout: byte 0 the number of operations (mod 64); 4 bytes per operation (kind, slot, file,
/// block, each small so that they collide); then 3-byte flips (16-bit offset into the file,
/// byte to xor); a last odd byte cuts the file there (a torn tail).
pub fn replay_input(data: &[u8]) -> Result<(), String> {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "tiercache-fuzz-journal-{}-{}",
        std::process::id(),
        N.fetch_add(1, Relaxed)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let out = run(data, &dir.join("journal"));
    let _ = std::fs::remove_dir_all(&dir);
    out
}

fn run(data: &[u8], path: &std::path::Path) -> Result<(), String> {
    let Some((&count, rest)) = data.split_first() else {
        return Ok(());
    };
    let ops = (count % 64) as usize;
    let (op_bytes, tail) = rest.split_at((ops * 4).min(rest.len()));
    let mut j = Journal::create(path).map_err(|e| e.to_string())?;
    // The last Map of each block still standing in an undamaged journal.
    let mut last_map: Option<(u32, BlockKey)> = None;
    for op in op_bytes.chunks_exact(4) {
        let (slot, file, block) = (
            u32::from(op[1] % 8),
            u64::from(op[2] % 3),
            u64::from(op[3] % 4),
        );
        let key = BlockKey::new(file, block);
        let io = match op[0] % 5 {
            0 | 1 => {
                last_map = Some((slot, key));
                j.map(slot, key, &[op[3]; 16])
            }
            2 => {
                if last_map.is_some_and(|(s, _)| s == slot) {
                    last_map = None;
                }
                j.clean(slot)
            }
            3 => j.truncate(file, u64::from(op[3]) * 100),
            _ => {
                if last_map.is_some_and(|(_, k)| k.file == file) {
                    last_map = None;
                }
                j.deleted(file)
            }
        };
        io.map_err(|e| e.to_string())?;
    }
    // A later Map of the same slot (another key) or a Clean of another slot holding an older
    // version of the last-mapped block may give it up: the check below holds only when the
    // last operation was that Map.
    let last_op_was_map = op_bytes
        .chunks_exact(4)
        .last()
        .is_some_and(|op| op[0] % 5 < 2);
    drop(j);
    let mut bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let mut damaged = false;
    let mut flips = tail.chunks_exact(3);
    for f in &mut flips {
        if !bytes.is_empty() && f[2] != 0 {
            let at = u16::from_le_bytes([f[0], f[1]]) as usize % bytes.len();
            bytes[at] ^= f[2];
            damaged = true;
        }
    }
    if let [cut] = flips.remainder() {
        if cut % 2 == 1 && !bytes.is_empty() {
            bytes.truncate(*cut as usize % bytes.len());
            damaged = true;
        }
    }
    std::fs::write(path, &bytes).map_err(|e| e.to_string())?;
    let r = replay(path).map_err(|e| format!("replay failed: {e}"))?;
    let mut slots = HashSet::new();
    for versions in &r.blocks {
        let first = versions.first().ok_or("a block with no version")?;
        for v in versions {
            if v.key != first.key {
                return Err(format!("versions of two blocks together: {versions:?}"));
            }
            if !slots.insert(v.slot) {
                return Err(format!("slot {} in two versions", v.slot));
            }
        }
        if versions.windows(2).any(|w| w[0].seq <= w[1].seq) {
            return Err(format!("versions not newest first: {versions:?}"));
        }
    }
    if let (false, true, Some((slot, key))) = (damaged, last_op_was_map, last_map) {
        let newest = r.blocks.iter().find(|v| v[0].key == key);
        if newest.is_none_or(|v| v[0].slot != slot) {
            return Err(format!(
                "the last Map ({key:?} in slot {slot}) is not its block's newest version: {:?}",
                r.blocks
            ));
        }
    }
    Ok(())
}
