//! tiercache's DEMOTE extension: negotiation (and its clean fallback with servers that do not
//! offer it) and race safety: two clients racing writes and demotes of stale copies on the
//! same blocks never leave anything but the latest write.

mod common;

use std::collections::HashMap;
use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tiercache_blockdev::{BlockDevice, DemoteReply, MemDevice};
use tiercache_nbd::client::Command;
use tiercache_nbd::*;

const BLOCK: usize = 4096;

/// A device whose accepted demotes overwrite its data, as a cache installing a line would:
/// a stale demote let through would be read back. `still_valid` is checked under the lock
/// writes take, as an engine checks it under the lock its writes are decided under.
struct Installing {
    data: RwLock<Vec<u8>>,
}

impl BlockDevice for Installing {
    fn size(&self) -> u64 {
        self.data.read().unwrap().len() as u64
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let d = self.data.read().unwrap();
        buf.copy_from_slice(&d[off as usize..off as usize + buf.len()]);
        Ok(())
    }
    fn write_at(&self, data: &[u8], off: u64, _fua: bool) -> io::Result<()> {
        let mut d = self.data.write().unwrap();
        d[off as usize..off as usize + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        self.write_zeroes(off, len, false)
    }
    fn write_zeroes(&self, off: u64, len: u64, _fua: bool) -> io::Result<()> {
        let mut d = self.data.write().unwrap();
        d[off as usize..(off + len) as usize].fill(0);
        Ok(())
    }
    fn multi_conn(&self) -> bool {
        true
    }
    fn demote_at(
        &self,
        data: &[u8],
        off: u64,
        still_valid: &dyn Fn() -> bool,
    ) -> io::Result<DemoteReply> {
        let mut d = self.data.write().unwrap();
        if !still_valid() {
            return Ok(DemoteReply::Rejected);
        }
        d[off as usize..off as usize + data.len()].copy_from_slice(data);
        Ok(DemoteReply::Accepted)
    }
}

fn uri(sock: &std::path::Path) -> NbdUri {
    format!("nbd+unix:///?socket={}", sock.display())
        .parse()
        .unwrap()
}

fn open(sock: &std::path::Path, session: Option<u64>) -> Connection {
    let losses = Arc::new(std::sync::atomic::AtomicU64::new(0));
    Connection::open_with(&uri(sock), Duration::from_secs(5), losses, session).unwrap()
}

const T: Duration = Duration::from_secs(10);

#[test]
fn a_server_without_demotes_refuses_the_option_and_the_client_sends_none() {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(1 << 20));
    let (sock, stats, stop, _dir) = common::serve(dev, ServerConfig::default());
    let c = open(&sock, Some(7));
    assert!(!c.demote_enabled());
    // The connection works as any other after the refused option.
    c.call(Command::Write, false, 0, 4096, &[5u8; 4096], T)
        .unwrap();
    assert_eq!(
        c.call(Command::Read, false, 0, 4096, &[], T).unwrap(),
        vec![5u8; 4096]
    );
    assert!(matches!(
        c.call(Command::Demote, false, 0, 4096, &[1u8; 4096], T),
        Err(ClientError::Invalid(_))
    ));
    let remote = Remote::connect(
        uri(&sock),
        RemoteConfig {
            demote: true,
            ..RemoteConfig::default()
        },
    )
    .unwrap();
    assert!(!remote.demote_enabled());
    assert_eq!(
        remote.demote(&[1u8; 4096], 0).unwrap(),
        DemoteReply::Rejected
    );
    let st = remote.stats();
    assert_eq!((st.demotes_sent, st.demote_negotiated), (0, false));
    assert_eq!(stats.protocol_errors.load(Relaxed), 0);
    stop.trigger();
}

#[test]
fn nbdkit_refuses_the_option_and_the_pool_works_without_demotes() {
    if !common::have("nbdkit") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("kit.sock");
    let kit = tiercache_testsupport::ServerProcess::start(
        std::process::Command::new("nbdkit").args([
            "-f",
            "-U",
            sock.to_str().unwrap(),
            "memory",
            "8M",
        ]),
        &sock,
    );
    let remote = Remote::connect(
        uri(&sock),
        RemoteConfig {
            demote: true,
            ..RemoteConfig::default()
        },
    );
    let out = remote.map(|r| {
        let enabled = r.demote_enabled();
        r.write(&[9u8; 4096], 8192, false).unwrap();
        let mut b = vec![0u8; 4096];
        r.read(&mut b, 8192).unwrap();
        (
            enabled,
            b == vec![9u8; 4096],
            r.demote(&[1u8; 4096], 0).unwrap(),
        )
    });
    drop(kit);
    assert_eq!(out.unwrap(), (false, true, DemoteReply::Rejected));
}

/// Bytes of block `b` as write number `n` of client `c` leaves them.
fn pattern(b: usize, c: u8, n: u32) -> Vec<u8> {
    let mut v = vec![c; BLOCK];
    v[..4].copy_from_slice(&n.to_le_bytes());
    v[4..12].copy_from_slice(&(b as u64).to_le_bytes());
    v
}

#[test]
fn racing_writes_and_stale_demotes_never_outlive_the_latest_write() {
    const BLOCKS: usize = 16;
    let dev = Arc::new(Installing {
        data: RwLock::new(vec![0; BLOCKS * BLOCK]),
    });
    let export = Arc::new(
        DemoteExport::new(
            dev,
            DemoteConfig {
                // A small table: collisions happen, and may only cause refusals.
                table_entries: 8,
                ledger_entries: 8,
                ..DemoteConfig::default()
            },
        )
        .unwrap(),
    );
    let tracker = export.tracker().clone();
    let (sock, _stats, stop, _dir) = common::serve(export, ServerConfig::default());
    // Per block: the latest write's bytes; writes of one block are serialised by its lock so
    // that "latest" is defined; reads and demotes race them freely.
    let latest: Arc<Vec<Mutex<Vec<u8>>>> =
        Arc::new((0..BLOCKS).map(|_| Mutex::new(vec![0; BLOCK])).collect());
    let mut threads = Vec::new();
    for client in 0..2u8 {
        let (sock, latest) = (sock.clone(), latest.clone());
        threads.push(std::thread::spawn(move || {
            // Two connections of one session: reads on one, demotes on the other.
            let a = Arc::new(open(&sock, Some(100 + client as u64)));
            let b = Arc::new(open(&sock, Some(100 + client as u64)));
            assert!(a.demote_enabled() && b.demote_enabled());
            let mut copies: HashMap<usize, Vec<u8>> = HashMap::new();
            let mut rng = 0x9E37_79B9_u64 ^ client as u64;
            let mut next = || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let mut writes = 0u32;
            for _ in 0..3000 {
                let blk = (next() % BLOCKS as u64) as usize;
                let off = (blk * BLOCK) as u64;
                match next() % 3 {
                    0 => {
                        writes += 1;
                        let v = pattern(blk, client + 1, writes);
                        let mut l = latest[blk].lock().unwrap();
                        a.call(Command::Write, false, off, BLOCK as u32, &v, T)
                            .unwrap();
                        *l = v.clone();
                        drop(l);
                        copies.insert(blk, v);
                    }
                    1 => {
                        let v = b
                            .call(Command::Read, false, off, BLOCK as u32, &[], T)
                            .unwrap();
                        copies.insert(blk, v);
                    }
                    _ => {
                        // Demote this client's copy, however old it may be by now.
                        if let Some(v) = copies.remove(&blk) {
                            let c = if next() % 2 == 0 { &a } else { &b };
                            match c.call(Command::Demote, false, off, BLOCK as u32, &v, T) {
                                Ok(_) => {}
                                Err(ClientError::Reply(e)) => {
                                    assert!(demote::reply_of_errno(e).is_some(), "errno {e}")
                                }
                                Err(e) => panic!("demote: {e}"),
                            }
                        }
                    }
                }
            }
            // Last, every copy still held goes down, the stale ones included: whatever is
            // installed now stays for the check below.
            for (blk, v) in copies {
                let off = (blk * BLOCK) as u64;
                match a.call(Command::Demote, false, off, BLOCK as u32, &v, T) {
                    Ok(_) | Err(ClientError::Reply(_)) => {}
                    Err(e) => panic!("demote: {e}"),
                }
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    let c = open(&sock, None);
    for (blk, l) in latest.iter().enumerate() {
        let got = c
            .call(
                Command::Read,
                false,
                (blk * BLOCK) as u64,
                BLOCK as u32,
                &[],
                T,
            )
            .unwrap();
        assert!(
            got == *l.lock().unwrap(),
            "block {blk}: read back {:?}, latest write {:?}",
            &got[..12],
            &l.lock().unwrap()[..12]
        );
    }
    let st = &tracker.stats;
    let g = |a: &std::sync::atomic::AtomicU64| a.load(Relaxed);
    // Conservation: every demote received was accepted, already held or refused for a reason.
    assert_eq!(
        g(&st.received),
        g(&st.accepted)
            + g(&st.already_held)
            + g(&st.rejected_stale)
            + g(&st.rejected_unknown)
            + g(&st.rejected_by_cache)
            + g(&st.rejected_invalid)
    );
    // Both paths ran: current copies were installed, stale ones refused.
    assert!(g(&st.accepted) > 0, "no demote accepted: {st:?}");
    assert!(g(&st.rejected_stale) > 0, "no stale demote seen: {st:?}");
    stop.trigger();
}

#[test]
fn a_negative_control_the_same_race_without_tracking_installs_stale_data() {
    // The harness above catches what the tracking prevents: demoting a copy read before
    // another client's write, straight into the device, leaves the older data.
    let dev = Installing {
        data: RwLock::new(vec![0; BLOCK]),
    };
    let old = {
        let mut b = vec![0u8; BLOCK];
        dev.read_at(&mut b, 0).unwrap();
        b
    };
    dev.write_at(&pattern(0, 2, 1), 0, false).unwrap();
    assert_eq!(
        dev.demote_at(&old, 0, &|| true).unwrap(),
        DemoteReply::Accepted
    );
    let mut now = vec![0u8; BLOCK];
    dev.read_at(&mut now, 0).unwrap();
    assert_ne!(now, pattern(0, 2, 1));
}
