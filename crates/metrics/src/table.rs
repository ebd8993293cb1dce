//! Human-readable table of runs.

use crate::RunMetrics;

/// A table column: header and how to format one run's value.
type Column = (&'static str, fn(&RunMetrics) -> String);

/// A ratio as a percentage, or `n/a` when nothing was there to hit (a 0.00 would claim every
/// such request missed).
fn pct(ratio: f64, of: u64) -> String {
    if of == 0 {
        "n/a".into()
    } else {
        format!("{:.2}", ratio * 100.0)
    }
}

/// A rate with a unit prefix scaled to its value (`850`, `12.3k`, `1.50M`).
fn rate(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.1}")
    }
}

/// A latency given in µs, in the unit that suits it (`2.1µs`, `568.6ms`, `2.13s`).
fn latency(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2}s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.1}ms", us / 1e3)
    } else {
        format!("{us:.1}µs")
    }
}

/// Bytes in the unit that suits them.
fn bytes(b: u64) -> String {
    let b = b as f64;
    if b >= 1e9 {
        format!("{:.2}GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1}MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1}kB", b / 1e3)
    } else {
        format!("{b}B")
    }
}

const TIMED: [Column; 11] = [
    ("requests", |m| m.requests.to_string()),
    ("hit%", |m| pct(m.hit_ratio, m.requests)),
    ("read-hit%", |m| pct(m.read_hit_ratio, m.read_requests)),
    ("IOPS", |m| rate(m.iops)),
    ("bandwidth", |m| {
        format!("{}/s", bytes(m.bandwidth_bytes_per_s as u64))
    }),
    ("mean", |m| latency(m.latency_us.all.mean)),
    ("p99", |m| latency(m.latency_us.all.p99)),
    ("p99.9", |m| latency(m.latency_us.all.p999)),
    ("promoted-lines", |m| m.promotions.to_string()),
    // Every line written back in the window: by the cleaner and by evicting dirty lines.
    ("written-back-lines", |m| {
        (m.flushes + m.dirty_evictions).to_string()
    }),
    ("bypassed-lines", |m| {
        m.bypasses.values().sum::<u64>().to_string()
    }),
];

/// Columns for runs without timing (hit-ratio-only mode): no IOPS or latency.
const UNTIMED: [Column; 9] = [
    ("requests", |m| m.requests.to_string()),
    ("hit%", |m| pct(m.hit_ratio, m.requests)),
    ("read-hit%", |m| pct(m.read_hit_ratio, m.read_requests)),
    ("write-hit%", |m| pct(m.write_hit_ratio, m.write_requests)),
    ("promoted-lines", |m| m.promotions.to_string()),
    ("evicted-lines", |m| m.evictions.to_string()),
    ("bypassed-lines", |m| {
        m.bypasses.values().sum::<u64>().to_string()
    }),
    ("cache-written", |m| bytes(m.cache_bytes_written)),
    ("backend-read", |m| bytes(m.backend_bytes_read)),
];

/// Renders one row per run with the headline metrics, as plain text with aligned columns
/// (names left-aligned, numbers right-aligned). Runs without timing (every `duration_ns` zero)
/// get hit-ratio columns instead of IOPS and latency.
pub fn render_table(rows: &[(String, RunMetrics)]) -> String {
    let untimed = !rows.is_empty() && rows.iter().all(|(_, m)| m.duration_ns == 0);
    let columns: &[Column] = if untimed { &UNTIMED } else { &TIMED };
    let mut cells: Vec<Vec<String>> = Vec::with_capacity(rows.len() + 1);
    cells.push(
        std::iter::once("name".to_string())
            .chain(columns.iter().map(|c| c.0.to_string()))
            .collect(),
    );
    for (name, m) in rows {
        cells.push(
            std::iter::once(name.clone())
                .chain(columns.iter().map(|c| (c.1)(m)))
                .collect(),
        );
    }
    let mut widths = vec![0usize; columns.len() + 1];
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in &cells {
        let mut line = String::new();
        for (i, (c, w)) in row.iter().zip(&widths).enumerate() {
            if i == 0 {
                line.push_str(&format!("{c:<w$}"));
            } else {
                line.push_str(&format!("  {c:>w$}"));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_scale_and_missing_classes_say_na() {
        let m = RunMetrics {
            requests: 1000,
            write_requests: 1000,
            hit_ratio: 0.1,
            write_hit_ratio: 0.1,
            iops: 950.0,
            duration_ns: 1,
            flushes: 3,
            dirty_evictions: 19_681,
            ..Default::default()
        };
        let mut m2 = m.clone();
        m2.latency_us.all.mean = 568_567.1;
        let t = render_table(&[("a".into(), m), ("b".into(), m2)]);
        let row: Vec<&str> = t.lines().nth(2).unwrap().split_whitespace().collect();
        // No reads: the read hit ratio is not 0.00 but n/a.
        assert_eq!(row[3], "n/a", "{t}");
        assert_eq!(row[4], "950.0", "{t}");
        assert_eq!(row[6], "568.6ms", "{t}");
        // Lines written back by evictions count: the column is not 0 or 3.
        assert_eq!(row[10], "19684", "{t}");
        assert!(t.lines().next().unwrap().contains("bypassed-lines"));
        assert_eq!(latency(2.1), "2.1µs");
        assert_eq!(rate(1_500_000.0), "1.50M");
        assert_eq!(bytes(2_400_000), "2.4MB");
    }

    #[test]
    fn columns_align() {
        let a = RunMetrics {
            requests: 5,
            hit_ratio: 0.5,
            iops: 123_456.0,
            duration_ns: 1_000,
            ..Default::default()
        };
        let b = RunMetrics {
            requests: 1_000_000,
            duration_ns: 1_000,
            ..Default::default()
        };
        let t = render_table(&[("short".into(), a), ("a-much-longer-name".into(), b)]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("name"));
        assert!(lines[1].contains("50.00") && lines[1].contains("123.5k"));
        // Every line has the same width: right-aligned numbers end at the same column.
        let width = |l: &str| l.chars().count();
        assert!(lines.iter().all(|l| width(l) == width(lines[0])), "{t}");
    }

    #[test]
    fn untimed_runs_get_hit_ratio_columns() {
        let m = RunMetrics {
            requests: 10,
            write_requests: 10,
            hit_ratio: 0.25,
            write_hit_ratio: 0.5,
            ..Default::default()
        };
        let t = render_table(&[("hr".into(), m)]);
        assert!(t.contains("write-hit%") && !t.contains("kIOPS"), "{t}");
        assert!(t.lines().nth(1).unwrap().contains("50.00"));
    }
}
