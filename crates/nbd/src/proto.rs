//! Protocol constants shared by the server and the client (NBD `doc/proto.md`).

pub(crate) const NBDMAGIC: &[u8; 8] = b"NBDMAGIC";
pub(crate) const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
pub(crate) const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub(crate) const REQ_MAGIC: u32 = 0x2560_9513;
/// The 32-byte request header of a connection that negotiated extended headers.
pub(crate) const EXT_REQ_MAGIC: u32 = 0x21e4_1c71;
pub(crate) const SIMPLE_MAGIC: u32 = 0x6744_6698;
pub(crate) const STRUCTURED_MAGIC: u32 = 0x668e_33ef;
pub(crate) const REPLY_FLAG_DONE: u16 = 1;
pub(crate) const REPLY_TYPE_NONE: u16 = 0;
pub(crate) const REPLY_TYPE_BLOCK_STATUS: u16 = 5;

pub(crate) const OPT_EXPORT_NAME: u32 = 1;
pub(crate) const OPT_ABORT: u32 = 2;
pub(crate) const OPT_LIST: u32 = 3;
pub(crate) const OPT_STARTTLS: u32 = 5;
pub(crate) const OPT_INFO: u32 = 6;
pub(crate) const OPT_GO: u32 = 7;
pub(crate) const OPT_STRUCTURED_REPLY: u32 = 8;
pub(crate) const OPT_LIST_META_CONTEXT: u32 = 9;
pub(crate) const OPT_SET_META_CONTEXT: u32 = 10;
pub(crate) const OPT_EXTENDED_HEADERS: u32 = 11;
pub(crate) const REP_ACK: u32 = 1;
pub(crate) const REP_SERVER: u32 = 2;
pub(crate) const REP_INFO: u32 = 3;
pub(crate) const REP_META_CONTEXT: u32 = 4;
pub(crate) const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
pub(crate) const REP_ERR_POLICY: u32 = (1 << 31) + 2;
pub(crate) const REP_ERR_INVALID: u32 = (1 << 31) + 3;
pub(crate) const REP_ERR_TLS_REQD: u32 = (1 << 31) + 5;
pub(crate) const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;
pub(crate) const REP_ERR_TOO_BIG: u32 = (1 << 31) + 9;
pub(crate) const REP_ERR_EXT_HEADER_REQD: u32 = (1 << 31) + 10;
pub(crate) const INFO_EXPORT: u16 = 0;
pub(crate) const INFO_BLOCK_SIZE: u16 = 3;

pub(crate) const FLAG_HAS_FLAGS: u16 = 1;
pub(crate) const FLAG_SEND_FLUSH: u16 = 1 << 2;
pub(crate) const FLAG_SEND_FUA: u16 = 1 << 3;
pub(crate) const FLAG_SEND_TRIM: u16 = 1 << 5;
pub(crate) const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub(crate) const FLAG_SEND_CACHE: u16 = 1 << 10;
pub(crate) const FLAG_SEND_DF: u16 = 1 << 7;
pub(crate) const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;
pub(crate) const FLAG_SEND_FAST_ZERO: u16 = 1 << 11;
pub(crate) const CMD_FLAG_FUA: u16 = 1;
/// `NBD_CMD_BLOCK_STATUS`: one extent per context, no longer than the request.
pub(crate) const CMD_FLAG_REQ_ONE: u16 = 1 << 3;
/// `NBD_CMD_WRITE_ZEROES`: fail at once with `NBD_ENOTSUP` unless zeroing is fast.
pub(crate) const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;
/// Extended headers: the length field is a payload's, which follows the header.
pub(crate) const CMD_FLAG_PAYLOAD_LEN: u16 = 1 << 5;

pub(crate) const CMD_READ: u16 = 0;
pub(crate) const CMD_WRITE: u16 = 1;
pub(crate) const CMD_DISC: u16 = 2;
pub(crate) const CMD_FLUSH: u16 = 3;
pub(crate) const CMD_TRIM: u16 = 4;
pub(crate) const CMD_CACHE: u16 = 5;
pub(crate) const CMD_WRITE_ZEROES: u16 = 6;
pub(crate) const CMD_BLOCK_STATUS: u16 = 7;

pub(crate) const EIO: u32 = 5;
pub(crate) const EINVAL: u32 = 22;
pub(crate) const ENOTSUP: u32 = 95;
pub(crate) const MAX_OPTION_LEN: u32 = 64 << 10;
/// Options longer than [`MAX_OPTION_LEN`] up to this length are read past and refused with
/// `NBD_REP_ERR_TOO_BIG`; a longer one ends the connection.
pub(crate) const MAX_OPTION_SKIP: u32 = 16 << 20;
pub(crate) const HANDSHAKE_FIXED_NEWSTYLE: u16 = 1;
pub(crate) const HANDSHAKE_NO_ZEROES: u16 = 2;
/// Client flag: the client speaks fixed newstyle.
pub(crate) const CLIENT_FIXED_NEWSTYLE: u32 = 1;
/// Client flag: no 124 zero bytes after `NBD_OPT_EXPORT_NAME`'s reply.
pub(crate) const CLIENT_NO_ZEROES: u32 = 2;
pub(crate) const FLAG_READ_ONLY: u16 = 1 << 1;

/// Reads exactly `N` bytes.
pub(crate) fn rd<const N: usize, R: std::io::Read + ?Sized>(s: &mut R) -> std::io::Result<[u8; N]> {
    let mut b = [0u8; N];
    s.read_exact(&mut b)?;
    Ok(b)
}
