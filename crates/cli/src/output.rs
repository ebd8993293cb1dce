//! `--quiet` and `--json`, spelled and meaning the same on every command that takes them:
//! `--quiet` prints no progress and no notes on stderr (errors still are), `--json` prints the
//! command's result as JSON on stdout instead of text, nothing else on stdout. Progress bars are
//! drawn only when stderr is a terminal and `--quiet` is not given.

use clap::Args;

/// The output flags every command shares (flattened into its arguments).
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct OutputArgs {
    /// No progress and no notes on stderr (errors still are printed).
    #[arg(long, short)]
    pub quiet: bool,
    /// Print the result as JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

impl OutputArgs {
    /// Makes `--quiet` hold for the whole process: notes printed deep inside runs and progress
    /// bars consult it (`tiercache_run::quiet`).
    pub fn apply(&self) {
        tiercache_run::set_quiet(self.quiet);
    }

    /// Whether to draw a progress bar: stderr is a terminal and not `--quiet`.
    pub fn progress(&self) -> bool {
        use std::io::IsTerminal;
        !self.quiet && std::io::stderr().is_terminal()
    }

    /// Prints a note on stderr unless `--quiet` (`tiercache: note: …`).
    pub fn note(&self, note: &str) {
        if !self.quiet {
            eprintln!("tiercache: note: {note}");
        }
    }
}
