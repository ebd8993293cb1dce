//! The policy core's plan of one block's read or write as the file cache's [`DevOp`] list
//! (docs/design.md §3, §4.9).
//!
//! The core's ops carry device, kind, cause and addresses; a cache-device op's offset divided
//! by the line (block) size is the slot. The list keeps the core's order where it matters:
//! a victim's write-back before anything reuses its slot, a fill before the write over it.

use tiercache_core::{Device, IoKind, OpCause, Plan};
use tiercache_eviction::Slot;

use super::{BlockKey, DevOp};

/// What the core decided about the request's own line, beside its plan.
#[derive(Debug, Clone, Copy)]
pub(super) struct Line {
    /// The line was resident.
    pub hit: bool,
    /// A write leaving old store bytes of the block in place (a fill if the core allocates).
    pub needs_fill: bool,
    /// The line is dirty after the request.
    pub dirty: bool,
}

/// Appends `plan`'s ops for block `key` to `ops`; `slots` names the block each slot held
/// before the request (victims).
pub(super) fn plan_ops(
    plan: &Plan,
    line: u64,
    slots: &[Option<BlockKey>],
    key: BlockKey,
    l: Line,
    ops: &mut Vec<DevOp>,
) {
    let slot_of = |offset: u64| (offset / line) as Slot;
    // Dirty victims first: each is read from its slot before the slot takes the new block.
    let mut last_victim = None;
    for o in &plan.ops {
        if o.device == Device::Cache && o.kind == IoKind::Read && o.cause == OpCause::EvictFlush {
            let slot = slot_of(o.offset);
            if last_victim != Some(slot) {
                last_victim = Some(slot);
                let victim = slots[slot as usize].expect("a victim's slot is mirrored");
                ops.push(DevOp::WriteBack { slot, key: victim });
            }
        }
    }
    let promoted = plan
        .ops
        .iter()
        .any(|o| o.device == Device::Cache && o.cause == OpCause::Promotion);
    for o in &plan.ops {
        match (o.device, o.kind, o.cause) {
            (Device::Cache, IoKind::Read, OpCause::ReadHit) => ops.push(DevOp::CacheRead {
                slot: slot_of(o.offset),
                key,
            }),
            // Served by the backend: promoted (below) or around the cache.
            (Device::Backend, IoKind::Read, OpCause::ReadMiss) if !promoted => {
                ops.push(DevOp::StoreRead { key })
            }
            (Device::Cache, IoKind::Write, OpCause::Promotion) => {
                let slot = slot_of(o.offset);
                ops.push(DevOp::Fill { slot, key });
                ops.push(DevOp::CacheRead { slot, key });
            }
            (Device::Cache, IoKind::Write, OpCause::Write) => {
                let slot = slot_of(o.offset);
                let allocated = !l.hit;
                if allocated && l.needs_fill {
                    ops.push(DevOp::Fill { slot, key });
                }
                ops.push(DevOp::CacheWrite {
                    slot,
                    key,
                    fresh: allocated && !l.needs_fill,
                    dirty: l.dirty,
                });
            }
            (Device::Backend, IoKind::Write, OpCause::Write) => ops.push(DevOp::StoreWrite { key }),
            // The victims' ops (above); nothing else occurs for whole-line requests.
            _ => {}
        }
    }
}
