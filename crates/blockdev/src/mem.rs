//! Bytes in memory: the device of tests and examples, and of an engine's RAM level.

use crate::{check_range, BlockDevice};
use std::io;
use std::sync::RwLock;

/// A device whose bytes live in process memory. Nothing is durable beyond the process, so
/// `flush` and FUA have nothing to do; trimmed ranges read as zeroes.
#[derive(Debug)]
pub struct MemDevice(RwLock<Vec<u8>>);

impl MemDevice {
    /// A zero-filled device of `size` bytes.
    pub fn new(size: usize) -> Self {
        Self(RwLock::new(vec![0; size]))
    }

    /// A device holding `bytes` (its size is their length).
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Self(RwLock::new(bytes))
    }

    /// A copy of the contents.
    pub fn snapshot(&self) -> Vec<u8> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl BlockDevice for MemDevice {
    fn size(&self) -> u64 {
        self.0.read().unwrap_or_else(|e| e.into_inner()).len() as u64
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let v = self.0.read().unwrap_or_else(|e| e.into_inner());
        check_range(off, buf.len() as u64, v.len() as u64)?;
        buf.copy_from_slice(&v[off as usize..off as usize + buf.len()]);
        Ok(())
    }
    fn write_at(&self, data: &[u8], off: u64, _fua: bool) -> io::Result<()> {
        let mut v = self.0.write().unwrap_or_else(|e| e.into_inner());
        check_range(off, data.len() as u64, v.len() as u64)?;
        v[off as usize..off as usize + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        self.write_zeroes(off, len, false)
    }
    fn write_zeroes(&self, off: u64, len: u64, _fua: bool) -> io::Result<()> {
        let mut v = self.0.write().unwrap_or_else(|e| e.into_inner());
        check_range(off, len, v.len() as u64)?;
        v[off as usize..(off + len) as usize].fill(0);
        Ok(())
    }
    fn multi_conn(&self) -> bool {
        true
    }
    /// Zeroing memory sends no payload and writes nothing through a device.
    fn fast_zeroes(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_past_the_end_are_refused_and_change_nothing() {
        let d = MemDevice::from_bytes(vec![7; 100]);
        let e = d.write_at(&[1; 10], 95, false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("95+10"), "{e}");
        assert_eq!(
            d.read_at(&mut [0; 2], u64::MAX).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        d.trim(90, 11).unwrap_err();
        d.write_zeroes(0, 101, true).unwrap_err();
        assert_eq!(d.snapshot(), vec![7; 100]);
    }
}
