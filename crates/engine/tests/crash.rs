//! Power loss at every point (the model in `common/mod.rs`): a write-back scenario runs on
//! crash-logging devices; for every write the cache device ever received, both devices are
//! rebuilt as a crash just before it leaves them (with unsynced writes kept, and lost), the
//! engine recovers, and every sector must read back a value it may legally hold: the value as
//! of the last completed FLUSH, a FUA write completed since, or any write issued after that.

mod common;

use common::{legal_values, Event, Kind, Scenario, LINE, SECTOR};
use rand::Rng;
use std::sync::Arc;

#[test]
fn every_crash_point_recovers_durable_data() {
    let mut run = Scenario::new(|backend| Arc::new(backend));
    for id in 1..=70u32 {
        if id % 9 == 0 {
            run.flush();
        }
        let line = run.pick_line();
        let first = line * (LINE as usize / SECTOR) + run.rng.gen_range(0..6);
        let sectors = run.rng.gen_range(1..=3);
        let fua = run.rng.gen_bool(0.1);
        run.write(id, first, sectors, fua);
    }
    assert!(run.check() > 300);
}

/// The old model's flaw, pinned: a FUA write over part of an earlier pending write leaves the
/// rest of that write pending, so a FLUSH after it makes that rest durable.
#[test]
fn a_partial_fua_write_leaves_the_rest_of_an_earlier_write_pending() {
    let w = |done_at, id, first, sectors, fua| Event {
        done_at,
        kind: Kind::Write {
            id,
            first,
            sectors,
            fua,
        },
    };
    let events = [
        w(1, 5, 0, 4, false),
        w(2, 6, 1, 1, true),
        Event {
            done_at: 3,
            kind: Kind::Flush,
        },
    ];
    let (stable, _) = legal_values(&events, 10);
    assert_eq!(&stable[0..4], &[5, 6, 5, 5]);
}
