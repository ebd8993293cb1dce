//! What the command line's `--set` may change in a sweep: keys of the base that nothing else
//! sets. An axis, a workload's `set` and the spec's `seed` are applied over the base for every
//! point, so a `--set` on one of their keys would be silently undone (and the points, then
//! unchanged, would count as already done): such a `--set` is refused.

use crate::spec::{spec_err, SweepSpec};
use crate::SweepError;

/// The key path of a `key=value` override, one trimmed part per component.
fn key_parts(text: &str) -> Vec<&str> {
    let key = text.split_once('=').map_or(text, |(k, _)| k);
    key.split('.').map(str::trim).collect()
}

/// True when one path is the other or lies inside it (`cache` and `cache.line_size`).
fn overlaps(a: &[&str], b: &[&str]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

impl SweepSpec {
    /// What sets `key` (or a key inside it, or a table holding it) for every point, when
    /// anything does: an axis, a workload's `set`, or the spec's `seed` at `seed_key`.
    pub fn setter_of(&self, key: &str) -> Option<String> {
        let parts = key_parts(key);
        for axis in &self.axes {
            for k in &axis.keys {
                if overlaps(&parts, &key_parts(&k.key)) {
                    return Some(format!("axis `{}` (key `{}`)", axis.name, k.key));
                }
            }
        }
        for w in &self.workloads {
            for s in &w.set {
                if overlaps(&parts, &key_parts(s)) {
                    return Some(format!(
                        "workload `{}` (`{}`)",
                        w.name,
                        key_parts(s).join(".")
                    ));
                }
            }
        }
        if self.seed.is_some() && overlaps(&parts, &key_parts(&self.seed_key)) {
            return Some(format!(
                "the spec's `seed` (repetition r runs with seed + r at `{}`)",
                self.seed_key
            ));
        }
        None
    }

    /// Applies `key=value` overrides to the base (the command line's `--set`). A key that an
    /// axis, a workload's `set` or the spec's `seed` also sets is an error naming both: those
    /// are applied over the base for every point, so the override would change nothing.
    pub fn apply_overrides(&mut self, set: &[String]) -> Result<(), SweepError> {
        for o in set {
            let key = key_parts(o).join(".");
            if let Some(what) = self.setter_of(&key) {
                return Err(spec_err(
                    "--set",
                    format!(
                        "`{o}`: `{key}` is also set by {what}, which is applied over the base for every point; change it in the spec instead"
                    ),
                ));
            }
        }
        self.base
            .apply_overrides(set)
            .map_err(|e| spec_err("--set", e.to_string()))
    }
}
