//! `tiercache serve`: the real cache over NBD; `tiercache flush`: detach (write every dirty
//! line back so the backend alone is complete). The lifecycle is `tiercache_server`'s; this
//! is the arguments around it.

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use tiercache_server::config::load;
use tiercache_server::Server;

/// Arguments of `tiercache serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Config (TOML) with `[cache]` (as for `sim`), `[engine]` and `[serve]`. Without it, the
    /// embedded examples/serve.toml.
    pub config: Option<PathBuf>,
    /// Override a config key: `--set engine.backend_path=/dev/sdb` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// `--quiet`: no notes in the server's log; `--json`: the engine's final counters as one
    /// JSON document on stdout once the server stops.
    #[command(flatten)]
    pub output: crate::output::OutputArgs,
}

/// Arguments of `tiercache flush`.
#[derive(Debug, Args)]
pub struct FlushArgs {
    /// The config the cache was served with.
    pub config: Option<PathBuf>,
    /// Override a config key (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Flush a running server's cache while it serves (over its control socket) instead of a
    /// stopped one's.
    #[arg(long)]
    pub live: bool,
    /// With --live: turn the cache write-through first, so no new line becomes dirty and the
    /// drain ends under any load.
    #[arg(long, requires = "live")]
    pub write_through: bool,
    /// With --live: the server's control socket (instead of finding it from the config).
    #[arg(long, value_name = "PATH", requires = "live")]
    pub control: Option<PathBuf>,
    /// `--quiet`: no progress lines (with --live); `--json`: what was written back as one
    /// JSON document on stdout.
    #[command(flatten)]
    pub output: crate::output::OutputArgs,
}

/// Serves until SIGINT/SIGTERM or the configured duration; then stops accepting, lets open
/// requests finish, makes everything durable (or detaches) and writes the final counters.
pub fn run(args: ServeArgs) -> Result<()> {
    let setup = load(args.config.as_deref(), &args.overrides)?;
    let mut builder = Server::builder(setup).stop_on_signals();
    if args.output.quiet {
        // Notes (`note: …`) only: the rest of the log is the server's account of itself.
        builder = builder.log(|m: &str| {
            if !m.starts_with("note:") {
                eprintln!("tiercache serve: {m}");
            }
        });
    }
    let report = builder.start()?.wait()?;
    if args.output.json {
        println!("{}", serde_json::json!({ "engine": report.engine }));
    }
    Ok(())
}

/// `tiercache flush`: opens the cache (recovering it), writes every dirty line back and
/// syncs the backend.
pub fn flush(args: FlushArgs) -> Result<()> {
    if args.live {
        let server = crate::control_cmd::ServerArgs {
            config: args.config,
            overrides: args.overrides,
            control: args.control,
        };
        return crate::control_cmd::flush_live(&server, args.write_through, args.output);
    }
    let setup = load(args.config.as_deref(), &args.overrides)?;
    let done = tiercache_server::flush::flush(&setup)?;
    let backends = if setup.serve.exports.is_empty() {
        format!("the backend {} is", setup.engine.backend_path.display())
    } else {
        let names: Vec<String> = setup
            .serve
            .exports
            .iter()
            .map(|e| e.backend_path.display().to_string())
            .collect();
        format!("the backends {} are", names.join(", "))
    };
    if args.output.json {
        println!(
            "{}",
            serde_json::json!({"dirty_lines": done.dirty_lines, "flushed_lines": done.flushed_lines})
        );
    } else {
        println!(
            "flushed {} dirty lines ({} written back); {backends} complete",
            done.dirty_lines, done.flushed_lines,
        );
    }
    Ok(())
}
