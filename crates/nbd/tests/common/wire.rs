//! The NBD handshake spoken by hand, for tests that send what no client would.

use std::io::{Read, Write};

/// `IHAVEOPT`: the magic before each option a client sends.
pub const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
/// The magic before each option reply.
pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// `NBD_REP_ACK`: the final reply of an option that succeeded.
pub const REP_ACK: u32 = 1;

/// Sends option `opt` with `data`.
pub fn send_opt(s: &mut impl Write, opt: u32, data: &[u8]) {
    let mut v = IHAVEOPT.to_be_bytes().to_vec();
    v.extend_from_slice(&opt.to_be_bytes());
    v.extend_from_slice(&(data.len() as u32).to_be_bytes());
    v.extend_from_slice(data);
    s.write_all(&v).unwrap();
    s.flush().unwrap();
}

/// One option reply: (option, type, data).
pub fn reply(s: &mut impl Read) -> (u32, u32, Vec<u8>) {
    let mut h = [0u8; 20];
    s.read_exact(&mut h).unwrap();
    assert_eq!(u64::from_be_bytes(h[..8].try_into().unwrap()), REPLY_MAGIC);
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
    let mut d = vec![0u8; len as usize];
    s.read_exact(&mut d).unwrap();
    (
        u32::from_be_bytes(h[8..12].try_into().unwrap()),
        u32::from_be_bytes(h[12..16].try_into().unwrap()),
        d,
    )
}

/// Sends option `opt` with `data` and reads its replies up to the final one (an ACK or an
/// error): their (type, data).
pub fn exchange(s: &mut (impl Read + Write), opt: u32, data: &[u8]) -> Vec<(u32, Vec<u8>)> {
    send_opt(s, opt, data);
    let mut out = Vec::new();
    loop {
        let (_, typ, d) = reply(s);
        let last = typ == REP_ACK || typ & (1 << 31) != 0;
        out.push((typ, d));
        if last {
            return out;
        }
    }
}
