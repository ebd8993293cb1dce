//! How an error reaches the user: its chain of causes, each said once.

/// The error's messages from the outermost context to the root cause, joined by `": "`, each
/// said once. Many error types print their cause inside their own message *and* return it as
/// their `source()` (thiserror does both for a field named `source` shown in the format), so
/// printing the chain naively repeats the root cause
/// (`x: No such file or directory (os error 2): No such file or directory (os error 2)`). A
/// cause already said as a whole segment of the message so far (after a `": "`, possibly with
/// more detail after it) adds nothing and is left out; the fix is here, once, rather than in
/// every error type.
pub fn render(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if text.is_empty() || out == text || out.contains(&format!(": {text}")) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// The exit code of a failed command: 2 for bad input (a config, an argument, a trace, a spec:
/// anything the user can fix in what they gave), 1 for anything else (I/O, failed points).
pub fn exit_code(err: &anyhow::Error) -> u8 {
    let input_error = err.chain().any(|c| {
        c.is::<tiercache_config::ConfigError>()
            || c.is::<tiercache_trace::TraceError>()
            || c.is::<tiercache_policy::PolicyError>()
            || c.is::<tiercache_sim::SimError>()
            || c.downcast_ref::<tiercache_sweep::SweepError>()
                .is_some_and(|e| !matches!(e, tiercache_sweep::SweepError::PointsFailed { .. }))
            || c.is::<tiercache_report::ReportError>()
            || c.downcast_ref::<tiercache_analyze::AnalyzeError>()
                .is_some_and(tiercache_analyze::AnalyzeError::is_input_error)
            || c.is::<crate::mount_cmd::BadMountArgument>()
            || c.downcast_ref::<tiercache_engine::EngineError>()
                .is_some_and(|e| !matches!(e, tiercache_engine::EngineError::Io(_)))
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

    #[derive(Debug, thiserror::Error)]
    #[error("opening {path}: {source}")]
    struct Open {
        path: String,
        source: std::io::Error,
    }

    #[test]
    fn a_cause_printed_by_its_parent_is_said_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let said = io.to_string();
        let e = anyhow::Error::from(Open {
            path: "/nonexist.toml".into(),
            source: io,
        })
        .context("loading the config");
        let text = render(&e);
        assert_eq!(text.matches(&said).count(), 1, "{text}");
        assert!(text.starts_with("loading the config: opening /nonexist.toml: "));
        // The naive rendering repeats it: this is what the function exists to avoid.
        assert_eq!(format!("{e:#}").matches(&said).count(), 2);
    }

    #[test]
    fn distinct_causes_are_all_kept() {
        let e = anyhow::anyhow!("root cause")
            .context("middle")
            .context("outer");
        assert_eq!(render(&e), "outer: middle: root cause");
    }
}
