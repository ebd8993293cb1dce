//! Hand-written number parsers for the text readers: no allocation, no UTF-8 validation on the
//! hot path, overflow checked.

/// Why a numeric field did not parse. The text is what the reader's error message shows.
pub(crate) type NumError = &'static str;

/// Parses an unsigned decimal integer of ASCII digits.
#[inline]
pub(crate) fn parse_u64(b: &[u8]) -> Result<u64, NumError> {
    if b.is_empty() {
        return Err("empty");
    }
    // Up to 19 digits cannot overflow a u64, so the common case skips the checked arithmetic.
    if b.len() <= 19 {
        let mut v: u64 = 0;
        for &c in b {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                return Err(non_digit(b));
            }
            v = v * 10 + d as u64;
        }
        return Ok(v);
    }
    let mut v: u64 = 0;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return Err(non_digit(b));
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(d as u64))
            .ok_or("out of range")?;
    }
    Ok(v)
}

#[cold]
fn non_digit(b: &[u8]) -> NumError {
    if b.first() == Some(&b'-') {
        "negative value"
    } else {
        "not an unsigned integer"
    }
}

/// Parses a non-negative decimal number with an optional fraction (`123`, `123.456`, `.5`) or,
/// rarely, an exponent (`1.5e-3`), and returns it times `unit` (e.g. seconds to ns with
/// `unit = 1e9`), truncated toward zero. Integer and fraction are combined in integers, so
/// `1456095145.133076000` s is exactly `1456095145133076000` ns.
pub(crate) fn parse_scaled(b: &[u8], unit: u64) -> Result<u64, NumError> {
    // One pass: whole part, then up to 18 fraction digits (more are below any unit we use:
    // ns of seconds need 9; they are checked but not used).
    let mut whole: u64 = 0;
    let mut i = 0;
    let mut digits = 0;
    while i < b.len() {
        let d = b[i].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        // 19 digits cannot overflow; only longer numbers pay for checked arithmetic.
        whole = if i < 19 {
            whole * 10 + d as u64
        } else {
            whole
                .checked_mul(10)
                .and_then(|w| w.checked_add(d as u64))
                .ok_or("out of range")?
        };
        i += 1;
        digits += 1;
    }
    let mut frac: u64 = 0;
    let mut frac_digits = 0u32;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() {
            let d = b[i].wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            if frac_digits < 18 {
                frac = frac * 10 + d as u64;
                frac_digits += 1;
            }
            i += 1;
            digits += 1;
        }
    }
    if i < b.len() {
        return if matches!(b[i], b'e' | b'E') {
            parse_float_scaled(b, unit)
        } else if b[i] == b'-' {
            Err("negative value")
        } else {
            Err("not a decimal number")
        };
    }
    if digits == 0 {
        return Err("empty");
    }
    let mut v = whole.checked_mul(unit).ok_or("out of range")?;
    if frac_digits > 0 {
        let part = (frac as u128 * unit as u128 / 10u128.pow(frac_digits)) as u64;
        v = v.checked_add(part).ok_or("out of range")?;
    }
    Ok(v)
}

#[cold]
fn parse_float_scaled(b: &[u8], unit: u64) -> Result<u64, NumError> {
    let s = std::str::from_utf8(b).map_err(|_| "not a number")?;
    let x: f64 = s.parse().map_err(|_| "not a number")?;
    if !x.is_finite() || x < 0.0 {
        return Err("negative or not finite");
    }
    let v = x * unit as f64;
    if v >= u64::MAX as f64 {
        return Err("out of range");
    }
    Ok(v as u64)
}

/// Removes ASCII spaces and tabs around a field.
#[inline]
pub(crate) fn trim(mut b: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = b {
        if *first == b' ' || *first == b'\t' {
            b = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = b {
        if *last == b' ' || *last == b'\t' {
            b = rest;
        } else {
            break;
        }
    }
    b
}

/// Fields separated by runs of spaces or tabs.
pub(crate) fn split_ws(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|&c| c == b' ' || c == b'\t')
        .filter(|f| !f.is_empty())
}

/// Splits `line` at `delim` into `out` (cleared first) as `(start, end)` ranges, stopping after
/// `max` fields (the last stored field then ends at the next delimiter, the rest is ignored).
#[inline]
pub(crate) fn split_delim(line: &[u8], delim: u8, max: usize, out: &mut Vec<(usize, usize)>) {
    out.clear();
    let mut start = 0;
    let mut i = 0;
    // Eight bytes at a time: words without the delimiter (long numbers) are skipped whole; a
    // word that may hold one is scanned bytewise, so the zero-byte test needs no exactness.
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let pattern = ONES * delim as u64;
    while i + 8 <= line.len() {
        let word = u64::from_le_bytes(line[i..i + 8].try_into().expect("8 bytes"));
        let x = word ^ pattern;
        if x.wrapping_sub(ONES) & !x & HIGHS != 0 {
            for (k, &c) in line[i..i + 8].iter().enumerate() {
                if c == delim {
                    out.push((start, i + k));
                    start = i + k + 1;
                    if out.len() == max {
                        return;
                    }
                }
            }
        }
        i += 8;
    }
    for (k, &c) in line[i..].iter().enumerate() {
        if c == delim {
            out.push((start, i + k));
            start = i + k + 1;
            if out.len() == max {
                return;
            }
        }
    }
    out.push((start, line.len()));
}

/// Lossy text of a field for an error message, shortened.
#[cold]
pub(crate) fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(64)]).into_owned();
    if b.len() > 64 {
        format!("{s}...")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn integers() {
        assert_eq!(parse_u64(b"0"), Ok(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Ok(u64::MAX));
        assert!(parse_u64(b"18446744073709551616").is_err());
        assert!(parse_u64(b"").is_err());
        assert!(parse_u64(b"12a").is_err());
        assert_eq!(parse_u64(b"-1"), Err("negative value"));
        assert!(parse_u64(b" 1").is_err());
    }

    #[test]
    fn scaled_decimals_are_exact() {
        assert_eq!(
            parse_scaled(b"1456095145.133076000", 1_000_000_000),
            Ok(1_456_095_145_133_076_000)
        );
        assert_eq!(parse_scaled(b"0.551706", 1_000_000_000), Ok(551_706_000));
        assert_eq!(parse_scaled(b".5", 1_000), Ok(500));
        assert_eq!(parse_scaled(b"7", 1_000), Ok(7_000));
        assert_eq!(parse_scaled(b"7.", 1_000), Ok(7_000));
        assert_eq!(
            parse_scaled(b"1.0000000001", 1_000_000_000),
            Ok(1_000_000_000)
        );
        assert_eq!(parse_scaled(b"1.5e-3", 1_000_000_000), Ok(1_500_000));
        assert!(parse_scaled(b"1.2.3", 1).is_err());
        assert!(parse_scaled(b".", 1).is_err());
        assert!(parse_scaled(b"-1.5", 1).is_err());
        assert!(parse_scaled(b"99999999999999999999", 1).is_err());
    }

    #[test]
    fn splitting() {
        let mut v = Vec::new();
        split_delim(b"a,bb,,c", b',', 10, &mut v);
        assert_eq!(v, vec![(0, 1), (2, 4), (5, 5), (6, 7)]);
        split_delim(b"a,bb,,c", b',', 2, &mut v);
        assert_eq!(v, vec![(0, 1), (2, 4)]);
        assert_eq!(trim(b" \tx y \t"), b"x y");
        assert_eq!(
            split_ws(b"  8,0   3 1 ").collect::<Vec<_>>(),
            vec![&b"8,0"[..], b"3", b"1"]
        );
    }

    proptest! {
        #[test]
        fn split_matches_reference(line in proptest::collection::vec(prop_oneof![Just(b','), Just(b';'), any::<u8>()], 0..80), max in 1usize..12) {
            let mut got = Vec::new();
            split_delim(&line, b',', max, &mut got);
            let mut want = Vec::new();
            let mut start = 0;
            for (i, &c) in line.iter().enumerate() {
                if c == b',' && want.len() < max {
                    want.push((start, i));
                    start = i + 1;
                }
            }
            if want.len() < max {
                want.push((start, line.len()));
            }
            prop_assert_eq!(got, want);
        }

        #[test]
        fn u64_matches_std(x in any::<u64>()) {
            prop_assert_eq!(parse_u64(x.to_string().as_bytes()), Ok(x));
        }

        #[test]
        fn seconds_with_ns_fraction_match_reference(s in 0u64..4_000_000_000, ns in 0u64..1_000_000_000) {
            let text = format!("{s}.{ns:09}");
            prop_assert_eq!(parse_scaled(text.as_bytes(), 1_000_000_000), Ok(s * 1_000_000_000 + ns));
            // Microsecond fractions of a second scale to whole ns.
            let us = ns / 1000;
            let text = format!("{s}.{us:06}");
            prop_assert_eq!(parse_scaled(text.as_bytes(), 1_000_000_000), Ok(s * 1_000_000_000 + us * 1000));
        }
    }
}
