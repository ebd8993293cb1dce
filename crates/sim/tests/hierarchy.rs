//! Cache hierarchies (docs/design.md §4.7): LRU-over-MRU with DEMOTE is one LRU of the summed size,
//! inclusive LRU-LRU never beats it, hits and demotes are conserved, runs are deterministic,
//! the constant-latency model reproduces the analytical mean latency, and bad configs name
//! their field.

use proptest::prelude::*;
use tiercache_core::{Arrival, Request, RequestSource};
use tiercache_policy::{Cache, CacheConfig, EvictionKind};
use tiercache_sim::hierarchy::{HierarchyConfig, HierarchyResult, HierarchySim};
use tiercache_workload::SyntheticWorkload;

const LINE: u64 = 4096;

/// Whole-line reads of the given lines, one at a time; a line given as `WRITE + l` is a
/// write of line `l`.
struct Lines {
    lines: std::vec::IntoIter<u64>,
}

const WRITE: u64 = 1 << 20;

impl RequestSource for Lines {
    fn arrival(&self) -> Arrival {
        Arrival::Closed {
            jobs: 1,
            iodepth: 1,
        }
    }
    fn next_request(&mut self, _job: u32) -> Option<Request> {
        self.lines.next().map(|l| {
            if l >= WRITE {
                Request::write((l - WRITE) * LINE, LINE)
            } else {
                Request::read(l * LINE, LINE)
            }
        })
    }
}

fn two_levels(client: &str, array: &str, demote: bool, c_lines: u64, a_lines: u64) -> String {
    format!(
        r#"
        exclusive = {demote}
        backend = {{ model = "constant", latency_ns = 1000 }}
        [[levels]]
        name = "array"
        cache = {{ capacity = {a}, eviction = "{array}", cleaning = {{ policy = "none" }} }}
        device = {{ model = "constant", latency_ns = 100 }}
        [[clients]]
        name = "c"
        workload = {{ archetype = "random" }}
        [[clients.levels]]
        name = "client"
        cache = {{ capacity = {c}, eviction = "{client}", cleaning = {{ policy = "none" }} }}
        device = {{ model = "constant", latency_ns = 10 }}
        "#,
        a = a_lines * LINE,
        c = c_lines * LINE,
    )
}

fn run(cfg: &HierarchyConfig, lines: &[Vec<u64>]) -> HierarchyResult {
    let mut sources: Vec<Box<dyn RequestSource>> = lines
        .iter()
        .map(|l| {
            Box::new(Lines {
                lines: l.clone().into_iter(),
            }) as Box<dyn RequestSource>
        })
        .collect();
    HierarchySim::new(cfg).unwrap().run(&mut sources).unwrap()
}

fn parse(text: &str) -> HierarchyConfig {
    toml::from_str(text).unwrap()
}

/// Hits of client + array (requests not served by the backend).
fn cache_hits(r: &HierarchyResult) -> u64 {
    r.levels
        .iter()
        .filter(|l| l.name != "backend")
        .map(|l| l.served)
        .sum()
}

fn one_lru_hits(lines: &[u64], capacity_lines: u64) -> u64 {
    let mut one = Cache::new(&CacheConfig {
        capacity: capacity_lines * LINE,
        eviction: EvictionKind::Lru,
        ..CacheConfig::default()
    })
    .unwrap();
    lines
        .iter()
        .map(|&l| {
            u64::from(
                one.access(&Request::read(l * LINE, LINE), None)
                    .unwrap()
                    .full_hit,
            )
        })
        .sum()
}

/// Every conservation law of a result.
fn check_conservation(r: &HierarchyResult) {
    let served: u64 = r.levels.iter().map(|l| l.served).sum();
    assert_eq!(served, r.requests, "per-level hits + backend = requests");
    for l in &r.levels {
        assert_eq!(
            l.demotes_sent,
            l.demotes_accepted + l.demotes_already_held + l.demotes_rejected,
            "{}: demotes sent = accepted + held + rejected",
            l.name
        );
    }
    let sent: u64 = r.levels.iter().map(|l| l.demotes_sent).sum();
    let received: u64 = r.levels.iter().map(|l| l.demotes_received).sum();
    assert_eq!(sent, received, "every demote sent is received");
    for c in &r.clients {
        let f: f64 = c.served_by.iter().map(|(_, f)| f).sum();
        assert!((f - 1.0).abs() < 1e-9 || c.requests == 0, "{}: {f}", c.name);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// docs/design.md §4.7: LRU client + MRU array + DEMOTE = one LRU cache of the summed capacity,
    /// on any stream; LRU-LRU without demote never does better.
    #[test]
    fn lru_over_mru_with_demote_is_one_lru(
        lines in proptest::collection::vec(0u64..48, 1..400),
        c_lines in 1u64..8,
        a_lines in 1u64..12,
    ) {
        let one = one_lru_hits(&lines, c_lines + a_lines);
        let exclusive = run(&parse(&two_levels("lru", "mru", true, c_lines, a_lines)), std::slice::from_ref(&lines));
        check_conservation(&exclusive);
        prop_assert_eq!(cache_hits(&exclusive), one);
        let inclusive = run(&parse(&two_levels("lru", "lru", false, c_lines, a_lines)), std::slice::from_ref(&lines));
        check_conservation(&inclusive);
        prop_assert!(cache_hits(&inclusive) <= one);
        prop_assert_eq!(inclusive.levels[0].demotes_sent, 0);
    }

    /// Conservation holds for all eight designs with several clients sharing the array,
    /// over overlapping and disjoint ranges.
    #[test]
    fn eight_designs_conserve_with_shared_arrays(
        streams in proptest::collection::vec(proptest::collection::vec(0u64..64, 1..150), 1..4),
        design in 0usize..8,
        disjoint in any::<bool>(),
    ) {
        let client = ["lru", "mru"][design & 1];
        let array = ["lru", "mru"][(design >> 1) & 1];
        let demote = design >> 2 == 1;
        let mut text = two_levels(client, array, demote, 4, 8);
        for i in 1..streams.len() {
            text.push_str(&format!(
                r#"
                [[clients]]
                name = "c{i}"
                offset = {off}
                workload = {{ archetype = "random" }}
                [[clients.levels]]
                name = "client"
                cache = {{ capacity = 16384, eviction = "{client}" }}
                device = {{ model = "constant", latency_ns = 10 }}
                "#,
                off = if disjoint { i as u64 * (1 << 30) } else { 0 },
            ));
        }
        let r = run(&parse(&text), &streams);
        check_conservation(&r);
        prop_assert_eq!(r.requests, streams.iter().map(|s| s.len() as u64).sum::<u64>());
        prop_assert_eq!(r.clients.len(), streams.len());
    }
}

#[test]
fn runs_are_deterministic() {
    let text = format!(
        "{}\n[clients.link]\nbandwidth = \"10MB\"\nlatency_ns = 2000\n",
        two_levels("lru", "mru", true, 64, 128).replace(
            "latency_ns = 1000 }",
            "latency_ns = 1000 }\nwarmup_requests = 500"
        )
    )
    .replace(
        "archetype = \"random\"",
        "archetype = \"zipf\", requests = 5000",
    );
    let cfg: HierarchyConfig = parse(&text);
    let once = || {
        let spec = cfg.synthetic_spec(0).unwrap();
        let mut s: Vec<Box<dyn RequestSource>> =
            vec![Box::new(SyntheticWorkload::new(&spec).unwrap())];
        serde_json::to_string(&HierarchySim::new(&cfg).unwrap().run(&mut s).unwrap()).unwrap()
    };
    let a = once();
    assert_eq!(a, once());
    let r: HierarchyResult = serde_json::from_str(&a).unwrap();
    assert_eq!(r.requests, 4500, "warm-up requests are not measured");
    check_conservation(&r);
    let link = r.levels[0].link.as_ref().expect("the client's link");
    assert!(link.demote_bytes > 0 && link.bytes_up > 0);
    assert!(link.utilisation > 0.0 && link.utilisation <= 1.0);
}

/// docs/design.md §4.7's latency model: with constant devices and no links, a client hit costs Tc,
/// an array hit Tc + Ta and a disk read Tc + Ta + Td, so the mean is
/// (h_c + h_a + h_d)·Tc + (h_a + h_d)·Ta + h_d·Td with the measured hit fractions.
#[test]
fn constant_model_reproduces_the_analytical_mean() {
    let (tc, ta, td) = (2_000.0, 150_000.0, 5_000_000.0);
    for (client, array, demote) in [("lru", "mru", true), ("lru", "lru", false)] {
        let text = two_levels(client, array, demote, 256, 512)
            .replace(
                "latency_ns = 1000 }",
                &format!("latency_ns = {} }}", tc + ta + td),
            )
            .replace(
                "latency_ns = 100 }",
                &format!("latency_ns = {} }}", tc + ta),
            )
            .replace("latency_ns = 10 }", &format!("latency_ns = {tc} }}"))
            .replace(
                "archetype = \"random\"",
                "archetype = \"zipf\", requests = 20000",
            );
        let cfg = parse(&text);
        let spec = cfg.synthetic_spec(0).unwrap();
        let mut s: Vec<Box<dyn RequestSource>> =
            vec![Box::new(SyntheticWorkload::new(&spec).unwrap())];
        let r = HierarchySim::new(&cfg).unwrap().run(&mut s).unwrap();
        let h = |name: &str| {
            r.levels
                .iter()
                .find(|l| l.name == name)
                .unwrap()
                .hit_fraction
        };
        let (hc, ha, hd) = (h("c.client"), h("array"), h("backend"));
        assert!(hc > 0.05 && ha > 0.05 && hd > 0.05, "{hc} {ha} {hd}");
        let formula = (hc + ha + hd) * tc + (ha + hd) * ta + hd * td;
        let sim = r.latency_us.mean * 1000.0;
        assert!(
            (sim - formula).abs() <= formula * 1e-9,
            "{client}-{array}: simulated {sim} ns, formula {formula} ns"
        );
    }
}

/// `hierarchy.demote_cost`: under `synchronous` (Wong and Wilkes's accounting) a request
/// that demotes a victim waits for the client's read of it and the array's write of it
/// (Tc + Ta under the constant model); under `background` (the default) neither. The hits
/// are the same: only where the time goes changes.
#[test]
fn synchronous_demotes_cost_the_arrays_time() {
    let (tc, ta, td) = (2_000.0, 150_000.0, 5_000_000.0);
    let text = two_levels("lru", "mru", true, 256, 512)
        .replace(
            "latency_ns = 1000 }",
            &format!("latency_ns = {} }}", tc + ta + td),
        )
        .replace(
            "latency_ns = 100 }",
            &format!("latency_ns = {} }}", tc + ta),
        )
        .replace("latency_ns = 10 }", &format!("latency_ns = {tc} }}"))
        .replace(
            "archetype = \"random\"",
            "archetype = \"zipf\", requests = 20000",
        );
    let run = |cost: tiercache_sim::hierarchy::DemoteCost| {
        let mut cfg = parse(&text);
        cfg.demote_cost = cost;
        let spec = cfg.synthetic_spec(0).unwrap();
        let mut s: Vec<Box<dyn RequestSource>> =
            vec![Box::new(SyntheticWorkload::new(&spec).unwrap())];
        HierarchySim::new(&cfg).unwrap().run(&mut s).unwrap()
    };
    let bg = run(tiercache_sim::hierarchy::DemoteCost::Background);
    let sync = run(tiercache_sim::hierarchy::DemoteCost::Synchronous);
    let fractions = |r: &tiercache_sim::hierarchy::HierarchyResult| {
        r.levels.iter().map(|l| l.hit_fraction).collect::<Vec<_>>()
    };
    assert_eq!(fractions(&bg), fractions(&sync));
    let sent = sync.levels.iter().map(|l| l.demotes_sent).sum::<u64>() as f64;
    assert!(sent > 0.0);
    // The measured requests' demotes each add the client's read and the array's write.
    let per_request = sent / sync.requests as f64;
    let extra = (sync.latency_us.mean - bg.latency_us.mean) * 1000.0;
    let want = per_request * (tc + tc + ta);
    assert!(
        (extra - want).abs() < 0.1 * want,
        "{extra} ns more per request, {want} ns expected ({per_request} demotes a request)"
    );
}

/// A closed-loop client's bursts hold its requests back through each off period, as in
/// `sim` (the issue time ignored the request's own, so off periods did not exist): with
/// 100 µs on and 900 µs off, the run takes several times longer than always on.
#[test]
fn closed_loop_bursts_are_honoured() {
    let text = two_levels("lru", "lru", false, 256, 512).replace(
        "archetype = \"random\"",
        "archetype = \"zipf\", requests = 3000",
    );
    let cfg = parse(&text);
    let elapsed = |bursts: Option<tiercache_workload::Bursts>| {
        let mut spec = cfg.synthetic_spec(0).unwrap();
        spec.bursts = bursts;
        let mut s: Vec<Box<dyn RequestSource>> =
            vec![Box::new(SyntheticWorkload::new(&spec).unwrap())];
        HierarchySim::new(&cfg)
            .unwrap()
            .run(&mut s)
            .unwrap()
            .elapsed_ns
    };
    let always = elapsed(None);
    let bursty = elapsed(Some(tiercache_workload::Bursts {
        on_ns: 100_000,
        off_ns: 900_000,
    }));
    assert!(
        always > 500_000,
        "the run spans several periods: {always} ns"
    );
    assert!(
        bursty > 5 * always,
        "{bursty} ns with bursts, {always} ns without"
    );
}

#[test]
fn bad_configs_name_the_field() {
    let err = |text: &str| match HierarchySim::new(&parse(text)) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    };
    let base = two_levels("lru", "mru", true, 4, 8);
    let e = err(&base.replace("capacity = 32768", "capacity = 0"));
    assert!(e.starts_with("hierarchy.levels[0].cache.capacity"), "{e}");
    let e = err(&base.replace(
        "archetype = \"random\"",
        "archetype = \"random\", trace = \"x\"",
    ));
    assert!(e.starts_with("hierarchy.clients[0].workload"), "{e}");
    let e = err(&base.replace(
        "eviction = \"mru\"",
        "eviction = \"mru\", victim = \"demote\"",
    ));
    assert!(e.starts_with("hierarchy.levels[0].cache.victim"), "{e}");
    let e = err(&base.replace(", latency_ns = 100 }", " }"));
    assert!(e.contains("latency_ns"), "{e}");
    // A level's link is named once (it read `….link.link.bandwidth`).
    let e = err(&base.replace(
        "name = \"array\"",
        "name = \"array\"\n        link = { bandwidth = 0, latency_ns = 0 }",
    ));
    assert!(e.starts_with("hierarchy.levels[0].link.bandwidth"), "{e}");
    // A client's link and its lowest level's own link: one would replace the other.
    let e = err(&base
        .replace(
            "name = \"client\"",
            "name = \"client\"\n        link = { bandwidth = 1000000, latency_ns = 10 }",
        )
        .replace(
            "name = \"c\"",
            "name = \"c\"\n        link = { bandwidth = 1000000, latency_ns = 20 }",
        ));
    assert!(
        e.starts_with("hierarchy.clients[0].link") && e.contains("its own link"),
        "{e}"
    );
    assert!(toml::from_str::<HierarchyConfig>(&base.replace("exclusive", "exclusiv")).is_err());
}

/// Every online policy, by config name.
const KINDS: [&str; 13] = [
    "lru", "mru", "fifo", "clock", "arc", "s3-fifo", "sieve",
    // Policies researchers compare against (issue 35).
    "slru", "2q", "lfu", "lfuda", "lru-k", "lirs",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Every replacement policy works at either level, with and without demote, with writes
    /// in the stream (write-back client: dirty victims are written down, not demoted).
    #[test]
    fn every_policy_works_at_either_level(
        lines in proptest::collection::vec((0u64..64, proptest::bool::weighted(0.2)), 1..300),
        client in 0usize..KINDS.len(),
        array in 0usize..KINDS.len(),
        demote in any::<bool>(),
    ) {
        let text = two_levels(KINDS[client], KINDS[array], demote, 6, 10);
        let lines: Vec<u64> = lines.into_iter().map(|(l, w)| if w { WRITE + l } else { l }).collect();
        let r = run(&parse(&text), &[lines]);
        check_conservation(&r);
        if !demote {
            prop_assert_eq!(r.levels[0].demotes_sent, 0);
        }
    }
}

/// Clients of different depths over two shared levels: one with two levels of its own, one
/// with none (its link leads straight to the shared levels); every level is exclusive.
#[test]
fn clients_of_different_depths_share_two_levels() {
    let cfg = parse(
        r#"
        exclusive = true
        backend = { model = "constant", latency_ns = 1000 }
        [[levels]]
        name = "array"
        cache = { capacity = 32768, eviction = "mru" }
        device = { model = "constant", latency_ns = 100 }
        [[levels]]
        name = "nvme"
        cache = { capacity = 65536, eviction = "mru" }
        device = { model = "constant", latency_ns = 300 }
        [[clients]]
        name = "deep"
        workload = { archetype = "random" }
        [[clients.levels]]
        name = "l1"
        cache = { capacity = 8192 }
        device = { model = "constant", latency_ns = 1 }
        [[clients.levels]]
        name = "l2"
        cache = { capacity = 16384, eviction = "mru" }
        device = { model = "constant", latency_ns = 10 }
        [[clients]]
        name = "bare"
        workload = { archetype = "random" }
        link = { bandwidth = "100MB", latency_ns = 500 }
        "#,
    );
    let stream: Vec<u64> = (0..600u64).map(|i| (i * 7919) % 40).collect();
    let r = run(&cfg, &[stream.clone(), stream]);
    check_conservation(&r);
    let names: Vec<&str> = r.levels.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["deep.l1", "deep.l2", "array", "nvme", "backend"]);
    // Demotes flow down every exclusive hop.
    for l in &r.levels[..3] {
        assert!(l.demotes_sent > 0, "{}", l.name);
    }
    let bare = r.clients.iter().find(|c| c.name == "bare").unwrap();
    let link = bare.link.as_ref().expect("the bare client's link");
    assert!(link.bytes_up > 0);
    assert!(bare.served_by.iter().all(|(n, _)| !n.starts_with("deep.")));
}

/// One read at a given offset.
struct ReadAt(Option<u64>);

impl RequestSource for ReadAt {
    fn arrival(&self) -> Arrival {
        Arrival::Closed {
            jobs: 1,
            iodepth: 1,
        }
    }
    fn next_request(&mut self, _job: u32) -> Option<Request> {
        self.0.take().map(|o| Request::read(o, LINE))
    }
}

/// A client's offset that would carry a request past 2^64 is an error naming the request,
/// not an overflow (a panic in a debug build, a wrapped offset in a release one).
#[test]
fn a_client_offset_past_the_address_space_is_an_error() {
    let text = two_levels("lru", "lru", false, 4, 8).replace(
        "name = \"c\"",
        &format!("name = \"c\"\n        offset = {}", i64::MAX),
    );
    let cfg = parse(&text);
    let at = (1u64 << 63) + LINE;
    let mut sources: Vec<Box<dyn RequestSource>> = vec![Box::new(ReadAt(Some(at)))];
    let e = HierarchySim::new(&cfg)
        .unwrap()
        .run(&mut sources)
        .unwrap_err();
    assert!(
        matches!(&e, tiercache_sim::SimError::Request { request, .. } if request.offset == at),
        "{e}"
    );
}
