//! `shared`: one cache for every volume, no partitions (a cache without a tenancy section).

use super::{TenancyMode, VolumePlan};
use tiercache_core::{Nanos, VolumeId};

/// Every volume shares the whole cache; never polled.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shared;

impl TenancyMode for Shared {
    fn name(&self) -> &'static str {
        "shared"
    }

    fn interval_ns(&self) -> Option<Nanos> {
        None
    }

    fn observes(&self) -> bool {
        false
    }

    fn observe(&mut self, _volume: VolumeId, _first: u64, _lines: u64, _is_write: bool) {}

    fn decide(&mut self, _capacity_lines: u64) -> Option<Vec<VolumePlan>> {
        None
    }

    fn plans_volume(&self, _volume: VolumeId) -> bool {
        false
    }
}
