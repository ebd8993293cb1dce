//! What an installed `tiercache` needs beside the binary, generated from the command's own
//! definition so it never drifts from it: shell completions (`tiercache completions SHELL`,
//! clap_complete) and man pages (`tiercache man [DIR]`, clap_mangen).

use anyhow::{Context, Result};
use clap::Args;
use clap_complete::Shell;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `tiercache completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell. Install, e.g. for bash:
    /// `tiercache completions bash > ~/.local/share/bash-completion/completions/tiercache`.
    pub shell: Shell,
}

/// Arguments of `tiercache man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Directory to write tiercache.1 and tiercache-COMMAND.1 into (created if missing);
    /// without it, tiercache.1 is printed. Install, e.g.:
    /// `tiercache man ~/.local/share/man/man1`.
    pub dir: Option<PathBuf>,
}

/// `tiercache completions SHELL`: the script on stdout.
pub fn completions(args: CompletionsArgs, mut cmd: clap::Command) -> Result<()> {
    let mut out = std::io::stdout().lock();
    clap_complete::generate(args.shell, &mut cmd, "tiercache", &mut out);
    out.flush()?;
    Ok(())
}

/// `tiercache man [DIR]`.
pub fn man(args: ManArgs, cmd: clap::Command) -> Result<()> {
    let Some(dir) = args.dir else {
        let mut out = std::io::stdout().lock();
        clap_mangen::Man::new(cmd).render(&mut out)?;
        return Ok(());
    };
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("man page directory {}", dir.display()))?;
    let written = write_pages(&cmd, &dir, "")?;
    eprintln!("tiercache man: {written} pages in {}", dir.display());
    Ok(())
}

/// Writes `cmd`'s page and its subcommands' (named `tiercache-sub-subsub.1`); how many.
fn write_pages(cmd: &clap::Command, dir: &std::path::Path, prefix: &str) -> Result<usize> {
    let name = if prefix.is_empty() {
        cmd.get_name().to_string()
    } else {
        format!("{prefix}-{}", cmd.get_name())
    };
    let page = dir.join(format!("{name}.1"));
    let mut buf = Vec::new();
    // The page's title is the full command name, so `man tiercache-sim` shows what it runs.
    clap_mangen::Man::new(cmd.clone())
        .title(name.clone())
        .render(&mut buf)?;
    std::fs::write(&page, buf).with_context(|| format!("writing {}", page.display()))?;
    let mut n = 1;
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        n += write_pages(sub, dir, &name)?;
    }
    Ok(n)
}
