//! The spec as users write it: TOML parsing, defaults, and validation errors naming the field.

use tiercache_workload::{
    AddressDist, ArrivalProcess, BlockSize, Bursts, SyntheticWorkload, WorkloadError, WorkloadSpec,
    Zone,
};

fn parse(s: &str) -> Result<WorkloadSpec, toml::de::Error> {
    toml::from_str(s)
}

#[test]
fn full_toml_with_units() {
    let spec = parse(
        r#"
        seed = 7
        jobs = 4
        iodepth = 8
        read_fraction = 0.7
        trim_fraction = 0.05
        block_sizes = [{ size = "4KiB", weight = 3 }, { size = 65536, weight = 1 }]
        alignment = "4KiB"
        footprint = "10GiB"
        volumes = 2
        volume_weights = [1, 3]
        distribution = { type = "zipf", theta = 0.9 }
        write_distribution = "sequential"
        bursts = { on = "1ms", off_ns = 4000000 }
        requests = 1_000_000
        duration = "2s"
        flush_every = 16
        "#,
    )
    .unwrap();
    assert_eq!(spec.seed, 7);
    assert_eq!(spec.iodepth, Some(8));
    assert_eq!(
        spec.block_sizes,
        vec![
            BlockSize {
                size: 4096,
                weight: 3.0
            },
            BlockSize {
                size: 65536,
                weight: 1.0
            }
        ]
    );
    assert_eq!(spec.alignment, Some(4096));
    assert_eq!(spec.footprint, 10 << 30);
    assert_eq!(
        spec.distribution,
        AddressDist::Zipf {
            theta: 0.9,
            scramble: true
        }
    );
    assert_eq!(spec.write_distribution, Some(AddressDist::Sequential));
    assert_eq!(
        spec.bursts,
        Some(Bursts {
            on_ns: 1_000_000,
            off_ns: 4_000_000
        })
    );
    assert_eq!(spec.duration_ns, Some(2_000_000_000));
    assert_eq!(spec.flush_every, Some(16));
    spec.validate().unwrap();
    // Serialising and reading back gives the same spec.
    let text = toml::to_string(&spec).unwrap();
    assert_eq!(parse(&text).unwrap(), spec, "{text}");
    let json = serde_json::to_string(&spec).unwrap();
    assert_eq!(serde_json::from_str::<WorkloadSpec>(&json).unwrap(), spec);
}

#[test]
fn defaults_are_documented_values() {
    let spec = parse("").unwrap();
    assert_eq!(spec, WorkloadSpec::default());
    assert_eq!(spec.jobs, 1);
    assert_eq!(spec.read_fraction, 1.0);
    assert_eq!(
        spec.block_sizes,
        vec![BlockSize {
            size: 4096,
            weight: 1.0
        }]
    );
    assert_eq!(spec.footprint, 1 << 30);
    assert_eq!(spec.distribution, AddressDist::Uniform);
    assert_eq!(spec.arrival, ArrivalProcess::Poisson);
    let w = SyntheticWorkload::new(&spec).unwrap();
    assert_eq!(w.alignment(), 4096);
    assert_eq!(w.slots(), (1 << 30) / 4096);
}

#[test]
fn every_distribution_parses() {
    let cases = [
        (r#"distribution = "uniform""#, AddressDist::Uniform),
        (
            r#"distribution = { type = "uniform" }"#,
            AddressDist::Uniform,
        ),
        (
            r#"distribution = { type = "zipf", theta = 1.2, scramble = false }"#,
            AddressDist::Zipf {
                theta: 1.2,
                scramble: false,
            },
        ),
        (
            r#"distribution = { type = "pareto", shape = 0.3 }"#,
            AddressDist::Pareto {
                shape: 0.3,
                scramble: true,
            },
        ),
        (
            r#"distribution = { type = "normal", stddev_fraction = 0.1 }"#,
            AddressDist::Normal {
                mean_fraction: 0.5,
                stddev_fraction: 0.1,
            },
        ),
        (
            r#"distribution = { type = "zoned", zones = [{ access_fraction = 0.55, size = "100MiB" }, { access_fraction = 0.45, size_fraction = 0.5 }] }"#,
            AddressDist::Zoned {
                zones: vec![
                    Zone {
                        access_fraction: 0.55,
                        size_fraction: None,
                        size: Some(100 << 20),
                    },
                    Zone {
                        access_fraction: 0.45,
                        size_fraction: Some(0.5),
                        size: None,
                    },
                ],
            },
        ),
        (
            r#"distribution = { type = "sequential" }"#,
            AddressDist::Sequential,
        ),
        (
            r#"distribution = { type = "loop", size_fraction = 0.9 }"#,
            AddressDist::Loop {
                size: None,
                size_fraction: Some(0.9),
            },
        ),
    ];
    for (text, want) in cases {
        let spec = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(spec.distribution, want, "{text}");
        SyntheticWorkload::new(&spec).unwrap_or_else(|e| panic!("{text}: {e}"));
    }
}

#[test]
fn unknown_or_malformed_fields_are_rejected_by_name() {
    for (text, needle) in [
        ("iodeph = 4", "iodeph"),
        (
            r#"distribution = { type = "zipf", theta = 0.9, skew = 2 }"#,
            "skew",
        ),
        (
            r#"distribution = { type = "zipfian", theta = 0.9 }"#,
            "zipfian",
        ),
        (r#"distribution = "zipf""#, "needs parameters"),
        (r#"distribution = "gaussian""#, "gaussian"),
        (r#"block_sizes = [{ size = "4 parsecs" }]"#, "parsecs"),
        (r#"bursts = { on_ns = 5, of_ns = 3 }"#, "of_ns"),
        (r#"arrival = "bursty""#, "bursty"),
    ] {
        let err = parse(text).expect_err(text).to_string();
        assert!(err.contains(needle), "{text}: {err}");
    }
}

fn invalid(spec: WorkloadSpec) -> WorkloadError {
    SyntheticWorkload::new(&spec).expect_err("spec should be rejected")
}

#[test]
fn invalid_specs_name_the_field() {
    let d = WorkloadSpec::default;
    let zones = |zones: Vec<Zone>| AddressDist::Zoned { zones };
    let z = |a: f64, f: f64| Zone {
        access_fraction: a,
        size_fraction: Some(f),
        size: None,
    };
    let cases: Vec<(WorkloadSpec, &str)> = vec![
        (WorkloadSpec { jobs: 0, ..d() }, "jobs"),
        (
            WorkloadSpec {
                iodepth: Some(0),
                ..d()
            },
            "iodepth",
        ),
        (
            WorkloadSpec {
                iodepth: Some(4),
                rate_iops: Some(10.0),
                ..d()
            },
            "iodepth",
        ),
        (
            WorkloadSpec {
                rate_iops: Some(0.0),
                ..d()
            },
            "rate_iops",
        ),
        (
            WorkloadSpec {
                rate_iops: Some(f64::NAN),
                ..d()
            },
            "rate_iops",
        ),
        (
            WorkloadSpec {
                read_fraction: 1.5,
                ..d()
            },
            "read_fraction",
        ),
        (
            WorkloadSpec {
                read_fraction: -0.1,
                ..d()
            },
            "read_fraction",
        ),
        (
            WorkloadSpec {
                read_fraction: 0.8,
                trim_fraction: 0.3,
                ..d()
            },
            "trim_fraction",
        ),
        (
            WorkloadSpec {
                block_sizes: vec![],
                ..d()
            },
            "block_sizes",
        ),
        (
            WorkloadSpec {
                block_sizes: vec![
                    BlockSize {
                        size: 4096,
                        weight: 1.0,
                    },
                    BlockSize {
                        size: 8192,
                        weight: 0.0,
                    },
                ],
                ..d()
            },
            "block_sizes[1].weight",
        ),
        (
            WorkloadSpec {
                block_sizes: vec![BlockSize {
                    size: 0,
                    weight: 1.0,
                }],
                ..d()
            },
            "block_sizes[0].size",
        ),
        (
            WorkloadSpec {
                footprint: 1000,
                ..d()
            },
            "footprint",
        ),
        (
            WorkloadSpec {
                alignment: Some(0),
                ..d()
            },
            "alignment",
        ),
        (WorkloadSpec { volumes: 0, ..d() }, "volumes"),
        (WorkloadSpec { volumes: 2, ..d() }, "volumes"),
        (
            WorkloadSpec {
                volumes: 2,
                volume_weights: Some(vec![1.0]),
                ..d()
            },
            "volume_weights",
        ),
        (
            WorkloadSpec {
                volumes: 2,
                volume_weights: Some(vec![1.0, -1.0]),
                ..d()
            },
            "volume_weights[1]",
        ),
        (
            WorkloadSpec {
                distribution: AddressDist::Zipf {
                    theta: 0.0,
                    scramble: true,
                },
                ..d()
            },
            "distribution.theta",
        ),
        (
            WorkloadSpec {
                distribution: AddressDist::Zipf {
                    theta: -1.0,
                    scramble: true,
                },
                ..d()
            },
            "distribution.theta",
        ),
        (
            WorkloadSpec {
                write_distribution: Some(AddressDist::Pareto {
                    shape: 0.0,
                    scramble: true,
                }),
                ..d()
            },
            "write_distribution.shape",
        ),
        (
            WorkloadSpec {
                distribution: AddressDist::Normal {
                    mean_fraction: 1.2,
                    stddev_fraction: 0.1,
                },
                ..d()
            },
            "distribution.mean_fraction",
        ),
        (
            WorkloadSpec {
                distribution: AddressDist::Normal {
                    mean_fraction: 0.5,
                    stddev_fraction: 0.0,
                },
                ..d()
            },
            "distribution.stddev_fraction",
        ),
        (
            WorkloadSpec {
                distribution: zones(vec![]),
                ..d()
            },
            "distribution.zones",
        ),
        (
            WorkloadSpec {
                distribution: zones(vec![z(0.7, 0.1), z(0.4, 0.1)]),
                ..d()
            },
            "distribution.zones",
        ),
        (
            WorkloadSpec {
                distribution: zones(vec![z(0.5, 0.6), z(0.5, 0.6)]),
                ..d()
            },
            "distribution.zones",
        ),
        (
            WorkloadSpec {
                distribution: zones(vec![z(0.5, 0.5), z(0.3, 0.5)]),
                ..d()
            },
            "distribution.zones",
        ),
        (
            WorkloadSpec {
                distribution: zones(vec![z(1.5, 0.5)]),
                ..d()
            },
            "distribution.zones[0].access_fraction",
        ),
        (
            WorkloadSpec {
                distribution: zones(vec![z(0.5, 0.0)]),
                ..d()
            },
            "distribution.zones[0].size_fraction",
        ),
        (
            WorkloadSpec {
                distribution: zones(vec![Zone {
                    access_fraction: 0.5,
                    size_fraction: Some(0.1),
                    size: Some(4096),
                }]),
                ..d()
            },
            "distribution.zones[0].size",
        ),
        (
            WorkloadSpec {
                distribution: zones(vec![Zone {
                    access_fraction: 0.5,
                    size_fraction: None,
                    size: Some(100),
                }]),
                ..d()
            },
            "distribution.zones[0].size",
        ),
        (
            WorkloadSpec {
                distribution: AddressDist::Loop {
                    size: None,
                    size_fraction: None,
                },
                ..d()
            },
            "distribution.size",
        ),
        (
            WorkloadSpec {
                distribution: AddressDist::Loop {
                    size: Some(2 << 30),
                    size_fraction: None,
                },
                ..d()
            },
            "distribution.size",
        ),
        (
            WorkloadSpec {
                bursts: Some(Bursts {
                    on_ns: 0,
                    off_ns: 5,
                }),
                ..d()
            },
            "bursts.on_ns",
        ),
        (
            WorkloadSpec {
                requests: Some(0),
                ..d()
            },
            "requests",
        ),
        (
            WorkloadSpec {
                duration_ns: Some(0),
                ..d()
            },
            "duration_ns",
        ),
    ];
    for (spec, field) in cases {
        let err = invalid(spec.clone());
        assert_eq!(err.field(), field, "{spec:?}: {err}");
        assert!(err.to_string().contains(field), "{err}");
    }
}

#[test]
fn zone_without_an_aligned_block_is_rejected() {
    // Zone 1 covers bytes 2048..6000: big enough for a 2 KiB block, but the only 4 KiB-aligned
    // start in it (4096) would end past 6000.
    let spec = WorkloadSpec {
        footprint: 1 << 20,
        distribution: AddressDist::Zoned {
            zones: vec![
                Zone {
                    access_fraction: 0.1,
                    size_fraction: None,
                    size: Some(2048),
                },
                Zone {
                    access_fraction: 0.5,
                    size_fraction: None,
                    size: Some(3952),
                },
            ],
        },
        block_sizes: vec![BlockSize {
            size: 2048,
            weight: 1.0,
        }],
        alignment: Some(4096),
        ..WorkloadSpec::default()
    };
    assert_eq!(invalid(spec.clone()).field(), "distribution.zones[1]");
    // One more aligned start makes it valid, and requests stay in their zones.
    let mut ok = spec;
    if let AddressDist::Zoned { zones } = &mut ok.distribution {
        zones[1].size = Some(4096);
    }
    let reqs: Vec<_> = SyntheticWorkload::new(&ok)
        .unwrap()
        .into_stream()
        .take(1000)
        .collect();
    assert!(reqs.iter().all(|r| r.offset % 4096 == 0 && r.len == 2048));
}
