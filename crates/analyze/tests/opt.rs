//! `analyze --opt` / `--writeback-cost` (docs/design.md §12): OPT never above LRU, the bound
//! never above any schedule's cost, and asking for `belady` among the policies asks for OPT.

use tiercache_analyze::{analyze_file, CostWeights, EvictionKind, FileOptions};

const MSR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/traces/msr-hm0-sample.csv"
);

#[test]
fn opt_is_below_lru_and_the_bound_below_every_cost() {
    let mut opts = FileOptions::new(MSR);
    opts.sizes = vec![19, 95, 191, 575];
    opts.opt = true;
    opts.policies = vec![EvictionKind::S3Fifo, EvictionKind::Arc];
    opts.writeback = Some(CostWeights {
        read: 1.0,
        write: 2.0,
    });
    let a = analyze_file(&opts, &mut |_| {}).unwrap();
    let opt = a.opt.as_ref().expect("OPT computed");
    assert_eq!(opt.line_accesses, a.line_accesses);
    for p in &a.curve {
        let (lru, best) = (p.miss_ratio.unwrap(), p.opt_miss_ratio.unwrap());
        assert!(best <= lru, "{} lines: OPT {best} above LRU {lru}", p.lines);
    }
    // The curve's smallest size is where OPT gains most on this trace.
    assert!(a.curve[0].opt_miss_ratio.unwrap() < a.curve[0].miss_ratio.unwrap());
    let wb = opt.writeback.as_ref().expect("write-back costs");
    assert_eq!(wb.points.len(), 4);
    for p in &wb.points {
        let names: Vec<&str> = p.policies.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["lru", "s3-fifo", "arc"]);
        assert!(p.bound.cost <= p.belady.cost, "{} lines", p.lines);
        // The largest of the valid bounds, named.
        let b = &p.bound;
        assert!(b.cost >= b.sum_of_minima.cost && b.cost >= b.joint_aggregated);
        assert!(b.joint_flow.is_none_or(|f| b.cost >= f));
        let named = match b.binds {
            "sum-of-minima" => b.sum_of_minima.cost,
            "joint-flow" => b.joint_flow.unwrap(),
            "joint-aggregated" => b.joint_aggregated,
            other => panic!("binds {other}"),
        };
        assert_eq!(named, b.cost);
        for (name, c) in &p.policies {
            assert!(
                p.bound.cost <= c.cost,
                "{} lines: {name} {} below the bound {}",
                p.lines,
                c.cost,
                p.bound.cost
            );
            assert_eq!(c.cost, c.reads as f64 + 2.0 * c.writes as f64);
        }
    }
    let json = serde_json::to_value(&a).unwrap();
    assert!(json["curve"][0]["opt_miss_ratio"].is_f64());
    assert!(json["opt"]["writeback"]["points"][0]["bound"]["cost"].is_f64());
    assert!(json["opt"]["writeback"]["points"][0]["bound"]["binds"].is_string());
}

#[test]
fn belady_among_the_policies_asks_for_opt_not_a_mini_simulation() {
    let mut opts = FileOptions::new(MSR);
    opts.sizes = vec![95];
    opts.policies = vec![EvictionKind::Belady];
    let a = analyze_file(&opts, &mut |_| {}).unwrap();
    assert!(a.opt.is_some());
    assert!(a.minisim.is_none());
    assert!(a.curve[0].opt_miss_ratio.is_some());
    // Without it, no OPT.
    let plain = analyze_file(&FileOptions::new(MSR), &mut |_| {}).unwrap();
    assert!(plain.opt.is_none() && plain.curve.iter().all(|p| p.opt_miss_ratio.is_none()));
}
