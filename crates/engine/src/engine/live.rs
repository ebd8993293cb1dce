//! Policies changed on a running engine (an operator's `tiercache set` through the serve
//! control socket): every shard's core takes the change between two of its requests, under
//! its own lock, and the flusher is woken so that a new cleaner is asked at once.

use super::Engine;
use tiercache_core::VolumeId;
use tiercache_policy::{CacheConfig, PolicyError, Report, WritePolicy};

impl Engine {
    /// Puts `cfg`'s write policy, cleaning, promotion and balancing in force on every shard
    /// ([`tiercache_policy::Cache::set_policies`]); the other fields are not read. Checked on
    /// the first shard before any shard changes, so an invalid setting changes nothing. A
    /// cache-wide write policy clears the volumes' own, and the journal follows (else a
    /// restart would bring back per-volume policies the operator replaced); should that
    /// journal write fail, the engine's log says so and the change is in force all the same.
    pub fn set_policies(&self, cfg: &CacheConfig) -> Result<(), PolicyError> {
        for sh in &self.inner.shards {
            self.inner.core(sh).cache.set_policies(cfg)?;
        }
        if let Err(e) = self.inner.journal_partitions() {
            self.inner.health.log(format!(
                "cache.write_policy set but not journaled ({e}): a restart brings back the \
                 volumes' write policies of before"
            ));
        }
        self.inner.kick();
        Ok(())
    }

    /// Sets the write policy of one volume (another volume keeps its own), journaled on the
    /// cache device with the partition layout: a warm restart keeps it. An error: the
    /// journal could not be written; the policy is in force all the same, for this run (and
    /// journaled with the next change that succeeds).
    pub fn set_volume_write_policy(&self, volume: u32, policy: WritePolicy) -> std::io::Result<()> {
        self.put_volume_write_policy(volume, policy);
        let journaled = self.inner.journal_partitions();
        self.inner.kick();
        journaled
    }

    /// Turns the cache and `volumes` write-through for the rest of this run only, so that
    /// nothing new becomes dirty while a detach drains the cache: the journal keeps the
    /// volumes' write policies of before, so a restart runs what it ran before the detach.
    pub fn write_through_until_restart(&self, volumes: &[u32]) -> Result<(), PolicyError> {
        {
            let mut held = super::lock(&self.inner.journal_policies_held);
            if held.is_none() {
                *held = Some(self.inner.volume_write_policies());
            }
        }
        let mut cfg = self.policies();
        cfg.write_policy = WritePolicy::WriteThrough;
        self.set_policies(&cfg)?;
        for &v in volumes {
            self.put_volume_write_policy(v, WritePolicy::WriteThrough);
        }
        self.inner.kick();
        Ok(())
    }

    /// Puts `policy` in force for `volume` on every shard (not journaled, no kick).
    fn put_volume_write_policy(&self, volume: u32, policy: WritePolicy) {
        for sh in &self.inner.shards {
            self.inner
                .core(sh)
                .cache
                .set_write_policy(Some(VolumeId(volume)), policy);
        }
    }

    /// The policies in force: the config the engine was opened with, with what
    /// [`set_policies`](Self::set_policies) changed since (the whole cache's capacity and
    /// shard count, not one shard's).
    pub fn policies(&self) -> CacheConfig {
        let layout = &self.inner.shard_layout;
        let mut cfg = CacheConfig {
            capacity: u64::from(layout.total_lines()) * self.inner.geo.line_size(),
            shards: layout.shards() as u32,
            ..self
                .inner
                .core(&self.inner.shards[0])
                .cache
                .config()
                .clone()
        };
        // The whole cache's sizes, not shard 0's split of them.
        cfg.partitions = self.inner.whole_sizes.0.clone();
        cfg.tenancy.fixed = self.inner.whole_sizes.1.clone();
        cfg
    }

    /// The write policy in force for `volume` now: its own, else the load balancer's, else the
    /// cache's.
    pub fn write_policy_in_force(&self, volume: u32) -> WritePolicy {
        Report::write_policy(
            &self.inner.core(&self.inner.shards[0]).cache,
            VolumeId(volume),
        )
    }
}
