//! Power loss that reorders writes: at every point of a scenario, the cache device is rebuilt
//! with every data write kept and every slot-table write since its last sync lost (the
//! device put the data on media and not the records, which it may). Recovery must never
//! pair a line's name with another line's bytes.
//!
//! The scenario frees a slot with a record that is not synced yet (a failed read drops the
//! clean line it touched) and reads another line into that slot at once: unless the empty
//! record is made durable before the new line's bytes land, such a crash recovers the old
//! line's record over the new line's bytes.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_engine::slot_table::Layout;
use tiercache_engine::{Engine, EngineConfig, Lookup};
use tiercache_policy::{CacheConfig, CleaningConfig, PromotionConfig, WritePolicy};

const LINE: u64 = 4096;
const VOLUME: usize = 256 << 10;

#[derive(Clone)]
enum Entry {
    Write { dev: u8, offset: u64, data: Vec<u8> },
    Sync { dev: u8 },
}

/// A device that logs its writes and syncs into a log shared with the other device; while
/// `failing`, its reads of line 1 fail.
struct Logged {
    id: u8,
    bytes: MemDevice,
    log: Arc<Mutex<Vec<Entry>>>,
    failing: AtomicBool,
}

impl BlockDevice for Logged {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        if self.failing.load(SeqCst) && offset < 2 * LINE && offset + buf.len() as u64 > LINE {
            return Err(std::io::Error::other("injected: line 1 unreadable"));
        }
        self.bytes.read_at(buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64, fua: bool) -> std::io::Result<()> {
        self.log.lock().unwrap().push(Entry::Write {
            dev: self.id,
            offset,
            data: data.to_vec(),
        });
        self.bytes.write_at(data, offset, fua)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.log.lock().unwrap().push(Entry::Sync { dev: self.id });
        Ok(())
    }
    fn size(&self) -> u64 {
        self.bytes.size()
    }
}

fn config() -> CacheConfig {
    CacheConfig {
        // One slot: the second line read must reuse the first's.
        capacity: LINE,
        line_size: LINE,
        write_policy: WritePolicy::WriteBack,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::None,
        ..CacheConfig::default()
    }
}

#[test]
fn a_reused_slot_never_pairs_the_old_line_with_new_bytes() {
    let cfg = config();
    let ecfg = EngineConfig {
        lookup: Lookup::HtCg,
        // Fills finish before reads return: the log is complete when the scenario ends.
        answer_reads_early: false,
        ..EngineConfig::default()
    };
    let layout = Layout::new(1, LINE);
    let cache0 = vec![0u8; layout.device_len() as usize];
    // Line 0 (A) holds 0x11, line 5 (B) 0x22.
    let mut backend0 = vec![0u8; VOLUME];
    backend0[..LINE as usize].fill(0x11);
    backend0[5 * LINE as usize..6 * LINE as usize].fill(0x22);
    let log = Arc::new(Mutex::new(Vec::new()));
    {
        let dev = |id, bytes: &Vec<u8>| {
            Arc::new(Logged {
                id,
                bytes: MemDevice::from_bytes(bytes.clone()),
                log: log.clone(),
                failing: false.into(),
            })
        };
        let backend = dev(1, &backend0);
        let engine = Engine::with_devices(&cfg, &ecfg, dev(0, &cache0), backend.clone()).unwrap();
        let mut b = vec![0u8; LINE as usize];
        engine.read(&mut b, 0).unwrap();
        engine.flush().unwrap();
        // A read of A and line 1 fails (line 1 unreadable): A, clean, is forgotten, its slot
        // freed by an empty record not synced yet.
        backend.failing.store(true, SeqCst);
        let mut two = vec![0u8; 2 * LINE as usize];
        assert!(engine.read(&mut two, 0).is_err());
        backend.failing.store(false, SeqCst);
        // B is read into the slot A left.
        engine.read(&mut b, 5 * LINE).unwrap();
        assert!(b.iter().all(|&x| x == 0x22));
        std::mem::forget(engine);
    }
    let log = log.lock().unwrap().clone();
    let mut checked = 0;
    for crash_at in 0..=log.len() {
        // The cache device: data writes all kept, table writes since its last sync lost.
        let last_sync = log[..crash_at]
            .iter()
            .rposition(|e| matches!(e, Entry::Sync { dev: 0 }))
            .map_or(0, |i| i + 1);
        let (mut cache, mut backend) = (cache0.clone(), backend0.clone());
        if last_sync == 0 {
            // Not even formatted durably: nothing to recover.
            continue;
        }
        for (i, e) in log[..crash_at].iter().enumerate() {
            if let Entry::Write { dev, offset, data } = e {
                let (img, keep) = match dev {
                    0 => (&mut cache, i < last_sync || *offset >= layout.data_offset),
                    _ => (&mut backend, true),
                };
                if keep {
                    img[*offset as usize..*offset as usize + data.len()].copy_from_slice(data);
                }
            }
        }
        let engine = Engine::with_devices(
            &cfg,
            &ecfg,
            Arc::new(MemDevice::from_bytes(cache)),
            Arc::new(MemDevice::from_bytes(backend)),
        )
        .unwrap_or_else(|e| panic!("crash at {crash_at}: recovery failed: {e}"));
        let mut a = vec![0u8; LINE as usize];
        engine.read(&mut a, 0).unwrap();
        assert!(
            a.iter().all(|&x| x == 0x11),
            "crash at {crash_at}: line A reads {:#x}.. (B's bytes under A's record?)",
            a[0]
        );
        let mut b = vec![0u8; LINE as usize];
        engine.read(&mut b, 5 * LINE).unwrap();
        assert!(b.iter().all(|&x| x == 0x22), "crash at {crash_at}: line B");
        checked += 1;
    }
    assert!(checked > 5, "{checked} crash points");
}
