//! Power-loss testing: devices that log every write and sync in one shared, ordered log, from
//! which a test rebuilds each device as a crash at any point would leave it.

use std::io;
use std::sync::{Arc, Mutex};
use tiercache_blockdev::{BlockDevice, MemDevice};

#[derive(Debug, Clone)]
enum Event {
    Write {
        device: u8,
        offset: u64,
        data: Vec<u8>,
        /// Written with FUA: durable on its own, whatever syncs follow.
        fua: bool,
    },
    Sync {
        device: u8,
    },
}

/// The ordered log of writes and syncs of a group of [`CrashDevice`]s.
#[derive(Debug, Default)]
pub struct CrashLog {
    events: Mutex<Vec<Event>>,
}

impl CrashLog {
    /// A new, shared, empty log.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Events so far (writes and syncs of every device).
    pub fn len(&self) -> usize {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether nothing was logged.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Positions of the writes of `device`, in order.
    pub fn writes_of(&self, device: u8) -> Vec<usize> {
        let ev = self.events.lock().unwrap_or_else(|e| e.into_inner());
        ev.iter()
            .enumerate()
            .filter(|(_, e)| matches!(e, Event::Write { device: d, .. } if *d == device))
            .map(|(i, _)| i)
            .collect()
    }

    /// `device` as a power loss just before event `crash_at` leaves it, starting from
    /// `initial`. With `lose_unsynced`, writes not followed by a sync of that device before
    /// the crash are lost (the harshest outcome; FUA writes are never lost); otherwise every
    /// earlier write landed.
    pub fn image(
        &self,
        device: u8,
        initial: &[u8],
        crash_at: usize,
        lose_unsynced: bool,
    ) -> Vec<u8> {
        let ev = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let upto = crash_at.min(ev.len());
        let last_sync = ev[..upto]
            .iter()
            .rposition(|e| matches!(e, Event::Sync { device: d } if *d == device));
        let mut img = initial.to_vec();
        for (i, e) in ev[..upto].iter().enumerate() {
            if let Event::Write {
                device: d,
                offset,
                data,
                fua,
            } = e
            {
                let unsynced = !fua && last_sync.is_none_or(|s| i > s);
                if *d != device || (lose_unsynced && unsynced) {
                    continue;
                }
                img[*offset as usize..*offset as usize + data.len()].copy_from_slice(data);
            }
        }
        img
    }
}

/// An in-memory device whose writes and syncs go to a shared [`CrashLog`].
#[derive(Debug)]
pub struct CrashDevice {
    id: u8,
    mem: MemDevice,
    log: Arc<CrashLog>,
}

impl CrashDevice {
    /// Device number `id` holding `initial`, logging to `log`.
    pub fn new(id: u8, initial: Vec<u8>, log: Arc<CrashLog>) -> Self {
        Self {
            id,
            mem: MemDevice::from_bytes(initial),
            log,
        }
    }
}

/// Trims keep the data (a hint), as a device that ignores them would.
impl BlockDevice for CrashDevice {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.mem.read_at(buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        // Log and apply under the log's lock so the log order is the order writes landed.
        let mut ev = self.log.events.lock().unwrap_or_else(|e| e.into_inner());
        self.mem.write_at(data, offset, false)?;
        ev.push(Event::Write {
            device: self.id,
            offset,
            data: data.to_vec(),
            fua,
        });
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        let mut ev = self.log.events.lock().unwrap_or_else(|e| e.into_inner());
        ev.push(Event::Sync { device: self.id });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_follow_the_log_and_the_sync_points() {
        let log = CrashLog::new();
        let d = CrashDevice::new(0, vec![0; 16], log.clone());
        d.write_at(&[1, 1], 0, false).unwrap();
        d.flush().unwrap();
        d.write_at(&[2, 2], 2, false).unwrap();
        assert_eq!(log.len(), 3);
        assert_eq!(&log.image(0, &[0; 16], 3, false)[..4], &[1, 1, 2, 2]);
        assert_eq!(&log.image(0, &[0; 16], 3, true)[..4], &[1, 1, 0, 0]);
        assert_eq!(&log.image(0, &[0; 16], 1, false)[..4], &[1, 1, 0, 0]);
        assert_eq!(&log.image(0, &[0; 16], 1, true)[..4], &[0, 0, 0, 0]);
        assert_eq!(log.writes_of(0), vec![0, 2]);
        // A FUA write is durable without a sync; the unsynced one before it is not.
        d.write_at(&[3, 3], 4, false).unwrap();
        d.write_at(&[4, 4], 6, true).unwrap();
        assert_eq!(
            &log.image(0, &[0; 16], 5, true)[..8],
            &[1, 1, 0, 0, 0, 0, 4, 4]
        );
        assert_eq!(
            &log.image(0, &[0; 16], 5, false)[..8],
            &[1, 1, 2, 2, 3, 3, 4, 4]
        );
    }
}
