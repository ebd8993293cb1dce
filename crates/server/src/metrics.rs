//! The live counters of a served cache as Prometheus text (exposition format 0.0.4) on an
//! optional HTTP address (`serve.metrics_listen`): `GET /metrics`. Per export (label
//! `export`) and overall: requests, bytes, line hits and misses, allocation, dirty lines,
//! queue depths, latency histograms, backend faults.
//!
//! It serves metrics only: whoever reaches the port reads counters and changes nothing.
//! Operator actions (resizing partitions, changing policies, flushing) go over the control
//! socket ([`crate::control`]), which only the server's user can open. A bare port listens on
//! loopback.

use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tiercache_engine::{Engine, LatencyBuckets};
use tiercache_nbd::ServerStats;

/// What the metrics endpoint reads.
pub struct MetricsSource {
    /// The engine.
    pub engine: Arc<Engine>,
    /// The NBD server's counters.
    pub server: Arc<ServerStats>,
    /// (export name, volume id) of each export.
    pub exports: Vec<(String, u32)>,
}

/// One metric family being written.
struct Family<'a> {
    out: &'a mut String,
    name: String,
}

impl<'a> Family<'a> {
    fn new(out: &'a mut String, name: &str, kind: &str, help: &str) -> Self {
        let name = format!("tiercache_{name}");
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        Self { out, name }
    }
    fn sample(&mut self, labels: &str, v: f64) {
        let _ = if labels.is_empty() {
            writeln!(self.out, "{} {v}", self.name)
        } else {
            writeln!(self.out, "{}{{{labels}}} {v}", self.name)
        };
    }
    fn histogram(&mut self, labels: &str, b: &LatencyBuckets) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (le, c) in b.le_us.iter().zip(&b.cumulative) {
            let _ = writeln!(
                self.out,
                "{}_bucket{{{labels}{sep}le=\"{}\"}} {c}",
                self.name,
                *le as f64 / 1e6
            );
        }
        let _ = writeln!(
            self.out,
            "{}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
            self.name, b.count
        );
        let braces = |s: &str| {
            if s.is_empty() {
                String::new()
            } else {
                format!("{{{s}}}")
            }
        };
        let _ = writeln!(
            self.out,
            "{}_sum{} {}",
            self.name,
            braces(labels),
            b.sum_us / 1e6
        );
        let _ = writeln!(
            self.out,
            "{}_count{} {}",
            self.name,
            braces(labels),
            b.count
        );
    }
}

/// A label value escaped as the text format wants (backslash, quote, newline).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The Prometheus text of the live counters.
pub fn render(src: &MetricsSource) -> String {
    let e = src.engine.stats();
    let vols = src.engine.volume_stats();
    let label = |v: u32| {
        let name = src
            .exports
            .iter()
            .find(|x| x.1 == v)
            .map_or_else(|| v.to_string(), |x| x.0.clone());
        format!("export=\"{}\",volume=\"{v}\"", escape(&name))
    };
    let mut out = String::new();
    type Get = fn(&tiercache_engine::VolumeStats) -> Option<f64>;
    let per_export: [(&str, &str, &str, Get); 13] = [
        ("export_reads_total", "counter", "Reads served.", |v| {
            Some(v.reads as f64)
        }),
        ("export_writes_total", "counter", "Writes served.", |v| {
            Some(v.writes as f64)
        }),
        ("export_read_bytes_total", "counter", "Bytes read.", |v| {
            Some(v.read_bytes as f64)
        }),
        (
            "export_write_bytes_total",
            "counter",
            "Bytes written.",
            |v| Some(v.write_bytes as f64),
        ),
        (
            "export_errors_total",
            "counter",
            "Requests answered with an error.",
            |v| Some(v.errors as f64),
        ),
        (
            "export_read_line_hits_total",
            "counter",
            "Read line accesses served by the cache.",
            |v| Some(v.read_line_hits as f64),
        ),
        (
            "export_read_line_misses_total",
            "counter",
            "Read line accesses that went to the backend.",
            |v| Some(v.read_line_misses as f64),
        ),
        (
            "export_write_line_hits_total",
            "counter",
            "Write line accesses finding their line resident.",
            |v| Some(v.write_line_hits as f64),
        ),
        (
            "export_write_line_misses_total",
            "counter",
            "Write line accesses not finding it.",
            |v| Some(v.write_line_misses as f64),
        ),
        (
            "export_in_flight",
            "gauge",
            "Requests in flight (the export's queue depth at the cache).",
            |v| Some(v.in_flight as f64),
        ),
        (
            "export_partition_lines",
            "gauge",
            "Cache lines allocated to the export's own partition (absent: it shares the cache).",
            |v| v.partition_lines.map(|x| x as f64),
        ),
        (
            "export_resident_lines",
            "gauge",
            "Lines its partition holds.",
            |v| v.resident_lines.map(|x| x as f64),
        ),
        (
            "export_dirty_lines",
            "gauge",
            "Dirty lines its partition holds.",
            |v| v.dirty_lines.map(|x| x as f64),
        ),
    ];
    for (name, kind, help, get) in per_export {
        let mut f = Family::new(&mut out, name, kind, help);
        for v in &vols {
            if let Some(x) = get(v) {
                f.sample(&label(v.volume), x);
            }
        }
    }
    let mut f = Family::new(
        &mut out,
        "export_read_latency_seconds",
        "histogram",
        "Read latency per export.",
    );
    for v in &vols {
        f.histogram(&label(v.volume), &v.read_latency_buckets);
    }
    let mut f = Family::new(
        &mut out,
        "export_write_latency_seconds",
        "histogram",
        "Write latency per export.",
    );
    for v in &vols {
        f.histogram(&label(v.volume), &v.write_latency_buckets);
    }
    if let Some(t) = src.engine.tenancy_report() {
        let mut f = Family::new(
            &mut out,
            "export_write_back",
            "gauge",
            "1 while the tenancy mode lets the export's writes into the cache (write-back), 0 \
             while it sends them around it.",
        );
        for v in &t.volumes {
            let wb = v.write_policy == tiercache_policy::WritePolicy::WriteBack;
            f.sample(&label(v.volume), f64::from(u8::from(wb)));
        }
        let mut f = Family::new(
            &mut out,
            "export_demand_lines",
            "gauge",
            "Lines the tenancy mode found the export would use well in its last interval.",
        );
        for v in &t.volumes {
            f.sample(&label(v.volume), v.demand_lines as f64);
        }
        Family::new(
            &mut out,
            "tenancy_decisions_total",
            "counter",
            "Interval decisions of the tenancy mode.",
        )
        .sample("", t.decisions as f64);
    }
    let link = e.backend_link.as_ref();
    let overall: [(&str, &str, &str, f64); 26] = [
        ("reads_total", "counter", "Reads served.", e.reads as f64),
        ("writes_total", "counter", "Writes served.", e.writes as f64),
        (
            "read_bytes_total",
            "counter",
            "Bytes read.",
            e.read_bytes as f64,
        ),
        (
            "write_bytes_total",
            "counter",
            "Bytes written.",
            e.write_bytes as f64,
        ),
        (
            "line_hits_total",
            "counter",
            "Line accesses finding all their data cached.",
            e.cache.line_hits as f64,
        ),
        (
            "line_accesses_total",
            "counter",
            "Line accesses.",
            e.cache.line_accesses as f64,
        ),
        (
            "errors_total",
            "counter",
            "Requests answered with an error.",
            e.errors as f64,
        ),
        (
            "capacity_lines",
            "gauge",
            "Cache lines.",
            e.capacity_lines as f64,
        ),
        (
            "resident_lines",
            "gauge",
            "Lines holding data.",
            e.resident_lines as f64,
        ),
        (
            "dirty_lines",
            "gauge",
            "Lines holding dirty data.",
            e.dirty_lines as f64,
        ),
        (
            "in_flight",
            "gauge",
            "Requests in flight.",
            e.in_flight as f64,
        ),
        (
            "cache_queue_depth",
            "gauge",
            "Operations queued at the cache device.",
            e.executor.cache.queued as f64,
        ),
        (
            "backend_queue_depth",
            "gauge",
            "Operations queued at the backend.",
            e.executor.backend.queued as f64,
        ),
        (
            "flushed_lines_total",
            "counter",
            "Dirty lines written back.",
            e.flushed_lines as f64,
        ),
        (
            "flush_jobs_total",
            "counter",
            "Background flush jobs run.",
            e.flush_jobs as f64,
        ),
        (
            "backend_flush_job_failures_total",
            "counter",
            "Flush jobs the backend failed (lines kept dirty).",
            e.flush_job_failures as f64,
        ),
        (
            "backend_link_retries_total",
            "counter",
            "Remote backend request retries.",
            link.map_or(0.0, |l| l.retries as f64),
        ),
        (
            "backend_link_timeouts_total",
            "counter",
            "Remote backend request timeouts.",
            link.map_or(0.0, |l| l.timeouts as f64),
        ),
        (
            "backend_link_losses_total",
            "counter",
            "Remote backend connection losses.",
            link.map_or(0.0, |l| l.connection_losses as f64),
        ),
        (
            "nbd_eio_total",
            "counter",
            "EIO replies sent to NBD clients.",
            src.server.eio.load(Relaxed) as f64,
        ),
        (
            "nbd_connections_total",
            "counter",
            "NBD connections accepted.",
            src.server.connections.load(Relaxed) as f64,
        ),
        (
            "nbd_tls_handshakes_total",
            "counter",
            "TLS sessions set up (NBD_OPT_STARTTLS and a completed TLS handshake).",
            src.server.tls_sessions.load(Relaxed) as f64,
        ),
        (
            "nbd_tls_handshake_failures_total",
            "counter",
            "TLS handshakes that failed (a certificate refused either way, a peer speaking no TLS).",
            src.server.tls_handshake_failures.load(Relaxed) as f64,
        ),
        (
            "nbd_tls_required_total",
            "counter",
            "Options refused with NBD_REP_ERR_TLS_REQD (or connections closed) before TLS.",
            src.server.tls_required.load(Relaxed) as f64,
        ),
        (
            "nbd_authz_refusals_total",
            "counter",
            "Exports refused to a TLS client whose identity may not use them.",
            src.server.authz_refusals.load(Relaxed) as f64,
        ),
        (
            "halted",
            "gauge",
            "1 once the engine halted (fail-stop; restart to recover).",
            e.halted.is_some() as u8 as f64,
        ),
    ];
    for (name, kind, help, v) in overall {
        Family::new(&mut out, name, kind, help).sample("", v);
    }
    // Device health and degraded mode (docs/design.md §11).
    let h = &e.health;
    Family::new(
        &mut out,
        "degraded",
        "gauge",
        "1 while the cache serves in pass-through after cache-device errors.",
    )
    .sample("", h.degraded as u8 as f64);
    let mut f = Family::new(
        &mut out,
        "degraded_transitions_total",
        "counter",
        "Entries into degraded mode and returns to service.",
    );
    f.sample("direction=\"entered\"", h.degraded_entered as f64);
    f.sample("direction=\"left\"", h.degraded_left as f64);
    Family::new(
        &mut out,
        "served_past_cache_total",
        "counter",
        "Requests a cache-device error failed that were served from the backend.",
    )
    .sample("", h.served_past_cache as f64);
    let mut f = Family::new(
        &mut out,
        "device_errors_total",
        "counter",
        "Device errors by device, op and kind (eio, enospc, other).",
    );
    for c in &h.errors {
        f.sample(
            &format!(
                "device=\"{}\",op=\"{}\",kind=\"{}\"",
                c.device.name(),
                c.op.name(),
                c.class.name()
            ),
            c.count as f64,
        );
    }
    let (r, w) = src.engine.latency_buckets();
    Family::new(
        &mut out,
        "read_latency_seconds",
        "histogram",
        "Read latency.",
    )
    .histogram("", &r);
    Family::new(
        &mut out,
        "write_latency_seconds",
        "histogram",
        "Write latency.",
    )
    .histogram("", &w);
    out
}

fn handle(src: &MetricsSource, req: tiny_http::Request) {
    let url = req.url().to_string();
    let path = url.split_once('?').map_or(url.as_str(), |(p, _)| p);
    let text = |code: u16, body: String, kind: &str| {
        tiny_http::Response::from_string(body)
            .with_status_code(code)
            .with_header(
                tiny_http::Header::from_bytes(&b"Content-Type"[..], kind.as_bytes())
                    .expect("a valid header"),
            )
    };
    let plain = "text/plain; charset=utf-8";
    let resp = match (req.method(), path) {
        (tiny_http::Method::Get, "/metrics") => {
            text(200, render(src), "text/plain; version=0.0.4; charset=utf-8")
        }
        (_, "/metrics") => text(
            405,
            "GET /metrics only: the metrics listener changes nothing (operator actions go over the control socket: `tiercache set`)\n".into(),
            plain,
        ),
        (tiny_http::Method::Post, "/partitions") => text(
            404,
            "partitions are resized over the control socket: `tiercache set exports.NAME.partition=SIZE`\n".into(),
            plain,
        ),
        _ => text(404, "GET /metrics\n".into(), plain),
    };
    let _ = req.respond(resp);
}

/// A running metrics listener.
pub struct MetricsServer {
    /// The address it listens on.
    pub addr: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens on `listen` (e.g. `127.0.0.1:9100`, or a bare port on loopback; port 0 picks
    /// one) and serves `src`.
    pub fn start(listen: &str, src: MetricsSource) -> Result<Self> {
        let bind = if listen.parse::<u16>().is_ok() {
            format!("127.0.0.1:{listen}")
        } else {
            listen.to_string()
        };
        let server = tiny_http::Server::http(&bind)
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("serve.metrics_listen {listen}"))?;
        let addr = server
            .server_addr()
            .to_ip()
            .map_or_else(|| listen.to_string(), |a| a.to_string());
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("tiercache-metrics".into())
            .spawn(move || {
                while !flag.load(Relaxed) {
                    match server.recv_timeout(Duration::from_millis(100)) {
                        Ok(Some(req)) => handle(&src, req),
                        Ok(None) => {}
                        Err(_) => std::thread::sleep(Duration::from_millis(100)),
                    }
                }
            })?;
        Ok(Self {
            addr,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
