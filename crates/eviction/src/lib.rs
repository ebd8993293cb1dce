//! Replacement (eviction) policies, every one the same shape behind [`Eviction`]
//! (docs/design.md §4.4).
//!
//! The policy core owns the line table; a policy only orders *slots* (indices into that table)
//! and chooses victims. Adding a policy is one file in this crate plus one arm in [`build`].
//!
//! | policy | type | per-slot state |
//! | --- | --- | --- |
//! | LRU, MRU, FIFO | [`Lru`], [`Mru`], [`Fifo`] | two links of the width the slots need ([`packed`]) |
//! | CLOCK | [`Clock`] | links, counter byte |
//! | SIEVE | [`Sieve`] | links, visited byte |
//! | ARC | [`ArcPolicy`] | links, list byte, key; ghosts B1/B2 (≤ c keys) |
//! | S3-FIFO | [`S3Fifo`] | links, queue/counter byte, key; ghost (0.9 c keys) |
//! | CAR | [`Car`] | two rings of slots (a packed entry per slot each), list/reference byte, key; ghosts B1/B2 (≤ c keys) |
//! | CLOCK-Pro | [`ClockPro`] | two rings of slots (as CAR), hot/reference/test byte, key; non-resident test keys (≤ c) |
//! | W-TinyLFU | [`WTinyLfu`] | links, segment byte, key; [`FrequencySketch`] (4 × 4 bits × width ≥ c) |
//! | LeCaR | [`LeCaR`] | recency links, frequency-group links, group and key; group pool; two histories (≤ c/2 keys each, with eviction time) |
//! | SLRU | [`Slru`] | links, segment byte |
//! | 2Q | [`TwoQ`] | links, queue byte, key; ghost A1out (0.5 c keys): 33 B |
//! | LFU | [`Lfu`] | links, bucket index; bucket pool (count, first, last: 16 B per slot): 28 B |
//! | LFUDA | [`Lfuda`] | order links, bucket and count; a pool bucket (priority, its lowest and highest line: 16 B): 32 B |
//! | LRU-K (K = 2) | [`LruK`] | heap entry (rank key and slot, 16 B), position, last access time: 28 B |
//! | LIRS | [`Lirs`] | stack and queue links, state byte, key; non-resident pool (≤ c keys): 57 B |
//! | LHD | [`Lhd`] | dense resident entry (last access, key, slot, two hit ages, explorer: 32 B) and position: 36 B; 3.84 MB of per-class age statistics |
//!
//! Every list is an intrusive doubly-linked list over `u32` arrays indexed by slot (but CAR's
//! and CLOCK-Pro's clocks, rings of slots scanned in order: `ring.rs`); ghost keys
//! live in a fixed pool with an open-addressing index. All memory is allocated by [`build`]
//! (or by [`Eviction::grow_slots`], which raises the slot limit):
//! `hit`, `insert`, `evict` and `remove` are O(1) (eviction scans only past pinned slots or, for
//! the CLOCK-like policies, past referenced ones) and never allocate, except in LRU-K, whose
//! order a hit can change anywhere: it keeps an indexed 4-ary heap, `O(log n)`; LFUDA, whose hit
//! or insert walks up past the priorities between a line's old and new one (one list sorted by
//! priority, cut into buckets of equal priority); LHD, whose eviction ranks a fixed number
//! of sampled lines; and CAR and CLOCK-Pro, whose rings purge the stale entries removed lines
//! leave, O(ring) in place, when a ring fills or a slot has three there (`ring.rs`).
//! (Bytes per slot as `memory_bytes` reports them, `tests/memory.rs`, for the policies compared
//! against in research; ghosts counted at a full cache.)
//!
//! A policy's capacity can change at run time ([`Eviction::set_capacity`], for partitions
//! resized by a multi-tenant cache): ARC and S3-FIFO re-derive their targets and ghost sizes
//! from it, and the caller evicts any excess. [`Eviction::insert_cold`] places a line where
//! it is evicted next, [`Eviction::insert_demoted`] where it is evicted last (the lower level of
//! a cache hierarchy, docs/design.md §4.7).
//!
//! Semantics follow libCacheSim's implementations with all objects of size 1 (`capacity` is
//! its cache size in objects); `tests/libcachesim_golden.rs` checks every policy but MRU
//! request by request against hits recorded from libCacheSim itself (LFUDA and LIRS are the
//! published ones, and SLRU differs at sizes not a multiple of 4 and after removals: all pinned there,
//! each file's doc says why). Pinned slots (lines under
//! write-back), which libCacheSim does not have, are passed over as a real cache would; with
//! nothing pinned the order is exactly libCacheSim's.
//!
//! ```
//! use tiercache_core::LineKey;
//! use tiercache_eviction::{build, EvictionKind};
//!
//! // Two lines; the core maps keys to slots 0 and 1.
//! let mut lru = build(EvictionKind::Lru, 2, 2);
//! lru.insert(0, LineKey(10));
//! lru.insert(1, LineKey(11));
//! lru.hit(0);
//! // Full: a miss on key 12 asks for a victim (slot 0 is under write-back), then inserts.
//! let victim = lru.evict(LineKey(12), &|slot| slot == 0).unwrap();
//! assert_eq!(victim, 1);
//! lru.insert(victim, LineKey(12));
//! assert_eq!(lru.len(), 2);
//! ```

#![warn(missing_docs)]

mod arc;
mod car;
mod clock;
mod clockpro;
mod fifo;
mod ghost;
mod lecar;
mod list;
mod lru;
mod mru;
pub mod packed;
mod ring;
mod s3fifo;
mod sieve;
mod sketch;
mod wtinylfu;
// Policies researchers compare against (issue 35).
mod heap;
mod lfu;
mod lfuda;
mod lhd;
mod lirs;
mod lruk;
mod slru;
mod twoq;

pub use arc::ArcPolicy;
pub use car::Car;
pub use clock::Clock;
pub use clockpro::ClockPro;
pub use fifo::Fifo;
pub use lecar::LeCaR;
pub use lru::Lru;
pub use mru::Mru;
pub use s3fifo::{S3Fifo, S3FifoConfig};
pub use sieve::Sieve;
pub use sketch::FrequencySketch;
pub use wtinylfu::WTinyLfu;
// Policies researchers compare against (issue 35).
pub use lfu::Lfu;
pub use lfuda::Lfuda;
pub use lhd::Lhd;
pub use lirs::Lirs;
pub use lruk::LruK;
pub use slru::Slru;
pub use twoq::TwoQ;

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use tiercache_core::LineKey;

/// Index of a line frame in the cache (cache-device address = slot × line size).
pub type Slot = u32;

/// The `incoming` key of an eviction that makes room for no particular line (a partition
/// shrinking). ARC and S3-FIFO skip their ghost lookup for it. (It is also the key of the last
/// line of volume 65535; such a line simply gets no ghost hit from a shrink's evictions.)
pub const NO_INCOMING: LineKey = LineKey(u64::MAX);

/// One replacement policy instance managing up to `capacity` slots.
///
/// Protocol the core follows (and the property tests check against reference models):
/// - [`Eviction::insert`] is called once for each line that enters the cache; when the
///   partition is full, the core first calls [`Eviction::evict`] with the incoming key and
///   then `insert` for that same key (into the freed slot or another free one);
/// - [`Eviction::hit`] on every access to a resident line;
/// - [`Eviction::remove`] when a resident line leaves other than as a victim (trim, invalidation);
/// - [`Eviction::evict`] removes and returns the policy's victim, passing over slots for which
///   `pinned` answers true (lines under write-back); `None` when every resident slot is pinned;
/// - [`Eviction::set_capacity`] changes the capacity the policy adapts to (a partition resized
///   at run time). A policy never evicts by itself: after shrinking below [`Eviction::len`] the
///   caller calls `evict` (with [`NO_INCOMING`] when no line is waiting for the room) until the
///   policy fits (or every candidate is pinned), as it calls `evict` on a miss when
///   `len() >= capacity`.
pub trait Eviction: Send {
    /// Policy name as written in configs.
    fn name(&self) -> &'static str;
    /// A line holding `key` entered `slot`.
    fn insert(&mut self, slot: Slot, key: LineKey);
    /// The resident line in `slot` was accessed.
    fn hit(&mut self, slot: Slot);
    /// The resident line in `slot` left the cache (not as a victim).
    fn remove(&mut self, slot: Slot);
    /// Chooses, unlinks and returns a victim to make room for `incoming` ([`NO_INCOMING`]
    /// when the room is for no line in particular, e.g. a shrink: ghost lists are then not
    /// consulted).
    fn evict(&mut self, incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot>;
    /// Resident slots tracked.
    fn len(&self) -> usize;
    /// Capacity in lines the policy adapts to (its cache size `c`).
    fn capacity(&self) -> usize;
    /// Sets the capacity the policy adapts to, at most the slot limit given to [`build`]
    /// (larger values are clamped to it). ARC bounds its target `p` and its ghosts by the new
    /// `c`; S3-FIFO gives its small queue `floor(0.1 c)` lines and its ghost `floor(0.9 c)`
    /// keys (its configured ratios); the recency policies only record it. Nothing is evicted
    /// here (see the protocol above). Growing ARC's or S3-FIFO's ghost pool beyond what it
    /// ever held allocates; nothing else does.
    fn set_capacity(&mut self, lines: usize);
    /// Inserts a line at the "evict next" end instead of where [`Eviction::insert`] puts it
    /// (the lower level of a cache hierarchy inserts blocks the level above now holds there,
    /// docs/design.md §4.7). The default is `insert`; each policy documents what it does.
    fn insert_cold(&mut self, slot: Slot, key: LineKey) {
        self.insert(slot, key);
    }
    /// Inserts a line demoted from the level above at the policy's "evict last" end
    /// (docs/design.md §4.7: an exclusive lower level keeps what the level above no longer holds
    /// longest). The default is `insert`, which is that end for the recency policies and FIFO; MRU,
    /// whose `insert` is its evict-next end, puts the line at its other end. S3-FIFO keeps
    /// the default, so a demoted line enters its small queue, which is evicted first (as any
    /// new line does there): it stays only if the level above's next access finds it soon.
    fn insert_demoted(&mut self, slot: Slot, key: LineKey) {
        self.insert(slot, key);
    }
    /// Whether no slot is tracked.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Heap bytes used by the policy's own structures (for the metadata-memory figure).
    fn memory_bytes(&self) -> usize;

    /// Raises the slot limit given to [`build`] to `slot_limit` (no-op if not larger), so
    /// slots up to it may be inserted: the per-slot arrays grow (this allocates); the order,
    /// the capacity and every later decision are as if the policy had been built with the
    /// larger limit. (A partition that numbers its own lines grows its policy with them.)
    fn grow_slots(&mut self, slot_limit: usize);

    /// Hint that `slot` is accessed soon: a policy may start loading its entry. Changes
    /// nothing; the default does nothing.
    #[inline]
    fn prefetch(&self, slot: Slot) {
        let _ = slot;
    }

    /// Hint that `key`, not resident, may soon be the incoming key of an [`Eviction::evict`]
    /// or [`Eviction::insert`]: a policy that looks incoming keys up (ARC's and S3-FIFO's
    /// ghosts) may start loading where that lookup begins. Changes nothing; the default does
    /// nothing.
    #[inline]
    fn prefetch_incoming(&self, key: LineKey) {
        let _ = key;
    }

    /// For prefetching: the slot the next eviction would likely pick and the one after it,
    /// when the policy can tell cheaply (from memory it touches anyway). Default: no hint.
    #[inline]
    fn victim_hint(&self) -> Option<(Slot, Option<Slot>)> {
        None
    }

    /// [`Eviction::victim_hint`], with [`Eviction::prefetch`] of the second slot done here: one
    /// dynamic call for both (the default body is compiled for each policy, where both calls
    /// are static). Changes nothing.
    #[inline]
    fn victim_hint_prefetching_next(&self) -> Option<(Slot, Option<Slot>)> {
        let hint = self.victim_hint();
        if let Some((_, Some(then))) = hint {
            self.prefetch(then);
        }
        hint
    }
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
    /// CAR: CLOCK with adaptive replacement (Bansal & Modha).
    Car,
    /// CLOCK-Pro (Jiang, Chen & Zhang): hot and cold lines, test periods.
    ClockPro,
    /// W-TinyLFU: LRU window, segmented-LRU main, frequency-sketch admission.
    #[serde(rename = "w-tinylfu")]
    WTinyLfu,
    /// LeCaR: LRU and LFU experts weighted by regret (Vietri et al.).
    #[serde(rename = "lecar")]
    LeCaR,
    // Policies researchers compare against (issue 35).
    /// Segmented LRU, libCacheSim's four equal segments.
    Slru,
    /// 2Q (A1in FIFO, Am LRU, A1out ghost).
    #[serde(rename = "2q")]
    TwoQ,
    /// Least frequently used (ties: oldest at its count).
    Lfu,
    /// LFU with dynamic aging.
    Lfuda,
    /// LRU-K with K = 2.
    LruK,
    /// LIRS (low inter-reference recency set).
    Lirs,
    /// LHD: least hit density (Beckmann et al.), learned from hit and eviction ages.
    Lhd,
    /// Belady's MIN (evict the line used furthest in the future): offline, it needs every
    /// line's next use, so only a whole-trace replay runs it (`sim` in hit-ratio mode, crate
    /// `tiercache-optimal`); it is not in [`EvictionKind::ALL`] and [`build`] refuses it.
    Belady,
}

impl EvictionKind {
    /// Every policy, in documentation order.
    pub const ALL: [EvictionKind; 18] = [
        EvictionKind::Lru,
        EvictionKind::Mru,
        EvictionKind::Fifo,
        EvictionKind::Clock,
        EvictionKind::Arc,
        EvictionKind::S3Fifo,
        EvictionKind::Sieve,
        EvictionKind::Car,
        EvictionKind::ClockPro,
        EvictionKind::WTinyLfu,
        EvictionKind::LeCaR,
        // Policies researchers compare against (issue 35).
        EvictionKind::Slru,
        EvictionKind::TwoQ,
        EvictionKind::Lfu,
        EvictionKind::Lfuda,
        EvictionKind::LruK,
        EvictionKind::Lirs,
        EvictionKind::Lhd,
    ];

    /// Name as written in configs (the serde name), e.g. `"s3-fifo"`.
    pub fn as_str(self) -> &'static str {
        match self {
            EvictionKind::Lru => "lru",
            EvictionKind::Mru => "mru",
            EvictionKind::Fifo => "fifo",
            EvictionKind::Clock => "clock",
            EvictionKind::Arc => "arc",
            EvictionKind::S3Fifo => "s3-fifo",
            EvictionKind::Sieve => "sieve",
            EvictionKind::Car => "car",
            EvictionKind::ClockPro => "clock-pro",
            EvictionKind::WTinyLfu => "w-tinylfu",
            EvictionKind::LeCaR => "lecar",
            // Policies researchers compare against (issue 35).
            EvictionKind::Slru => "slru",
            EvictionKind::TwoQ => "2q",
            EvictionKind::Lfu => "lfu",
            EvictionKind::Lfuda => "lfuda",
            EvictionKind::LruK => "lru-k",
            EvictionKind::Lirs => "lirs",
            EvictionKind::Lhd => "lhd",
            EvictionKind::Belady => "belady",
        }
    }
}

impl fmt::Display for EvictionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy name that is not one of [`EvictionKind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown eviction policy {0:?} (expected one of lru, mru, fifo, clock, arc, s3-fifo, sieve, car, clock-pro, w-tinylfu, lecar, slru, 2q, lfu, lfuda, lru-k, lirs, lhd, or belady offline)"
)]
pub struct UnknownEviction(pub String);

impl FromStr for EvictionKind {
    type Err = UnknownEviction;

    /// Parses a config name, ignoring ASCII case; `s3fifo` is accepted for `s3-fifo`, `twoq`
    /// and `two-q` for `2q`, `lruk` and `lru-2` for `lru-k`, and
    /// `belady` (also `opt`, `min`) names the offline [`EvictionKind::Belady`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        let name = match lower.as_str() {
            "s3fifo" => "s3-fifo",
            "clockpro" => "clock-pro",
            "wtinylfu" | "w-tiny-lfu" => "w-tinylfu",
            "opt" | "min" => "belady",
            "twoq" | "two-q" => "2q",
            "lruk" | "lru-2" => "lru-k",
            other => other,
        };
        EvictionKind::ALL
            .into_iter()
            .chain([EvictionKind::Belady])
            .find(|k| k.as_str() == name)
            .ok_or_else(|| UnknownEviction(s.to_string()))
    }
}

/// Builds a policy for a partition of `capacity` slots whose slot numbers are `< slot_limit`.
///
/// `capacity` sizes ARC's and S3-FIFO's queues and ghosts (it is libCacheSim's cache size in
/// objects); the per-slot arrays are `slot_limit` long. All memory is allocated here (or when
/// [`Eviction::grow_slots`] raises the limit), so the policies do not allocate while running.
///
/// # Panics
/// If `slot_limit` does not fit in `u32` link space (more than about 4 billion slots), or for
/// [`EvictionKind::Belady`], which no online cache can run (the policy core refuses it in its
/// configuration check before building anything; offline replays use `tiercache-optimal`).
pub fn build(kind: EvictionKind, capacity: usize, slot_limit: usize) -> Box<dyn Eviction> {
    let mut policy: Box<dyn Eviction> = match kind {
        EvictionKind::Lru => Box::new(Lru::new(slot_limit)),
        EvictionKind::Mru => Box::new(Mru::new(slot_limit)),
        EvictionKind::Fifo => Box::new(Fifo::new(slot_limit)),
        EvictionKind::Clock => Box::new(Clock::new(slot_limit)),
        EvictionKind::Arc => return Box::new(ArcPolicy::new(capacity, slot_limit)),
        EvictionKind::S3Fifo => return Box::new(S3Fifo::new(capacity, slot_limit)),
        EvictionKind::Sieve => Box::new(Sieve::new(slot_limit)),
        EvictionKind::Car => return Box::new(Car::new(capacity, slot_limit)),
        EvictionKind::ClockPro => return Box::new(ClockPro::new(capacity, slot_limit)),
        EvictionKind::WTinyLfu => return Box::new(WTinyLfu::new(capacity, slot_limit)),
        EvictionKind::LeCaR => return Box::new(LeCaR::new(capacity, slot_limit)),
        // Policies researchers compare against (issue 35).
        EvictionKind::Slru => return Box::new(Slru::new(capacity, slot_limit)),
        EvictionKind::TwoQ => return Box::new(TwoQ::new(capacity, slot_limit)),
        EvictionKind::Lfu => Box::new(Lfu::new(slot_limit)),
        EvictionKind::Lfuda => Box::new(Lfuda::new(slot_limit)),
        EvictionKind::LruK => Box::new(LruK::new(slot_limit)),
        EvictionKind::Lirs => return Box::new(Lirs::new(capacity, slot_limit)),
        EvictionKind::Lhd => return Box::new(Lhd::new(capacity, slot_limit)),
        EvictionKind::Belady => {
            panic!("belady needs the future: it runs only in an offline replay (tiercache-optimal)")
        }
    };
    policy.set_capacity(capacity);
    policy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_print_and_serialise_alike() {
        for kind in EvictionKind::ALL {
            let name = kind.as_str();
            assert_eq!(name.parse::<EvictionKind>(), Ok(kind));
            assert_eq!(name.to_ascii_uppercase().parse::<EvictionKind>(), Ok(kind));
            assert_eq!(kind.to_string(), name);
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{name}\""));
            assert_eq!(build(kind, 4, 4).name(), name);
        }
        assert_eq!("s3fifo".parse::<EvictionKind>(), Ok(EvictionKind::S3Fifo));
        assert_eq!(
            "ClockPro".parse::<EvictionKind>(),
            Ok(EvictionKind::ClockPro)
        );
        assert_eq!(
            "WTinyLFU".parse::<EvictionKind>(),
            Ok(EvictionKind::WTinyLfu)
        );
        assert_eq!("LeCaR".parse::<EvictionKind>(), Ok(EvictionKind::LeCaR));
        for name in ["belady", "OPT", "min"] {
            assert_eq!(name.parse::<EvictionKind>(), Ok(EvictionKind::Belady));
        }
        assert_eq!(
            serde_json::to_string(&EvictionKind::Belady).unwrap(),
            "\"belady\""
        );
        for name in ["twoq", "Two-Q"] {
            assert_eq!(name.parse::<EvictionKind>(), Ok(EvictionKind::TwoQ));
        }
        let err = "lfu-x".parse::<EvictionKind>().unwrap_err();
        assert_eq!(err, UnknownEviction("lfu-x".into()));
        assert!(err.to_string().contains("\"lfu-x\""));
    }

    #[test]
    fn empty_and_zero_capacity_policies_evict_nothing() {
        for kind in EvictionKind::ALL {
            let mut p = build(kind, 0, 0);
            assert!(p.is_empty());
            assert_eq!(p.evict(LineKey(1), &|_| false), None, "{kind}");
        }
    }
}
