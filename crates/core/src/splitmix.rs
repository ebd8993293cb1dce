//! SplitMix64 (Steele, Lea and Flood, 2014): the one definition of its step and of its
//! finaliser, shared by workload generation (keys from a seed), SHARDS sampling (the analysis's
//! and the multi-tenant policy's spatial hash) and the NBD client's session ids. Sampling
//! decisions and generated workloads depend on every bit, so this must not change.

/// The golden-ratio increment of the SplitMix64 state (2⁶⁴ / φ, odd).
pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The SplitMix64 finaliser (Stafford's "Mix13" variant): a bijection of `u64` whose output
/// bits each depend on every input bit.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// SplitMix64 step: advances `state` by [`GAMMA`] and returns the mixed state; derives
/// independent 64-bit keys from one seed.
#[inline]
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(GAMMA);
    mix64(*state)
}

/// The SplitMix64 output for state `key` (one step from `key`, without keeping the state): a
/// hash of a key, e.g. a line number spread over a sampling modulus.
#[inline]
pub fn hash64(key: u64) -> u64 {
    mix64(key.wrapping_add(GAMMA))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference sequence of SplitMix64 from seed 0 (as in Vigna's `splitmix64.c`).
    #[test]
    fn matches_the_reference_sequence() {
        let mut s = 0u64;
        let got: Vec<u64> = (0..3).map(|_| splitmix64(&mut s)).collect();
        assert_eq!(
            got,
            [
                0xE220_A839_7B1D_CDAF,
                0x6E78_9E6A_A1B9_65F4,
                0x06C4_5D18_8009_454F
            ]
        );
        assert_eq!(hash64(0), got[0]);
        assert_eq!(hash64(GAMMA), got[1]);
    }
}
