//! Memory per cache line (docs/design.md §13): anonymous memory (`RssAnon` of
//! `/proc/self/status`) per line of a full cache, for the engine and for the simulator's
//! policy core, per eviction policy, promotion policy, line size and cache size; with the
//! heap bytes of each structure (line entries, index, dirty list, replacement lists,
//! promotion tables, the slot table's shadow of the on-device records) per line, and the
//! engine's start-up time against reading its metadata sequentially.
//!
//! ```text
//! cargo run --release -p tiercache-engine --example memory_per_line -- \
//!     [--gib 1,8] [--line 4096,65536] [--eviction lru,clock,...] [--promotion always,nhit,smq] \
//!     [--what engine,core] [--dir /tmp] [--json]
//! cargo run --release -p tiercache-engine --example memory_per_line -- \
//!     --what startup [--gib 1,8,64] [--line 4096] [--rounds 3] [--dir /tmp]
//! ```
//!
//! `--what startup` measures start-up alone: per cache size, cold each time and interleaved
//! round by round, `dd` reading the slot table (`bs=1M`), the slot table's recovery alone and
//! the engine's open, with the engine's median over `dd`'s; then the open serving before the
//! scan ends (`Engine::open_early`): the time to the first hit (a read of a random cached
//! line, its bytes checked, started with the open from another thread) and until every
//! shard is ready.
//!
//! Every measurement runs in a child process of its own (this program run again), so one
//! cache's freed memory never counts for the next. The engine's cache is filled the way a
//! restart finds a full cache: every slot's record names a clean line, written to a sparse
//! cache file (data area untouched) by a preparing child, then a measuring child opens the
//! engine on it (recovery restores every line), serves 100,000 hits and reads its memory.
//! Before the open the cache file's pages are dropped from the page cache
//! (`posix_fadvise(DONTNEED)`), so the start-up time includes reading the metadata from the
//! disk; the same metadata read sequentially with 1 MiB `pread`s, also cold, is the anchor
//! (`dd` with `bs=1M` does the same). The simulator's policy core (one shard, as `tiercache
//! sim` runs by default) is filled by reading every line of its capacity once (twice for
//! `nhit`) in hit-ratio-only mode.

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use tiercache_blockdev::FileDevice;
use tiercache_core::{LineGeometry, Request, VolumeId};
use tiercache_engine::slot_table::{Layout, SlotRecord, SlotTable};
use tiercache_engine::{Engine, EngineConfig};
use tiercache_policy::metadata::MetadataMemory;
use tiercache_policy::{
    Cache, CacheConfig, CleaningConfig, EvictionKind, PromotionConfig, ShardLayout, WritePolicy,
};

/// The engine's shards, as the shipped configs set them (`SUGGESTED_SHARDS`).
const ENGINE_SHARDS: u32 = tiercache_engine::config::SUGGESTED_SHARDS;
/// Hits served after the open, before memory is read.
const HITS: u64 = 100_000;

/// Anonymous resident memory of this process, in bytes.
fn rss_anon() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    s.lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("RssAnon in /proc/self/status")
        * 1024
}

/// Drops `path`'s pages from the page cache (they are clean: synced first).
fn drop_cached(path: &Path) {
    let f = File::open(path).expect("open to drop cached pages");
    f.sync_all().expect("sync");
    // SAFETY: a plain system call on a file descriptor this function owns for its duration.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0, "posix_fadvise");
}

fn promotion(name: &str) -> PromotionConfig {
    match name {
        "always" => PromotionConfig::Always,
        "nhit" => PromotionConfig::Nhit {
            n: 2,
            table_ratio: 1.0,
            occupancy_threshold: 0.0,
        },
        "smq" => PromotionConfig::Smq { hotspot_lines: 16 },
        other => panic!("--promotion {other}: one of always, nhit, smq"),
    }
}

fn eviction(name: &str) -> EvictionKind {
    serde_json::from_str(&format!("\"{name}\""))
        .unwrap_or_else(|_| panic!("--eviction {name}: a policy name such as lru, clock, s3-fifo"))
}

fn cache_config(gib: u64, line: u64, evict: &str, promo: &str, shards: u32) -> CacheConfig {
    CacheConfig {
        capacity: gib << 30,
        line_size: line,
        write_policy: WritePolicy::WriteBack,
        eviction: eviction(evict),
        promotion: promotion(promo),
        cleaning: CleaningConfig::None,
        shards,
        ..CacheConfig::default()
    }
}

fn paths(dir: &Path, gib: u64, line: u64) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("memory-per-line-{gib}g-{line}.cache")),
        dir.join(format!("memory-per-line-{gib}g-{line}.backend")),
    )
}

/// Writes a full cache's records (every slot a clean line in its shard) on a sparse cache
/// file, and prints the seconds a cold sequential read of the metadata takes.
fn prepare(gib: u64, line: u64, dir: &Path) {
    let cfg = cache_config(gib, line, "lru", "always", ENGINE_SHARDS);
    let geo = LineGeometry::new(line).expect("line size");
    let slots = (cfg.capacity / line) as u32;
    let layout = Layout::new(slots, line);
    let (cache, _) = paths(dir, gib, line);
    let _ = std::fs::remove_file(&cache);
    let dev = FileDevice::open(&cache, layout.device_len()).expect("cache file");
    let (table, _, _) = SlotTable::open(&dev, layout, true).expect("format");
    let shards = ShardLayout::new(&cfg).expect("shards");
    let mut filled = vec![0u32; shards.shards()];
    let mut left = slots;
    let mut index = 0u64;
    while left > 0 {
        let k = shards.shard_of(VolumeId(0), index);
        if filled[k] < shards.lines(k) {
            let rec = SlotRecord {
                line: Some((0, index)),
                valid: geo.full_mask(),
                dirty: 0,
            };
            table
                .write(&dev, shards.base(k) + filled[k], &rec)
                .expect("record");
            filled[k] += 1;
            left -= 1;
        }
        index += 1;
    }
    table.sync(&dev).expect("sync");
    drop(table);
    // The line `--what startup` reads first, from a slot picked at random: its data holds a
    // pattern the backend (zeroes) does not, so a right answer is a hit.
    let probe_slot = (gib.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 7) as u32 % slots;
    let k = shards.shard_of_slot(probe_slot);
    let probe_line = probe_line_of(&shards, k, probe_slot - shards.base(k));
    tiercache_blockdev::BlockDevice::write_at(
        &dev,
        &probe_bytes(line),
        layout.data_offset + u64::from(probe_slot) * line,
        false,
    )
    .expect("probe line");
    std::fs::write(probe_path(dir, gib, line), probe_line.to_string()).expect("probe file");
    drop(dev);
    // The backend must hold every line named.
    let (_, backend) = paths(dir, gib, line);
    let f = File::create(&backend).expect("backend");
    f.set_len((index * line).max(1 << 20))
        .expect("backend size");
    drop_cached(&cache);
    let f = File::open(&cache).expect("cache file");
    let mut buf = vec![0u8; 1 << 20];
    let t = Instant::now();
    let mut at = 0u64;
    while at < layout.data_offset {
        let n = (layout.data_offset - at).min(buf.len() as u64) as usize;
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf[..n], at).expect("read");
        at += n as u64;
    }
    println!(
        "{{\"metadata_bytes\":{},\"read_seconds\":{:.4},\"backend_bytes\":{}}}",
        layout.data_offset,
        t.elapsed().as_secs_f64(),
        index * line
    );
}

/// The line `prepare` puts in slot `nth` of shard `k` (it fills each shard's slots with its
/// lines in ascending order).
fn probe_line_of(shards: &ShardLayout, k: usize, nth: u32) -> u64 {
    let mut seen = 0u32;
    let mut index = 0u64;
    loop {
        if shards.shard_of(VolumeId(0), index) == k {
            if seen == nth {
                return index;
            }
            seen += 1;
        }
        index += 1;
    }
}

/// The probe line's bytes.
fn probe_bytes(line: u64) -> Vec<u8> {
    (0..line).map(|i| (i % 251) as u8 | 0x80).collect()
}

fn probe_path(dir: &Path, gib: u64, line: u64) -> PathBuf {
    dir.join(format!("memory-per-line-{gib}g-{line}.probe"))
}

fn per_line(m: &MetadataMemory, lines: f64) -> serde_json::Value {
    serde_json::json!({
        "line_entries": m.line_entries as f64 / lines,
        "index": m.index as f64 / lines,
        "free_slots": m.free_slots as f64 / lines,
        "dirty_list": m.dirty_list as f64 / lines,
        "eviction": m.eviction as f64 / lines,
        "partitions": m.partitions as f64 / lines,
        "promotion": m.promotion as f64 / lines,
        "journal": m.journal as f64 / lines,
    })
}

/// Opens the engine on a prepared cache file, serves hits, prints its memory.
fn measure_engine(gib: u64, line: u64, evict: &str, promo: &str, dir: &Path) {
    let cfg = cache_config(gib, line, evict, promo, ENGINE_SHARDS);
    let (cache, backend) = paths(dir, gib, line);
    let backend_size = std::fs::metadata(&backend).expect("prepared backend").len();
    let ecfg = EngineConfig {
        cache_path: cache.clone(),
        backend_path: backend,
        backend_size: Some(backend_size),
        cache_mapped_reads: false,
        // The cache file stays sparse: only its metadata is written.
        cache_preallocate: false,
        ..EngineConfig::default()
    };
    drop_cached(&cache);
    let before = rss_anon();
    let t = Instant::now();
    let engine = Engine::open(&cfg, &ecfg).expect("engine");
    let open_seconds = t.elapsed().as_secs_f64();
    let lines = (cfg.capacity / line) as f64;
    assert_eq!(
        engine.stats().resident_lines as f64,
        lines,
        "every line recovered"
    );
    // Hits over the whole cache: reads and writes (write-back: lines go dirty).
    let mut buf = vec![0u8; 4096];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..HITS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let at = (x % (backend_size / 4096)) * 4096;
        if i % 2 == 0 {
            engine.read(&mut buf, at).expect("read");
        } else {
            engine.write(&buf, at, false).expect("write");
        }
    }
    let after = rss_anon();
    let m = engine.metadata_memory();
    println!(
        "{}",
        serde_json::json!({
            "what": "engine", "gib": gib, "line_size": line, "eviction": evict,
            "promotion": promo, "lines": lines as u64,
            "rss_anon_per_line": (after - before) as f64 / lines,
            "heap_per_line": m.total() as f64 / lines,
            "core": per_line(&m.core, lines),
            "slot_table": m.slot_table as f64 / lines,
            "ordering": m.ordering as f64 / lines,
            "open_seconds": open_seconds,
        })
    );
    drop(engine);
}

/// Start-up of a prepared cache, `rounds` times, each part cold (the cache file's pages dropped
/// first), interleaved: `dd` reading the metadata (`bs=1M`, as many blocks as the slot table
/// covers), the slot table's recovery alone, and the engine's open (ready to serve). Prints
/// the median of each and the engine's median against `dd`'s.
///
/// With `early_first`, each round opens the engine serving early before the plain open, not
/// after it (so that a comparison of the two is not one of their places in the round).
fn measure_startup(gib: u64, line: u64, dir: &Path, rounds: usize, early_first: bool) {
    let cfg = cache_config(gib, line, "lru", "always", ENGINE_SHARDS);
    let (cache, backend) = paths(dir, gib, line);
    let layout = Layout::new((cfg.capacity / line) as u32, line);
    let backend_size = std::fs::metadata(&backend).expect("prepared backend").len();
    let ecfg = EngineConfig {
        cache_path: cache.clone(),
        backend_path: backend,
        backend_size: Some(backend_size),
        cache_mapped_reads: false,
        // The cache file stays sparse: only its metadata is written.
        cache_preallocate: false,
        ..EngineConfig::default()
    };
    let blocks = layout.data_offset.div_ceil(1 << 20);
    let probe: u64 = std::fs::read_to_string(probe_path(dir, gib, line))
        .expect("prepared probe")
        .trim()
        .parse()
        .expect("probe line");
    let (mut dd, mut table, mut engine) = (Vec::new(), Vec::new(), Vec::new());
    let (mut first_hit, mut all_ready) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        drop_cached(&cache);
        let t = Instant::now();
        let out = Command::new("dd")
            .arg(format!("if={}", cache.display()))
            .args(["of=/dev/null", "bs=1M", &format!("count={blocks}")])
            .output()
            .expect("run dd");
        assert!(out.status.success(), "dd failed");
        dd.push(t.elapsed().as_secs_f64());

        drop_cached(&cache);
        let dev = FileDevice::open(&cache, layout.device_len()).expect("cache file");
        let t = Instant::now();
        let (_t, found, _) = SlotTable::open(&dev, layout, false).expect("slot table");
        table.push(t.elapsed().as_secs_f64());
        assert_eq!(found.len() as u32, layout.slots, "every slot recovered");
        drop((_t, found, dev));

        let mut plain = || {
            drop_cached(&cache);
            let t = Instant::now();
            let e = Engine::open(&cfg, &ecfg).expect("engine");
            engine.push(t.elapsed().as_secs_f64());
            assert_eq!(e.stats().resident_lines, u64::from(layout.slots));
            drop(e);
        };
        let mut early = || {
            // Serving before the scan ends (docs/design.md §13): the open started and, from
            // another thread at once, a read of the probe line, timed until it is answered; and
            // the time until every shard is ready (the whole open).
            drop_cached(&cache);
            let t = Instant::now();
            let opening = Engine::open_early(&cfg, &ecfg, &[]);
            let hit = std::thread::scope(|s| {
                let reader = s.spawn(|| {
                    let mut buf = vec![0u8; line as usize];
                    opening.read(&mut buf, probe * line).expect("probe read");
                    let at = t.elapsed().as_secs_f64();
                    assert!(buf == probe_bytes(line), "the probe line's bytes");
                    at
                });
                let e = opening.wait().expect("engine");
                all_ready.push(t.elapsed().as_secs_f64());
                assert_eq!(e.stats().resident_lines, u64::from(layout.slots));
                reader.join().expect("probe reader")
            });
            first_hit.push(hit);
            drop(opening);
        };
        if early_first {
            early();
            plain();
        } else {
            plain();
            early();
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (dd, table, engine) = (median(&mut dd), median(&mut table), median(&mut engine));
    let (first_hit, all_ready) = (median(&mut first_hit), median(&mut all_ready));
    println!(
        "{}",
        serde_json::json!({
            "what": "startup", "gib": gib, "line_size": line, "lines": layout.slots,
            "metadata_bytes": layout.data_offset, "rounds": rounds,
            "dd_seconds": dd, "slot_table_seconds": table, "engine_open_seconds": engine,
            "engine_over_dd": engine / dd,
            "first_hit_seconds": first_hit, "all_ready_seconds": all_ready,
            "first_hit_over_dd": first_hit / dd, "all_ready_over_dd": all_ready / dd,
        })
    );
}

/// Fills the simulator's policy core (hit-ratio-only) and prints its memory.
fn measure_core(gib: u64, line: u64, evict: &str, promo: &str) {
    let cfg = cache_config(gib, line, evict, promo, 1);
    let before = rss_anon();
    let mut cache = Cache::new(&cfg).expect("cache");
    let lines = cache.capacity_lines();
    for _pass in 0..2 {
        for i in 0..lines {
            cache
                .access(&Request::read(i * line, line), None)
                .expect("request");
        }
        if cache.resident_lines() == lines {
            break;
        }
    }
    let after = rss_anon();
    let m = cache.metadata_memory();
    let n = lines as f64;
    println!(
        "{}",
        serde_json::json!({
            "what": "core", "gib": gib, "line_size": line, "eviction": evict,
            "promotion": promo, "lines": lines, "resident": cache.resident_lines(),
            "rss_anon_per_line": (after - before) as f64 / n,
            "heap_per_line": m.total() as f64 / n,
            "core": per_line(&m, n),
        })
    );
}

fn child(args: &[String]) -> serde_json::Value {
    let out = Command::new(std::env::current_exe().expect("own path"))
        .arg("--child")
        .args(args)
        .output()
        .expect("run the measuring child");
    assert!(
        out.status.success(),
        "child {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    serde_json::from_str(text.trim()).expect("child's JSON")
}

fn list<'a>(args: &'a [String], flag: &str, default: &'a str) -> Vec<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .map_or(default, |i| {
            args.get(i + 1).expect("a value after the flag")
        })
        .split(',')
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        let num = |i: usize| args[i].parse::<u64>().expect("number");
        match args[1].as_str() {
            "prepare" => prepare(num(2), num(3), Path::new(&args[4])),
            "engine" => measure_engine(num(2), num(3), &args[4], &args[5], Path::new(&args[6])),
            "core" => measure_core(num(2), num(3), &args[4], &args[5]),
            "startup" => measure_startup(
                num(2),
                num(3),
                Path::new(&args[4]),
                num(5) as usize,
                args.get(6).is_some_and(|a| a == "early-first"),
            ),
            other => panic!("unknown child {other}"),
        }
        return;
    }
    let gibs = list(&args, "--gib", "1,8");
    let line_sizes = list(&args, "--line", "4096,65536");
    let evictions = list(&args, "--eviction", "lru,clock,s3-fifo,arc");
    let promotions = list(&args, "--promotion", "always,nhit,smq");
    let what = list(&args, "--what", "engine,core");
    let dir = list(&args, "--dir", "/tmp")[0].to_string();
    let json = args.iter().any(|a| a == "--json");
    if what == ["startup"] {
        let rounds = list(&args, "--rounds", "3")[0].to_string();
        println!(
            "{:>4} {:>6} {:>9} {:>9} {:>8} {:>8} {:>8} {:>7} {:>8} {:>8} {:>7}",
            "GiB",
            "line",
            "lines",
            "meta_MiB",
            "dd_s",
            "table_s",
            "open_s",
            "open/dd",
            "hit_s",
            "ready_s",
            "hit/dd"
        );
        for &gib in &gibs {
            for &line in &line_sizes {
                child(&["prepare".into(), gib.into(), line.into(), dir.clone()]);
                let r = child(&[
                    "startup".into(),
                    gib.into(),
                    line.into(),
                    dir.clone(),
                    rounds.clone(),
                ]);
                if json {
                    println!("{r}");
                } else {
                    let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
                    println!(
                        "{:>4} {:>6} {:>9} {:>9.1} {:>8.3} {:>8.3} {:>8.3} {:>7.2} {:>8.3} {:>8.3} {:>7.2}",
                        gib,
                        line,
                        r["lines"],
                        f("metadata_bytes") / (1 << 20) as f64,
                        f("dd_seconds"),
                        f("slot_table_seconds"),
                        f("engine_open_seconds"),
                        f("engine_over_dd"),
                        f("first_hit_seconds"),
                        f("all_ready_seconds"),
                        f("first_hit_over_dd"),
                    );
                }
                let (cache, backend) = paths(
                    Path::new(&dir),
                    gib.parse().expect("GiB"),
                    line.parse().expect("line"),
                );
                let _ = std::fs::remove_file(cache);
                let _ = std::fs::remove_file(backend);
                let _ = std::fs::remove_file(probe_path(
                    Path::new(&dir),
                    gib.parse().expect("GiB"),
                    line.parse().expect("line"),
                ));
            }
        }
        return;
    }
    if !json {
        println!(
            "{:6} {:>4} {:>6} {:8} {:7} {:>9} {:>8} {:>8} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>7} {:>7}",
            "what", "GiB", "line", "evict", "promo", "lines", "anon/ln", "heap/ln", "entries",
            "index", "dirty", "evict", "promo", "other", "slots", "open_s", "read_s"
        );
    }
    for &gib in &gibs {
        for &line in &line_sizes {
            let mut read_seconds = None;
            if what.contains(&"engine") {
                let p = child(&["prepare".into(), gib.into(), line.into(), dir.clone()]);
                read_seconds = p["read_seconds"].as_f64();
            }
            for &w in &what {
                for &e in &evictions {
                    for &p in &promotions {
                        let mut a: Vec<String> =
                            vec![w.into(), gib.into(), line.into(), e.into(), p.into()];
                        if w == "engine" {
                            a.push(dir.clone());
                        }
                        let mut r = child(&a);
                        if json {
                            r["metadata_read_seconds"] = read_seconds.into();
                            println!("{r}");
                            continue;
                        }
                        let c = &r["core"];
                        let f = |v: &serde_json::Value| v.as_f64().unwrap_or(0.0);
                        let other = f(&c["free_slots"])
                            + f(&c["partitions"])
                            + f(&c["journal"])
                            + f(&r["ordering"]);
                        println!(
                            "{:6} {:>4} {:>6} {:8} {:7} {:>9} {:>8.1} {:>8.1} {:>7.1} {:>6.1} {:>6.1} {:>6.1} {:>6.1} {:>6.1} {:>6.1} {:>7} {:>7}",
                            w, gib, line, e, p, r["lines"], f(&r["rss_anon_per_line"]),
                            f(&r["heap_per_line"]), f(&c["line_entries"]), f(&c["index"]),
                            f(&c["dirty_list"]), f(&c["eviction"]), f(&c["promotion"]), other,
                            f(&r["slot_table"]),
                            r["open_seconds"].as_f64().map_or("-".into(), |s| format!("{s:.3}")),
                            if w == "engine" { read_seconds.map_or("-".into(), |s| format!("{s:.3}")) } else { "-".into() },
                        );
                    }
                }
            }
            if what.contains(&"engine") {
                let (c, b) = paths(Path::new(&dir), gib.parse().unwrap(), line.parse().unwrap());
                let _ = std::fs::remove_file(c);
                let _ = std::fs::remove_file(b);
            }
        }
    }
}
