//! Minimal NBD server (fixed newstyle handshake, simple replies) over a [`BlockDevice`].
#![warn(missing_docs)]
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

/// A byte-addressed block device served over NBD.
pub trait BlockDevice: Send + Sync {
    /// Export size in bytes.
    fn size(&self) -> u64;
    /// Fill `buf` from offset `off`.
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()>;
    /// Write `data` at `off`; `fua` asks for durability before return.
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()>;
    /// Make all completed writes durable.
    fn flush(&self) -> io::Result<()>;
    /// Discard a range (contents become zero here).
    fn trim(&self, off: u64, len: u64) -> io::Result<()>;
    /// Zero a range.
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> io::Result<()>;
    /// Whether several connections may safely share the export.
    fn multi_conn(&self) -> bool {
        false
    }
}

/// In-memory device for tests.
pub struct MemDevice(RwLock<Vec<u8>>);
impl MemDevice {
    /// A zero-filled device of `size` bytes.
    pub fn new(size: usize) -> Self {
        MemDevice(RwLock::new(vec![0; size]))
    }
}
fn range(off: u64, len: u64, size: u64) -> io::Result<(usize, usize)> {
    match off.checked_add(len) {
        Some(end) if end <= size => Ok((off as usize, end as usize)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "range beyond device",
        )),
    }
}
impl BlockDevice for MemDevice {
    fn size(&self) -> u64 {
        self.0.read().unwrap().len() as u64
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let v = self.0.read().unwrap();
        let (a, b) = range(off, buf.len() as u64, v.len() as u64)?;
        buf.copy_from_slice(&v[a..b]);
        Ok(())
    }
    fn write_at(&self, data: &[u8], off: u64, _fua: bool) -> io::Result<()> {
        let mut v = self.0.write().unwrap();
        let (a, b) = range(off, data.len() as u64, v.len() as u64)?;
        v[a..b].copy_from_slice(data);
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        self.write_zeroes(off, len, false)
    }
    fn write_zeroes(&self, off: u64, len: u64, _fua: bool) -> io::Result<()> {
        let mut v = self.0.write().unwrap();
        let (a, b) = range(off, len, v.len() as u64)?;
        v[a..b].fill(0);
        Ok(())
    }
    fn multi_conn(&self) -> bool {
        true
    }
}

/// File-backed device (pread/pwrite; fdatasync for flush and FUA).
pub struct FileDevice {
    file: std::fs::File,
    size: u64,
}
impl FileDevice {
    /// Wrap an open read-write file; its current length is the export size.
    pub fn new(file: std::fs::File) -> io::Result<Self> {
        let size = file.metadata()?.len();
        Ok(FileDevice { file, size })
    }
}
impl BlockDevice for FileDevice {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        self.file.write_all_at(data, off)?;
        if fua {
            self.file.sync_data()?;
        }
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        // No hole punching yet: zeroing keeps trim semantics (reads return zeroes).
        self.write_zeroes(off, len, false)
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> io::Result<()> {
        range(off, len, self.size)?;
        let zeros = vec![0u8; 1 << 20];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(zeros.len() as u64);
            self.file.write_all_at(&zeros[..n as usize], off + done)?;
            done += n;
        }
        if fua {
            self.file.sync_data()?;
        }
        Ok(())
    }
}

/// Server counters.
#[derive(Default, Debug)]
pub struct ServerStats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Requests handled (all commands).
    pub requests: AtomicU64,
    /// Connections closed for protocol violations (bad magic, oversized length).
    pub protocol_errors: AtomicU64,
    /// EINVAL replies sent.
    pub einval: AtomicU64,
    /// EIO replies sent.
    pub eio: AtomicU64,
    /// Bytes read by clients.
    pub bytes_read: AtomicU64,
    /// Bytes written by clients.
    pub bytes_written: AtomicU64,
}

/// Server limits.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Largest READ/WRITE payload accepted; larger closes the connection.
    pub max_payload: u32,
}
impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_payload: 32 << 20,
        }
    }
}

const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
const REQ_MAGIC: u32 = 0x2560_9513;
const SIMPLE_MAGIC: u32 = 0x6744_6698;
const ERR_UNSUP: u32 = (1 << 31) + 1;
const EIO: u32 = 5;
const EINVAL: u32 = 22;

fn rd<const N: usize>(s: &mut impl Read) -> io::Result<[u8; N]> {
    let mut b = [0u8; N];
    s.read_exact(&mut b)?;
    Ok(b)
}

fn opt_reply(s: &mut impl Write, opt: u32, typ: u32, data: &[u8]) -> io::Result<()> {
    let mut v = Vec::with_capacity(20 + data.len());
    v.extend_from_slice(&REPLY_MAGIC.to_be_bytes());
    v.extend_from_slice(&opt.to_be_bytes());
    v.extend_from_slice(&typ.to_be_bytes());
    v.extend_from_slice(&(data.len() as u32).to_be_bytes());
    v.extend_from_slice(data);
    s.write_all(&v)
}

/// Serve one connection until disconnect or protocol error.
pub fn serve_connection<S: Read + Write>(
    mut s: S,
    dev: &dyn BlockDevice,
    cfg: &ServerConfig,
    stats: &ServerStats,
) -> io::Result<()> {
    stats.connections.fetch_add(1, Relaxed);
    let mut flags: u16 = 1 | 4 | 8 | 32 | 64;
    if dev.multi_conn() {
        flags |= 256;
    }
    let mut hello = Vec::new();
    hello.extend_from_slice(b"NBDMAGIC");
    hello.extend_from_slice(&IHAVEOPT.to_be_bytes());
    hello.extend_from_slice(&3u16.to_be_bytes());
    s.write_all(&hello)?;
    let cflags = u32::from_be_bytes(rd(&mut s)?);
    let no_zeroes = cflags & 2 != 0;
    loop {
        if u64::from_be_bytes(rd(&mut s)?) != IHAVEOPT {
            stats.protocol_errors.fetch_add(1, Relaxed);
            return Ok(());
        }
        let opt = u32::from_be_bytes(rd(&mut s)?);
        let len = u32::from_be_bytes(rd(&mut s)?);
        if len > 65536 {
            stats.protocol_errors.fetch_add(1, Relaxed);
            return Ok(());
        }
        let mut data = vec![0u8; len as usize];
        s.read_exact(&mut data)?;
        let mut export = Vec::new();
        export.extend_from_slice(&dev.size().to_be_bytes());
        export.extend_from_slice(&flags.to_be_bytes());
        match opt {
            1 => {
                if !no_zeroes {
                    export.extend_from_slice(&[0u8; 124]);
                }
                s.write_all(&export)?;
                break;
            }
            2 => {
                let _ = opt_reply(&mut s, opt, 1, &[]);
                return Ok(());
            }
            3 => {
                opt_reply(&mut s, opt, 2, &0u32.to_be_bytes())?;
                opt_reply(&mut s, opt, 1, &[])?;
            }
            6 | 7 => {
                let mut info = 0u16.to_be_bytes().to_vec();
                info.extend_from_slice(&export);
                opt_reply(&mut s, opt, 3, &info)?;
                let mut bs = 3u16.to_be_bytes().to_vec();
                for v in [1u32, 4096, cfg.max_payload] {
                    bs.extend_from_slice(&v.to_be_bytes());
                }
                opt_reply(&mut s, opt, 3, &bs)?;
                opt_reply(&mut s, opt, 1, &[])?;
                if opt == 7 {
                    break;
                }
            }
            _ => opt_reply(&mut s, opt, ERR_UNSUP, &[])?,
        }
    }
    let mut buf = Vec::new();
    loop {
        let h: [u8; 28] = rd(&mut s)?;
        if u32::from_be_bytes(h[0..4].try_into().unwrap()) != REQ_MAGIC {
            stats.protocol_errors.fetch_add(1, Relaxed);
            return Ok(());
        }
        let cflags = u16::from_be_bytes([h[4], h[5]]);
        let typ = u16::from_be_bytes([h[6], h[7]]);
        let handle = &h[8..16];
        let off = u64::from_be_bytes(h[16..24].try_into().unwrap());
        let len = u32::from_be_bytes(h[24..28].try_into().unwrap());
        let fua = cflags & 1 != 0;
        stats.requests.fetch_add(1, Relaxed);
        if (typ == 0 || typ == 1) && len > cfg.max_payload {
            stats.protocol_errors.fetch_add(1, Relaxed);
            return Ok(());
        }
        let in_range = off.checked_add(len as u64).is_some_and(|e| e <= dev.size());
        let mut payload_len = 0;
        let res: Result<(), u32> = match typ {
            0 => {
                buf.resize(len as usize, 0);
                if !in_range {
                    Err(EINVAL)
                } else {
                    dev.read_at(&mut buf, off).map_err(|_| EIO).map(|_| {
                        payload_len = len as usize;
                        stats.bytes_read.fetch_add(len as u64, Relaxed);
                    })
                }
            }
            1 => {
                buf.resize(len as usize, 0);
                s.read_exact(&mut buf)?;
                if !in_range {
                    Err(EINVAL)
                } else {
                    stats.bytes_written.fetch_add(len as u64, Relaxed);
                    dev.write_at(&buf, off, fua).map_err(|_| EIO)
                }
            }
            2 => return Ok(()),
            3 => dev.flush().map_err(|_| EIO),
            4 | 6 if !in_range => Err(EINVAL),
            4 => dev.trim(off, len as u64).map_err(|_| EIO),
            6 => dev.write_zeroes(off, len as u64, fua).map_err(|_| EIO),
            _ => Err(EINVAL),
        };
        let err = res.err().unwrap_or(0);
        match err {
            EINVAL => stats.einval.fetch_add(1, Relaxed),
            EIO => stats.eio.fetch_add(1, Relaxed),
            _ => 0,
        };
        let mut out = Vec::with_capacity(16 + payload_len);
        out.extend_from_slice(&SIMPLE_MAGIC.to_be_bytes());
        out.extend_from_slice(&err.to_be_bytes());
        out.extend_from_slice(handle);
        out.extend_from_slice(&buf[..payload_len]);
        s.write_all(&out)?;
    }
}

/// Accept Unix-socket connections forever, one thread per connection.
pub fn serve_unix(
    listener: UnixListener,
    dev: Arc<dyn BlockDevice>,
    cfg: ServerConfig,
    stats: Arc<ServerStats>,
) -> io::Result<()> {
    for conn in listener.incoming() {
        let conn = conn?;
        let (dev, cfg, stats) = (dev.clone(), cfg.clone(), stats.clone());
        std::thread::spawn(move || {
            // A vanished client just ends its own thread.
            let _ = serve_connection(conn, &*dev, &cfg, &stats);
        });
    }
    Ok(())
}
