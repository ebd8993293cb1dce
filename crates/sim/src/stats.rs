//! Window arithmetic on the policy's cumulative counters, and their mapping into run metrics.

use tiercache_metrics::{ratio, RunMetrics};
use tiercache_policy::{BypassReason, CacheStats};

/// `later − earlier`, field by field: the counters of a window.
pub fn stats_diff(earlier: &CacheStats, later: &CacheStats) -> CacheStats {
    macro_rules! d {
        ($($f:ident),*) => {
            CacheStats {
                $($f: later.$f - earlier.$f,)*
                bypasses: std::array::from_fn(|i| later.bypasses[i] - earlier.bypasses[i]),
            }
        };
    }
    d!(
        requests,
        read_requests,
        write_requests,
        full_hit_requests,
        read_hit_requests,
        write_hit_requests,
        line_accesses,
        line_hits,
        line_partial_hits,
        line_misses,
        read_line_accesses,
        read_line_hits,
        write_line_accesses,
        write_line_hits,
        promotions,
        write_allocations,
        evictions,
        dirty_evictions,
        invalidations,
        cleaned_lines,
        clean_jobs,
        written_back_bytes,
        cache_bytes_written,
        cache_bytes_read,
        backend_bytes_read,
        backend_bytes_written,
        dirtied_bytes,
        trimmed_dirty_bytes,
        balancer_polls,
        demotions,
        balancer_bypassed,
        balancer_changes,
        demoted_bytes,
        demotes_received,
        demotes_accepted,
        demotes_already_held,
        demotes_rejected,
        demoted_in_bytes
    )
}

/// Fills the policy-derived fields of `m` from a window's counters.
pub fn fill_policy_metrics(m: &mut RunMetrics, d: &CacheStats) {
    m.hit_ratio = ratio(d.line_hits, d.line_accesses);
    m.read_hit_ratio = ratio(d.read_line_hits, d.read_line_accesses);
    m.write_hit_ratio = ratio(d.write_line_hits, d.write_line_accesses);
    m.full_hit_ratio = ratio(d.full_hit_requests, d.read_requests + d.write_requests);
    m.partial_hit_ratio = ratio(d.line_partial_hits, d.line_accesses);
    m.promotions = d.promotions;
    m.evictions = d.evictions;
    m.dirty_evictions = d.dirty_evictions;
    m.flushes = d.cleaned_lines;
    m.flush_jobs = d.clean_jobs;
    m.bypasses = BypassReason::ALL
        .iter()
        .map(|r| (r.name().to_string(), d.bypasses_for(*r)))
        .collect();
    if d.balancer_bypassed > 0 {
        // Requests the load balancer sent past the cache (their lines also count under
        // "mode": the mode in force for them sent them to the backend).
        m.bypasses
            .insert("balancer-requests".to_string(), d.balancer_bypassed);
    }
    m.cache_bytes_written = d.cache_bytes_written;
    m.cache_bytes_read = d.cache_bytes_read;
    m.backend_bytes_read = d.backend_bytes_read;
    m.backend_bytes_written = d.backend_bytes_written;
    m.written_back_bytes = d.written_back_bytes;
}
