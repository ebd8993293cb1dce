//! `tiercache bench` on a trace workload: the trace (its chosen volume) rewritten as a fio
//! iolog in the bench's private directory, replayed by fio against the engine, as fast as
//! `jobs × iodepth` allow (`replay = "fast"`) or at the trace's times divided by `speed`.

use crate::experiment::{ReplayMode, TraceWorkload, VolumeChoice};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use tiercache_core::VolumeId;
use tiercache_trace::{OutputFormat, VolumeMap};

/// Requests in flight when replaying at the trace's times (an open loop needs room for
/// requests that arrive while earlier ones are still in service).
const TIMESTAMP_REPLAY_DEPTH: u32 = 64;

/// A trace prepared for fio.
#[derive(Debug)]
pub struct IologReplay {
    /// fio options replaying it (after the global options).
    pub fio_args: Vec<String>,
    /// Requests in the iolog.
    pub requests: u64,
    /// One past the highest byte the trace touches: the backend must be at least this large.
    pub end: u64,
}

/// Reads the trace (stopping at its first bad record unless `skip_bad`, like `sim`), keeps the
/// volumes the workload chooses, and writes them as a fio v3 iolog at `iolog`. fio drives one
/// export, so the kept requests must come from one volume.
pub fn prepare(t: &TraceWorkload, iolog: &Path) -> Result<IologReplay> {
    let path = t
        .trace
        .to_str()
        .context("workload.trace: path is not UTF-8")?;
    let opts = t.read_options();
    let mut reader = tiercache_trace::open(path, t.format, &opts)
        .with_context(|| format!("workload.trace {}", t.trace.display()))?;
    let out = iolog.to_str().context("bench directory is not UTF-8")?;
    let mut writer = tiercache_trace::create_writer(out, OutputFormat::FioIolog, 4096)?;
    // Every kept request goes to the one export, under one fio file name.
    let mut export = VolumeMap::new();
    let export_id = export.intern(b"export").context("volume map")?;
    let mut choice = VolumeChoice::new(t.volumes.clone());
    let mut kept: Option<VolumeId> = None;
    let (mut requests, mut end) = (0u64, 0u64);
    // Checked when the config was read (`trace_workload`): never replaced here.
    let speed = t.speed;
    anyhow::ensure!(
        speed.is_finite() && speed > 0.0,
        "workload.speed {speed}: must be a finite number > 0"
    );
    while let Some(r) = reader.next() {
        let mut r = r?;
        if !choice.wanted(r.volume, reader.volumes().name(r.volume).unwrap_or("")) {
            continue;
        }
        match kept {
            None => kept = Some(r.volume),
            Some(v) if v != r.volume => bail!(
                "workload.trace {}: bench replays one volume over one export, and this trace has several: choose one with workload.volumes",
                t.trace.display()
            ),
            Some(_) => {}
        }
        r.time_ns = match t.replay {
            ReplayMode::Fast => 0,
            ReplayMode::Timestamps => (r.time_ns as f64 / speed) as u64,
        };
        r.volume = export_id;
        end = end.max(r.offset.saturating_add(r.len));
        writer.write(&r, &export)?;
        requests += 1;
    }
    writer.finish(&export, None)?;
    if requests == 0 {
        bail!(
            "workload.trace {}: no requests to replay (check workload.volumes)",
            t.trace.display()
        );
    }
    for note in tiercache_trace::CounterNotes(reader.counters())
        .to_string()
        .lines()
    {
        crate::print_note(&format!("bench: {note}"));
    }
    let mut fio_args = vec![format!("--read_iolog={}", iolog.display())];
    match t.replay {
        ReplayMode::Fast => {
            fio_args.push("--replay_no_stall=1".into());
            fio_args.push(format!("--iodepth={}", t.jobs.max(1) * t.iodepth.max(1)));
        }
        ReplayMode::Timestamps => {
            fio_args.push(format!("--iodepth={TIMESTAMP_REPLAY_DEPTH}"));
        }
    }
    fio_args.push("--name=replay".into());
    Ok(IologReplay {
        fio_args,
        requests,
        end,
    })
}

/// Where the iolog goes in the bench's directory.
pub fn iolog_path(dir: &Path) -> PathBuf {
    dir.join("trace.iolog")
}
