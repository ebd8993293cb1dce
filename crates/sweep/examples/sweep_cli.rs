//! Runs a sweep through an external `tiercache sim` binary (one process per point): a way to
//! run real sweeps before the `tiercache sweep` command is wired in, and an end-to-end check of
//! the runner on real records.
//!
//! `TIERCACHE=path/to/tiercache cargo run -p tiercache-sweep --example sweep_cli -- SPEC OUT_DIR [--ci] [-j N]`

use std::path::PathBuf;
use std::process::Command;
use tiercache_sweep::{run_points, PointSpec, RunOptions, SweepSpec};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let spec_path = PathBuf::from(
        args.next()
            .ok_or_else(|| anyhow::anyhow!("usage: sweep_cli SPEC OUT_DIR [--ci] [-j N]"))?,
    );
    let out = PathBuf::from(
        args.next()
            .ok_or_else(|| anyhow::anyhow!("missing OUT_DIR"))?,
    );
    let mut ci = false;
    let mut jobs = 0;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--ci" => ci = true,
            "-j" => {
                jobs = args
                    .next()
                    .ok_or_else(|| anyhow::anyhow!("-j needs N"))?
                    .parse()?
            }
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    let bin = std::env::var("TIERCACHE").unwrap_or_else(|_| "tiercache".into());
    let mut spec = SweepSpec::load(&spec_path)?;
    if ci {
        spec.apply_ci()?;
    }
    let points = spec.expand()?;
    let tmp = out.join("configs");
    std::fs::create_dir_all(&tmp)?;
    let backend = |p: &PointSpec| -> Result<serde_json::Value, String> {
        let mut doc = p.doc.value.clone();
        if let Some(t) = doc.as_table_mut() {
            t.insert("name".into(), toml::Value::String(p.name.clone()));
        }
        // Relative paths in the config resolve against the base's directory: write the file there
        // only in spirit — the shipped experiments use none, so a scratch directory is fine.
        let file = tmp.join(format!("{}.toml", p.id));
        std::fs::write(&file, toml::to_string(&doc).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        let out = Command::new(&bin)
            .arg("sim")
            .arg(&file)
            .arg("--json")
            .output()
            .map_err(|e| format!("{bin}: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().next().ok_or("no output")?;
        serde_json::from_str(line).map_err(|e| e.to_string())
    };
    let opts = RunOptions {
        jobs,
        sweep_name: spec.name.clone(),
        ..RunOptions::new(&out)
    };
    let s = run_points(&points, &backend, &opts)?;
    eprintln!(
        "{} points: {} skipped, {} ok, {} failed -> {}",
        s.total,
        s.skipped,
        s.ok,
        s.failed,
        s.results_jsonl.display()
    );
    Ok(())
}
