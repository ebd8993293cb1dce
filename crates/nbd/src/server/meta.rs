//! Metadata contexts and block status (`NBD_OPT_LIST_META_CONTEXT`,
//! `NBD_OPT_SET_META_CONTEXT`, `NBD_CMD_BLOCK_STATUS`; docs/nbd-tls.md, "Block status"): `base:allocation`
//! reports the export's holes (a sparse backend's, which copying tools then skip), and
//! `tiercache:state` what a cache holds of it, flags 1 = resident (a read is a hit), 2 =
//! dirty (newer than the backend), so that `nbdinfo --map=tiercache:state` shows the cache's
//! contents.

use super::*;
use tiercache_blockdev::Extent;

/// A metadata context the server offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MetaContext {
    /// `base:allocation`: flags 1 = hole, 2 = reads as zeroes.
    Allocation,
    /// `tiercache:state`: flags 1 = resident in the cache, 2 = dirty.
    CacheState,
}

impl MetaContext {
    /// Its id in replies (fixed: ids are only asked to be unique within a connection).
    pub(super) fn id(self) -> u32 {
        match self {
            MetaContext::Allocation => 1,
            MetaContext::CacheState => 2,
        }
    }

    fn name(self) -> &'static str {
        match self {
            MetaContext::Allocation => "base:allocation",
            MetaContext::CacheState => "tiercache:state",
        }
    }

    /// The contexts `dev` has: allocation always (all data where the device knows no
    /// holes), the cache's state where the device is a cache.
    fn offered(dev: &dyn BlockDevice) -> Vec<MetaContext> {
        let mut v = vec![MetaContext::Allocation];
        // A cache answers a query of no bytes; any other device has no answer at all.
        if dev.cache_state(0, 0).is_some() {
            v.push(MetaContext::CacheState);
        }
        v
    }
}

/// A meta-context option's data: the export's name and the queries; `None` when its lengths
/// do not add up to the option's (the protocol's `NBD_REP_ERR_INVALID`).
pub(super) fn parse(data: &[u8]) -> Option<(&[u8], Vec<&[u8]>)> {
    fn take<'a>(d: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (d.len() >= n).then(|| d.split_at(n))?;
        *d = rest;
        Some(head)
    }
    fn u32_of(d: &mut &[u8]) -> Option<usize> {
        take(d, 4).map(|b| u32::from_be_bytes(b.try_into().unwrap()) as usize)
    }
    let mut d = data;
    let name_len = u32_of(&mut d)?;
    let name = take(&mut d, name_len)?;
    let count = u32_of(&mut d)?;
    // Each query takes 4 bytes at least: a count the data cannot hold sizes nothing.
    if count > d.len() / 4 {
        return None;
    }
    let mut queries = Vec::with_capacity(count);
    for _ in 0..count {
        let n = u32_of(&mut d)?;
        queries.push(take(&mut d, n)?);
    }
    d.is_empty().then_some((name, queries))
}

/// The contexts of `dev` the queries select: exact names for `SET`; for `LIST` also a
/// namespace alone (`base:`, `tiercache:`) as a wildcard, and no query meaning all. Queries
/// of other namespaces, or names not known, select nothing (the protocol says ignore them).
pub(super) fn select(dev: &dyn BlockDevice, queries: &[&[u8]], list: bool) -> Vec<MetaContext> {
    let offered = MetaContext::offered(dev);
    if list && queries.is_empty() {
        return offered;
    }
    offered
        .into_iter()
        .filter(|c| {
            let name = c.name().as_bytes();
            let namespace = &name[..=name.iter().position(|&b| b == b':').unwrap()];
            queries
                .iter()
                .any(|q| *q == name || (list && *q == namespace))
        })
        .collect()
}

/// The `NBD_REP_META_CONTEXT` reply data of `c`.
pub(super) fn reply_data(c: MetaContext, list: bool) -> Vec<u8> {
    // Ids in LIST replies are reserved: zero.
    let id = if list { 0 } else { c.id() };
    let mut d = id.to_be_bytes().to_vec();
    d.extend_from_slice(c.name().as_bytes());
    d
}

/// The extents of context `c` for `len` bytes at `offset` of `dev`; with `req_one`, the first
/// alone.
pub(super) fn block_status(
    dev: &dyn BlockDevice,
    c: MetaContext,
    offset: u64,
    len: u64,
    req_one: bool,
) -> io::Result<Vec<Extent>> {
    let mut x = match c {
        MetaContext::Allocation => dev.allocation(offset, len)?,
        MetaContext::CacheState => dev
            .cache_state(offset, len)
            .unwrap_or_else(|| Err(io::Error::other("the export is no cache")))?,
    };
    if x.is_empty() {
        // Every device answers at least one byte; one that did not is broken, and the
        // protocol needs an extent: an error reply instead.
        return Err(io::Error::other("no extent for a block status query"));
    }
    if req_one {
        x.truncate(1);
    }
    Ok(x)
}
