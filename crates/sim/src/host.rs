//! Host CPU model for the lookup architectures (docs/design.md §4.1).
//!
//! Host cores (or, for LT, worker threads) are servers. Every request costs CPU twice: at
//! submission (`lookup_ns` of hashing and request handling, then the metadata critical section:
//! `lock_hold_ns` plus `promotion_ns` per promoted line, under a lock) and at completion
//! (`completion_ns`). Locks are FIFO resources:
//! - **LT**: `lt_workers` servers do all the work; the workers serialise metadata access between
//!   themselves, so no lock is modelled. More submitters only queue up.
//! - **HT+CG**: `cores` servers and one global lock. A core waiting for the lock spins, so it is
//!   busy (not available to other requests) while it waits, and every spinning waiter slows the
//!   holder's critical section by `spin_penalty_ns` (cache-line bouncing): the hold time grows
//!   with the number of waiters until the lock dominates and throughput falls.
//! - **HT+FG**: as HT+CG but `fg_lock_shards` locks chosen by a hash of the request's first
//!   line, so waiters are rare and throughput scales with cores.
//!
//! Like the device models, every reservation is computed when it is made (FIFO, calls in
//! non-decreasing time), so the host adds at most one event per CPU phase.

use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use tiercache_core::units::de_nanos;
use tiercache_core::Nanos;

use crate::SimError;

/// Lookup architecture (threads and lock granularity): the one enum both executors use.
pub type LookupArch = tiercache_core::Lookup;

/// Host CPU configuration. Every field has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HostConfig {
    /// Cores (servers for HT architectures).
    pub cores: u32,
    /// Lookup architecture.
    pub lookup: LookupArch,
    /// CPU per request at submission outside the lock (hash, parse, plan).
    #[serde(deserialize_with = "de_nanos")]
    pub lookup_ns: Nanos,
    /// CPU per promoted line, inside the critical section (allocation, eviction bookkeeping).
    #[serde(deserialize_with = "de_nanos")]
    pub promotion_ns: Nanos,
    /// CPU per request at completion.
    #[serde(deserialize_with = "de_nanos")]
    pub completion_ns: Nanos,
    /// Critical section per request (tag search and update) with no contention.
    #[serde(deserialize_with = "de_nanos")]
    pub lock_hold_ns: Nanos,
    /// Extra hold time per spinning waiter (HT architectures).
    #[serde(deserialize_with = "de_nanos")]
    pub spin_penalty_ns: Nanos,
    /// Worker threads of LT.
    pub lt_workers: u32,
    /// Lock shards of HT+FG.
    pub fg_lock_shards: u32,
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            cores: 16,
            lookup: LookupArch::HtFg,
            lookup_ns: 1_000,
            promotion_ns: 500,
            completion_ns: 1_000,
            lock_hold_ns: 1_000,
            spin_penalty_ns: 300,
            lt_workers: 2,
            fg_lock_shards: 1024,
        }
    }
}

impl HostConfig {
    /// Validates the configuration.
    pub fn validate(&self, path: &str) -> Result<(), SimError> {
        let err = |field: &str, reason: String| {
            Err(SimError::Config {
                field: format!("{path}.{field}"),
                reason,
            })
        };
        if self.cores == 0 || self.cores > 65_536 {
            return err("cores", format!("{} must be in 1..=65536", self.cores));
        }
        if self.lt_workers == 0 || self.lt_workers > 65_536 {
            return err(
                "lt_workers",
                format!("{} must be in 1..=65536", self.lt_workers),
            );
        }
        // The model keeps a state per lock: 65536 is past any engine's lock table, and keeps
        // that state small (2^24 took 670 MB).
        if self.fg_lock_shards == 0 || self.fg_lock_shards > 1 << 16 {
            return err(
                "fg_lock_shards",
                format!("{} must be in 1..=65536", self.fg_lock_shards),
            );
        }
        Ok(())
    }
}

/// One lock: its holds in FIFO order as (start, end), pruned as they pass.
#[derive(Debug, Clone, Default)]
struct Lock {
    holds: VecDeque<(Nanos, Nanos)>,
    free_at: Nanos,
}

/// Runtime state of the host CPU.
#[derive(Debug, Clone)]
pub struct Host {
    cfg: HostConfig,
    servers: BinaryHeap<Reverse<Nanos>>,
    locks: Vec<Lock>,
    busy_ns: u128,
    /// Lock waits observed (requests that found their lock held).
    pub contended: u64,
}

impl Host {
    /// A host at rest.
    pub fn new(cfg: &HostConfig) -> Result<Self, SimError> {
        cfg.validate("host")?;
        let servers = match cfg.lookup {
            LookupArch::Lt => cfg.lt_workers,
            _ => cfg.cores,
        };
        let locks = match cfg.lookup {
            LookupArch::Lt => 0,
            LookupArch::HtCg => 1,
            LookupArch::HtFg => cfg.fg_lock_shards,
        };
        Ok(Self {
            cfg: cfg.clone(),
            servers: (0..servers).map(|_| Reverse(0)).collect(),
            locks: (0..locks).map(|_| Lock::default()).collect(),
            busy_ns: 0,
            contended: 0,
        })
    }

    /// Servers (cores or LT workers).
    pub fn servers(&self) -> u32 {
        self.servers.len() as u32
    }

    /// CPU time consumed so far, ns (spinning included).
    pub fn busy_ns(&self) -> u128 {
        self.busy_ns
    }

    /// When the earliest free server can start work arriving at `now`. The server stays at
    /// the top of the heap until [`Host::release_server`], which must come before the next
    /// take.
    fn take_server(&self, now: Nanos) -> Nanos {
        // `validate` refuses a host without servers (cores and LT workers are at least 1).
        now.max(self.servers.peek().expect("a host has a server").0)
    }

    /// The server taken by [`Host::take_server`] works from `from` and is free again at
    /// `until`: one sift of the heap's top, not a pop and a push.
    fn release_server(&mut self, from: Nanos, until: Nanos) {
        self.busy_ns += (until - from) as u128;
        *self.servers.peek_mut().expect("a host has a server") = Reverse(until);
    }

    /// Submission CPU of a request arriving at `now` whose first line hashes to `key_hash` and
    /// which promotes `promotions` lines. Returns when its device ops may be issued.
    pub fn submit(&mut self, now: Nanos, key_hash: u64, promotions: u32) -> Nanos {
        let start = self.take_server(now);
        let critical = self.cfg.lock_hold_ns + self.cfg.promotion_ns * promotions as Nanos;
        let ready = start + self.cfg.lookup_ns;
        if self.locks.is_empty() {
            let end = ready + critical;
            self.release_server(start, end);
            return end;
        }
        let shard =
            (key_hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % self.locks.len();
        let max_waiters = self.servers.len() as Nanos;
        let lock = &mut self.locks[shard];
        while lock.holds.front().is_some_and(|h| h.1 <= ready) {
            lock.holds.pop_front();
        }
        let acquire = ready.max(lock.free_at);
        // Waiters spinning when this request takes the lock: queued holds that start after
        // `ready` (holds start in FIFO order, so they form a suffix).
        let waiting = lock.holds.len() - lock.holds.partition_point(|h| h.0 <= ready);
        if acquire > ready {
            self.contended += 1;
        }
        let hold = critical + self.cfg.spin_penalty_ns * (waiting as Nanos).min(max_waiters);
        let end = acquire + hold;
        lock.holds.push_back((acquire, end));
        lock.free_at = end;
        // The core spins from `ready` to `acquire`: it stays busy all along.
        self.release_server(start, end);
        end
    }

    /// Completion CPU of a request whose last critical op completed at `now`. Returns when the
    /// request is acknowledged.
    pub fn complete(&mut self, now: Nanos) -> Nanos {
        let start = self.take_server(now);
        let end = start + self.cfg.completion_ns;
        self.release_server(start, end);
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(lookup: LookupArch) -> Host {
        Host::new(&HostConfig {
            lookup,
            ..Default::default()
        })
        .unwrap()
    }

    /// Requests all arriving at once: when does the last one get through submission?
    fn burst(h: &mut Host, n: u64) -> Nanos {
        (0..n).map(|i| h.submit(0, i, 0)).max().unwrap()
    }

    #[test]
    fn uncontended_request_costs_lookup_and_hold() {
        for arch in [LookupArch::Lt, LookupArch::HtCg, LookupArch::HtFg] {
            let mut h = host(arch);
            assert_eq!(h.submit(100, 7, 1), 100 + 1000 + 1000 + 500, "{arch:?}");
            assert_eq!(h.complete(5000), 6000);
        }
    }

    #[test]
    fn coarse_lock_serialises_and_spinning_costs_more() {
        let n = 64;
        let lt = burst(&mut host(LookupArch::Lt), n);
        let cg = burst(&mut host(LookupArch::HtCg), n);
        let fg = burst(&mut host(LookupArch::HtFg), n);
        // LT: 2 workers × 2 µs per request.
        assert_eq!(lt, n * 2000 / 2);
        // CG: holds serialise and each is inflated by spinning waiters.
        assert!(cg > n * 1000 + n * 300, "cg {cg}");
        // FG: 16 cores in parallel, nearly no contention.
        assert!(fg <= (n / 16 + 1) * 2000 + 2000, "fg {fg}");
        assert!(fg * 4 < cg && fg * 4 < lt);
    }

    #[test]
    fn config_rejects_zero_cores_and_unknown_keys() {
        let e = Host::new(&HostConfig {
            cores: 0,
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("host.cores"));
        let e = toml::from_str::<HostConfig>("cores = 4\nthreads = 2").unwrap_err();
        assert!(e.to_string().contains("threads"));
        let h: HostConfig = toml::from_str("lookup = \"ht-cg\"\nlock_hold_ns = \"2us\"").unwrap();
        assert_eq!(
            (h.lookup, h.lock_hold_ns, h.cores),
            (LookupArch::HtCg, 2000, 16)
        );
    }
}
