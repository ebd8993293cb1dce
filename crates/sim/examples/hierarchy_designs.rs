//! The exclusive-caching designs of `experiments/exclusive-caching` (docs/design.md §4.7): the
//! eight client/array designs on RANDOM, SEQUENTIAL and ZIPF under the constant-latency model,
//! at full size, and the link sweep's two designs on a 10 Mbit/s link. Prints, per run, the
//! client's, the array's and the backend's hit fractions, the demotes sent and the mean
//! latency: the figures to compare between revisions when the hierarchy's executor changes.
//!
//! `cargo run --release -p tiercache-sim --example hierarchy_designs -- [REQUESTS]`

use tiercache_core::RequestSource;
use tiercache_sim::hierarchy::{HierarchyConfig, HierarchySim};
use tiercache_workload::SyntheticWorkload;

fn config(workload: &str, client: &str, array: &str, victim: &str, link: &str, n: u64) -> String {
    format!(
        r#"
warmup_requests = 50_000
backend = {{ model = "constant", latency_ns = 5_202_000 }}
[[levels]]
name = "array"
cache = {{ capacity = "16MiB", eviction = "{array}", cleaning = {{ policy = "none" }} }}
device = {{ model = "constant", latency_ns = 202_000 }}
[[clients]]
name = "host"
workload = {{ archetype = "{workload}", requests = {n} }}
{link}
[[clients.levels]]
name = "client"
cache = {{ capacity = "16MiB", eviction = "{client}", cleaning = {{ policy = "none" }}, victim = "{victim}" }}
device = {{ model = "constant", latency_ns = 2_000 }}
"#
    )
}

fn run(text: &str) -> String {
    let cfg: HierarchyConfig = toml::from_str(text).expect("config");
    let spec = cfg.synthetic_spec(0).expect("archetype");
    let mut sources: Vec<Box<dyn RequestSource>> =
        vec![Box::new(SyntheticWorkload::new(&spec).expect("workload"))];
    let r = HierarchySim::new(&cfg)
        .expect("hierarchy")
        .run(&mut sources)
        .expect("run");
    let hits: Vec<String> = r
        .levels
        .iter()
        .map(|l| format!("{:.6}", l.hit_fraction))
        .collect();
    format!(
        "hits {} demotes {} mean_us {:.3}",
        hits.join(" "),
        r.levels[0].demotes_sent,
        r.latency_us.mean
    )
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map_or(200_000, |a| a.parse().expect("REQUESTS"));
    let designs = [
        ("lru", "lru", "drop"),
        ("lru", "mru", "drop"),
        ("mru", "lru", "drop"),
        ("mru", "mru", "drop"),
        ("lru", "lru", "demote"),
        ("lru", "mru", "demote"),
        ("mru", "lru", "demote"),
        ("mru", "mru", "demote"),
    ];
    for w in ["random", "sequential", "zipf"] {
        for (c, a, v) in designs {
            println!("{w} {c}-{a}-{v}: {}", run(&config(w, c, a, v, "", n)));
        }
        for (c, a, v) in [("lru", "lru", "drop"), ("lru", "mru", "demote")] {
            let link = "link = { bandwidth = 1_250_000, latency_ns = 0 }";
            println!("{w} 10M {c}-{a}-{v}: {}", run(&config(w, c, a, v, link, n)));
        }
    }
}
