//! `tiercache set`: settings in `--set`'s spelling applied to a running server. `cache.*` keys
//! go through the config language (the policies in force as a document, the settings applied,
//! the result read back as a cache config), so values, units and errors are the config's; of
//! them only the policies that are no part of the cache device's layout may change (write
//! policy, cleaning, promotion, admission, balancing: [`LIVE_CACHE_KEYS`]). Export
//! keys (`exports.NAME.write_policy`, `exports.NAME.partition`) act on one export.
//! `degraded=on|off` is the operator's switch for degraded mode (docs/design.md §11): `on`
//! takes a failing cache device out of service, `off` returns a fixed one to it.

use anyhow::{anyhow, bail, Context, Result};
use tiercache_config::Document;
use tiercache_policy::{CacheConfig, TenancyModeKind, WritePolicy};

use super::listener::ControlSource;

/// The `cache.*` fields a running cache can change.
pub const LIVE_CACHE_KEYS: [&str; 5] = [
    "write_policy",
    "cleaning",
    "promotion",
    "admission",
    "balancing",
];

/// What a list of settings asks for, once parsed and checked.
#[derive(Debug, Default)]
struct Plan {
    cache: Option<CacheConfig>,
    write_policies: Vec<(u32, WritePolicy)>,
    partitions: Vec<(u32, u64)>,
    degraded: Option<bool>,
}

/// Applies `settings`; answers what is in force afterwards, one line per setting.
pub(super) fn apply(src: &ControlSource, settings: &[String]) -> Result<Vec<String>> {
    if settings.is_empty() {
        bail!("nothing to set: give KEY=VALUE settings (`tiercache set cache.write_policy=write-through`)");
    }
    let plan = parse(src, settings)?;
    let mut answers = Vec::new();
    if let Some(on) = plan.degraded {
        if on {
            src.engine.degrade("tiercache set degraded=on");
            answers.push("degraded: serving in pass-through".to_string());
        } else if src.engine.return_to_service() {
            answers.push("returned to service".to_string());
        } else {
            answers.push("not degraded".to_string());
        }
    }
    // The checks are done: now the changes, cache-wide ones first (they clear per-export
    // write policies, which the settings may then give again).
    if let Some(cfg) = &plan.cache {
        src.engine
            .set_policies(cfg)
            .map_err(|e| anyhow!("cache.{e}"))?;
    }
    for &(volume, wp) in &plan.write_policies {
        if let Err(e) = src.engine.set_volume_write_policy(volume, wp) {
            answers.push(format!(
                "volume {volume}: write policy {} in force but not journaled ({e}): a restart \
                 does not keep it",
                wp.name()
            ));
        }
    }
    if !plan.partitions.is_empty() {
        src.engine
            .set_volume_partitions(&plan.partitions)
            .context("exports.*.partition")?;
    }
    answers.extend(settings.iter().map(|s| format!("set {}", s.trim())));
    Ok(answers)
}

fn parse(src: &ControlSource, settings: &[String]) -> Result<Plan> {
    let mut plan = Plan::default();
    let mut cache_keys = Vec::new();
    for s in settings {
        let (key, value) = s
            .split_once('=')
            .ok_or_else(|| anyhow!("{s:?}: expected KEY=VALUE"))?;
        let key = key.trim();
        if key == "degraded" {
            plan.degraded = Some(match value.trim().trim_matches('"') {
                "on" | "true" => true,
                "off" | "false" => false,
                other => bail!("degraded: {other:?} is neither `on` nor `off`"),
            });
        } else if key.starts_with("cache.") {
            cache_keys.push(s.clone());
        } else if let Some(rest) = key.strip_prefix("exports.") {
            let (name, field) = rest.rsplit_once('.').ok_or_else(|| {
                anyhow!("{key}: expected exports.NAME.write_policy or exports.NAME.partition")
            })?;
            let volume = src
                .exports
                .iter()
                .find(|x| x.name == name)
                .map(|x| x.volume)
                .ok_or_else(|| {
                    let names: Vec<&str> = src.exports.iter().map(|x| x.name.as_str()).collect();
                    anyhow!("{key}: no export {name:?} (exports: {})", names.join(", "))
                })?;
            let value = value.trim().trim_matches('"');
            match field {
                "write_policy" => {
                    let wp: WritePolicy = serde_json::from_value(value.into()).map_err(|_| {
                        anyhow!("{key}: {value:?} is not a write policy (write-back, write-through, write-around, write-only, read-only, pass-through, write-back-around)")
                    })?;
                    plan.write_policies.push((volume, wp));
                }
                "partition" => {
                    if src.tenancy != TenancyModeKind::Shared {
                        bail!(
                            "{key}: cache.tenancy.mode = \"{}\" sizes the partitions; resize by hand only a cache whose tenancy mode is \"shared\"",
                            super::status::config_name(&src.tenancy)
                        );
                    }
                    let bytes = tiercache_core::units::parse_bytes(value)
                        .map_err(|e| anyhow!("{key}: {e}"))?;
                    plan.partitions.push((volume, bytes / src.line_size.max(1)));
                }
                other => {
                    bail!("{key}: an export takes `write_policy` or `partition`, not `{other}`")
                }
            }
        } else {
            bail!(
                "{key}: a running server takes cache.{{{}}}, exports.NAME.{{write_policy,partition}} and degraded=on|off",
                LIVE_CACHE_KEYS.join(",")
            );
        }
    }
    if !cache_keys.is_empty() {
        plan.cache = Some(cache_config(&src.engine.policies(), &cache_keys)?);
    }
    Ok(plan)
}

/// `now` with `settings` (`cache.*=…`) applied as `--set` applies them, refusing any change
/// to a field that is not live-settable.
fn cache_config(now: &CacheConfig, settings: &[String]) -> Result<CacheConfig> {
    let mut root = toml::Table::new();
    root.insert(
        "cache".into(),
        toml::Value::try_from(now).context("the policies in force as a config")?,
    );
    let mut doc = Document::parse(&toml::to_string(&root)?, "<the cache in force>")?;
    doc.apply_overrides(settings)?;
    let next: CacheConfig = doc.typed(Some("cache"))?;
    let before = toml::Value::try_from(now)?;
    let after = toml::Value::try_from(&next)?;
    let (Some(before), Some(after)) = (before.as_table(), after.as_table()) else {
        bail!("the cache config is not a table");
    };
    for (k, v) in after {
        if before.get(k) != Some(v) && !LIVE_CACHE_KEYS.contains(&k.as_str()) {
            bail!(
                "cache.{k}: cannot change on a running cache (it is part of the cache device's layout or of how it was opened); \
                 live: cache.{{{}}}. Stop the server and serve again with `--set cache.{k}=…`",
                LIVE_CACHE_KEYS.join(",")
            );
        }
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiercache_policy::{AdmissionConfig, CleaningConfig};

    #[test]
    fn cache_settings_take_the_config_spelling_and_refuse_the_layout() {
        let now = CacheConfig::default();
        let next = cache_config(
            &now,
            &[
                "cache.write_policy=write-through".into(),
                r#"cache.cleaning={policy="threshold",high=0.5,low=0.25}"#.into(),
            ],
        )
        .unwrap();
        assert_eq!(next.write_policy, WritePolicy::WriteThrough);
        assert!(matches!(
            next.cleaning,
            CleaningConfig::Threshold { high, low, .. } if high == 0.5 && low == 0.25
        ));
        // Admission is no part of the layout: it changes live, in the config's spelling.
        let next = cache_config(
            &now,
            &[r#"cache.admission={policy="tinylfu",sketch_ratio=2.0}"#.into()],
        )
        .unwrap();
        assert_eq!(
            next.admission,
            AdmissionConfig::Tinylfu { sketch_ratio: 2.0 }
        );
        let back = cache_config(&next, &[r#"cache.admission={policy="all"}"#.into()]).unwrap();
        assert_eq!(back.admission, AdmissionConfig::All);
        let next = cache_config(
            &now,
            &[r#"cache.admission={policy="probabilistic",probability=0.25,seed=7}"#.into()],
        )
        .unwrap();
        assert_eq!(
            next.admission,
            AdmissionConfig::Probabilistic {
                probability: 0.25,
                seed: 7
            }
        );
        let e = format!(
            "{:#}",
            cache_config(&now, &[r#"cache.admission={policy="sometimes"}"#.into()]).unwrap_err()
        );
        assert!(e.contains("admission"), "{e}");
        let e = cache_config(&now, &["cache.line_size=8KiB".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("cache.line_size: cannot change"), "{e}");
        let e = format!(
            "{:#}",
            cache_config(&now, &["cache.write_policy=sometimes".into()]).unwrap_err()
        );
        assert!(e.contains("write_policy"), "{e}");
    }
}
