//! Writes every point of a sweep spec as a standalone config file, for inspecting a spec or
//! running points by hand with `tiercache sim FILE`:
//!
//! `cargo run -p tiercache-sweep --example expand -- SPEC OUT_DIR [--ci] [--set KEY=VALUE ...]`

use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let spec_path = PathBuf::from(
        args.next()
            .ok_or_else(|| anyhow::anyhow!("usage: expand SPEC OUT_DIR [--ci] [--set K=V]"))?,
    );
    let out = PathBuf::from(
        args.next()
            .ok_or_else(|| anyhow::anyhow!("missing OUT_DIR"))?,
    );
    let mut ci = false;
    let mut set = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--ci" => ci = true,
            "--set" => set.push(
                args.next()
                    .ok_or_else(|| anyhow::anyhow!("--set needs KEY=VALUE"))?,
            ),
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    let mut spec = tiercache_sweep::SweepSpec::load(&spec_path)?;
    if ci {
        spec.apply_ci()?;
    }
    spec.apply_overrides(&set)?;
    let points = spec.expand()?;
    std::fs::create_dir_all(&out)?;
    for p in &points {
        let file = out.join(format!("{:04}-{}.toml", p.index, p.id));
        let mut doc = p.doc.value.clone();
        if let Some(t) = doc.as_table_mut() {
            t.insert(
                "name".into(),
                toml::Value::String(format!("{}/{}", p.workload, p.name)),
            );
        }
        std::fs::write(&file, toml::to_string(&doc)?)?;
        println!("{}\t{}\t{}\t{}", file.display(), p.workload, p.rep, p.name);
    }
    eprintln!("{} points written to {}", points.len(), out.display());
    Ok(())
}
