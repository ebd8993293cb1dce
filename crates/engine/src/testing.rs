//! Test devices for the engine's start-up (docs/design.md §13, "Serving before the scan
//! ends"): [`ScanGate`], a cache device whose reads of chosen shards' slot records wait at a
//! gate, so a test can hold a shard's scan and observe what is served meanwhile without
//! waiting on a clock. Used by the engine's and the server's `early_serving` tests.

use crate::slot_table::{Layout, SUPERBLOCK_BYTES};
use std::collections::HashSet;
use std::ops::Range;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_policy::ShardLayout;

/// A cache device in memory whose reads of chosen shards' slot records wait while their gate
/// is shut; it logs the order in which each shard's records were first asked for.
pub struct ScanGate {
    mem: MemDevice,
    /// Each shard's slot records, as a byte range of the device.
    ranges: Vec<Range<u64>>,
    state: Mutex<GateState>,
    opened: Condvar,
}

#[derive(Default)]
struct GateState {
    shut: HashSet<usize>,
    asked: Vec<usize>,
    waiting: usize,
}

impl ScanGate {
    /// A gate over the device image `bytes` of a cache of `shards`' layout with lines of
    /// `line_size` bytes, the shards `shut` held.
    pub fn new(bytes: Vec<u8>, shards: &ShardLayout, line_size: u64, shut: &[usize]) -> Arc<Self> {
        let layout = Layout::new(shards.total_lines(), line_size);
        let at = |slot: u32| SUPERBLOCK_BYTES + u64::from(slot) * layout.slot_bytes();
        let ranges = (0..shards.shards())
            .map(|k| at(shards.base(k))..at(shards.base(k) + shards.lines(k)))
            .collect();
        Arc::new(Self {
            mem: MemDevice::from_bytes(bytes),
            ranges,
            state: Mutex::new(GateState {
                shut: shut.iter().copied().collect(),
                ..GateState::default()
            }),
            opened: Condvar::new(),
        })
    }

    /// Lets shard `k`'s reads through.
    pub fn open(&self, k: usize) {
        self.state.lock().unwrap().shut.remove(&k);
        self.opened.notify_all();
    }

    /// Lets every read through.
    pub fn open_all(&self) {
        self.state.lock().unwrap().shut.clear();
        self.opened.notify_all();
    }

    /// A guard that opens every gate when dropped: a failed assertion then ends its test
    /// rather than leave the open (and the threads waiting on it) held for ever.
    pub fn release_on_drop(self: &Arc<Self>) -> OpenOnDrop {
        OpenOnDrop(Arc::clone(self))
    }

    /// Shards whose records were asked for, in the order first asked.
    pub fn asked(&self) -> Vec<usize> {
        self.state.lock().unwrap().asked.clone()
    }

    /// Reads waiting at the gate now.
    pub fn waiting(&self) -> usize {
        self.state.lock().unwrap().waiting
    }

    /// The device's bytes now.
    pub fn snapshot(&self) -> Vec<u8> {
        self.mem.snapshot()
    }
}

impl BlockDevice for ScanGate {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        let end = off + buf.len() as u64;
        let shard = self
            .ranges
            .iter()
            .position(|r| !r.is_empty() && off < r.end && end > r.start);
        if let Some(k) = shard {
            let mut st = self.state.lock().unwrap();
            if !st.asked.contains(&k) {
                st.asked.push(k);
            }
            st.waiting += 1;
            while st.shut.contains(&k) {
                st = self.opened.wait(st).unwrap();
            }
            st.waiting -= 1;
        }
        self.mem.read_at(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> std::io::Result<()> {
        self.mem.write_at(data, off, fua)
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Opens every gate of a [`ScanGate`] when dropped ([`ScanGate::release_on_drop`]).
pub struct OpenOnDrop(Arc<ScanGate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open_all();
    }
}

/// Waits (polling every millisecond) until `cond` holds; panics naming `what` after two
/// minutes, so a state that never comes fails its test instead of hanging it. Tests wait
/// for states, never assert a time.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !cond() {
        assert!(Instant::now() < deadline, "waited two minutes for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shut_shard_holds_reads_of_its_records_only_until_opened() {
        let cfg = tiercache_policy::CacheConfig {
            capacity: 16 * 4096,
            line_size: 4096,
            shards: 2,
            ..Default::default()
        };
        let shards = ShardLayout::new(&cfg).unwrap();
        let layout = Layout::new(shards.total_lines(), 4096);
        let size = SUPERBLOCK_BYTES + 16 * layout.slot_bytes() + 16 * 4096;
        let gate = ScanGate::new(vec![7; size as usize], &shards, 4096, &[1]);
        let _release = gate.release_on_drop();
        let mut b = [0u8; 8];
        // The superblock and shard 0's records pass; shard 1's wait.
        gate.read_at(&mut b, 0).unwrap();
        gate.read_at(&mut b, SUPERBLOCK_BYTES).unwrap();
        let held = {
            let gate = Arc::clone(&gate);
            let at = SUPERBLOCK_BYTES + u64::from(shards.base(1)) * layout.slot_bytes();
            std::thread::spawn(move || gate.read_at(&mut [0u8; 8], at))
        };
        wait_until("the read of shard 1 held", || gate.waiting() == 1);
        assert!(!held.is_finished());
        gate.open(1);
        held.join().unwrap().unwrap();
        assert_eq!(gate.asked(), vec![0, 1]);
        assert_eq!(b, [7; 8]);
    }
}
