//! The config language of tiercache: one TOML document per experiment, shared by `sim`, `serve`,
//! `bench` and `sweep`.
//!
//! This crate is generic over the typed sections: it loads a document, applies `--set key=value`
//! overrides, expands `[[variant]]` tables (each a named list of overrides against the base),
//! and deserialises into any typed structure with errors that name the offending key path
//! (`cache.promotion.n: invalid value ...`). Typed sections live with the crates that use them.

#![warn(missing_docs)]

use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use toml::Value;

/// Errors of the config language. Each names the file, key or override at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("{path}: {message}")]
    Syntax {
        /// File.
        path: PathBuf,
        /// Parser message, with line and column.
        message: String,
    },
    /// A `--set` override is malformed.
    #[error("--set `{text}`: {reason}")]
    Override {
        /// The override as given.
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// A key is unknown, or a value has the wrong type or range.
    #[error("{context}{path}: {message}")]
    Value {
        /// Where the document came from (file and variant), with a trailing ": " when set.
        context: String,
        /// Dotted key path.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A combination of values is impossible.
    #[error("{context}{message}")]
    Invalid {
        /// Where the document came from.
        context: String,
        /// What is wrong, naming the keys.
        message: String,
    },
}

/// A parsed config document and where it came from.
#[derive(Debug, Clone)]
pub struct Document {
    /// Source (file path or `<embedded>`).
    pub source: String,
    /// The TOML tree.
    pub value: Value,
}

impl Document {
    /// Reads and parses a TOML file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.into(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses TOML text; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Self, ConfigError> {
        let value: Value = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            path: source.into(),
            message: e.to_string(),
        })?;
        Ok(Self {
            source: source.to_string(),
            value,
        })
    }

    /// Applies `key.path=value` overrides in order. The value is read as a TOML value (number,
    /// boolean, string, array, inline table); anything else is taken as a bare string.
    pub fn apply_overrides<S: AsRef<str>>(&mut self, overrides: &[S]) -> Result<(), ConfigError> {
        for o in overrides {
            set_path(&mut self.value, o.as_ref())?;
        }
        Ok(())
    }

    /// As [`variants`](Self::variants), with `overrides` (the command line's `--set`, already
    /// applied to this base) applied again to each variant after its own `set`: the command
    /// line wins over a variant.
    pub fn variants_with(
        &self,
        overrides: &[String],
    ) -> Result<Vec<(String, Document)>, ConfigError> {
        let mut variants = self.variants()?;
        for (_, d) in &mut variants {
            d.apply_overrides(overrides)?;
        }
        Ok(variants)
    }

    /// The document's variants: `(name, document)` for each `[[variant]]` table (its `set` list
    /// of overrides applied to the base), or the base alone (named by `name` or "base") when
    /// there are none. The `variant` key itself is removed from every result.
    pub fn variants(&self) -> Result<Vec<(String, Document)>, ConfigError> {
        let mut base = self.clone();
        let variants = match base.value.as_table_mut().and_then(|t| t.remove("variant")) {
            None => Vec::new(),
            Some(Value::Array(a)) => a,
            Some(_) => {
                return Err(ConfigError::Value {
                    context: self.context(),
                    path: "variant".into(),
                    message: "must be an array of tables ([[variant]])".into(),
                })
            }
        };
        let base_name = base
            .value
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("base")
            .to_string();
        if variants.is_empty() {
            return Ok(vec![(base_name, base)]);
        }
        let mut out = Vec::new();
        for (i, v) in variants.into_iter().enumerate() {
            let ctx = |m: &str| ConfigError::Value {
                context: self.context(),
                path: format!("variant[{i}]"),
                message: m.into(),
            };
            let t = v.as_table().ok_or_else(|| ctx("must be a table"))?;
            for k in t.keys() {
                if k != "name" && k != "set" {
                    return Err(ctx(&format!("unknown key `{k}` (expected `name`, `set`)")));
                }
            }
            let name = t
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| ctx("needs a string `name`"))?
                .to_string();
            let mut doc = base.clone();
            doc.source = format!("{} [variant {name}]", self.source);
            if let Some(set) = t.get("set") {
                let list = set
                    .as_array()
                    .ok_or_else(|| ctx("`set` must be an array of \"key=value\" strings"))?;
                for s in list {
                    let s = s
                        .as_str()
                        .ok_or_else(|| ctx("`set` entries must be strings \"key=value\""))?;
                    set_path(&mut doc.value, s)?;
                }
            }
            if let Some(t) = doc.value.as_table_mut() {
                t.insert("name".into(), Value::String(name.clone()));
            }
            if out.iter().any(|(n, _): &(String, Document)| *n == name) {
                return Err(ctx(&format!("duplicate variant name `{name}`")));
            }
            out.push((name, doc));
        }
        Ok(out)
    }

    /// Deserialises the whole document (or the section at `section`, a dotted path, when given)
    /// into `T`, naming the key path of any error.
    pub fn typed<T: DeserializeOwned>(&self, section: Option<&str>) -> Result<T, ConfigError> {
        let (value, prefix) = match section {
            None => (self.value.clone(), String::new()),
            Some(s) => {
                let mut v = &self.value;
                for part in s.split('.') {
                    v = v.get(part).ok_or_else(|| ConfigError::Value {
                        context: self.context(),
                        path: s.into(),
                        message: "missing section".into(),
                    })?;
                }
                (v.clone(), format!("{s}."))
            }
        };
        serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." {
                prefix.trim_end_matches('.').to_string()
            } else {
                format!("{prefix}{path}")
            };
            let message = plain_types(without_key_suffix(&e.into_inner().to_string()));
            ConfigError::Value {
                context: self.context(),
                path: with_unknown_key(path, &message),
                message,
            }
        })
    }

    /// Error context prefix naming the source.
    pub fn context(&self) -> String {
        format!("{}: ", self.source)
    }

    /// The document as JSON (for result records).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.value).unwrap_or(serde_json::Value::Null)
    }
}

/// `path` ending in the key an "unknown field `KEY`" message names. serde reports a key
/// unknown to a tagged enum's variant at the enum's table (`cache.promotion`), the variant
/// having been read from a buffered copy; the reader wants the key (`cache.promotion.bogus`).
fn with_unknown_key(path: String, message: &str) -> String {
    let key = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once('`'))
        .map(|(key, _)| key);
    match key {
        Some(key) if path.rsplit('.').next() != Some(key) => {
            if path.is_empty() {
                key.to_string()
            } else {
                format!("{path}.{key}")
            }
        }
        _ => path,
    }
}

/// The TOML deserialiser ends its messages with the key again (`\nin `requests``): the path
/// already names it.
fn without_key_suffix(message: &str) -> &str {
    match message.find("\nin `") {
        Some(i) => message[..i].trim_end(),
        None => message.trim_end(),
    }
}

/// serde's messages name Rust types (`expected u64`); a config's reader wants what to write.
fn plain_types(message: &str) -> String {
    const NAMES: [(&str, &str); 10] = [
        ("expected u64", "expected a whole number ≥ 0"),
        ("expected u32", "expected a whole number ≥ 0 (below 2^32)"),
        ("expected u16", "expected a whole number ≥ 0 (below 65536)"),
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected usize", "expected a whole number ≥ 0"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected f32", "expected a number"),
        ("expected a boolean", "expected true or false"),
        ("expected a string", "expected a string (in quotes)"),
    ];
    let mut out = message.to_string();
    for (rust, plain) in NAMES {
        // Whole words only: `expected u64` must not rewrite `expected u640…`.
        let mut from = 0;
        while let Some(i) = out[from..].find(rust) {
            let at = from + i;
            let end = at + rust.len();
            if out[end..].starts_with(|c: char| c.is_ascii_alphanumeric()) {
                from = end;
                continue;
            }
            out.replace_range(at..end, plain);
            from = at + plain.len();
        }
    }
    out
}

/// Sets `a.b.c=value` in a TOML tree, creating tables on the way.
pub fn set_path(root: &mut Value, text: &str) -> Result<(), ConfigError> {
    let err = |reason: &str| ConfigError::Override {
        text: text.into(),
        reason: reason.into(),
    };
    let (key, raw) = text
        .split_once('=')
        .ok_or_else(|| err("expected key=value"))?;
    let key = key.trim();
    if key.is_empty() || key.split('.').any(|p| p.trim().is_empty()) {
        return Err(err("empty key"));
    }
    let raw = raw.trim();
    let value = match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut t) => t.remove("v").expect("parsed"),
        Err(_) => Value::String(raw.to_string()),
    };
    set_value(root, key, value).map_err(|reason| err(&reason))
}

/// Sets the dotted `key` (whose parts may be `name[k]`, element k of an existing array:
/// `hierarchy.clients[0].link`) to `value` in a TOML tree, creating tables on the way; the
/// error says which part is not a table or not an element. `--set`, `[[variant]]` and sweep
/// axes all set keys through it, so every place takes the same key paths.
pub fn set_value(root: &mut Value, key: &str, value: Value) -> Result<(), String> {
    let parts: Vec<&str> = key.split('.').map(str::trim).collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(format!("`{key}` is not a dotted key path"));
    }
    let mut cur = root;
    for (i, p) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let table = cur
            .as_table_mut()
            .ok_or_else(|| format!("`{}` is not a table", parts[..i].join(".")))?;
        // `name[k]`: element k of an existing array (`hierarchy.clients[0].link=…`).
        if let Some((name, index)) = element(p) {
            let at = || {
                parts[..i]
                    .iter()
                    .chain([&name])
                    .copied()
                    .collect::<Vec<_>>()
                    .join(".")
            };
            let index = index.ok_or_else(|| format!("`{p}`: the index is not a number"))?;
            let array = table
                .get_mut(name)
                .and_then(Value::as_array_mut)
                .ok_or_else(|| format!("`{}` is not an array", at()))?;
            let len = array.len();
            let slot = array
                .get_mut(index)
                .ok_or_else(|| format!("`{}` has no element {index} (it has {len})", at()))?;
            if last {
                *slot = value;
                return Ok(());
            }
            cur = slot;
            continue;
        }
        if last {
            table.insert((*p).to_string(), value);
            return Ok(());
        }
        cur = table
            .entry((*p).to_string())
            .or_insert_with(|| Value::Table(Default::default()));
    }
    unreachable!("loop returns at the last part")
}

/// The value at the dotted `key` (parts may be `name[k]`, as for [`set_value`]), if any.
pub fn lookup<'a>(root: &'a Value, key: &str) -> Option<&'a Value> {
    key.split('.')
        .map(str::trim)
        .try_fold(root, |v, p| match element(p) {
            Some((name, index)) => v.get(name)?.as_array()?.get(index?),
            None => v.get(p),
        })
}

/// `name[k]` as `(name, Some(k))` (`None` when `k` is not a number); `None` for a plain key.
fn element(part: &str) -> Option<(&str, Option<usize>)> {
    let (name, rest) = part.split_once('[')?;
    let index = rest.strip_suffix(']')?;
    Some((name.trim(), index.trim().parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        n: u32,
        #[serde(default)]
        label: String,
    }
    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        #[serde(default)]
        name: String,
        inner: Inner,
    }

    #[test]
    fn type_errors_say_what_to_write_not_the_rust_type() {
        let doc = Document::parse("[inner]\nn = \"many\"\n", "t.toml").unwrap();
        let err = doc.typed::<Outer>(None).unwrap_err().to_string();
        assert!(err.contains("inner.n"), "{err}");
        assert!(err.contains("a whole number ≥ 0"), "{err}");
        assert!(!err.contains("u32"), "{err}");
        assert_eq!(plain_types("expected u640"), "expected u640");
        assert!(!err.contains("\nin `"), "{err}");
    }

    /// `lookup` reads the key paths `set_value` writes, array elements included.
    #[test]
    fn lookup_reads_array_elements() {
        let d = Document::parse("[[clients]]\nname = 'a'\nlink = { latency = 1 }\n", "t").unwrap();
        assert_eq!(
            lookup(&d.value, "clients[0].link.latency").and_then(Value::as_integer),
            Some(1)
        );
        for missing in [
            "clients[1].name",
            "clients[x].name",
            "clients.name",
            "nothing",
        ] {
            assert!(lookup(&d.value, missing).is_none(), "{missing}");
        }
    }

    /// `name[k]` addresses element k of an array (it was taken for a key named `clients[0]`,
    /// and then refused as an unknown field).
    #[test]
    fn overrides_address_array_elements() {
        let mut d = Document::parse(
            "[[clients]]\nname = 'a'\n[[clients]]\nname = 'b'\nlink = { latency = 1 }\n",
            "t",
        )
        .unwrap();
        d.apply_overrides(&["clients[1].link.latency=5", "clients[0].name=z"])
            .unwrap();
        let clients = d.value["clients"].as_array().unwrap();
        assert_eq!(clients[0]["name"].as_str(), Some("z"));
        assert_eq!(clients[1]["link"]["latency"].as_integer(), Some(5));
        d.apply_overrides(&["clients[1]={ name = 'c' }"]).unwrap();
        assert_eq!(d.value["clients"][1]["name"].as_str(), Some("c"));
        for (bad, says) in [
            ("clients[2].name=x", "has no element 2 (it has 2)"),
            ("clients[x].name=x", "not a number"),
            ("nothing[0].name=x", "`nothing` is not an array"),
        ] {
            let e = d.apply_overrides(&[bad]).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn overrides_create_and_replace() {
        let mut d = Document::parse("[inner]\nn = 1\n", "t").unwrap();
        d.apply_overrides(&["inner.n=5", "inner.label=hello world"])
            .unwrap();
        let o: Outer = d.typed(None).unwrap();
        assert_eq!(
            o.inner,
            Inner {
                n: 5,
                label: "hello world".into()
            }
        );
        assert!(matches!(
            d.apply_overrides(&["nokey"]),
            Err(ConfigError::Override { .. })
        ));
        assert!(matches!(
            d.apply_overrides(&["inner.n.x=1"]),
            Err(ConfigError::Override { .. })
        ));
    }

    #[test]
    fn unknown_key_is_named_with_its_path() {
        let d = Document::parse("[inner]\nn = 1\nbogus = 2\n", "cfg.toml").unwrap();
        let e = d.typed::<Outer>(None).unwrap_err().to_string();
        assert!(e.contains("cfg.toml"), "{e}");
        assert!(e.contains("inner.bogus") || e.contains("bogus"), "{e}");
        let d = Document::parse("[inner]\nn = -3\n", "cfg.toml").unwrap();
        let e = d.typed::<Outer>(None).unwrap_err().to_string();
        assert!(e.contains("inner.n"), "{e}");
    }

    #[test]
    fn an_unknown_key_reported_at_its_table_is_named_in_the_path() {
        let msg = "unknown field `bogus`, there are no fields";
        assert_eq!(
            with_unknown_key("cache.promotion".into(), msg),
            "cache.promotion.bogus"
        );
        assert_eq!(with_unknown_key("a.bogus".into(), msg), "a.bogus");
        assert_eq!(with_unknown_key(String::new(), msg), "bogus");
        assert_eq!(with_unknown_key("a.b".into(), "invalid type"), "a.b");
    }

    #[test]
    fn syntax_error_names_file_and_line() {
        let e = Document::parse("[inner]\nn = = 1\n", "bad.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad.toml") && e.contains("line 2"), "{e}");
    }

    #[test]
    fn variants_expand_against_the_base() {
        let text = r#"
name = "x"
[inner]
n = 1
[[variant]]
name = "a"
set = ["inner.n=2"]
[[variant]]
name = "b"
set = ["inner.n=3", "inner.label=b"]
"#;
        let d = Document::parse(text, "t").unwrap();
        let v = d.variants().unwrap();
        let got: Vec<(String, Outer)> = v
            .iter()
            .map(|(n, d)| (n.clone(), d.typed(None).unwrap()))
            .collect();
        assert_eq!(got[0].1.inner.n, 2);
        assert_eq!(
            got[1].1.inner,
            Inner {
                n: 3,
                label: "b".into()
            }
        );
        assert_eq!(got[1].1.name, "b");
        // The command line wins over a variant's own `set`.
        let v = d.variants_with(&["inner.n=9".to_string()]).unwrap();
        for (name, doc) in &v {
            let o: Outer = doc.typed(None).unwrap();
            assert_eq!(o.inner.n, 9, "variant {name}");
        }
        let dup = Document::parse("[[variant]]\nname='a'\n[[variant]]\nname='a'\n", "t").unwrap();
        assert!(dup
            .variants()
            .unwrap_err()
            .to_string()
            .contains("duplicate"));
        let bad = Document::parse("[[variant]]\nname='a'\nsett=[]\n", "t").unwrap();
        assert!(bad.variants().unwrap_err().to_string().contains("sett"));
    }
}
