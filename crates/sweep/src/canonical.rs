//! Canonical text of TOML values (sorted keys) for stable ids, readable labels, and a stable hash.

use toml::Value;

/// 64-bit FNV-1a: tiny, dependency-free and stable across platforms and releases (unlike
/// `std`'s `DefaultHasher`), which point ids need to survive a rebuild.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Appends a canonical JSON-like text of `v`: table keys sorted, so the text does not depend on
/// the order keys were written or overridden in.
pub fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Table(t) => {
            let mut keys: Vec<&String> = t.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push(':');
                write_canonical(&t[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        Value::String(s) => out.push_str(&serde_json::to_string(s).unwrap_or_default()),
        // Floats keep a marker so 1 and 1.0 (different TOML types) hash apart.
        Value::Float(f) => out.push_str(&format!("{f:?}f")),
        other => out.push_str(&other.to_string()),
    }
}

/// A short readable label for an axis value: strings bare, numbers as written, tables as their
/// values joined by `-` with the discriminating key (`policy`, `type`, `mode`, `name`) first:
/// `{ policy = "nhit", n = 2 }` → `nhit-2`.
pub fn value_label(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Table(t) => {
            const FIRST: [&str; 4] = ["policy", "type", "mode", "name"];
            let mut parts: Vec<String> = FIRST
                .iter()
                .filter_map(|k| t.get(*k))
                .map(value_label)
                .collect();
            let mut rest: Vec<(&String, &Value)> = t
                .iter()
                .filter(|(k, _)| !FIRST.contains(&k.as_str()))
                .collect();
            rest.sort_by(|a, b| a.0.cmp(b.0));
            parts.extend(rest.into_iter().map(|(_, v)| value_label(v)));
            parts.join("-")
        }
        Value::Array(a) => a.iter().map(value_label).collect::<Vec<_>>().join("+"),
        other => other.to_string(),
    }
}

/// A TOML value as JSON (for result lines).
pub fn to_json(v: &Value) -> serde_json::Value {
    match v {
        Value::String(s) => serde_json::Value::String(s.clone()),
        Value::Integer(i) => serde_json::Value::from(*i),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null),
        Value::Boolean(b) => serde_json::Value::Bool(*b),
        Value::Datetime(d) => serde_json::Value::String(d.to_string()),
        Value::Array(a) => serde_json::Value::Array(a.iter().map(to_json).collect()),
        Value::Table(t) => {
            serde_json::Value::Object(t.iter().map(|(k, v)| (k.clone(), to_json(v))).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Value {
        toml::from_str::<toml::Table>(&format!("v = {s}"))
            .unwrap()
            .remove("v")
            .unwrap()
    }

    #[test]
    fn labels_are_readable() {
        assert_eq!(value_label(&parse("'4KiB'")), "4KiB");
        assert_eq!(value_label(&parse("{ policy = 'nhit', n = 2 }")), "nhit-2");
        assert_eq!(value_label(&parse("{ n = 2, policy = 'nhit' }")), "nhit-2");
        assert_eq!(
            value_label(&parse(
                "{ policy = 'aggressive', batch = 128, period_ns = '1ms' }"
            )),
            "aggressive-128-1ms"
        );
        assert_eq!(value_label(&parse("0.9")), "0.9");
        assert_eq!(value_label(&parse("[1, 2]")), "1+2");
    }

    #[test]
    fn canonical_text_ignores_key_order_but_not_types() {
        let mut a = String::new();
        let mut b = String::new();
        write_canonical(&parse("{ a = 1, b = { c = 'x', d = [1, 2] } }"), &mut a);
        write_canonical(&parse("{ b = { d = [1, 2], c = 'x' }, a = 1 }"), &mut b);
        assert_eq!(a, b);
        let mut c = String::new();
        write_canonical(&parse("{ a = 1.0, b = { c = 'x', d = [1, 2] } }"), &mut c);
        assert_ne!(a, c);
    }

    #[test]
    fn fnv_matches_reference_vectors() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }
}
