//! The cleaning order in the simulator (docs/design.md §4.6): a dirty cache flushed to one
//! 7.2K HDD in ascending backend address (adjacent lines merged into one write, runs continuing
//! where the last write ended) takes less simulated time than least recently written first,
//! writes the same bytes, and runs deterministically.

use tiercache_policy::{Cache, CacheConfig, CleaningConfig, CleaningOrder};
use tiercache_sim::testing::UniformSource;
use tiercache_sim::{simulate, DeviceConfig, RunLimits, SimConfig};

/// (final flush time, backend bytes written, metrics as JSON) of random 4 KiB writes over a
/// 16 MiB volume into a 16 MiB write-back cache with no background cleaning, then a final
/// flush to `hdd-7200-sas`.
fn flush(order: CleaningOrder) -> (u64, u64, String) {
    let mut c = Cache::new(&CacheConfig {
        capacity: 16 << 20,
        line_size: 4096,
        cleaning: CleaningConfig::None,
        cleaning_order: order,
        ..Default::default()
    })
    .unwrap();
    let mut src = UniformSource::closed(5, 4, 4, 800, 16 << 20, 4096, 0.0);
    let cfg = SimConfig {
        cache_device: DeviceConfig::preset("sata-ssd-863a"),
        backend: DeviceConfig::preset("hdd-7200-sas"),
        run: RunLimits {
            final_flush: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let out = simulate(&mut c, &mut src, &cfg).unwrap();
    assert_eq!(c.dirty_lines(), 0, "{order:?}: the final flush cleaned all");
    assert!(
        out.metrics.dirty_lines_end > 1000,
        "{order:?}: a dirty cache"
    );
    (
        out.metrics.final_flush_ns,
        out.devices["backend"].bytes_written,
        serde_json::to_string(&out.metrics).unwrap(),
    )
}

#[test]
fn an_address_ordered_flush_to_an_hdd_is_shorter_and_writes_the_same_bytes() {
    let (written, written_bytes, _) = flush(CleaningOrder::Written);
    let (address, address_bytes, address_json) = flush(CleaningOrder::Address);
    let (sweep, sweep_bytes, _) = flush(CleaningOrder::Sweep);
    assert_eq!(address_bytes, written_bytes);
    assert_eq!(sweep_bytes, written_bytes);
    // About 3200 random writes over 4096 lines leave about half of them dirty: most dirty
    // lines have a dirty neighbour, so sorted they merge into far fewer seeks.
    assert!(
        address * 2 < written,
        "address order {address} ns against written {written} ns"
    );
    // A final flush sorts everything once under either address order.
    assert_eq!(sweep, address);
    // Deterministic: the same run twice gives the same record.
    assert_eq!(flush(CleaningOrder::Address).2, address_json);
}
