//! Human-readable table of runs.

use crate::RunMetrics;

/// Renders one row per run with the headline metrics, as plain text with aligned columns
/// (names left-aligned, numbers right-aligned).
pub fn render_table(rows: &[(String, RunMetrics)]) -> String {
    const HEAD: [&str; 12] = [
        "name",
        "requests",
        "hit%",
        "read-hit%",
        "kIOPS",
        "MB/s",
        "mean-us",
        "p99-us",
        "p99.9-us",
        "promotions",
        "flushes",
        "bypasses",
    ];
    let mut cells: Vec<[String; 12]> = Vec::with_capacity(rows.len() + 1);
    cells.push(HEAD.map(str::to_string));
    for (name, m) in rows {
        cells.push([
            name.clone(),
            m.requests.to_string(),
            format!("{:.2}", m.hit_ratio * 100.0),
            format!("{:.2}", m.read_hit_ratio * 100.0),
            format!("{:.1}", m.iops / 1e3),
            format!("{:.1}", m.bandwidth_bytes_per_s / 1e6),
            format!("{:.1}", m.latency_us.all.mean),
            format!("{:.1}", m.latency_us.all.p99),
            format!("{:.1}", m.latency_us.all.p999),
            m.promotions.to_string(),
            m.flushes.to_string(),
            m.bypasses.values().sum::<u64>().to_string(),
        ]);
    }
    let mut widths = [0usize; 12];
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in &cells {
        let mut line = String::new();
        for (i, (c, w)) in row.iter().zip(widths).enumerate() {
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
            ..Default::default()
        };
        let b = RunMetrics {
            requests: 1_000_000,
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
}
