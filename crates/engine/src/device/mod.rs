//! The engine's own devices, each a [`BlockDevice`] like every cache device and backend it
//! runs on (a [`tiercache_blockdev::FileDevice`], a [`tiercache_blockdev::MemDevice`], or
//! another engine).
//!
//! [`Emulated`] makes any device take as long as a docs/design.md §5 preset would, so a
//! fast-cache/slow-backend system can be built on one machine; [`CrashDevice`] records every
//! write so tests can rebuild the device as a power loss would leave it; [`NbdBackend`] is a
//! remote NBD export; [`VolumeSet`] lays several volumes' backends end to end;
//! [`FaultDevice`] fails or stalls chosen ops (fault injection, docs/design.md §11).

mod crash;
mod emulated;
mod fault;
mod remote;
mod volumes;
pub(crate) mod watched;

pub use crash::{CrashDevice, CrashLog};
pub use emulated::Emulated;
pub use fault::{FaultDevice, FaultKind, FaultOp, FaultRule};
pub use remote::NbdBackend;
pub use volumes::{DuplicateVolume, VolumeSet};

use std::fs::File;
use std::io;
use std::path::Path;

#[cfg(doc)]
use tiercache_blockdev::BlockDevice;

/// Opens (creating it empty if missing) and takes an exclusive advisory lock (flock) on the
/// file at `path`, failing at once when another process, or another open of the file in this
/// one, holds it: two caches sharing one cache device would destroy each other's data. Taken
/// before anything else touches the device, and held as long as the returned handle lives; the
/// lock goes with the descriptor, so a killed process leaves none behind.
pub(crate) fn lock_exclusive(path: &Path) -> io::Result<File> {
    let file = tiercache_blockdev::open_rw(path)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "in use by another tiercache (serve, flush or bench): stop it first, or choose another engine.cache_path",
        )),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}
