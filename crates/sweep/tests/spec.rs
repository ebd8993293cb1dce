//! Spec expansion: counts, zipped vs cartesian axes, stable ids, defaults, seeds, CI profile,
//! and errors that name the axis or workload at fault.

use proptest::prelude::*;
use std::collections::BTreeSet;
use std::path::Path;
use tiercache_sweep::{SweepError, SweepSpec};

const BASE: &str = r#"
[base]
name = "b"
[base.run]
seed = 42
requests = 1000
[base.cache]
line_size = "4KiB"
promotion = { policy = "always" }
[base.workload]
read_fraction = 0.8
"#;

fn parse(extra: &str) -> Result<SweepSpec, SweepError> {
    SweepSpec::parse(
        &format!("{extra}\n{BASE}"),
        "test.toml",
        Path::new("."),
        "test",
    )
}

fn err(extra: &str) -> String {
    match parse(extra).and_then(|s| s.expand().map(|_| s)) {
        Ok(_) => panic!("spec should be rejected:\n{extra}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn counts_cross_axes_workloads_and_repetitions() {
    let spec = parse(
        r#"
repetitions = 2
[[axis]]
key = "cache.line_size"
values = ["4KiB", "32KiB", "64KiB"]
[[axis]]
name = "promotion"
key = "cache.promotion"
values = [{ policy = "always" }, { policy = "nhit", n = 2 }]
[[axis]]
name = "flushing"
zip = [{ key = "cache.cleaning.policy", values = ["lazy", "aggressive"] },
       { key = "cache.cleaning.batch", values = [32, 1024] }]
[[workload]]
name = "r90"
set = ["workload.read_fraction=0.9"]
[[workload]]
name = "r50"
set = ["workload.read_fraction=0.5"]
[[workload]]
name = "r10"
set = ["workload.read_fraction=0.1"]
"#,
    )
    .unwrap();
    assert_eq!(spec.designs(), 3 * 2 * 2);
    let points = spec.expand().unwrap();
    assert_eq!(points.len(), 3 * 2 * 2 * 3 * 2);
    let ids: BTreeSet<&str> = points.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids.len(), points.len(), "ids are unique");
    assert!(points
        .iter()
        .all(|p| p.id.len() == 16 && p.id.chars().all(|c| c.is_ascii_hexdigit())));
    // Nesting: workload, then axes (last fastest), then repetition.
    assert_eq!(
        points[0].name,
        "line_size=4KiB,promotion=always,flushing=lazy/32"
    );
    assert_eq!(points[1].name, points[0].name);
    assert_eq!((points[0].rep, points[1].rep), (0, 1));
    assert_eq!(
        points[2].name,
        "line_size=4KiB,promotion=always,flushing=aggressive/1024"
    );
    assert_eq!(
        points[4].name,
        "line_size=4KiB,promotion=nhit-2,flushing=lazy/32"
    );
    assert!(points.iter().enumerate().all(|(i, p)| p.index == i));
    let last = points.last().unwrap();
    assert_eq!(last.workload, "r10");
    assert_eq!(
        last.name,
        "line_size=64KiB,promotion=nhit-2,flushing=aggressive/1024"
    );
    // Each point's document carries its workload's and its axes' values.
    let p = points
        .iter()
        .find(|p| p.workload == "r50" && p.name.contains("nhit-2") && p.name.contains("aggr"))
        .unwrap();
    let v = &p.doc.value;
    assert_eq!(v["workload"]["read_fraction"].as_float(), Some(0.5));
    assert_eq!(v["cache"]["promotion"]["policy"].as_str(), Some("nhit"));
    assert_eq!(v["cache"]["promotion"]["n"].as_integer(), Some(2));
    assert_eq!(v["cache"]["cleaning"]["batch"].as_integer(), Some(1024));
    assert_eq!(
        v["run"]["requests"].as_integer(),
        Some(1000),
        "base keys are kept"
    );
    assert!(
        p.overrides
            .iter()
            .any(|o| o == "cache.promotion={ n = 2, policy = \"nhit\" }"),
        "{:?}",
        p.overrides
    );
    // The recorded overrides reproduce the document from the base.
    let mut again = spec.base.clone();
    again.apply_overrides(&p.overrides).unwrap();
    assert_eq!(again.value, p.doc.value);
}

#[test]
fn zipped_axes_advance_together_and_crossed_axes_multiply() {
    let zipped = parse(
        r#"
[[axis]]
zip = [{ key = "cache.line_size", values = ["4KiB", "32KiB", "64KiB"] },
       { key = "cache.capacity", values = ["1MiB", "8MiB", "16MiB"] }]
"#,
    )
    .unwrap()
    .expand()
    .unwrap();
    assert_eq!(zipped.len(), 3);
    let pairs: Vec<(String, String)> = zipped
        .iter()
        .map(|p| {
            let c = &p.doc.value["cache"];
            (
                c["line_size"].as_str().unwrap().to_string(),
                c["capacity"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        pairs,
        [("4KiB", "1MiB"), ("32KiB", "8MiB"), ("64KiB", "16MiB")]
            .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    assert_eq!(zipped[1].name, "line_size+capacity=32KiB/8MiB");

    let crossed = parse(
        r#"
[[axis]]
key = "cache.line_size"
values = ["4KiB", "32KiB", "64KiB"]
[[axis]]
key = "cache.capacity"
values = ["1MiB", "8MiB", "16MiB"]
"#,
    )
    .unwrap()
    .expand()
    .unwrap();
    assert_eq!(crossed.len(), 9);
    let combos: BTreeSet<String> = crossed.iter().map(|p| p.name.clone()).collect();
    assert_eq!(combos.len(), 9);
    assert!(combos.contains("line_size=64KiB,capacity=1MiB"));
}

#[test]
fn invalid_axes_are_named() {
    let e = err(r#"
[[axis]]
name = "geometry"
zip = [{ key = "cache.line_size", values = ["4KiB", "32KiB"] },
       { key = "cache.capacity", values = ["1MiB"] }]
"#);
    assert!(
        e.contains("geometry") && e.contains("cache.line_size") && e.contains("cache.capacity"),
        "{e}"
    );
    assert!(e.contains("differ in length"), "{e}");

    let e = err(
        "[[axis]]\nkey = \"cache.line_size\"\nvalues = [\"4KiB\", \"8KiB\"]\nlabels = [\"a\"]\n",
    );
    assert!(
        e.contains("cache.line_size") && e.contains("2 values but 1 labels"),
        "{e}"
    );

    // An axis named as a column of the results table (here by its key's last part).
    for axis in [
        "key = \"run.seed\"\nvalues = [1, 2]\n",
        "key = \"cache.line_size\"\nname = \"status\"\nvalues = [\"4KiB\"]\n",
        "key = \"cache.line_size\"\nname = \"metrics.iops\"\nvalues = [\"4KiB\"]\n",
    ] {
        let e = err(&format!("[[axis]]\n{axis}"));
        assert!(e.contains("is a column of the results table"), "{e}");
    }

    let e = err("[[axis]]\nkey = \"cache.line_size\"\nvalue = [\"4KiB\"]\n");
    assert!(
        e.contains("cache.line_size") && e.contains("`value`"),
        "{e}"
    );

    let e = err("[[axis]]\nkey = \"cache.line_size\"\nvalues = []\n");
    assert!(e.contains("cache.line_size") && e.contains("empty"), "{e}");

    let e = err("[[axis]]\nname = \"x\"\nkey = \"a\"\nvalues = [1]\nzip = []\n");
    assert!(e.contains("`x`") && e.contains("not both"), "{e}");

    let e = err("[[axis]]\nname = \"lonely\"\n");
    assert!(e.contains("`lonely`") && e.contains("needs `key`"), "{e}");

    let e = err("[[axis]]\nkey = \"cache..x\"\nvalues = [1]\n");
    assert!(e.contains("cache..x"), "{e}");

    let e = err(r#"
[[axis]]
key = "cache.line_size"
values = ["4KiB"]
[[axis]]
name = "again"
key = "cache.line_size"
values = ["8KiB"]
"#);
    assert!(
        e.contains("axis[1] `again`") && e.contains("already swept"),
        "{e}"
    );

    let e = err("[[axis]]\nkey = \"cache.line_size\"\nvalues = [\"4KiB\", \"4KiB\"]\n");
    assert!(
        e.contains("cache.line_size") && e.contains("share the label"),
        "{e}"
    );

    // A key through a non-table is caught at expansion, naming the axis and key.
    let e = err("[[axis]]\nname = \"deep\"\nkey = \"cache.line_size.bits\"\nvalues = [1]\n");
    assert!(
        e.contains("`deep`") && e.contains("cache.line_size.bits") && e.contains("not a table"),
        "{e}"
    );

    let e = err("[[workload]]\nname = \"w1\"\nset = [\"no-equals-sign\"]\n");
    assert!(e.contains("w1"), "{e}");
    let e = err("[[workload]]\nname = \"w\"\n[[workload]]\nname = \"w\"\n");
    assert!(e.contains("used twice"), "{e}");
    let e = err("axes = []\n");
    assert!(e.contains("axes") && e.contains("unknown key"), "{e}");
    let e = err("repetitions = 0\n");
    assert!(e.contains("repetitions"), "{e}");
}

#[test]
fn ids_are_stable_and_depend_only_on_the_resolved_config() {
    let text = r#"
[[axis]]
key = "cache.line_size"
values = ["4KiB", "32KiB"]
[[axis]]
key = "workload.read_fraction"
values = [0.5, 0.9]
"#;
    let a = parse(text).unwrap().expand().unwrap();
    let b = parse(text).unwrap().expand().unwrap();
    assert_eq!(
        a.iter().map(|p| &p.id).collect::<Vec<_>>(),
        b.iter().map(|p| &p.id).collect::<Vec<_>>()
    );
    // Swapping the axes changes names and order, not the configurations: the same ids.
    let swapped = parse(
        r#"
[[axis]]
key = "workload.read_fraction"
values = [0.5, 0.9]
[[axis]]
key = "cache.line_size"
values = ["4KiB", "32KiB"]
"#,
    )
    .unwrap()
    .expand()
    .unwrap();
    let ids =
        |v: &[tiercache_sweep::PointSpec]| v.iter().map(|p| p.id.clone()).collect::<BTreeSet<_>>();
    assert_eq!(ids(&a), ids(&swapped));
    // Adding a value keeps the existing points' ids (so a grown sweep resumes).
    let grown = parse(&text.replace("[0.5, 0.9]", "[0.5, 0.9, 0.99]"))
        .unwrap()
        .expand()
        .unwrap();
    assert!(ids(&a).is_subset(&ids(&grown)));
    assert_eq!(grown.len(), 6);
    // A different base is a different experiment.
    let other = SweepSpec::parse(
        &format!(
            "{text}\n{}",
            BASE.replace("requests = 1000", "requests = 2000")
        ),
        "t",
        Path::new("."),
        "t",
    )
    .unwrap()
    .expand()
    .unwrap();
    assert!(ids(&a).is_disjoint(&ids(&other)));
}

#[test]
fn seeds_follow_repetitions_and_the_base_seed() {
    let pts = parse("repetitions = 3\n").unwrap().expand().unwrap();
    assert_eq!(pts.iter().map(|p| p.seed).collect::<Vec<_>>(), [42, 43, 44]);
    assert!(pts
        .iter()
        .all(|p| p.doc.value["run"]["seed"].as_integer() == Some(p.seed as i64)));
    assert!(pts
        .iter()
        .all(|p| p.name == "base" && p.workload == "default"));
    let pts = parse("repetitions = 2\nseed = 7\n")
        .unwrap()
        .expand()
        .unwrap();
    assert_eq!(pts.iter().map(|p| p.seed).collect::<Vec<_>>(), [7, 8]);
    let pts = parse("repetitions = 2\nseed_key = \"workload.seed\"\n")
        .unwrap()
        .expand()
        .unwrap();
    assert_eq!(
        pts[1].doc.value["workload"]["seed"].as_integer(),
        Some(2),
        "no base value at the key: seed 1 + rep"
    );
}

#[test]
fn the_default_design_is_the_one_matching_the_base() {
    let pts = parse(
        r#"
[[axis]]
key = "cache.line_size"
values = ["32KiB", "4KiB"]
[[axis]]
name = "promotion"
key = "cache.promotion"
values = [{ policy = "nhit", n = 2 }, { policy = "always" }]
"#,
    )
    .unwrap()
    .expand()
    .unwrap();
    let defaults: Vec<&str> = pts
        .iter()
        .filter(|p| p.is_default)
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(defaults, ["line_size=4KiB,promotion=always"]);
    // No design equals the base: the first one is the reference.
    let pts = parse("[[axis]]\nkey = \"cache.line_size\"\nvalues = [\"32KiB\", \"64KiB\"]\n")
        .unwrap()
        .expand()
        .unwrap();
    assert_eq!(
        pts.iter()
            .filter(|p| p.is_default)
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>(),
        ["line_size=32KiB"]
    );
}

#[test]
fn ci_profile_shrinks_the_sweep_and_keeps_the_default() {
    let mut spec = parse(
        r#"
repetitions = 3
[[axis]]
key = "cache.line_size"
values = ["32KiB", "64KiB", "128KiB", "4KiB"]
[[axis]]
key = "workload.read_fraction"
values = [0.1, 0.5, 0.8]
[ci]
set = ["run.requests = 10"]
repetitions = 1
points = 3
"#,
    )
    .unwrap();
    assert_eq!(spec.expand().unwrap().len(), 12 * 3);
    spec.apply_ci().unwrap();
    let pts = spec.expand().unwrap();
    assert_eq!(pts.len(), 3);
    assert!(pts
        .iter()
        .all(|p| p.doc.value["run"]["requests"].as_integer() == Some(10)));
    assert!(pts
        .iter()
        .any(|p| p.is_default && p.name == "line_size=4KiB,read_fraction=0.8"));
}

#[test]
fn base_file_is_resolved_relative_to_the_spec_and_its_variants_dropped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("configs")).unwrap();
    std::fs::write(
        dir.path().join("configs/base.toml"),
        "name = 'x'\n[cache]\nline_size = '4KiB'\n[[variant]]\nname = 'v'\nset = ['cache.line_size=8KiB']\n",
    )
    .unwrap();
    let spec_path = dir.path().join("spec.toml");
    std::fs::write(
        &spec_path,
        "base = 'configs/base.toml'\nset = ['cache.capacity = \"1GiB\"']\n[[axis]]\nkey = 'cache.line_size'\nvalues = ['4KiB', '8KiB']\n",
    )
    .unwrap();
    let spec = SweepSpec::load(&spec_path).unwrap();
    assert_eq!(spec.name, "spec");
    assert_eq!(spec.base_dir, dir.path().join("configs"));
    let pts = spec.expand().unwrap();
    assert_eq!(pts.len(), 2);
    assert!(pts.iter().all(|p| p.doc.value.get("variant").is_none()));
    assert_eq!(pts[0].doc.value["cache"]["capacity"].as_str(), Some("1GiB"));
    let missing = dir.path().join("bad.toml");
    std::fs::write(&missing, "base = 'nope.toml'\n").unwrap();
    let e = SweepSpec::load(&missing).unwrap_err().to_string();
    assert!(e.contains("base") && e.contains("nope.toml"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Against a reference count: every combination of axis positions appears exactly once per
    /// workload and repetition, zipped groups contributing one factor.
    #[test]
    fn expansion_matches_the_product(
        axes in prop::collection::vec((1usize..4, 1usize..3), 0..4),
        workloads in 1usize..3,
        reps in 1u32..3,
    ) {
        let mut text = format!("repetitions = {reps}\n");
        for (i, (len, width)) in axes.iter().enumerate() {
            if *width == 1 {
                text += &format!("[[axis]]\nkey = \"k.a{i}\"\nvalues = {:?}\n", (0..*len).collect::<Vec<_>>());
            } else {
                text += &format!("[[axis]]\nname = \"z{i}\"\nzip = [");
                for j in 0..*width {
                    text += &format!("{{ key = \"k.z{i}_{j}\", values = {:?} }},", (0..*len).map(|v| v * 10 + j).collect::<Vec<_>>());
                }
                text += "]\n";
            }
        }
        for w in 0..workloads {
            text += &format!("[[workload]]\nname = \"w{w}\"\nset = [\"workload.n={w}\"]\n");
        }
        let pts = parse(&text).unwrap().expand().unwrap();
        let designs: usize = axes.iter().map(|(l, _)| *l).product();
        prop_assert_eq!(pts.len(), designs * workloads * reps as usize);
        let ids: BTreeSet<&str> = pts.iter().map(|p| p.id.as_str()).collect();
        prop_assert_eq!(ids.len(), pts.len());
        let combos: BTreeSet<(String, String, u32)> = pts.iter().map(|p| (p.workload.clone(), p.name.clone(), p.rep)).collect();
        prop_assert_eq!(combos.len(), pts.len());
        for p in &pts {
            // Zipped members always carry the same position.
            for s in &p.axes {
                for (k, v) in &s.values {
                    let j: i64 = k.rsplit('_').next().and_then(|x| x.parse().ok()).unwrap_or(0);
                    let expect = if k.contains(".z") { s.index as i64 * 10 + j } else { s.index as i64 };
                    prop_assert_eq!(v.as_integer(), Some(expect));
                }
            }
            prop_assert_eq!(p.axes.len(), axes.len());
            prop_assert_eq!(p.is_default, p.axes.iter().all(|s| s.index == 0));
        }
    }
}

#[test]
fn the_ci_sample_varies_every_axis() {
    let mut spec = parse(
        r#"
[[axis]]
key = "a.x"
values = [1, 2, 3, 4]
[[axis]]
key = "a.y"
values = [1, 2, 3]
[[axis]]
key = "a.z"
values = [1, 2]
[ci]
points = 8
"#,
    )
    .unwrap();
    spec.apply_ci().unwrap();
    let pts = spec.expand().unwrap();
    assert_eq!(pts.len(), 8);
    for axis in 0..3 {
        let seen: BTreeSet<usize> = pts.iter().map(|p| p.axes[axis].index).collect();
        assert!(
            seen.len() > 1,
            "axis {axis} stuck at one value in the CI sample"
        );
    }
    assert!(pts.iter().any(|p| p.is_default));
    let again = spec.expand().unwrap();
    assert_eq!(
        pts.iter().map(|p| &p.id).collect::<Vec<_>>(),
        again.iter().map(|p| &p.id).collect::<Vec<_>>()
    );
}

/// An axis key may name an element of an array of tables, as `--set` may
/// (`hierarchy.clients[0].levels[0].cache.eviction`, docs/design.md §4.7); the default design
/// is found through it, and an element the base lacks is an error naming the axis.
#[test]
fn axis_keys_address_array_elements() {
    let spec = |key: &str| {
        SweepSpec::parse(
            &format!(
                "[[base.clients]]\nname = 'host'\nlevels = [{{ eviction = 'lru' }}]\n\
                 [[axis]]\nname = 'client'\nkey = '{key}'\nvalues = ['mru', 'lru']\n"
            ),
            "test.toml",
            Path::new("."),
            "test",
        )
        .unwrap()
        .expand()
    };
    let pts = spec("clients[0].levels[0].eviction").unwrap();
    assert_eq!(
        pts[0].doc.value["clients"][0]["levels"][0]["eviction"].as_str(),
        Some("mru")
    );
    assert!(pts[1].is_default && !pts[0].is_default);
    let e = spec("clients[1].eviction").unwrap_err().to_string();
    assert!(
        e.contains("axis `client`") && e.contains("has no element 1"),
        "{e}"
    );
}

#[test]
fn command_line_set_on_a_key_the_spec_sets_is_refused() {
    let swept = r#"
seed = 7
[[axis]]
key = "cache.line_size"
values = ["4KiB", "16KiB"]
[[workload]]
name = "w1"
set = ["workload.distribution = { type = 'zipf', theta = 0.6 }"]
"#;
    for (set, what) in [
        ("cache.line_size=64KiB", "axis `line_size`"),
        ("cache={ line_size = '64KiB' }", "axis `line_size`"),
        ("workload.distribution={type='uniform'}", "workload `w1`"),
        ("workload.distribution.theta=0.9", "workload `w1`"),
        ("workload = { read_fraction = 0.5 }", "workload `w1`"),
        ("run.seed=3", "`seed`"),
    ] {
        let mut spec = parse(swept).unwrap();
        let e = spec.apply_overrides(&[set.to_string()]).unwrap_err();
        let e = e.to_string();
        let key = set.split('=').next().unwrap().trim();
        assert!(
            e.contains("--set") && e.contains(&format!("`{key}`")) && e.contains(what),
            "{set}: {e}"
        );
    }
    // Keys nothing else sets still reach every point.
    let mut spec = parse(swept).unwrap();
    spec.apply_overrides(&["cache.capacity=1GiB".to_string()])
        .unwrap();
    let points = spec.expand().unwrap();
    assert!(points
        .iter()
        .all(|p| p.doc.value["cache"]["capacity"].as_str() == Some("1GiB")));
    // Without a spec `seed`, `--set run.seed` moves the base seed.
    let mut spec = parse("repetitions = 2").unwrap();
    spec.apply_overrides(&["run.seed=5".to_string()]).unwrap();
    let seeds: Vec<u64> = spec.expand().unwrap().iter().map(|p| p.seed).collect();
    assert_eq!(seeds, [5, 6]);
}

#[test]
fn a_sweep_of_more_points_than_memory_holds_is_refused_before_expanding() {
    let e = err("repetitions = 2000000000\n[[axis]]\nkey = \"cache.line_size\"\nvalues = [\"4KiB\", \"8KiB\"]\n");
    assert!(
        e.contains("repetitions") && e.contains("1000000 points") && e.contains("2 design(s)"),
        "{e}"
    );
    // Axes whose product overflows are refused too.
    let axes: String = (0..70)
        .map(|i| format!("[[axis]]\nkey = \"x.k{i}\"\nvalues = [1, 2]\n"))
        .collect();
    let e = err(&axes);
    assert!(e.contains("too many design(s)"), "{e}");
    // Right at the limit is fine to describe; a little over is not.
    let mut spec = parse("repetitions = 500000\n[[axis]]\nkey = \"cache.line_size\"\nvalues = [\"4KiB\", \"8KiB\"]\n").unwrap();
    assert_eq!(
        spec.designs() * spec.repetitions as usize,
        tiercache_sweep::MAX_POINTS
    );
    spec.repetitions += 1;
    assert!(spec.expand().is_err());
}
