//! `NBD_CMD_CACHE` as what its name says: a prefetch that reads the range through the device
//! (so a cache below holds it), in bounded chunks, answered without data; offered in the
//! export's flags, so libnbd's `can_cache` is true (nbdinfo).

mod common;

use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_nbd::client::Command;
use tiercache_nbd::*;

/// Records the reads that reach it.
struct Recording {
    inner: MemDevice,
    reads: Mutex<Vec<(u64, usize)>>,
    bytes: AtomicU64,
}

impl BlockDevice for Recording {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.reads.lock().unwrap().push((off, buf.len()));
        self.bytes.fetch_add(buf.len() as u64, Relaxed);
        self.inner.read_at(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        self.inner.write_at(data, off, fua)
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
}

fn recording(size: usize) -> Arc<Recording> {
    Arc::new(Recording {
        inner: MemDevice::new(size),
        reads: Mutex::new(Vec::new()),
        bytes: AtomicU64::new(0),
    })
}

#[test]
fn cache_reads_the_range_through_the_device_in_chunks() {
    let dev = recording(8 << 20);
    let (sock, stats, stop, _dir) = common::serve(dev.clone(), ServerConfig::default());
    let uri: NbdUri = format!("nbd+unix:///?socket={}", sock.display())
        .parse()
        .unwrap();
    let c = Connection::open(&uri, Duration::from_secs(5)).unwrap();
    assert!(c.info().can_cache());
    let t = Duration::from_secs(10);
    let (off, len) = (4096u64, (3 << 20) + 512);
    assert!(c
        .call(Command::Cache, false, off, len, &[], t)
        .unwrap()
        .is_empty());
    let reads = dev.reads.lock().unwrap().clone();
    // The whole range, in order, no chunk over 1 MiB.
    assert_eq!(dev.bytes.load(Relaxed), len as u64);
    assert!(reads.iter().all(|&(_, n)| n <= 1 << 20), "{reads:?}");
    let mut at = off;
    for &(o, n) in &reads {
        assert_eq!(o, at);
        at += n as u64;
    }
    // Beyond the export: refused before it is sent, nothing read.
    let before = dev.bytes.load(Relaxed);
    assert!(matches!(
        c.call(Command::Cache, false, (8 << 20) - 4096, 8192, &[], t),
        Err(ClientError::Invalid(_))
    ));
    assert_eq!(dev.bytes.load(Relaxed), before);
    assert_eq!(stats.einval.load(Relaxed), 0);
    stop.trigger();
}

#[test]
fn nbdinfo_sees_can_cache_and_structured_replies() {
    if !common::have("nbdinfo") {
        return;
    }
    let dev = recording(4 << 20);
    let (sock, _stats, stop, _dir) = common::serve(dev, ServerConfig::default());
    let o = std::process::Command::new("nbdinfo")
        .arg(format!("nbd+unix:///?socket={}", sock.display()))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("can_cache: true"),
        "{out}"
    );
    stop.trigger();
}
