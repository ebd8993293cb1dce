//! How an error reaches the user: its chain of causes, each said once
//! ([`tiercache_run::errors::render`]), and the exit code of its kind.

pub use tiercache_run::errors::render;

/// The exit code of a failed command: 2 for bad input (a config, an argument, a trace, a spec:
/// anything the user can fix in what they gave), 1 for anything else (I/O, failed points).
pub fn exit_code(err: &anyhow::Error) -> u8 {
    let input_error = err.chain().any(|c| {
        // The runners' kinds (config, trace, policy, simulator, sweep, engine errors).
        tiercache_run::errors::is_input_cause(c)
            || c.is::<tiercache_report::ReportError>()
            || c.downcast_ref::<tiercache_analyze::AnalyzeError>()
                .is_some_and(tiercache_analyze::AnalyzeError::is_input_error)
            || c.is::<crate::mount_cmd::BadMountArgument>()
    });
    if input_error {
        2
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A runner's bad input exits 2 through the command's context; other failures exit 1.
    #[test]
    fn runner_errors_keep_their_exit_code() {
        let bad = tiercache_run::experiment::load_str("[cache]\nline_size = \"x\"\n", "t", &[])
            .expect_err("a bad line size");
        let e = anyhow::Error::from(bad).context("outer");
        assert_eq!(exit_code(&e), 2, "{}", render(&e));
        assert_eq!(exit_code(&anyhow::anyhow!("disk on fire")), 1);
    }
}
