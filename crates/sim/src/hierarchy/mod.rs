//! Cache hierarchies (docs/design.md §4.7): clients with their own cache levels over shared levels
//! over one backend, joined by links; inclusive, or exclusive with DEMOTE.
//!
//! Every level is the one policy core ([`tiercache_policy::Cache`], or its shards), so a
//! level behaves exactly as a single-level cache with the same `[cache]` settings; this module
//! only connects them. A miss's backend op at one level is a request to the next after the
//! link; a demote (a backend write marked [`tiercache_core::OpCause::Demote`]) crosses the link
//! and is offered to the next level's
//! [`accept_demote`](tiercache_policy::Decide::accept_demote).
//!
//! - `config`: [`HierarchyConfig`] (`[hierarchy]` in a config document) and its validation;
//! - `executor`: [`HierarchySim`], the run (timing model in its docs);
//! - `results`: [`HierarchyResult`], per level, per client and overall, and its table.
//!
//! ```
//! use tiercache_sim::hierarchy::{HierarchyConfig, HierarchySim};
//! use tiercache_workload::SyntheticWorkload;
//!
//! let cfg: HierarchyConfig = toml::from_str(r#"
//!     exclusive = true
//!     backend = { model = "constant", latency_ns = 1000000 }
//!     [[levels]]
//!     name = "array"
//!     cache = { capacity = "1MiB", eviction = "mru" }
//!     device = { model = "constant", latency_ns = 10000 }
//!     [[clients]]
//!     name = "host"
//!     workload = { archetype = "random", requests = 20000 }
//!     [[clients.levels]]
//!     name = "ram"
//!     cache = { capacity = "1MiB" }
//!     device = { model = "constant", latency_ns = 100 }
//! "#).unwrap();
//! let spec = cfg.synthetic_spec(0).unwrap();
//! let mut sources: Vec<Box<dyn tiercache_core::RequestSource>> =
//!     vec![Box::new(SyntheticWorkload::new(&spec).unwrap())];
//! let r = HierarchySim::new(&cfg).unwrap().run(&mut sources).unwrap();
//! let total: f64 = r.levels.iter().map(|l| l.hit_fraction).sum();
//! assert!((total - 1.0).abs() < 1e-9);
//! assert!(r.levels[0].demotes_sent > 0);
//! ```

mod config;
mod executor;
mod results;

pub use config::{ClientConfig, ClientWorkload, DemoteCost, HierarchyConfig, LevelConfig};
pub use executor::HierarchySim;
pub use results::{ClientResult, HierarchyResult, LevelResult, LinkResult};
