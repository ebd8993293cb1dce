//! CPU cache hints for the hot loops (hit-ratio-only simulation, analysis).
//!
//! Simulating a cache is a chain of dependent random memory reads (index bucket, line entry,
//! replacement-list links); the CPU waits on each. Loops that know the next requests ahead ask
//! for those cache lines early so the loads overlap.

/// Asks the CPU to start loading the cache line holding `p` into its caches. A hint only: it
/// neither reads nor writes program-visible memory, so any address, valid or not, is allowed.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` requires the SSE target feature, which is part of the x86_64
    // baseline (every x86_64 target enables it). PREFETCHT0 never faults and has no
    // architectural effect whatever address it is given (Intel SDM Vol. 2B, PREFETCHh: "does not
    // affect program behavior"), so no validity of `p` is needed.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::prefetch;

    #[test]
    fn prefetch_is_a_pure_hint() {
        let v: Vec<u64> = (0..1024).collect();
        for i in (0..v.len()).step_by(8) {
            prefetch(&v[i]);
        }
        // Addresses past the end, dangling and null are allowed: a hint never faults.
        prefetch(v.as_ptr().wrapping_add(1 << 20));
        prefetch(std::ptr::null::<u8>());
        prefetch(std::ptr::dangling::<u64>());
        assert_eq!(v.iter().sum::<u64>(), 1023 * 1024 / 2);
    }
}
