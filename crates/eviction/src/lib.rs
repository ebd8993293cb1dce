//! Replacement (eviction) policies, every one the same shape behind [`Eviction`] (SPEC §4.4).
//!
//! The policy core owns the line table; a policy only orders *slots* (indices into that table)
//! and chooses victims. Adding a policy is one file in this crate plus one arm in [`build`].

use serde::{Deserialize, Serialize};
use tiercache_core::LineKey;

/// Index of a line frame in the cache (cache-device address = slot × line size).
pub type Slot = u32;

/// One replacement policy instance managing up to `capacity` slots.
///
/// Protocol the core follows (and the property tests check against reference models):
/// - [`Eviction::insert`] is called once for each line that enters the cache; when the
///   partition is full, the core first calls [`Eviction::evict`] with the incoming key and
///   then `insert` for that same key (into the freed slot or another free one);
/// - [`Eviction::hit`] on every access to a resident line;
/// - [`Eviction::remove`] when a resident line leaves other than as a victim (trim, invalidation);
/// - [`Eviction::evict`] removes and returns the policy's victim, passing over slots for which
///   `pinned` answers true (lines under write-back); `None` when every resident slot is pinned.
pub trait Eviction: Send {
    /// Policy name as written in configs.
    fn name(&self) -> &'static str;
    /// A line holding `key` entered `slot`.
    fn insert(&mut self, slot: Slot, key: LineKey);
    /// The resident line in `slot` was accessed.
    fn hit(&mut self, slot: Slot);
    /// The resident line in `slot` left the cache (not as a victim).
    fn remove(&mut self, slot: Slot);
    /// Chooses, unlinks and returns a victim to make room for `incoming`.
    fn evict(&mut self, incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot>;
    /// Resident slots tracked.
    fn len(&self) -> usize;
    /// Whether no slot is tracked.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Heap bytes used by the policy's own structures (for the metadata-memory figure).
    fn memory_bytes(&self) -> usize;
}

/// Replacement policy selector, as written in configs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EvictionKind {
    /// Least recently used.
    Lru,
    /// Most recently used.
    Mru,
    /// First in, first out.
    Fifo,
    /// CLOCK (second chance, one reference bit).
    Clock,
    /// Adaptive replacement cache (Megiddo & Modha).
    Arc,
    /// S3-FIFO (small, main and ghost FIFO queues).
    S3Fifo,
    /// SIEVE.
    Sieve,
}

/// Builds a policy for `capacity` slots (slot numbers are `< slot_limit`).
pub fn build(kind: EvictionKind, capacity: usize, slot_limit: usize) -> Box<dyn Eviction> {
    let _ = (kind, capacity, slot_limit);
    todo!("implemented by the eviction policies")
}
