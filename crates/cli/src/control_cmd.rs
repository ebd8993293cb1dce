//! The operator's commands on a running `tiercache serve`, over its control socket
//! (`tiercache_server::control`): `status`, `stats`, `set`, `flush --live` and `detach`, in the
//! spirit of Open CAS's `casadm`. Each finds the socket from `--control PATH`, or from the
//! config the server was started with (`serve.control_socket`, by default the NBD socket's
//! path with `.ctl` appended).

use anyhow::Result;
use clap::Args;
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use tiercache_server::control::{Client, Progress, Request, Status};

/// Which server: its config, or its control socket.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// The config the server was started with (without it and without --control: the
    /// embedded examples/serve.toml's socket).
    pub config: Option<PathBuf>,
    /// Override a config key, as given to `serve` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// The server's control socket (instead of finding it from the config).
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
}

impl ServerArgs {
    /// A client of the server's control socket.
    pub fn client(&self) -> Result<Client> {
        if let Some(p) = &self.control {
            return Ok(Client::new(p.clone()));
        }
        let setup = tiercache_server::config::load(self.config.as_deref(), &self.overrides)?;
        Ok(Client::new(setup.serve.control_path()))
    }
}

/// Arguments of `tiercache status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Which server.
    #[command(flatten)]
    pub server: ServerArgs,
    /// `--json`: the status as one JSON object (`--quiet` is accepted: nothing is printed on
    /// stderr but errors).
    #[command(flatten)]
    pub output: crate::output::OutputArgs,
}

/// Arguments of `tiercache stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Which server.
    #[command(flatten)]
    pub server: ServerArgs,
    /// `--json`: every counter as one JSON object (`--quiet` is accepted: nothing is printed
    /// on stderr but errors).
    #[command(flatten)]
    pub output: crate::output::OutputArgs,
}

/// Arguments of `tiercache set`.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// Settings, spelled as `--set` spells them: `cache.write_policy=write-through`,
    /// `cache.cleaning={policy="threshold",high=0.5,low=0.2}`, `cache.promotion.policy=always`,
    /// `cache.admission={policy="tinylfu"}`,
    /// `cache.balancing.policy=lbica`, `exports.NAME.write_policy=write-around`,
    /// `exports.NAME.partition=64MiB` (a cache whose tenancy mode is `shared`).
    #[arg(required = true, value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
    /// The server's control socket (default: the embedded serve config's).
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
    /// The config the server was started with, to find its control socket.
    #[arg(long, value_name = "CONFIG")]
    pub config: Option<PathBuf>,
    /// `--json`: the status afterwards as one JSON object (`--quiet` is accepted: nothing is
    /// printed on stderr but errors).
    #[command(flatten)]
    pub output: crate::output::OutputArgs,
}

/// Arguments of `tiercache detach`.
#[derive(Debug, Args)]
pub struct DetachArgs {
    /// Which server.
    #[command(flatten)]
    pub server: ServerArgs,
    /// `--quiet`: no progress lines; `--json`: the outcome as one JSON object.
    #[command(flatten)]
    pub output: crate::output::OutputArgs,
}

/// `tiercache status`.
pub fn status(args: StatusArgs) -> Result<()> {
    let v = args.server.client()?.call(&Request::Status, |_| {})?;
    let mut out = std::io::stdout().lock();
    if args.output.json {
        writeln!(out, "{v}")?;
        return Ok(());
    }
    let s: Status = serde_json::from_value(v)?;
    write!(out, "{}", render_status(&s))?;
    Ok(())
}

/// `tiercache stats`.
pub fn stats(args: StatsArgs) -> Result<()> {
    let v = args.server.client()?.call(&Request::Stats, |_| {})?;
    let mut out = std::io::stdout().lock();
    if args.output.json {
        writeln!(out, "{v}")?;
    } else {
        write!(out, "{}", render_stats(&v))?;
    }
    Ok(())
}

/// `tiercache set`.
pub fn set(args: SetArgs) -> Result<()> {
    let server = ServerArgs {
        config: args.config,
        overrides: Vec::new(),
        control: args.control,
    };
    let v = server.client()?.call(
        &Request::Set {
            settings: args.settings,
        },
        |_| {},
    )?;
    let mut out = std::io::stdout().lock();
    if args.output.json {
        writeln!(out, "{}", v["status"])?;
        return Ok(());
    }
    for line in v["set"].as_array().into_iter().flatten() {
        writeln!(out, "{}", line.as_str().unwrap_or_default())?;
    }
    let s: Status = serde_json::from_value(v["status"].clone())?;
    write!(out, "{}", render_policy(&s))?;
    Ok(())
}

/// `tiercache flush --live`: drains a running server's dirty lines.
pub fn flush_live(
    server: &ServerArgs,
    write_through: bool,
    output: crate::output::OutputArgs,
) -> Result<()> {
    let v = server
        .client()?
        .call(&Request::Flush { write_through }, progress(output.quiet))?;
    if output.json {
        println!("{v}");
        return Ok(());
    }
    println!(
        "flushed {} lines while serving; {} dirty now; write policy {}",
        v["flushed_lines"],
        v["dirty_lines"],
        v["write_policy"].as_str().unwrap_or("?")
    );
    Ok(())
}

/// `tiercache detach`.
pub fn detach(args: DetachArgs) -> Result<()> {
    let v = args
        .server
        .client()?
        .call(&Request::Detach, progress(args.output.quiet))?;
    if args.output.json {
        println!("{v}");
        return Ok(());
    }
    println!(
        "detached: {} lines written back while serving; the server {}",
        v["flushed_lines"],
        v["stopped"].as_str().unwrap_or("stopped")
    );
    Ok(())
}

/// Prints a drain's progress on stderr (one line each, so logs keep them).
fn progress(quiet: bool) -> impl FnMut(Progress) {
    move |p: Progress| {
        if !quiet {
            eprintln!(
                "tiercache: flushing: {} lines written back, {} dirty left",
                p.flushed_lines, p.dirty_lines
            );
        }
    }
}

fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn opt_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "-".into(), |r| format!("{r:.3}"))
}

fn opt_num(n: Option<u64>) -> String {
    n.map_or_else(|| "-".into(), |n| n.to_string())
}

/// A policy config (`{"policy": "lazy", "idle_ns": 1000}`) as `lazy (idle_ns 1000)`.
fn policy_text(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let name = m.get("policy").and_then(Value::as_str).unwrap_or("?");
            let rest: Vec<String> = m
                .iter()
                .filter(|(k, _)| *k != "policy")
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            if rest.is_empty() {
                name.to_string()
            } else {
                format!("{name} ({})", rest.join(", "))
            }
        }
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Rows of cells as aligned columns (first column left, the rest right-aligned).
fn columns(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect();
        out += cells.join("  ").trim_end();
        out.push('\n');
    }
    out
}

fn render_policy(s: &Status) -> String {
    let p = &s.policy;
    let mut text = format!(
        "policy   {}{}; eviction {}; cleaning {}; promotion {}; admission {}; balancing {}; tenancy {}; {} shard{} ({})\n",
        p.write_policy,
        p.balanced_write_policy
            .as_ref()
            .map_or_else(String::new, |b| format!(" (the balancer has {b} in force)")),
        p.eviction,
        policy_text(&p.cleaning),
        policy_text(&p.promotion),
        policy_text(&p.admission),
        policy_text(&p.balancing),
        p.tenancy,
        p.shards,
        if p.shards == 1 { "" } else { "s" },
        p.lookup,
    );
    let own: Vec<String> = s
        .exports
        .iter()
        .filter(|e| e.write_policy != p.write_policy)
        .map(|e| format!("{} {}", display_name(&e.name), e.write_policy))
        .collect();
    if !own.is_empty() {
        text += &format!(
            "         exports with their own write policy: {}\n",
            own.join(", ")
        );
    }
    text
}

fn display_name(name: &str) -> String {
    if name.is_empty() {
        "(default)".into()
    } else {
        name.to_string()
    }
}

/// The human form of `tiercache status`.
pub fn render_status(s: &Status) -> String {
    let c = &s.cache;
    let mut text = format!(
        "serving  {} (pid {}, up {:.0} s){}\n",
        s.address,
        s.pid,
        s.uptime_s,
        s.metrics_address
            .as_ref()
            .map_or_else(String::new, |m| format!("; metrics on http://{m}/metrics")),
    );
    if let Some(h) = &s.halted {
        text += &format!("HALTED   {h}\n");
    }
    let pct = |n: u64| {
        if c.capacity_lines == 0 {
            0.0
        } else {
            100.0 * n as f64 / c.capacity_lines as f64
        }
    };
    text += &format!(
        "cache    {}: {} lines of {} ({}); {} resident ({:.1}%), {} dirty ({:.1}%); line hit ratio {}\n",
        c.path,
        c.capacity_lines,
        size(c.line_size),
        size(c.capacity_lines * c.line_size),
        c.resident_lines,
        pct(c.resident_lines),
        c.dirty_lines,
        pct(c.dirty_lines),
        opt_ratio(c.hit_ratio),
    );
    text += &format!(
        "queues   {} requests in flight; {} ops queued at the cache device, {} at the backend; {} lines written back so far\n",
        c.in_flight, c.cache_queue_depth, c.backend_queue_depth, c.flushed_lines
    );
    text += &render_policy(s);
    let mut rows = vec![[
        "export",
        "volume",
        "size",
        "reads",
        "writes",
        "read hits",
        "write policy",
        "partition",
        "resident",
        "dirty",
        "in flight",
    ]
    .map(String::from)
    .to_vec()];
    for e in &s.exports {
        rows.push(vec![
            display_name(&e.name),
            e.volume.to_string(),
            size(e.size_bytes),
            e.reads.to_string(),
            e.writes.to_string(),
            opt_ratio(e.read_hit_ratio),
            e.write_policy.clone(),
            e.partition_lines
                .map_or_else(|| "shared".into(), |l| l.to_string()),
            opt_num(e.resident_lines),
            opt_num(e.dirty_lines),
            e.in_flight.to_string(),
        ]);
    }
    text += "\n";
    text += &columns(&rows);
    text
}

/// The human form of `tiercache stats`: the cache's counters, then per export, then the
/// partitions.
pub fn render_stats(v: &Value) -> String {
    let e = &v["engine"];
    let c = &e["cache"];
    let n = |v: &Value| v.as_u64().unwrap_or(0).to_string();
    let mut text = String::from("cache\n");
    let rows: Vec<Vec<String>> = [
        ("reads", &e["reads"]),
        ("writes", &e["writes"]),
        ("read bytes", &e["read_bytes"]),
        ("write bytes", &e["write_bytes"]),
        ("line accesses", &c["line_accesses"]),
        ("line hits", &c["line_hits"]),
        ("line partial hits", &c["line_partial_hits"]),
        ("promotions", &c["promotions"]),
        ("evictions", &c["evictions"]),
        ("dirty evictions", &c["dirty_evictions"]),
        ("lines written back", &e["flushed_lines"]),
        ("flush jobs", &e["flush_jobs"]),
        ("flush job failures", &e["flush_job_failures"]),
        ("resident lines", &e["resident_lines"]),
        ("dirty lines", &e["dirty_lines"]),
        ("errors", &e["errors"]),
    ]
    .iter()
    .map(|(k, v)| vec![format!("  {k}"), n(v)])
    .collect();
    text += &columns(&rows);
    let mut rows = vec![[
        "export",
        "reads",
        "writes",
        "read bytes",
        "write bytes",
        "read hits",
        "read misses",
        "write hits",
        "write misses",
        "read mean µs",
        "read p99 µs",
        "write mean µs",
        "write p99 µs",
        "errors",
    ]
    .map(String::from)
    .to_vec()];
    for x in v["exports"].as_array().into_iter().flatten() {
        let f = |v: &Value| v.as_f64().map_or_else(|| "-".into(), |f| format!("{f:.1}"));
        rows.push(vec![
            display_name(x["name"].as_str().unwrap_or_default()),
            n(&x["reads"]),
            n(&x["writes"]),
            n(&x["read_bytes"]),
            n(&x["write_bytes"]),
            n(&x["read_line_hits"]),
            n(&x["read_line_misses"]),
            n(&x["write_line_hits"]),
            n(&x["write_line_misses"]),
            f(&x["read_latency"]["mean_us"]),
            n(&x["read_latency"]["p99_us"]),
            f(&x["write_latency"]["mean_us"]),
            n(&x["write_latency"]["p99_us"]),
            n(&x["errors"]),
        ]);
    }
    text += "\n";
    text += &columns(&rows);
    let parts = v["partitions"].as_array().cloned().unwrap_or_default();
    if parts.is_empty() {
        text += "\nno partitions: every export shares the cache\n";
    } else {
        let mut rows = vec![["partition of", "volume", "shard", "lines"]
            .map(String::from)
            .to_vec()];
        for p in parts {
            rows.push(vec![
                display_name(p["export"].as_str().unwrap_or_default()),
                n(&p["volume"]),
                n(&p["shard"]),
                n(&p["lines"]),
            ]);
        }
        text += "\n";
        text += &columns(&rows);
    }
    text
}
