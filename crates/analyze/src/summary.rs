//! The terminal summary of an [`Analysis`] (its `Display`): the mix, the curves, the
//! per-volume rows and demands, and the per-interval figures (docs/design.md §4.10).

use crate::{characterise, opt, reuse, Analysis, VolumeAnalysis};

impl Analysis {
    /// The per-volume rows and total demands of the terminal summary.
    fn fmt_volumes(
        &self,
        f: &mut std::fmt::Formatter<'_>,
        volumes: &[VolumeAnalysis],
    ) -> std::fmt::Result {
        writeln!(
            f,
            "per volume (URD: useful reuse distance; demands in lines):"
        )?;
        writeln!(
            f,
            "  {:<16} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}  advice",
            "volume", "accesses", "footprint", "URD-dem", "URD-knee", "TRD-dem", "WAR+WAW"
        )?;
        // Many volumes (a cloud trace has thousands): the largest demands, the rest summed.
        let mut order: Vec<&VolumeAnalysis> = volumes.iter().collect();
        let shown = if order.len() > MAX_VOLUME_ROWS {
            order.sort_by(|a, b| {
                (b.advice.urd_demand_lines, b.line_accesses)
                    .cmp(&(a.advice.urd_demand_lines, a.line_accesses))
            });
            MAX_VOLUME_ROWS
        } else {
            order.len()
        };
        for v in &order[..shown] {
            let a = &v.advice;
            writeln!(
                f,
                "  {:<16} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7.1}%  {}",
                v.name,
                v.line_accesses,
                v.footprint_lines,
                a.urd_demand_lines,
                a.urd_knee_lines,
                a.trd_demand_lines,
                a.write_reuse_share * 100.0,
                a.write_policy
            )?;
        }
        let rest = &order[shown..];
        if !rest.is_empty() {
            let sum = |f: fn(&VolumeAnalysis) -> u64| rest.iter().map(|v| f(v)).sum::<u64>();
            let count = |p: &str| rest.iter().filter(|v| v.advice.write_policy == p).count();
            writeln!(
                f,
                "  {:<16} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}  {} write-back, {} read-only, {} no-cache (sums; --json lists every volume)",
                format!("+{} more", rest.len()),
                sum(|v| v.line_accesses),
                sum(|v| v.footprint_lines),
                sum(|v| v.advice.urd_demand_lines),
                sum(|v| v.advice.urd_knee_lines),
                sum(|v| v.advice.trd_demand_lines),
                "",
                count("write-back"),
                count("read-only"),
                count("no-cache"),
            )?;
        }
        writeln!(
            f,
            "total demand: URD {} lines, TRD {} lines",
            volumes
                .iter()
                .map(|v| v.advice.urd_demand_lines)
                .sum::<u64>(),
            volumes
                .iter()
                .map(|v| v.advice.trd_demand_lines)
                .sum::<u64>()
        )
    }
}

/// Median and maximum of a per-interval figure over the rows that have it.
fn of_opt(
    rows: &[characterise::IntervalRow],
    g: impl Fn(&characterise::IntervalRow) -> Option<u64>,
) -> (u64, u64) {
    let mut v: Vec<u64> = rows.iter().filter_map(g).collect();
    v.sort_unstable();
    (
        v.get(v.len() / 2).copied().unwrap_or(0),
        v.last().copied().unwrap_or(0),
    )
}

/// Volumes listed one per row in the terminal summary; the rest are summed in one row.
pub const MAX_VOLUME_ROWS: usize = 20;

impl std::fmt::Display for Analysis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "requests     {} ({} reads, {} writes)",
            self.requests, self.read_requests, self.write_requests
        )?;
        match self.footprint_lines {
            Some(n) => writeln!(
                f,
                "lines        {} accesses over {} distinct {}-byte lines",
                self.line_accesses, n, self.line_size
            )?,
            None => writeln!(
                f,
                "lines        {} accesses of {}-byte lines (distinct lines: not computed, sampled analysis)",
                self.line_accesses, self.line_size
            )?,
        }
        writeln!(
            f,
            "sequential   {:.1}% of requests continue the previous one",
            self.sequential_fraction * 100.0
        )?;
        if let Some((rate, peak)) = self.shards {
            writeln!(
                f,
                "SHARDS       rate {rate:.4}, at most {peak} lines tracked"
            )?;
        }
        if self.exact {
            writeln!(f, "LRU miss-ratio curve (all volumes share the cache):")?;
        } else {
            writeln!(
                f,
                "LRU miss-ratio curve (all volumes share the cache; sampled analysis: exact curves not computed, `-`; sizes up to the estimated footprint):"
            )?;
        }
        let with_opt = self.opt.is_some();
        write!(
            f,
            "  {:>12} {:>12} {:>8} {:>8} {:>8} {:>8}",
            "lines", "bytes", "all", "reads", "writes", "shards"
        )?;
        if with_opt {
            write!(f, " {:>8}", "OPT")?;
        }
        writeln!(f)?;
        let show = |m: Option<f64>| m.map_or("-".to_string(), |m| format!("{m:.4}"));
        for p in &self.curve {
            write!(
                f,
                "  {:>12} {:>12} {:>8} {:>8} {:>8} {:>8}",
                p.lines,
                p.bytes,
                show(p.miss_ratio),
                show(p.read_miss_ratio),
                show(p.write_miss_ratio),
                show(p.shards_miss_ratio)
            )?;
            if with_opt {
                write!(f, " {:>8}", show(p.opt_miss_ratio))?;
            }
            writeln!(f)?;
        }
        if let Some(wb) = self.opt.as_ref().and_then(|o| o.writeback.as_ref()) {
            opt::fmt_writeback(f, wb)?;
        }
        if let Some(m) = &self.minisim {
            writeln!(
                f,
                "other policies by mini-simulation ({:.2}% of lines sampled plus {} hot lines, {} accesses simulated):",
                m.rate * 100.0,
                m.hot_lines,
                m.simulated_accesses
            )?;
            write!(f, "  {:>12}", "lines")?;
            for c in &m.curves {
                write!(f, " {:>8}", c.policy)?;
            }
            writeln!(f)?;
            for (i, p) in self.curve.iter().enumerate() {
                write!(f, "  {:>12}", p.lines)?;
                for c in &m.curves {
                    write!(f, " {:>8.4}", c.points[i].1)?;
                }
                writeln!(f)?;
            }
        }
        match &self.volumes {
            Some(volumes) => self.fmt_volumes(f, volumes)?,
            None => writeln!(
                f,
                "per volume   not computed (sampled analysis: reuse distances, advice and demands need the exact stacks; --exact keeps them)"
            )?,
        }
        let c = &self.characterisation;
        writeln!(
            f,
            "bytes        {} read, {} written, {} trims; request sizes p50 {} B, p99 {} B (log2 buckets: powers of two at or below)",
            c.read_bytes, c.write_bytes, c.trims, c.request_sizes.p50, c.request_sizes.p99
        )?;
        writeln!(
            f,
            "arrivals     inter-arrival p50 {} ns, p90 {} ns, p99 {} ns (log2 buckets)",
            c.inter_arrival_ns.p50, c.inter_arrival_ns.p90, c.inter_arrival_ns.p99
        )?;
        let lines_known = c.intervals.iter().all(|r| r.reuse.is_some());
        let reuse_of =
            |g: fn(&reuse::IntervalReuse) -> u64| of_opt(&c.intervals, |r| r.reuse.as_ref().map(g));
        let (reuses, urd, trd) = (
            reuse_of(|r| r.reuses),
            reuse_of(|r| r.urd_demand_lines),
            reuse_of(|r| r.trd_demand_lines),
        );
        let peak_ws = c.intervals.iter().filter_map(|r| r.working_set_lines).max();
        writeln!(
            f,
            "intervals    {} of {} ms; median {:.0} IOPS, peak {:.0}; {} bursts (> {}x median) over {} intervals, longest {}; peak working set {}",
            c.intervals.len(),
            c.interval_ns / 1_000_000,
            c.bursts.median_iops,
            c.bursts.peak_iops,
            c.bursts.bursts,
            c.bursts.factor,
            c.bursts.burst_intervals,
            c.bursts.longest_burst_intervals,
            match (lines_known, peak_ws) {
                (true, Some(ws)) => format!("{ws} lines"),
                (true, None) => "0 lines".to_string(),
                (false, _) => "not computed (sampled analysis)".to_string(),
            }
        )?;
        if c.intervals_widened {
            writeln!(
                f,
                "             (intervals widened to {} ms to keep at most {} rows; working sets of widened intervals are lower bounds)",
                c.interval_ns / 1_000_000,
                characterise::MAX_INTERVALS
            )?;
        }
        if !lines_known {
            return writeln!(
                f,
                "reuse        per interval: not computed (sampled analysis; --exact computes it)"
            );
        }
        writeln!(
            f,
            "reuse        per interval: reuses median {}, max {}; URD demand median {}, max {} lines; TRD demand median {}, max {} lines",
            reuses.0, reuses.1, urd.0, urd.1, trd.0, trd.1
        )
    }
}
