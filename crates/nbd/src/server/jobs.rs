//! A request's work: its payload read (memory by the bytes that arrive), and the job the
//! workers (or the reader) run on the device.

use super::*;

/// Bytes of a payload taken for granted before they arrive: the buffer grows by this much, or
/// by what it holds already (doubling), as bytes come.
const PAYLOAD_STEP: usize = 1 << 20;

/// Reads a `len`-byte payload into `payload`, which grows with the bytes that arrive (at most
/// double them), not with the header's length: a header alone holds no memory.
pub(super) fn read_payload(
    reader: &mut impl Read,
    len: usize,
    payload: &mut Vec<u8>,
) -> io::Result<()> {
    payload.clear();
    while payload.len() < len {
        let have = payload.len();
        let next = (have + PAYLOAD_STEP.max(have)).min(len);
        payload.reserve_exact(next - have);
        payload.resize(next, 0);
        reader.read_exact(&mut payload[have..])?;
    }
    Ok(())
}

/// One request, validated and with its payload read.
pub(super) struct Job {
    pub(super) typ: u16,
    pub(super) flags: u16,
    pub(super) handle: [u8; 8],
    pub(super) offset: u64,
    pub(super) len: u64,
    pub(super) payload: Vec<u8>,
}

/// Runs `job` on `dev`; returns the NBD error (0 = ok) and the read data.
pub(super) fn run(job: &mut Job, dev: &dyn BlockDevice, stats: &ServerStats) -> u32 {
    let fua = job.flags & CMD_FLAG_FUA != 0;
    let len = job.len;
    let res = match job.typ {
        CMD_READ => {
            job.payload.resize(job.len as usize, 0);
            dev.read_at(&mut job.payload, job.offset).map(|_| {
                stats.bytes_read.fetch_add(len, Relaxed);
            })
        }
        CMD_WRITE => dev.write_at(&job.payload, job.offset, fua).map(|_| {
            stats.bytes_written.fetch_add(len, Relaxed);
        }),
        CMD_FLUSH => dev.flush(),
        CMD_TRIM => dev.trim(job.offset, len),
        CMD_WRITE_ZEROES => dev.write_zeroes(job.offset, len, fua),
        CMD_CACHE => prefetch(dev, job.offset, len),
        crate::demote::CMD_TIERCACHE_DEMOTE => {
            return crate::demote::run(dev, &job.payload, job.offset)
        }
        _ => unreachable!("validated before dispatch"),
    };
    match res {
        Ok(()) => 0,
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
            stats.einval.fetch_add(1, Relaxed);
            EINVAL
        }
        Err(_) => {
            stats.eio.fetch_add(1, Relaxed);
            EIO
        }
    }
}

/// Bytes `NBD_CMD_CACHE` reads at a time: its length (up to 4 GiB) never sizes a buffer.
const PREFETCH_CHUNK: u64 = 1 << 20;

/// `NBD_CMD_CACHE`: reads the range through the device, in chunks, so that a cache below
/// holds it (as its promotion policy decides for reads); the data goes nowhere.
fn prefetch(dev: &dyn BlockDevice, offset: u64, len: u64) -> io::Result<()> {
    let mut buf = vec![0u8; PREFETCH_CHUNK.min(len) as usize];
    let mut at = 0;
    while at < len {
        let n = PREFETCH_CHUNK.min(len - at) as usize;
        dev.read_at(&mut buf[..n], offset + at)?;
        at += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A payload's buffer grows with the bytes that arrive: a header promising 32 MiB followed
    /// by 100 bytes holds about 1 MiB, not 32 (the buffer was zero-filled to the header's
    /// length first); a whole payload reads exactly.
    #[test]
    fn a_payload_holds_memory_by_the_bytes_that_arrive() {
        let mut payload = Vec::new();
        let e = read_payload(&mut &[7u8; 100][..], 32 << 20, &mut payload).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(payload.capacity() <= PAYLOAD_STEP, "{}", payload.capacity());
        let data: Vec<u8> = (0..(3 << 20) + 5).map(|i| i as u8).collect();
        read_payload(&mut &data[..], data.len(), &mut payload).unwrap();
        assert!(payload == data);
        read_payload(&mut &data[..4096], 4096, &mut payload).unwrap();
        assert!(payload[..] == data[..4096]);
    }
}
