//! Demote clean victims (DEMOTE, docs/design.md §4.7): the level below gets the chance to keep what
//! this level no longer holds, so two levels hold different lines (exclusive caching).

use super::{VictimAction, VictimPolicy};
use tiercache_core::LineKey;

/// Every clean victim with valid data is demoted.
#[derive(Debug, Clone, Copy, Default)]
pub struct DemoteClean;

impl VictimPolicy for DemoteClean {
    fn name(&self) -> &'static str {
        "demote"
    }

    fn on_clean_victim(&mut self, _key: LineKey, valid: u64) -> VictimAction {
        if valid == 0 {
            // Nothing to hand down (a line whose data was all trimmed).
            VictimAction::Drop
        } else {
            VictimAction::Demote
        }
    }
}
