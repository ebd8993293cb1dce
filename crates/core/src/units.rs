//! Human-readable units at the edges: sizes like `"4KiB"`, `"1.5GB"` and durations like `"100us"`,
//! `"2ms"`, parsed into bytes and nanoseconds. Configs may give either a plain integer (bytes, ns)
//! or such a string; use the `serde` helpers with `#[serde(deserialize_with = ...)]`.

use serde::{Deserialize, Deserializer};

/// Parses a size: an integer number of bytes, or a number with a unit
/// (B, K/KB, KiB, M/MB, MiB, G/GB, GiB, T/TB, TiB; decimal units are powers of 1000, binary 1024;
/// `K`, `M`, `G`, `T` alone are binary, as in fio).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim().replace('_', "");
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (e.g. 4096, \"4KiB\", \"1GiB\")"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "kb" => 1e3,
        "m" | "mib" => 1024.0 * 1024.0,
        "mb" => 1e6,
        "g" | "gib" => 1024f64.powi(3),
        "gb" => 1e9,
        "t" | "tib" => 1024f64.powi(4),
        "tb" => 1e12,
        u => return Err(format!("unknown size unit `{u}` in `{s}`")),
    };
    let v = n * mult;
    if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 {
        return Err(format!("size `{s}` out of range"));
    }
    if v.fract() != 0.0 {
        return Err(format!("size `{s}` is not a whole number of bytes"));
    }
    Ok(v as u64)
}

/// Parses a duration: an integer number of nanoseconds, or a number with a unit
/// (ns, us/µs, ms, s, min).
pub fn parse_nanos(s: &str) -> Result<u64, String> {
    let t = s.trim().replace('_', "");
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (e.g. 1000, \"100us\", \"2ms\")"))?;
    let mult = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "min" => 60e9,
        u => return Err(format!("unknown time unit `{u}` in `{s}`")),
    };
    let v = (n * mult).round();
    if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 {
        return Err(format!("duration `{s}` out of range"));
    }
    Ok(v as u64)
}

#[derive(Deserialize)]
#[serde(untagged)]
enum IntOrString {
    Int(u64),
    Float(f64),
    Str(String),
}

/// Serde helper: a size in bytes from an integer or a string with a unit.
pub fn de_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match IntOrString::deserialize(d)? {
        IntOrString::Int(v) => Ok(v),
        IntOrString::Float(f) if f >= 0.0 && f.fract() == 0.0 => Ok(f as u64),
        IntOrString::Float(f) => Err(serde::de::Error::custom(format!(
            "size {f} is not a whole number of bytes"
        ))),
        IntOrString::Str(s) => parse_bytes(&s).map_err(serde::de::Error::custom),
    }
}

/// Serde helper: a duration in ns from an integer or a string with a unit.
pub fn de_nanos<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match IntOrString::deserialize(d)? {
        IntOrString::Int(v) => Ok(v),
        IntOrString::Float(f) if f >= 0.0 => Ok(f.round() as u64),
        IntOrString::Float(f) => Err(serde::de::Error::custom(format!(
            "duration {f} is negative"
        ))),
        IntOrString::Str(s) => parse_nanos(&s).map_err(serde::de::Error::custom),
    }
}

/// Serde helper: an optional size.
pub fn de_opt_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_bytes(d).map(Some)
}

/// Serde helper: an optional duration.
pub fn de_opt_nanos<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_nanos(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("4KiB"), Ok(4096));
        assert_eq!(parse_bytes("4k"), Ok(4096));
        assert_eq!(parse_bytes("1.5 GiB"), Ok(3 << 29));
        assert_eq!(parse_bytes("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_bytes("1_000"), Ok(1000));
        assert!(parse_bytes("12 parsecs").unwrap_err().contains("parsecs"));
        assert!(parse_bytes("0.3B").is_err());
        assert!(parse_bytes("-1").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_nanos("100us"), Ok(100_000));
        assert_eq!(parse_nanos("2ms"), Ok(2_000_000));
        assert_eq!(parse_nanos("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_nanos("42"), Ok(42));
        assert!(parse_nanos("3 fortnights").is_err());
    }
}
