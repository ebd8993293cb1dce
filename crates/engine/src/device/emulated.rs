//! A device that takes as long as a modelled one (docs/design.md §5 presets), for building a
//! fast-cache/slow-backend system on one machine.

use std::io;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tiercache_blockdev::{BlockDevice, DemoteReply, RemoteStats};
use tiercache_core::IoKind;
use tiercache_devices::{DeviceConfig, DeviceError, DeviceModel};

/// Wraps a device so each op completes no earlier than the simulator's model of `config`
/// says: the same model (base latency, per-byte cost, channels, queueing, RAID penalties)
/// fed with real submission times.
pub struct Emulated<D> {
    inner: D,
    model: Mutex<DeviceModel>,
    epoch: Instant,
}

impl<D: BlockDevice> Emulated<D> {
    /// Emulates `config` (e.g. `DeviceConfig::preset("sata-ssd-5100")`) over `inner`.
    pub fn new(inner: D, name: &str, config: &DeviceConfig) -> Result<Self, DeviceError> {
        Ok(Self {
            inner,
            model: Mutex::new(DeviceModel::new(name, config)?),
            epoch: Instant::now(),
        })
    }

    fn timed<T>(&self, kind: IoKind, offset: u64, len: u64, op: impl FnOnce() -> T) -> T {
        let done = {
            let mut m = self.model.lock().unwrap_or_else(|e| e.into_inner());
            // Read under the lock, so the model sees its ops in time order (it assumes time
            // never goes back: a disk forgets channels that fell idle before `now`).
            let now = self.epoch.elapsed().as_nanos() as u64;
            m.run_op(now, kind, offset, len)
        };
        let out = op();
        wait_until(self.epoch + Duration::from_nanos(done));
        out
    }
}

/// Sleeps until `deadline`, spinning the last stretch: thread wake-up is too coarse for
/// device latencies of tens of microseconds.
fn wait_until(deadline: Instant) {
    const SPIN: Duration = Duration::from_micros(60);
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > SPIN {
            std::thread::sleep(left - SPIN);
        } else {
            std::hint::spin_loop();
        }
    }
}

impl<D: BlockDevice> BlockDevice for Emulated<D> {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let len = buf.len() as u64;
        self.timed(IoKind::Read, offset, len, || {
            self.inner.read_at(buf, offset)
        })
    }
    fn write_at(&self, data: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        self.timed(IoKind::Write, offset, data.len() as u64, || {
            self.inner.write_at(data, offset, fua)
        })
    }
    fn flush(&self) -> io::Result<()> {
        self.timed(IoKind::Flush, 0, 0, || self.inner.flush())
    }
    fn epoch(&self) -> u64 {
        self.inner.epoch()
    }
    fn flush_since(&self, epoch: u64) -> io::Result<()> {
        self.timed(IoKind::Flush, 0, 0, || self.inner.flush_since(epoch))
    }
    fn link_stats(&self) -> Option<RemoteStats> {
        self.inner.link_stats()
    }
    fn takes_demotes(&self) -> bool {
        self.inner.takes_demotes()
    }
    fn demote_at(
        &self,
        data: &[u8],
        offset: u64,
        still_valid: &dyn Fn() -> bool,
    ) -> io::Result<DemoteReply> {
        // A demote moves a line over the link like a write.
        self.timed(IoKind::Write, offset, data.len() as u64, || {
            self.inner.demote_at(data, offset, still_valid)
        })
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.trim(offset, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiercache_blockdev::MemDevice;

    #[test]
    fn ops_take_at_least_the_modelled_latency() {
        let cfg = DeviceConfig::preset("sata-ssd-5100");
        let d = Emulated::new(MemDevice::new(1 << 20), "ssd", &cfg).unwrap();
        let model_ns = {
            let mut m = DeviceModel::new("probe", &cfg).unwrap();
            m.run_op(0, IoKind::Read, 0, 4096)
        };
        assert!(model_ns > 10_000, "an SSD read takes tens of microseconds");
        let t = Instant::now();
        let mut b = [0u8; 4096];
        for i in 0..20 {
            d.read_at(&mut b, i * 4096).unwrap();
        }
        // Serial ops each wait for their own completion: never faster than the model.
        assert!(t.elapsed().as_nanos() as u64 >= 20 * model_ns);
    }
}
