//! Errors of the runners, and how an error reaches the user.
//!
//! A runner's messages are chains of causes (a run's name, then the config key, then the OS
//! error), built with `anyhow` context inside the runners; at their boundary a [`RunError`]
//! says which kind of failure it is: bad input (the command exits 2, Python raises
//! `InputError`) or anything else (exit 1). [`render`] prints a chain with each cause said once.

/// A runner's failure, by kind; its message and causes are the wrapped chain's.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad input: a config, an argument, a trace, a spec: anything the user can fix in what
    /// they gave.
    #[error(transparent)]
    Input(anyhow::Error),
    /// Anything else: I/O, a run that failed, sweep points that failed.
    #[error(transparent)]
    Failed(anyhow::Error),
}

impl RunError {
    /// Whether the error is bad input (the command's exit code 2).
    pub fn is_input(&self) -> bool {
        matches!(self, RunError::Input(_))
    }

    /// The chain of causes.
    pub fn into_anyhow(self) -> anyhow::Error {
        match self {
            RunError::Input(e) | RunError::Failed(e) => e,
        }
    }
}

impl From<anyhow::Error> for RunError {
    fn from(e: anyhow::Error) -> Self {
        if is_input_error(&e) {
            RunError::Input(e)
        } else {
            RunError::Failed(e)
        }
    }
}

/// The result of a runner.
pub type Result<T, E = RunError> = std::result::Result<T, E>;

/// Whether one cause of a chain is bad input, among the error types of the libraries the
/// runners use.
pub fn is_input_cause(c: &(dyn std::error::Error + 'static)) -> bool {
    if let Some(e) = c.downcast_ref::<RunError>() {
        return e.is_input();
    }
    #[cfg(feature = "engine")]
    if let Some(e) = c.downcast_ref::<tiercache_engine::EngineError>() {
        return !matches!(e, tiercache_engine::EngineError::Io(_));
    }
    c.is::<tiercache_config::ConfigError>()
        || c.is::<tiercache_trace::TraceError>()
        || c.is::<tiercache_policy::PolicyError>()
        || c.is::<tiercache_sim::SimError>()
        || c.downcast_ref::<tiercache_sweep::SweepError>()
            .is_some_and(|e| !matches!(e, tiercache_sweep::SweepError::PointsFailed { .. }))
}

/// Whether any cause of `err` is bad input (see [`is_input_cause`]).
pub fn is_input_error(err: &anyhow::Error) -> bool {
    err.chain().any(is_input_cause)
}

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

    /// A run error keeps its kind and renders as its chain, wrapped in context or not.
    #[test]
    fn the_kind_survives_the_boundary() {
        let bad = tiercache_config::ConfigError::Invalid {
            context: "t".into(),
            message: "no".into(),
        };
        let e = RunError::from(anyhow::Error::from(bad).context("run `x`"));
        assert!(e.is_input());
        let outer = anyhow::Error::from(e).context("outer");
        assert!(is_input_error(&outer));
        assert!(
            render(&outer).starts_with("outer: run `x`: "),
            "{}",
            render(&outer)
        );
        let io = RunError::from(anyhow::Error::from(std::io::Error::other("disk")));
        assert!(!io.is_input());
    }
}
