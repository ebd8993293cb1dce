//! `cache.eviction = "belady"` through the config (docs/design.md §12): refused, naming what
//! is missing, where it cannot run; on a trace in hit-ratio mode, no online policy hits more.

use tiercache_run::experiment::load_str;
use tiercache_run::sim::run_experiment;

const MSR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/traces/msr-hm0-sample.csv"
);

fn config(mode: &str, workload: &str, eviction: &str) -> String {
    format!(
        "[run]\nmode = '{mode}'\n{workload}\n[cache]\ncapacity = {}\nline_size = 4096\neviction = '{eviction}'\n",
        200 * 4096
    )
}

fn trace() -> String {
    format!("[workload]\ntrace = '{MSR}'\nreplay = 'fast'")
}

fn error_of(cfg: &str) -> String {
    match load_str(cfg, "belady-test", &[]) {
        Ok(_) => panic!("accepted: {cfg}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn belady_is_refused_where_it_cannot_run() {
    let timed = error_of(&config("timed", &trace(), "belady"));
    assert!(timed.contains("run.mode"), "{timed}");
    let synthetic = error_of(&config("hit-ratio", "", "belady"));
    assert!(synthetic.contains("workload.trace"), "{synthetic}");
    let sharded = error_of(&format!(
        "{}shards = 2\n",
        config("hit-ratio", &trace(), "belady")
    ));
    assert!(sharded.contains("shards"), "{sharded}");
}

#[test]
fn on_a_trace_no_online_policy_hits_more_than_belady() {
    let hit = |eviction: &str| {
        let runs = load_str(&config("hit-ratio", &trace(), eviction), "belady-test", &[]).unwrap();
        run_experiment(&runs[0]).unwrap().record.metrics
    };
    let opt = hit("belady");
    assert_eq!(opt.requests, 1000);
    for policy in [
        "lru", "fifo", "clock", "arc", "s3-fifo", "sieve", "mru",
        // Policies researchers compare against (issue 35).
        "slru", "2q", "lfu", "lfuda", "lru-k", "lirs", "lhd",
    ] {
        let m = hit(policy);
        assert_eq!(m.requests, opt.requests);
        assert!(
            m.hit_ratio <= opt.hit_ratio,
            "{policy} {} above belady {}",
            m.hit_ratio,
            opt.hit_ratio
        );
    }
    assert!(opt.hit_ratio > hit("lru").hit_ratio, "belady gains nothing");
}
