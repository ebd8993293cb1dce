//! Drop clean victims: the level below already holds their data.

use super::{VictimAction, VictimPolicy};
use tiercache_core::LineKey;

/// Every clean victim is dropped.
#[derive(Debug, Clone, Copy, Default)]
pub struct DropClean;

impl VictimPolicy for DropClean {
    fn name(&self) -> &'static str {
        "drop"
    }

    fn on_clean_victim(&mut self, _key: LineKey, _valid: u64) -> VictimAction {
        VictimAction::Drop
    }
}
