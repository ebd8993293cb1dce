//! Executing one plan with real bytes: ops stage by stage, data routed by volume address.
//!
//! Every read op deposits its bytes at its volume address (`DevOp::vaddr`); every write op
//! takes its bytes from there, a write request's own data winning over bytes read. A read
//! request gets the bytes of its range. Reads that land inside a read request's range go
//! straight into the client's buffer.

use std::borrow::Cow;
use std::io;
use tiercache_blockdev::BlockDevice;
use tiercache_core::DevOp;

/// The application side of a plan.
pub enum Client<'a> {
    /// A read of `buf.len()` bytes at `offset` of `volume`.
    Read {
        /// Volume.
        volume: u32,
        /// Byte offset.
        offset: u64,
        /// Destination.
        buf: &'a mut [u8],
    },
    /// A write of `data` at `offset` of `volume`.
    Write {
        /// Volume.
        volume: u32,
        /// Byte offset.
        offset: u64,
        /// Source.
        data: &'a [u8],
    },
    /// No application data (flush jobs, trims).
    None,
    /// No application data: a trim that zeroes (a WRITE_ZEROES of whole sub-blocks on a
    /// backend that zeroes fast): its backend trims zero the range (`write_zeroes`) instead of
    /// discarding it, so the range reads as zeroes once the cached copies are dropped.
    Zeroes,
}

/// Bytes read so far by one plan.
pub struct Scratch<'a> {
    client: Client<'a>,
    /// Reads kept here: (volume, vaddr, bytes), in execution order.
    owned: Vec<(u32, u64, Vec<u8>)>,
    /// Reads that went straight into the client buffer: (vaddr, len).
    direct: Vec<(u64, usize)>,
}

fn overlap(a: u64, alen: usize, b: u64, blen: usize) -> Option<(u64, u64)> {
    let lo = a.max(b);
    let hi = (a + alen as u64).min(b + blen as u64);
    (lo < hi).then_some((lo, hi))
}

/// Whether the ranges `[lo, hi)` of `pieces` together cover `[from, to)` (sorts `pieces`).
fn covers(pieces: &mut [(u64, u64)], from: u64, to: u64) -> bool {
    pieces.sort_unstable();
    let mut reached = from;
    for &(lo, hi) in pieces.iter() {
        if lo > reached {
            break;
        }
        reached = reached.max(hi);
    }
    reached >= to
}

impl<'a> Scratch<'a> {
    /// Scratch for a plan serving `client`.
    pub fn new(client: Client<'a>) -> Self {
        Self {
            client,
            owned: Vec::new(),
            direct: Vec::new(),
        }
    }

    /// Whether this plan's backend trims must leave zeroes ([`Client::Zeroes`]).
    pub fn zeroes(&self) -> bool {
        matches!(self.client, Client::Zeroes)
    }

    /// Executes read `op` from `dev` at device address `addr`.
    pub fn read(&mut self, dev: &dyn BlockDevice, op: &DevOp, addr: u64) -> io::Result<()> {
        let len = op.len as usize;
        if let Client::Read {
            volume,
            offset,
            buf,
        } = &mut self.client
        {
            if *volume == op.volume.0
                && op.vaddr >= *offset
                && op.vaddr + op.len <= *offset + buf.len() as u64
            {
                let at = (op.vaddr - *offset) as usize;
                dev.read_at(&mut buf[at..at + len], addr)?;
                self.direct.push((op.vaddr, len));
                return Ok(());
            }
        }
        let mut v = vec![0u8; len];
        dev.read_at(&mut v, addr)?;
        self.owned.push((op.volume.0, op.vaddr, v));
        Ok(())
    }

    /// The bytes write `op` carries.
    pub fn data_for(&self, op: &DevOp) -> Cow<'_, [u8]> {
        let (vol, vaddr, len) = (op.volume.0, op.vaddr, op.len as usize);
        if let Client::Write {
            volume,
            offset,
            data,
        } = &self.client
        {
            if *volume == vol
                && vaddr >= *offset
                && vaddr + len as u64 <= *offset + data.len() as u64
            {
                let at = (vaddr - *offset) as usize;
                return Cow::Borrowed(&data[at..at + len]);
            }
        }
        let mut out = vec![0u8; len];
        // Where the bytes came from (debug builds): every byte a write carries was read by
        // this plan or given by the client; a gap would be written as zeroes.
        let mut sources: Vec<(u64, u64)> = Vec::new();
        for (v, a, bytes) in &self.owned {
            if *v == vol {
                if let Some((lo, hi)) = overlap(*a, bytes.len(), vaddr, len) {
                    out[(lo - vaddr) as usize..(hi - vaddr) as usize]
                        .copy_from_slice(&bytes[(lo - a) as usize..(hi - a) as usize]);
                    if cfg!(debug_assertions) {
                        sources.push((lo, hi));
                    }
                }
            }
        }
        match &self.client {
            Client::Read {
                volume,
                offset,
                buf,
            } if *volume == vol => {
                for &(a, l) in &self.direct {
                    if let Some((lo, hi)) = overlap(a, l, vaddr, len) {
                        out[(lo - vaddr) as usize..(hi - vaddr) as usize]
                            .copy_from_slice(&buf[(lo - offset) as usize..(hi - offset) as usize]);
                        if cfg!(debug_assertions) {
                            sources.push((lo, hi));
                        }
                    }
                }
            }
            Client::Write {
                volume,
                offset,
                data,
            } if *volume == vol => {
                if let Some((lo, hi)) = overlap(*offset, data.len(), vaddr, len) {
                    out[(lo - vaddr) as usize..(hi - vaddr) as usize]
                        .copy_from_slice(&data[(lo - offset) as usize..(hi - offset) as usize]);
                    if cfg!(debug_assertions) {
                        sources.push((lo, hi));
                    }
                }
            }
            _ => {}
        }
        debug_assert!(
            covers(&mut sources, vaddr, vaddr + len as u64),
            "write {op:?} carries bytes no read of its plan or client gave"
        );
        Cow::Owned(out)
    }

    /// Completes the client's part now and keeps what later ops of the plan still need: the
    /// read request's buffer gets its bytes (as [`finish`](Self::finish)), and the bytes read
    /// straight into it are copied here, so the plan can go on without the client.
    pub fn detach(mut self) -> Scratch<'static> {
        let zeroes = self.zeroes();
        let client = std::mem::replace(&mut self.client, Client::None);
        if let Client::Read {
            volume,
            offset,
            buf,
        } = client
        {
            for (v, a, bytes) in &self.owned {
                if *v == volume {
                    if let Some((lo, hi)) = overlap(*a, bytes.len(), offset, buf.len()) {
                        buf[(lo - offset) as usize..(hi - offset) as usize]
                            .copy_from_slice(&bytes[(lo - a) as usize..(hi - a) as usize]);
                    }
                }
            }
            for &(a, l) in &self.direct {
                let at = (a - offset) as usize;
                self.owned.push((volume, a, buf[at..at + l].to_vec()));
            }
        }
        Scratch {
            // What the rest of the plan still needs of the client: whether it zeroes.
            client: if zeroes { Client::Zeroes } else { Client::None },
            owned: self.owned,
            direct: Vec::new(),
        }
    }

    /// Completes a read request: copies the bytes kept here that fall in its range.
    pub fn finish(self) {
        if let Client::Read {
            volume,
            offset,
            buf,
        } = self.client
        {
            for (v, a, bytes) in &self.owned {
                if *v == volume {
                    if let Some((lo, hi)) = overlap(*a, bytes.len(), offset, buf.len()) {
                        buf[(lo - offset) as usize..(hi - offset) as usize]
                            .copy_from_slice(&bytes[(lo - a) as usize..(hi - a) as usize]);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiercache_blockdev::MemDevice;
    use tiercache_core::{IoKind, OpCause, VolumeId};

    #[test]
    fn coverage_of_ranges() {
        assert!(covers(&mut [(0, 4), (4, 8)], 0, 8));
        assert!(covers(&mut [(4, 9), (0, 5)], 1, 8));
        assert!(!covers(&mut [(0, 3), (4, 8)], 0, 8));
        assert!(!covers(&mut [], 0, 1));
        assert!(covers(&mut [], 5, 5));
    }

    /// A write's bytes come from the plan's reads and the client's data, the client winning.
    #[test]
    fn writes_carry_bytes_read_and_given() {
        let dev = MemDevice::from_bytes((0..64u8).collect());
        let data = [200u8; 8];
        let mut s = Scratch::new(Client::Write {
            volume: 0,
            offset: 1004,
            data: &data,
        });
        let v = VolumeId(0);
        s.read(
            &dev,
            &DevOp::backend(IoKind::Read, v, 1000, 16, OpCause::Fill),
            0,
        )
        .unwrap();
        let w = DevOp::cache(IoKind::Write, v, 0, 1000, 16, OpCause::Fill);
        let got = s.data_for(&w).into_owned();
        let want: Vec<u8> = (0..16u8)
            .map(|i| if (4..12).contains(&i) { 200 } else { i })
            .collect();
        assert_eq!(got, want);
    }

    /// Debug builds refuse to write bytes nobody read or gave (they would go out as zeroes).
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "carries bytes no read")]
    fn a_write_of_bytes_never_read_is_caught() {
        let s = Scratch::new(Client::None);
        let w = DevOp::backend(IoKind::Write, VolumeId(0), 0, 512, OpCause::Clean);
        let _ = s.data_for(&w);
    }
}
