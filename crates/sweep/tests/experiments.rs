//! The shipped experiments (experiments/*/sweep.toml) parse, expand to the documented sizes,
//! sweep only keys the base config has (typos fail here, not after an hour of running), and
//! shrink under their CI profile.

use std::path::PathBuf;
use tiercache_config::lookup;
use tiercache_sweep::SweepSpec;

fn experiments() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path().join("sweep.toml"))
        .filter(|p| p.exists())
        .collect();
    v.sort();
    v
}

/// Requests a point runs: `run.requests`, or for a hierarchy (docs/design.md §4.7) the sum of
/// its archetype clients' (a trace client replays a small fixture), or for a file-level point
/// (§4.9) 1 with the smoke run's sizes (`quick`) and 2 without (its sizes are the experiment's).
fn requests(doc: &toml::Value) -> i64 {
    if let Some(f) = lookup(doc, "file_level") {
        return if f.get("quick").and_then(|q| q.as_bool()) == Some(true) {
            1
        } else {
            2
        };
    }
    match lookup(doc, "hierarchy.clients").and_then(|c| c.as_array()) {
        Some(clients) => clients
            .iter()
            .filter_map(|c| lookup(c, "workload.requests").and_then(|v| v.as_integer()))
            .sum(),
        None => lookup(doc, "run.requests")
            .and_then(|v| v.as_integer())
            .unwrap(),
    }
}

#[test]
fn shipped_experiments_expand_and_shrink_for_ci() {
    let specs = experiments();
    // The four shipped with the sweep framework, with their sizes; others may be added.
    let expected = [
        ("flushing-write-bursts", 2 * 6 * 2),
        ("lookup-scalability", 2 * 12 * 2),
        ("many-choice", 3 * 144),
        ("promotion-line-size", 3 * 18 * 2),
        ("load-balancing", 3 * 12),
    ];
    let name_of = |p: &PathBuf| {
        p.parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    };
    for (name, _) in expected {
        assert!(
            specs.iter().any(|p| name_of(p) == name),
            "experiments/{name} is missing"
        );
    }
    for path in &specs {
        let full = expected
            .iter()
            .find(|(n, _)| *n == name_of(path))
            .map(|(_, c)| *c);
        let mut spec = SweepSpec::load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            path.parent().unwrap().join("README.md").exists(),
            "{} has no README",
            path.display()
        );
        let points = spec.expand().unwrap();
        if let Some(full) = full {
            assert_eq!(points.len(), full, "{}", path.display());
        }
        for axis in &spec.axes {
            for k in &axis.keys {
                assert!(
                    lookup(&spec.base.value, &k.key).is_some(),
                    "{}: axis key {} is not in the base",
                    path.display(),
                    k.key
                );
            }
        }
        for w in &spec.workloads {
            assert!(
                points.iter().any(|p| p.workload == w.name && p.is_default),
                "{}: no default design",
                w.name
            );
        }
        spec.apply_ci().unwrap();
        let ci = spec.expand().unwrap();
        // A CI run keeps fewer designs, or (a small design space whose every design a test
        // checks, such as exclusive-caching's eight) all of them with fewer requests each.
        let fewer_requests = ci.len() == points.len()
            && ci
                .iter()
                .zip(&points)
                .all(|(c, p)| requests(&c.doc.value) < requests(&p.doc.value).max(1));
        assert!(
            (ci.len() <= 24 && ci.len() < points.len()) || (ci.len() <= 32 && fewer_requests),
            "{}: CI run has {} points",
            path.display(),
            ci.len()
        );
        for p in &ci {
            let req = requests(&p.doc.value);
            assert!(
                req <= 20_000,
                "{}: CI points run {req} requests",
                path.display()
            );
        }
    }
}
