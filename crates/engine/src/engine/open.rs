//! Starting the engine: opening the cache and backend devices (files, block devices,
//! emulated models, a remote export) and recovering the policy cores from the cache device's
//! slot table.

use super::*;
use crate::config::VolumeConfig;
use crate::device::watched::Watched;
use crate::device::VolumeSet;
use crate::device::{FaultDevice, FaultRule};
use crate::health::DeviceRole;
use crate::partition_log::{Journaled, PartitionLog};

impl Engine {
    /// Opens the devices named by `cfg` (creating files as needed, wrapping them in device
    /// models when configured) and starts the engine.
    pub fn open(cache_cfg: &CacheConfig, cfg: &EngineConfig) -> Result<Self, EngineError> {
        Self::open_volumes(cache_cfg, cfg, &[])
    }

    /// As [`open`](Self::open), serving several volumes on one cache device, each over its
    /// own backend file or block device (`cfg.backend_path` is then unused); no volumes:
    /// the one volume of `cfg.backend_path`.
    pub fn open_volumes(
        cache_cfg: &CacheConfig,
        cfg: &EngineConfig,
        volumes: &[VolumeConfig],
    ) -> Result<Self, EngineError> {
        Self::open_volumes_with(cache_cfg, cfg, volumes, None)
    }

    /// As [`open_volumes`](Self::open_volumes), serving reads before the scan ends through
    /// `early` when given (`early.rs`).
    pub(super) fn open_volumes_with(
        cache_cfg: &CacheConfig,
        cfg: &EngineConfig,
        volumes: &[VolumeConfig],
        early: Option<&super::early::Opening>,
    ) -> Result<Self, EngineError> {
        let geo = LineGeometry::new(cache_cfg.line_size).map_err(PolicyError::from)?;
        let slots = (cache_cfg.capacity / geo.line_size()) as u32;
        let layout = Layout::new(slots, geo.line_size());
        let open = |what: &'static str, path: &std::path::Path, min: u64, direct: bool| {
            let dev = if direct {
                FileDevice::open_direct(path, min)
            } else {
                FileDevice::open(path, min)
            };
            dev.map(|d| d.with_io_uring(cfg.io.uses_io_uring(direct)))
                .map_err(|source| EngineError::Open {
                    what,
                    path: path.display().to_string(),
                    source,
                })
        };
        let cache_lock =
            crate::device::lock_exclusive(&cfg.cache_path).map_err(|source| EngineError::Open {
                what: "cache device",
                path: cfg.cache_path.display().to_string(),
                source,
            })?;
        let mut notes = Vec::new();
        if cfg.cache_preallocate {
            if let Some(note) =
                preallocate_cache(&cache_lock, &cfg.cache_path, layout.device_len())?
            {
                notes.push(note);
            }
        }
        for (field, rules) in [
            ("engine.cache_faults", &cfg.cache_faults),
            ("engine.backend_faults", &cfg.backend_faults),
        ] {
            for (i, r) in rules.iter().enumerate() {
                r.validate().map_err(|(key, reason)| EngineError::Setting {
                    field,
                    reason: format!("entry {}: {key}: {reason}", i + 1),
                })?;
            }
        }
        let cache_file = open(
            "cache device",
            &cfg.cache_path,
            layout.device_len(),
            cfg.cache_direct,
        )?;
        let cache_file = if cfg.cache_mapped_reads && !cfg.cache_direct {
            cache_file
                .with_mapped_reads()
                .map_err(|source| EngineError::Open {
                    what: "cache device (mapping)",
                    path: cfg.cache_path.display().to_string(),
                    source,
                })?
        } else {
            cache_file
        };
        // A backend that is the cache device itself would have write-backs overwrite the
        // cache's metadata and lines.
        let cache_id = file_id(&cfg.cache_path);
        let same_as_cache = |field: &'static str, path: &std::path::Path| {
            if cache_id.is_some() && file_id(path) == cache_id {
                return Err(EngineError::Setting {
                    field,
                    reason: format!(
                        "{} is the cache device ({}): a backend must be another file or device",
                        path.display(),
                        cfg.cache_path.display()
                    ),
                });
            }
            Ok(())
        };
        let cache_dev: Arc<dyn BlockDevice> = match &cfg.cache_device {
            Some(m) => Arc::new(Emulated::new(cache_file, "engine.cache_device", m)?),
            None => Arc::new(cache_file),
        };
        let cache_dev = with_faults(
            cache_dev,
            &cfg.cache_faults,
            cfg.fault_seed,
            &mut notes,
            "cache",
        );
        let mut overrides = Vec::new();
        let remote_uri = cfg
            .backend_path
            .to_str()
            .filter(|s| tiercache_nbd::NbdUri::is_uri(s));
        let (backend, cache_cfg, extents) = if !volumes.is_empty() {
            let mut devs = Vec::new();
            for v in volumes {
                if v.backend_path
                    .to_str()
                    .is_some_and(tiercache_nbd::NbdUri::is_uri)
                {
                    return Err(EngineError::Setting {
                        field: "serve.exports.backend_path",
                        reason: format!(
                            "{}: a volume of several is a local file or block device",
                            v.backend_path.display()
                        ),
                    });
                }
                let min = if v.backend_path.exists() {
                    v.backend_size.unwrap_or(0)
                } else {
                    v.backend_size.unwrap_or(DEFAULT_BACKEND_SIZE)
                };
                same_as_cache("serve.exports.backend_path", &v.backend_path)?;
                let file = open("backend", &v.backend_path, min, cfg.backend_direct)?;
                let dev: Arc<dyn BlockDevice> = match &cfg.backend_device {
                    Some(m) => Arc::new(Emulated::new(file, "engine.backend_device", m)?),
                    None => Arc::new(file),
                };
                devs.push((v.volume, dev));
            }
            let set = VolumeSet::new(devs).map_err(|e| EngineError::Setting {
                field: "serve.exports.volume",
                reason: e.to_string(),
            })?;
            let extents = set.extents();
            (
                Arc::new(set) as Arc<dyn BlockDevice>,
                cache_cfg.clone(),
                Some(extents),
            )
        } else if let Some(uri) = remote_uri {
            if cfg.backend_size.is_some() {
                return Err(EngineError::Setting {
                    field: "engine.backend_size",
                    reason: "a remote backend has the export's size; remove backend_size".into(),
                });
            }
            let parsed: tiercache_nbd::NbdUri =
                uri.parse()
                    .map_err(|e: tiercache_nbd::client::UriError| EngineError::Setting {
                        field: "engine.backend_path",
                        reason: e.to_string(),
                    })?;
            cfg.remote
                .validate()
                .map_err(|(field, reason)| EngineError::Setting { field, reason })?;
            let mut client = cfg.remote.client();
            let demoting = cache_cfg.victim == tiercache_policy::VictimConfig::Demote;
            client.demote = demoting;
            let remote = tiercache_nbd::Remote::connect(parsed, client).map_err(|source| {
                EngineError::Remote {
                    uri: uri.to_string(),
                    source,
                }
            })?;
            let no_demotes = demoting && !remote.demote_enabled();
            if remote.info().read_only() {
                return Err(EngineError::Setting {
                    field: "engine.backend_path",
                    reason: format!("{uri} is a read-only export"),
                });
            }
            let dev = NbdBackend(remote);
            let backend: Arc<dyn BlockDevice> = match &cfg.backend_device {
                Some(m) => Arc::new(Emulated::new(dev, "engine.backend_device", m)?),
                None => Arc::new(dev),
            };
            let mut c = cache_cfg.clone();
            if no_demotes {
                // Not a tiercache below (or one that takes no demotes): the extension is
                // simply not used, and clean victims are dropped.
                c.victim = tiercache_policy::VictimConfig::Drop;
                overrides.push(("cache.victim", "drop".to_string()));
                notes.push(format!(
                    "cache.victim = demote: {uri} did not take tiercache's DEMOTE extension; \
                     clean victims are dropped"
                ));
            }
            if c.dirty_full == DirtyFullPolicy::EvictThenWrite {
                // A request that evicts a dirty line writes it back inline; if the remote
                // fails then, the request fails with the line already out of the core's
                // tables. Only flush jobs (which can be put back) write dirty data remotely.
                c.dirty_full = DirtyFullPolicy::Bypass;
                overrides.push(("cache.dirty_full", "bypass".to_string()));
                notes.push(
                    "remote backend: cache.dirty_full = bypass (dirty lines are written back \
                     only by the flusher, which keeps them dirty while the remote fails)"
                        .to_string(),
                );
            }
            (backend, c, None)
        } else {
            let backend_min = if cfg.backend_path.exists() {
                cfg.backend_size.unwrap_or(0)
            } else {
                cfg.backend_size.unwrap_or(DEFAULT_BACKEND_SIZE)
            };
            same_as_cache("engine.backend_path", &cfg.backend_path)?;
            let backend_file = open(
                "backend",
                &cfg.backend_path,
                backend_min,
                cfg.backend_direct,
            )?;
            let backend: Arc<dyn BlockDevice> = match &cfg.backend_device {
                Some(m) => Arc::new(Emulated::new(backend_file, "engine.backend_device", m)?),
                None => Arc::new(backend_file),
            };
            (backend, cache_cfg.clone(), None)
        };
        // Only where sharding is possible: partitions (static or a tenancy mode's) need one
        // shard, and a config that has them chose it.
        let can_shard = cache_cfg.partitions.is_empty() && !cache_cfg.tenancy.partitions();
        if cfg.lookup == Lookup::HtFg && cache_cfg.shards <= 1 && can_shard {
            notes.push(
                "engine.lookup = ht-fg with cache.shards = 1: one policy core behind one lock; \
                 set cache.shards (the shipped serve configs use 16) for a lock per shard"
                    .to_string(),
            );
        }
        if cache_cfg.capacity > backend.size() {
            return Err(EngineError::Setting {
                field: "cache.capacity",
                reason: format!(
                    "{} bytes is larger than the backend {} ({} bytes): a cache larger than what it caches",
                    cache_cfg.capacity,
                    cfg.backend_path.display(),
                    backend.size()
                ),
            });
        }
        let extents = extents.unwrap_or_else(|| vec![(0, 0, backend.size())]);
        let backend = with_faults(
            backend,
            &cfg.backend_faults,
            cfg.fault_seed.wrapping_add(1),
            &mut notes,
            "backend",
        );
        let mut engine = Self::open_devices(
            &cache_cfg, cfg, cache_dev, backend, extents, true, early,
        )
        .map_err(|e| match e {
            EngineError::Metadata(source) => EngineError::CacheMetadata {
                path: cfg.cache_path.display().to_string(),
                source,
            },
            e => e,
        })?;
        notes.append(&mut engine.notes);
        engine.notes = notes;
        engine.overrides = overrides;
        engine.cache_lock = Some(cache_lock);
        Ok(engine)
    }

    /// Settings the engine chose differently from the configuration, and why.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The same settings as `(config key, value the engine runs with)`, so that a result
    /// record can describe the run that was made (see [`Engine::notes`] for why).
    pub fn overrides(&self) -> &[(&'static str, String)] {
        &self.overrides
    }

    /// Starts the engine on given devices (tests use in-memory ones). The backend's size is
    /// the exported volume's size.
    pub fn with_devices(
        cache_cfg: &CacheConfig,
        cfg: &EngineConfig,
        cache_dev: Arc<dyn BlockDevice>,
        backend: Arc<dyn BlockDevice>,
    ) -> Result<Self, EngineError> {
        let extents = vec![(0, 0, backend.size())];
        Self::with_volume_devices(cache_cfg, cfg, cache_dev, backend, extents)
    }

    /// As [`with_devices`](Self::with_devices) for several volumes: `extents` lists each as
    /// (volume, base address on `backend`, size), e.g. a [`VolumeSet`]'s.
    pub fn with_volume_devices(
        cache_cfg: &CacheConfig,
        cfg: &EngineConfig,
        cache_dev: Arc<dyn BlockDevice>,
        backend: Arc<dyn BlockDevice>,
        extents: Vec<(u32, u64, u64)>,
    ) -> Result<Self, EngineError> {
        Self::open_devices(cache_cfg, cfg, cache_dev, backend, extents, true, None)
    }

    /// As [`with_devices`](Self::with_devices) without the watcher on the devices
    /// (`device/watched.rs`): only to measure the watcher's cost on the request path
    /// (`examples/request_path_cost.rs`). Errors are then neither counted nor marked, so a
    /// cache-device error fails its request: never serve with it.
    #[doc(hidden)]
    pub fn with_devices_unwatched(
        cache_cfg: &CacheConfig,
        cfg: &EngineConfig,
        cache_dev: Arc<dyn BlockDevice>,
        backend: Arc<dyn BlockDevice>,
    ) -> Result<Self, EngineError> {
        let extents = vec![(0, 0, backend.size())];
        Self::open_devices(cache_cfg, cfg, cache_dev, backend, extents, false, None)
    }

    pub(super) fn open_devices(
        cache_cfg: &CacheConfig,
        cfg: &EngineConfig,
        cache_dev: Arc<dyn BlockDevice>,
        backend: Arc<dyn BlockDevice>,
        extents: Vec<(u32, u64, u64)>,
        watch: bool,
        early: Option<&super::early::Opening>,
    ) -> Result<Self, EngineError> {
        if extents.is_empty() {
            return Err(EngineError::Setting {
                field: "serve.exports",
                reason: "no volume to serve".into(),
            });
        }
        let geo = LineGeometry::new(cache_cfg.line_size).map_err(PolicyError::from)?;
        // The policy plans whole lines: a volume ending inside a line would have it read or
        // filled past the volume's end.
        if let Some(&(vol, _, size)) = extents.iter().find(|e| e.2 % geo.line_size() != 0) {
            return Err(EngineError::Setting {
                field: if extents.len() > 1 {
                    "serve.exports.backend_path"
                } else {
                    "engine.backend_path"
                },
                reason: format!(
                    "volume {vol}'s backend holds {size} bytes, not a multiple of cache.line_size \
                     ({} bytes): its last line would be read past its end; give it a size that \
                     is a multiple (backend_size), or a line size that divides it",
                    geo.line_size()
                ),
            });
        }
        cfg.on_error
            .validate()
            .map_err(|(field, reason)| EngineError::Setting { field, reason })?;
        // Every op of both devices goes through a watcher that counts its errors (and marks
        // the cache device's, so a request they fail is served from the backend).
        let health = Arc::new(crate::health::Health::new(cfg.on_error.clone()));
        let degrade_due = Arc::new(AtomicBool::new(false));
        let (cache_dev, backend): (Arc<dyn BlockDevice>, Arc<dyn BlockDevice>) = if watch {
            (
                Arc::new(Watched::new(
                    cache_dev,
                    DeviceRole::Cache,
                    health.clone(),
                    degrade_due.clone(),
                )),
                Arc::new(Watched::new(
                    backend,
                    DeviceRole::Backend,
                    health.clone(),
                    degrade_due.clone(),
                )),
            )
        } else {
            (cache_dev, backend)
        };
        if let Some(n) = cfg.shards {
            return Err(EngineError::Setting {
                field: "engine.shards",
                reason: format!(
                    "moved to cache.shards (= {n}): the shards are the policy's, and the \
                     simulator runs them too"
                ),
            });
        }
        if cache_cfg.victim == tiercache_policy::VictimConfig::Demote && !backend.takes_demotes() {
            return Err(EngineError::Setting {
                field: "cache.victim",
                reason: "\"demote\" hands clean victims to a cache level below, and this \
                         backend is none (demotes go to a RAM level's engine below, see \
                         [ram_level], or to a remote tiercache that negotiated the DEMOTE \
                         extension)"
                    .into(),
            });
        }
        // The policy's shards (`cache.shards`), laid out as the simulator lays them out; the
        // engine puts a lock on each.
        let shard_layout = ShardLayout::new(cache_cfg)?;
        let base = shard_layout.total_lines();
        let n = shard_layout.shards();
        let layout = Layout::new(base, geo.line_size());
        // Journaling (the slots whose records need writing) starts once the recovered lines
        // are restored: restoring changes no record.
        let make_cores = || {
            super::restore::new_cores(
                cache_cfg,
                &shard_layout,
                crate::slot_table::recovery_threads(base as usize),
            )
        };
        // Making the cores (their arrays written page by page) overlaps the scan, which waits
        // on the device (docs/design.md §13) — when the scan only reads: a device with a
        // superblock, not asked to format. Otherwise (a blank device is formatted) the cores
        // come first as before, so a core refused leaves the device untouched. Either way a
        // core's error comes before the scan's.
        let overlap = !cfg.format && {
            let mut sb = [0u8; 64];
            cache_dev.read_at(&mut sb, 0).is_ok() && sb.iter().any(|&b| b != 0)
        };
        // Each shard restored by the thread that scanned it (docs/design.md §13, the fifth
        // stop), where nothing between the scan and the restore needs every line.
        let fast = if overlap {
            let backends = super::restore::Backends {
                extents: &extents,
                line_size: geo.line_size(),
            };
            super::restore::open_per_shard(
                &*cache_dev,
                layout,
                cache_cfg,
                &shard_layout,
                backends,
                // Twice the cores: while one thread makes or restores a core (CPU only),
                // another's reads keep the device busy.
                crate::slot_table::recovery_threads(base as usize) * 2,
                early.map(|opening| super::early::EarlyDevices {
                    opening,
                    cache_dev: cache_dev.clone(),
                    backend: backend.clone(),
                }),
            )?
        } else {
            None
        };
        let (table, recovery, caches, partition_log, journaled, notes) = match fast {
            Some((table, recovery, caches, partition_log, notes)) => {
                (table, recovery, caches, partition_log, Vec::new(), notes)
            }
            None => {
                let (caches, scanned) = if overlap {
                    std::thread::scope(|s| {
                        let cores = s.spawn(make_cores);
                        let scanned = SlotTable::open_parts(&*cache_dev, layout, false);
                        (
                            cores.join().expect("the thread making cores panicked"),
                            Some(scanned),
                        )
                    })
                } else {
                    (make_cores(), None)
                };
                let mut caches = caches?;
                // Shard 0 leads a partitioning tenancy mode, as the simulator's shards run it
                // (docs/design.md §4.10, "On shards").
                tiercache_policy::shards::link_tenancy(&mut caches, &shard_layout, cache_cfg);
                if cfg.format && !cfg.force_format {
                    // Formatting must not silently drop dirty data: look first, under the layout the
                    // device was written with when it differs from the configured one.
                    let looked = match SlotTable::open(&*cache_dev, layout, false) {
                        Err(SlotTableError::Mismatch { .. }) => {
                            SlotTable::on_disk_layout(&*cache_dev)
                                .and_then(|old| SlotTable::open(&*cache_dev, old, false))
                        }
                        other => other,
                    };
                    match looked {
                        Ok((_, _, rep)) if rep.dirty_lines > 0 => {
                            return Err(EngineError::Recovery(format!(
                        "engine.format: the cache device holds {} dirty lines; run `tiercache flush` first (under the configuration that wrote them) or set engine.force_format",
                        rep.dirty_lines
                    )));
                        }
                        // Clean, or not a tiercache device at all: nothing of ours to lose.
                        Ok(_) | Err(SlotTableError::NotTiercache(_)) => {}
                        Err(e) => {
                            return Err(EngineError::Recovery(format!(
                        "engine.format: the cache device's metadata cannot be read ({e}), so it may hold dirty lines; set engine.force_format to discard it"
                    )));
                        }
                    }
                }
                let (table, mut found, mut recovery) = match scanned {
                    Some(scanned) => scanned?,
                    None => SlotTable::open_parts(&*cache_dev, layout, cfg.format)?,
                };
                let (mut partition_log, journaled) = PartitionLog::open(&*cache_dev)?;
                let journaled = if recovery.formatted {
                    // A formatted device has no layout (the superblock's spare bytes may hold an old
                    // one).
                    partition_log.clear(&*cache_dev)?;
                    Default::default()
                } else {
                    journaled.unwrap_or_default()
                };
                let Journaled {
                    partitions: journaled,
                    write_policies,
                } = journaled;
                // Partitions of volumes no longer served hold no lines (recovery refuses a line of a
                // volume it does not serve): dropped, so their lines go back to the others.
                let mut notes = Vec::new();
                if recovery.formatted {
                    // Formatting leaves the superblock's spare bytes as they were.
                    crate::pass_through_mark::clear(&*cache_dev)?;
                } else if let Some(runs) = crate::pass_through_mark::read(&*cache_dev)? {
                    // The last run served requests past the cache, whose records of dropped clean
                    // copies may never have landed: keep only the dirty data (docs/design.md §11).
                    let before = recovery_lines(&found);
                    let mut dropped = 0u64;
                    for part in &mut found {
                        for (slot, rec) in super::restore::keep_dirty_only(part) {
                            table.write(&*cache_dev, slot, &rec)?;
                            dropped += 1;
                        }
                    }
                    recovery.lines -= before - recovery_lines(&found);
                    table.sync(&*cache_dev)?;
                    crate::pass_through_mark::clear(&*cache_dev)?;
                    recovery.clean_dropped_after_pass_through = dropped;
                    notes.push(super::restore::pass_through_note(runs, dropped));
                }
                let served = |v: u32| extents.iter().any(|e| e.0 == v);
                let (journaled, gone): (Vec<_>, Vec<_>) =
                    journaled.into_iter().partition(|e| served(e.volume));
                let write_policies: Vec<(u32, tiercache_policy::WritePolicy)> = write_policies
                    .into_iter()
                    .filter(|&(v, _)| served(v))
                    .collect();
                if !gone.is_empty() {
                    partition_log.write(
                        &*cache_dev,
                        &Journaled {
                            partitions: journaled.clone(),
                            write_policies: write_policies.clone(),
                        },
                    )?;
                    let mut vols: Vec<u32> = gone.iter().map(|e| e.volume).collect();
                    vols.dedup();
                    notes.push(format!(
                "the journaled partition layout named volumes no longer served ({vols:?}): their partitions were dropped"
            ));
                }
                super::journaled::restore(
                    &mut caches,
                    cache_cfg,
                    &shard_layout,
                    &found,
                    &journaled,
                    &write_policies,
                    &mut notes,
                )?;
                let threads = crate::slot_table::recovery_threads(recovery_lines(&found) as usize);
                let backends = super::restore::Backends {
                    extents: &extents,
                    line_size: geo.line_size(),
                };
                super::restore::restore_shards(
                    &mut caches,
                    &shard_layout,
                    &found,
                    backends,
                    threads,
                )?;
                (table, recovery, caches, partition_log, journaled, notes)
            }
        };
        // The device's own record format (an older device keeps its wider records).
        let layout = table.layout();
        let mut caches = caches;
        // Restoring touched every slot, but nothing of it needs writing again: the cores
        // journal their changes from here on, not a list of every slot to throw away
        // (docs/design.md §13).
        for c in &mut caches {
            c.set_journal(true);
        }
        let shards = caches
            .into_iter()
            .enumerate()
            .map(|(k, cache)| Shard {
                core: Mutex::new(Core {
                    cache,
                    order: OrderingTable::default(),
                    updates: Vec::new(),
                    unrecorded: Vec::new(),
                    reinstated: Default::default(),
                    frees: Vec::new(),
                }),
                base: shard_layout.base(k),
            })
            .collect();
        let (deferred_tx, deferred_rx) = mpsc::channel::<Box<Deferred>>();
        let inner = Arc::new(Inner {
            shards,
            shard_layout,
            whole_sizes: (
                cache_cfg.partitions.clone(),
                cache_cfg.tenancy.fixed.clone(),
            ),
            decide: Mutex::new(()),
            serial: Mutex::new(()),
            lookup: cfg.lookup,
            answer_reads_early: cfg.answer_reads_early,
            cache_is_slow: cfg.cache_device.is_some(),
            cache_hits_wait: cfg.cache_direct && cfg.cache_device.is_none(),
            cache_dev,
            backend,
            volumes: extents
                .iter()
                .map(|&(v, base, size)| VolumeState::new(v, base, size))
                .collect(),
            partition_log: Mutex::new((partition_log, Journaled::default())),
            journal_policies_held: Mutex::new(None),
            resizing: Mutex::new(()),
            table,
            layout,
            geo,
            counters: Counters::default(),
            latency: Latencies::new(),
            recovery,
            epoch: Instant::now(),
            in_flight: AtomicU64::new(0),
            cache_load: LoadMeter::default(),
            backend_load: LoadMeter::default(),
            request_tally: Mutex::new(CacheStats::default()),
            deferred_tx: Mutex::new(Some(deferred_tx)),
            deferred_pending: AtomicU64::new(0),
            last_foreground_ns: AtomicU64::new(0),
            last_write_kick_ns: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            pass_through_marked: Mutex::new(false),
            wake: (Mutex::new(false), Condvar::new()),
            poll: Duration::from_nanos(cfg.flusher_poll_ns.max(1_000_000)),
            backend_unsynced: AtomicU64::new(u64::MAX),
            halted: OnceLock::new(),
            health,
            degrade_due,
        });
        let worker = inner.clone();
        let flusher = std::thread::Builder::new()
            .name("tiercache-flusher".into())
            .spawn(move || worker.flusher_loop())?;
        let rx = Arc::new(Mutex::new(deferred_rx));
        let mut finishers = Vec::new();
        for _ in 0..2 {
            let (inner, rx) = (inner.clone(), rx.clone());
            finishers.push(
                std::thread::Builder::new()
                    .name("tiercache-finisher".into())
                    .spawn(move || loop {
                        let task = lock(&rx).recv();
                        match task {
                            Ok(t) => {
                                let _ = inner.finish_deferred(t);
                            }
                            Err(_) => return,
                        }
                    })?,
            );
        }
        let engine = Self {
            inner,
            flusher: Mutex::new(Some(flusher)),
            finishers: Mutex::new(finishers),
            notes,
            overrides: Vec::new(),
            cache_lock: None,
        };
        // The journaled sizes: partitions holding more lines than that (a crash mid-resize)
        // write their dirty excess back and drop it now.
        let mut per_shard: Vec<(u32, Vec<u64>)> = Vec::new();
        for e in &journaled {
            let i = match per_shard.iter().position(|p| p.0 == e.volume) {
                Some(i) => i,
                None => {
                    per_shard.push((e.volume, vec![0; n]));
                    per_shard.len() - 1
                }
            };
            per_shard[i].1[e.shard as usize] = u64::from(e.lines);
        }
        engine.inner.apply_layout(&per_shard)?;
        Ok(engine)
    }
}

/// The (device, inode) of the file at `path`, when it exists: two paths naming one file
/// (links, `..`, a block device and its node) have the same.
fn file_id(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(path).ok()?;
    if m.file_type().is_block_device() {
        // Two nodes of one block device differ in inode, not in the device they name.
        return Some((u64::MAX, m.rdev()));
    }
    Some((m.dev(), m.ino()))
}

/// `dev` under the fault `rules` (none: `dev` itself), with a note saying faults are on.
fn with_faults(
    dev: Arc<dyn BlockDevice>,
    rules: &[FaultRule],
    seed: u64,
    notes: &mut Vec<String>,
    what: &str,
) -> Arc<dyn BlockDevice> {
    if rules.is_empty() {
        return dev;
    }
    notes.push(format!(
        "engine.{what}_faults: {} fault rule(s) injected into the {what} device (testing)",
        rules.len()
    ));
    Arc::new(FaultDevice::new(dev, rules.to_vec(), seed))
}

/// Allocates the blocks of the cache file at `path` (open as `file`) up to `len` bytes, so a
/// file system without the room is an error now, naming the path, the size asked and the
/// space free (docs/design.md §11). A block device, or a file system that cannot allocate
/// ahead, is left as it is (the latter with a note, returned).
fn preallocate_cache(
    file: &std::fs::File,
    path: &std::path::Path,
    len: u64,
) -> Result<Option<String>, EngineError> {
    use tiercache_blockdev::space::{free_bytes, preallocate, Preallocated};
    let is_file = file
        .metadata()
        .map(|m| m.file_type().is_file())
        .unwrap_or(false);
    if !is_file {
        return Ok(None);
    }
    match preallocate(file, len) {
        Ok(Preallocated::Done) => Ok(None),
        Ok(Preallocated::Unsupported) => Ok(Some(format!(
            "engine.cache_preallocate: the file system of {} cannot allocate ahead; the cache \
             file stays sparse, and running out of room there is a cache-device error",
            path.display()
        ))),
        Err(e) => {
            let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
            let free = free_bytes(dir.unwrap_or(std::path::Path::new(".")))
                .map(|b| format!("{b} bytes free there"))
                .unwrap_or_else(|_| "free space unknown".into());
            Err(EngineError::Open {
                what: "cache device",
                path: path.display().to_string(),
                source: std::io::Error::new(
                    e.kind(),
                    format!(
                        "allocating {len} bytes for the cache file failed ({e}); {free}: \
                         make room, lower cache.capacity, or set \
                         engine.cache_preallocate = false to run it sparse"
                    ),
                ),
            })
        }
    }
}

/// Lines in the recovery threads' lists (`SlotTable::open_parts`).
fn recovery_lines(found: &[Vec<(u32, SlotRecord)>]) -> u64 {
    found.iter().map(|p| p.len() as u64).sum()
}
