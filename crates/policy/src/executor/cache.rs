//! The executor contract for one [`Cache`]: every method forwards to the inherent one of the
//! same name (kept for callers that hold a `Cache`). The per-request forwarders are
//! `#[inline]` so that a call through the trait compiles to the direct call it replaces.

use super::{Background, Decide, EngineCore, ExecutorState, Report};
use crate::balancing::{BalanceDecision, BalanceReport, Balancer};
use crate::cache::{
    AccessOutcome, Cache, DemoteOutcome, FlushJob, LineState, MetaUpdate, PolicyError,
};
use crate::config::WritePolicy;
use crate::partition::{PartitionId, PartitionInfo};
use crate::stats::CacheStats;
use crate::tenancy::{TenancyReport, VolumeStats};
use tiercache_core::{LineGeometry, Nanos, Plan, Request, VolumeId};
use tiercache_eviction::Slot;

impl Decide for Cache {
    #[inline]
    fn access(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<AccessOutcome, PolicyError> {
        Cache::access(self, req, plan)
    }
    #[inline]
    fn access_piece(
        &mut self,
        piece: &Request,
        plan: Option<&mut Plan>,
        first: bool,
    ) -> Result<AccessOutcome, PolicyError> {
        Cache::access_piece(self, piece, plan, first)
    }
    #[inline]
    fn accept_demote(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<DemoteOutcome, PolicyError> {
        Cache::accept_demote(self, req, plan)
    }
    #[inline]
    fn accept_demote_piece(
        &mut self,
        piece: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<DemoteOutcome, PolicyError> {
        Cache::accept_demote_piece(self, piece, plan)
    }
    #[inline]
    fn would_hit(&self, req: &Request) -> bool {
        Cache::would_hit(self, req)
    }
    #[inline]
    fn would_absorb(&self, req: &Request) -> bool {
        Cache::would_absorb(self, req)
    }
    #[inline]
    fn prefetch(&self, req: &Request, stage: u8) {
        Cache::prefetch(self, req, stage)
    }
    #[inline]
    fn prefetch_ahead(&self, newest: Option<&Request>, soon: Option<&Request>, _: &Request) {
        Cache::prefetch_ahead(self, newest, soon)
    }
}

impl Background for Cache {
    fn clean(&mut self, state: &ExecutorState, jobs: &mut Vec<FlushJob>) {
        Cache::clean(self, state, jobs)
    }
    fn next_clean_poll(&self, state: &ExecutorState) -> Option<Nanos> {
        Cache::next_clean_poll(self, state)
    }
    fn cleaning_waits_for_idle_cache(&self) -> bool {
        Cache::cleaning_waits_for_idle_cache(self)
    }
    fn flush_done(&mut self, job: FlushJob) {
        Cache::flush_done(self, job)
    }
    fn flush_all(&mut self, jobs: &mut Vec<FlushJob>) {
        Cache::flush_all(self, jobs)
    }
    fn balance(&mut self, state: &ExecutorState) -> Option<Nanos> {
        Cache::balance(self, state)
    }
    fn balance_decision(&self) -> BalanceDecision {
        Cache::balance_decision(self)
    }
    fn follow_balancing(&mut self, d: BalanceDecision) {
        Cache::follow_balancing(self, d)
    }
    fn set_balancer(&mut self, b: Box<dyn Balancer>) {
        Cache::set_balancer(self, b)
    }
    fn repartition(&mut self, state: &ExecutorState) -> Option<Nanos> {
        Cache::repartition(self, state)
    }
    fn take_resize_jobs(&mut self, jobs: &mut Vec<FlushJob>) {
        Cache::take_resize_jobs(self, jobs)
    }
    fn set_write_policy(&mut self, volume: Option<VolumeId>, policy: WritePolicy) {
        Cache::set_write_policy(self, volume, policy)
    }
}

impl Report for Cache {
    fn stats_snapshot(&self) -> CacheStats {
        self.stats().clone()
    }
    fn volume_stats(&self) -> Vec<VolumeStats> {
        Cache::volume_stats(self).to_vec()
    }
    fn resident_lines(&self) -> u64 {
        Cache::resident_lines(self)
    }
    fn dirty_lines(&self) -> u64 {
        Cache::dirty_lines(self)
    }
    fn line_awaits_write_back(&self, volume: VolumeId, index: u64) -> Option<bool> {
        Some(Cache::line_state(self, volume, index).is_some_and(|s| s.dirty != 0 || s.pinned))
    }
    fn capacity_lines(&self) -> u64 {
        Cache::capacity_lines(self)
    }
    fn jobs_in_flight(&self) -> u32 {
        Cache::jobs_in_flight(self)
    }
    fn metadata_bytes(&self) -> usize {
        Cache::metadata_bytes(self)
    }
    fn geometry(&self) -> LineGeometry {
        Cache::geometry(self)
    }
    fn write_policy(&self, volume: VolumeId) -> WritePolicy {
        Cache::write_policy(self, volume)
    }
    fn balance_report(&self) -> Option<BalanceReport> {
        Cache::balance_report(self)
    }
    fn balanced_write_policy(&self) -> Option<WritePolicy> {
        Cache::balanced_write_policy(self)
    }
    fn tenancy_report(&self) -> Option<TenancyReport> {
        Cache::tenancy_report(self)
    }
    fn audit(&self) {
        Cache::audit(self)
    }
}

impl EngineCore for Cache {
    fn set_journal(&mut self, on: bool) {
        Cache::set_journal(self, on)
    }
    fn drain_meta_updates(&mut self, out: &mut Vec<MetaUpdate>) {
        Cache::drain_meta_updates(self, out)
    }
    fn slot_record(&self, slot: Slot) -> MetaUpdate {
        Cache::slot_record(self, slot)
    }
    fn restore_line(
        &mut self,
        slot: Slot,
        volume: VolumeId,
        index: u64,
        valid: u64,
        dirty: u64,
    ) -> Result<(), PolicyError> {
        Cache::restore_line(self, slot, volume, index, valid, dirty)
    }
    fn flush_failed(&mut self, job: FlushJob) {
        Cache::flush_failed(self, job)
    }
    fn force_write_policy(&mut self, policy: Option<WritePolicy>) {
        Cache::force_write_policy(self, policy)
    }
    fn drop_clean(&mut self, volume: VolumeId, index: u64) -> bool {
        Cache::drop_clean(self, volume, index)
    }
    fn reinstate_evicted(
        &mut self,
        slot: Slot,
        volume: VolumeId,
        index: u64,
        dirty: u64,
    ) -> Result<(), PolicyError> {
        Cache::reinstate_evicted(self, slot, volume, index, dirty)
    }
    #[inline]
    fn line_state(&self, volume: VolumeId, index: u64) -> Option<LineState> {
        Cache::line_state(self, volume, index)
    }
    fn partition_stats(&self) -> Vec<PartitionInfo> {
        Cache::partition_stats(self)
    }
    fn partition_info(&self, id: PartitionId) -> Option<PartitionInfo> {
        Cache::partition_info(self, id)
    }
    fn partition_of(&self, volume: VolumeId) -> PartitionId {
        Cache::partition_of(self, volume)
    }
    fn set_partition(
        &mut self,
        volume: VolumeId,
        lines: u64,
        jobs: &mut Vec<FlushJob>,
    ) -> Result<PartitionId, PolicyError> {
        Cache::set_partition(self, volume, lines, jobs)
    }
    fn leads_tenancy(&self) -> bool {
        Cache::leads_tenancy(self)
    }
    fn tenancy_due(&self, now: Nanos) -> bool {
        Cache::tenancy_due(self, now)
    }
    fn shard_share(&self) -> crate::shards::ShardShare {
        Cache::shard_share(self)
    }
    fn lead_repartition(
        &mut self,
        state: &ExecutorState,
        shares: &[crate::shards::ShardShare],
    ) -> Option<Nanos> {
        Cache::lead_repartition(self, state, shares)
    }
    fn tenancy_split(&self) -> Option<crate::shards::TenancySplit> {
        Cache::tenancy_split(self).cloned()
    }
    fn volume_write_policy(&self, volume: VolumeId) -> Option<WritePolicy> {
        Cache::volume_write_policy(self, volume)
    }
    fn follow_tenancy(&mut self, split: &crate::shards::TenancySplit, now: Nanos) {
        Cache::follow_tenancy(self, split, now)
    }
}
