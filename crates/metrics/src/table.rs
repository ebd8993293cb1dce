//! Human-readable table of runs.

use crate::RunMetrics;

/// A table column: header and how to format one run's value.
type Column = (&'static str, fn(&RunMetrics) -> String);

const TIMED: [Column; 11] = [
    ("requests", |m| m.requests.to_string()),
    ("hit%", |m| format!("{:.2}", m.hit_ratio * 100.0)),
    ("read-hit%", |m| format!("{:.2}", m.read_hit_ratio * 100.0)),
    ("kIOPS", |m| format!("{:.1}", m.iops / 1e3)),
    ("MB/s", |m| format!("{:.1}", m.bandwidth_bytes_per_s / 1e6)),
    ("mean-us", |m| format!("{:.1}", m.latency_us.all.mean)),
    ("p99-us", |m| format!("{:.1}", m.latency_us.all.p99)),
    ("p99.9-us", |m| format!("{:.1}", m.latency_us.all.p999)),
    ("promotions", |m| m.promotions.to_string()),
    ("flushes", |m| m.flushes.to_string()),
    ("bypasses", |m| m.bypasses.values().sum::<u64>().to_string()),
];

/// Columns for runs without timing (hit-ratio-only mode): no IOPS or latency.
const UNTIMED: [Column; 9] = [
    ("requests", |m| m.requests.to_string()),
    ("hit%", |m| format!("{:.2}", m.hit_ratio * 100.0)),
    ("read-hit%", |m| format!("{:.2}", m.read_hit_ratio * 100.0)),
    ("write-hit%", |m| {
        format!("{:.2}", m.write_hit_ratio * 100.0)
    }),
    ("promotions", |m| m.promotions.to_string()),
    ("evictions", |m| m.evictions.to_string()),
    ("bypasses", |m| m.bypasses.values().sum::<u64>().to_string()),
    ("cache-MB-written", |m| {
        format!("{:.1}", m.cache_bytes_written as f64 / 1e6)
    }),
    ("backend-MB-read", |m| {
        format!("{:.1}", m.backend_bytes_read as f64 / 1e6)
    }),
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
        assert!(lines[1].contains("50.00") && lines[1].contains("123.5"));
        // Every line has the same width: right-aligned numbers end at the same column.
        assert!(lines.iter().all(|l| l.len() == lines[0].len()), "{t}");
    }

    #[test]
    fn untimed_runs_get_hit_ratio_columns() {
        let m = RunMetrics {
            requests: 10,
            hit_ratio: 0.25,
            write_hit_ratio: 0.5,
            ..Default::default()
        };
        let t = render_table(&[("hr".into(), m)]);
        assert!(t.contains("write-hit%") && !t.contains("kIOPS"), "{t}");
        assert!(t.lines().nth(1).unwrap().contains("50.00"));
    }
}
