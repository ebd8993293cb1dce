//! Samplers behind the address distributions: fast uniform integers, a Zipf sampler valid for
//! every exponent > 0, and a seeded bijection that scatters popularity ranks over the slots.

use rand_xoshiro::rand_core::RngCore;

/// Uniform `f64` in `[0, 1)` from the top 53 bits of one draw.
#[inline]
pub fn unit_f64<R: RngCore + ?Sized>(rng: &mut R) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Uniform integer in `0..n` (`n >= 1`) by one multiply (Lemire): the bias is at most
/// `n / 2^64`, far below anything a workload can observe, and it needs no rejection loop.
#[inline]
pub fn below<R: RngCore + ?Sized>(rng: &mut R, n: u64) -> u64 {
    ((rng.next_u64() as u128 * n as u128) >> 64) as u64
}

/// Segment width relative to its first rank: rank `a` starts a segment of `max(1, a >> 7)`
/// ranks, over which k^-θ varies by a factor of at most (1 + 1/128)^θ.
const SEGMENT_SHIFT: u32 = 7;

/// Zipf sampler over ranks `1..=n`, P(k) ∝ k^-θ, exact for any θ > 0 and any `n`.
///
/// The ranks are cut into segments: single ranks up to 128, then segments whose width grows
/// with their first rank (1/128 of it), so there are only about `128·(1 + ln(n/128))` of them
/// (≈ 2600 for n = 2^34). A draw picks a segment with Walker's alias method (Vose's
/// construction: one uniform index, one comparison, no search), then a rank inside it by
/// rejection from the uniform with acceptance (k/a)^-θ: the squeeze `((a+w−1)/a)^-θ`, a
/// constant per segment, accepts over 99% of draws for θ ≤ 1 without any transcendental
/// function, so a sample costs three random numbers and two table reads.
/// Segment masses are summed exactly for narrow segments and by Euler–Maclaurin for wide ones
/// (first rank ≥ 8192; the first omitted term is below 1e-20 relative).
#[derive(Debug, Clone)]
pub struct Zipf {
    theta: f64,
    /// Alias-method columns, one per segment.
    columns: Vec<AliasColumn>,
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, Copy)]
struct Segment {
    first: u64,
    width: u64,
    /// Lowest acceptance probability in the segment: draws below it accept at once.
    squeeze: f64,
}

#[derive(Debug, Clone, Copy)]
struct AliasColumn {
    /// Probability of keeping this column's own segment.
    keep: f64,
    /// Segment chosen otherwise.
    alias: u32,
}

impl Zipf {
    /// Sampler over `1..=n` with exponent `theta` (`n >= 1`, `theta > 0`, finite).
    pub fn new(n: u64, theta: f64) -> Self {
        debug_assert!(n >= 1 && theta > 0.0 && theta.is_finite());
        let mut segments = Vec::new();
        let mut masses = Vec::new();
        let mut a = 1u64;
        while a <= n {
            let width = (a >> SEGMENT_SHIFT).max(1).min(n - a + 1);
            let last = a + (width - 1);
            segments.push(Segment {
                first: a,
                width,
                squeeze: (last as f64 / a as f64).powf(-theta),
            });
            masses.push(power_sum(theta, a, last));
            match last.checked_add(1) {
                Some(next) => a = next,
                None => break, // n = u64::MAX: the last segment ends the range.
            }
        }
        Zipf {
            theta,
            columns: alias_table(&masses),
            segments,
        }
    }

    /// One rank in `1..=n`.
    #[inline]
    pub fn sample<R: RngCore + ?Sized>(&self, rng: &mut R) -> u64 {
        // One draw gives both the column (integer part) and the keep test (fraction).
        let x = unit_f64(rng) * self.columns.len() as f64;
        let i = (x as usize).min(self.columns.len() - 1);
        let col = self.columns[i];
        let seg = if x - (i as f64) < col.keep {
            i
        } else {
            col.alias as usize
        };
        self.rank_in(self.segments[seg], rng)
    }

    /// A rank of segment `seg`, distributed ∝ k^-θ within it.
    #[inline]
    fn rank_in<R: RngCore + ?Sized>(&self, seg: Segment, rng: &mut R) -> u64 {
        // No special case for single-rank segments: their squeeze is 1, so the first draw
        // accepts, and skipping a data-dependent branch is faster than saving two draws.
        loop {
            let k = seg.first + below(rng, seg.width);
            let v = unit_f64(rng);
            if v < seg.squeeze || v < (k as f64 / seg.first as f64).powf(-self.theta) {
                return k;
            }
        }
    }

    /// Number of segments (for reports and tests of the construction).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Exact probability of rank `k` (sums the normaliser: O(n), for tests and reports).
    pub fn probability(n: u64, theta: f64, k: u64) -> f64 {
        let norm: f64 = (1..=n).rev().map(|i| (i as f64).powf(-theta)).sum();
        (k as f64).powf(-theta) / norm
    }
}

/// Walker alias table of `weights` (Vose's construction, O(n)): column `i` keeps `i` with
/// probability `keep` and otherwise yields `alias`, so a uniform column plus one comparison
/// samples index `i` with probability `weights[i] / Σ weights`.
fn alias_table(weights: &[f64]) -> Vec<AliasColumn> {
    let n = weights.len();
    // Sum from the smallest terms (the tail) up, so the total is as accurate as the parts.
    let total: f64 = weights.iter().rev().sum();
    let mut scaled: Vec<f64> = weights.iter().map(|w| w / total * n as f64).collect();
    let mut columns: Vec<AliasColumn> = (0..n)
        .map(|i| AliasColumn {
            keep: 1.0,
            alias: i as u32,
        })
        .collect();
    let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| scaled[i] < 1.0);
    while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
        small.pop();
        columns[s] = AliasColumn {
            keep: scaled[s],
            alias: l as u32,
        };
        // The large column gives away what fills the small one.
        scaled[l] -= 1.0 - scaled[s];
        if scaled[l] < 1.0 {
            large.pop();
            small.push(l);
        }
    }
    // Whatever is left is 1 up to rounding: those columns keep themselves (the default).
    columns
}

/// Σ_{k=a}^{b} k^-θ: directly for short ranges, else by Euler–Maclaurin with terms up to the
/// third derivative (used only for a ≥ 8192, where the next term is negligible).
pub fn power_sum(theta: f64, a: u64, b: u64) -> f64 {
    let f = |x: f64| x.powf(-theta);
    if b - a < 64 {
        return (a..=b).rev().map(|k| f(k as f64)).sum();
    }
    let (af, bf, t) = (a as f64, b as f64, theta);
    let d1 = |x: f64| -t * x.powf(-t - 1.0);
    let d3 = |x: f64| -t * (t + 1.0) * (t + 2.0) * x.powf(-t - 3.0);
    integral(t, af, bf) + (f(af) + f(bf)) / 2.0 + (d1(bf) - d1(af)) / 12.0
        - (d3(bf) - d3(af)) / 720.0
}

/// ∫_a^b x^-θ dx = a^(1−θ) · ((b/a)^(1−θ) − 1)/(1−θ) (or a^0 · ln(b/a) at θ = 1), written
/// so that neither θ near 1 nor a large θ (where both end values are nearly equal) cancels.
fn integral(theta: f64, a: f64, b: f64) -> f64 {
    let log_ratio = (b / a).ln();
    a.powf(1.0 - theta) * helper2((1.0 - theta) * log_ratio) * log_ratio
}

/// `(e^x - 1)/x`, with its Taylor series near 0.
#[inline]
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

/// A seeded bijection of `0..n`: hot popularity ranks land on scattered slots.
///
/// Built from steps that are each invertible on `b`-bit words (`b = ⌈log2 n⌉`): xor with a key,
/// multiplication by an odd constant mod 2^b, `x ^= x >> s` with `s >= 1`, addition mod 2^b.
/// Their composition permutes `0..2^b`; cycle-walking (re-applying it until the value falls
/// below `n`) restricts that to a permutation of `0..n`, in fewer than 2 rounds on average since
/// `n > 2^(b-1)`.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    mask: u64,
    shift: u32,
    keys: [u64; 3],
}

impl Permutation {
    /// Permutation of `0..n` (`n >= 1`) chosen by `key`.
    pub fn new(n: u64, key: u64) -> Self {
        let bits = 64 - (n.max(1) - 1).leading_zeros();
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let mut sm = key;
        let keys = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        Permutation {
            n,
            mask,
            shift: (bits / 2).max(1),
            keys,
        }
    }

    /// Image of `x` (`x < n`).
    #[inline]
    pub fn apply(&self, mut x: u64) -> u64 {
        debug_assert!(x < self.n);
        loop {
            x = self.round(x);
            if x < self.n {
                return x;
            }
        }
    }

    #[inline]
    fn round(&self, mut x: u64) -> u64 {
        let m = self.mask;
        x ^= self.keys[0] & m;
        x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15) & m;
        x ^= x >> self.shift;
        x = x.wrapping_add(self.keys[1]) & m;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9) & m;
        x ^= x >> self.shift;
        x = x.wrapping_add(self.keys[2]) & m;
        x = x.wrapping_mul(0x94D0_49BB_1331_11EB) & m;
        x ^= x >> self.shift;
        x
    }
}

/// SplitMix64 step: derives independent 64-bit keys from one seed (defined once, in
/// `tiercache-core`; here under its old path).
pub use tiercache_core::splitmix::splitmix64;

#[cfg(test)]
mod tests {
    use super::*;
    use rand_xoshiro::rand_core::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn permutation_is_a_bijection_for_awkward_sizes() {
        for n in [1u64, 2, 3, 5, 7, 8, 9, 100, 1000, 1023, 1024, 1025, 4097] {
            for key in [0u64, 1, 0xdead_beef] {
                let p = Permutation::new(n, key);
                let mut seen = vec![false; n as usize];
                for x in 0..n {
                    let y = p.apply(x);
                    assert!(y < n, "n={n} x={x} -> {y}");
                    assert!(!seen[y as usize], "n={n} key={key}: {y} hit twice");
                    seen[y as usize] = true;
                }
            }
        }
    }

    #[test]
    fn permutation_scatters_consecutive_ranks() {
        let n = 1 << 20;
        let p = Permutation::new(n, 42);
        let adjacent = (0..1000u64)
            .filter(|&r| p.apply(r).abs_diff(p.apply(r + 1)) <= 1)
            .count();
        assert!(
            adjacent < 5,
            "{adjacent} of 1000 consecutive ranks stayed adjacent"
        );
        // Different keys give different permutations.
        let q = Permutation::new(n, 43);
        assert!((0..100u64).filter(|&r| p.apply(r) == q.apply(r)).count() < 5);
    }

    #[test]
    fn zipf_small_n_matches_exact_pmf() {
        // Chi-square over all ranks of a small support, for θ below, at and above 1.
        for theta in [0.5, 0.9, 1.0, 1.2, 2.5] {
            let n = 20u64;
            let z = Zipf::new(n, theta);
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
            let draws = 200_000u64;
            let mut counts = vec![0u64; n as usize + 1];
            for _ in 0..draws {
                let k = z.sample(&mut rng);
                assert!((1..=n).contains(&k));
                counts[k as usize] += 1;
            }
            let mut chi2 = 0.0;
            for k in 1..=n {
                let e = Zipf::probability(n, theta, k) * draws as f64;
                chi2 += (counts[k as usize] as f64 - e).powi(2) / e;
            }
            // 19 degrees of freedom: P(chi2 > 50) < 2e-4.
            assert!(chi2 < 50.0, "theta={theta}: chi2={chi2}");
        }
    }

    #[test]
    fn power_sum_matches_direct_summation() {
        for theta in [0.3, 0.9, 1.0, 1.0 + 1e-9, 1.2, 3.0] {
            for (a, b) in [
                (1u64, 10u64),
                (8192, 8255),
                (8192, 1 << 20),
                (100_000, 100_777),
            ] {
                let direct: f64 = (a..=b).rev().map(|k| (k as f64).powf(-theta)).sum();
                let got = power_sum(theta, a, b);
                assert!(
                    (got / direct - 1.0).abs() < 1e-11,
                    "theta={theta} {a}..={b}: {got} vs {direct}"
                );
            }
        }
    }

    #[test]
    fn zipf_segments_are_few_and_tile_the_ranks() {
        let z = Zipf::new(1 << 34, 0.9);
        assert!(z.segment_count() < 3_000, "{}", z.segment_count());
        for n in [1u64, 2, 127, 128, 129, 1000, 123_457] {
            let z = Zipf::new(n, 1.1);
            let mut next = 1;
            for s in &z.segments {
                assert_eq!(s.first, next);
                assert!(s.width >= 1);
                next += s.width;
            }
            assert_eq!(next, n + 1, "segments of n={n} end at n");
        }
    }

    #[test]
    fn zipf_rank_bands_on_a_mid_size_support() {
        // Bands mixing single-rank and wide segments, down to the far tail.
        let n = 3 * 8192;
        for theta in [0.6, 1.1] {
            let z = Zipf::new(n, theta);
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
            let draws = 400_000usize;
            let bands = [(1, 1), (2, 10), (11, 8192), (8193, 8292), (8293, n)];
            let mut counts = [0usize; 5];
            for _ in 0..draws {
                let k = z.sample(&mut rng);
                assert!((1..=n).contains(&k));
                counts[bands
                    .iter()
                    .position(|&(lo, hi)| (lo..=hi).contains(&k))
                    .unwrap()] += 1;
            }
            let norm: f64 = (1..=n).map(|k| (k as f64).powf(-theta)).sum();
            for (i, &(lo, hi)) in bands.iter().enumerate() {
                let p: f64 = (lo..=hi).map(|k| (k as f64).powf(-theta)).sum::<f64>() / norm;
                let f = counts[i] as f64 / draws as f64;
                let tol = 5.0 * (p * (1.0 - p) / draws as f64).sqrt();
                assert!(
                    (f - p).abs() < tol,
                    "theta={theta} band {lo}..={hi}: {f} vs {p}"
                );
            }
        }
    }

    #[test]
    fn ranks_within_a_segment_follow_the_power_law() {
        // A huge θ makes k^-θ vary strongly inside one segment, so the squeeze often fails and
        // the exact acceptance test decides.
        let theta = 40.0;
        let z = Zipf::new(2048, theta);
        let seg = *z.segments.iter().find(|s| s.first >= 1024).unwrap();
        assert_eq!(seg.width, 8);
        let a = seg.first;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let draws = 200_000;
        let mut counts = [0f64; 8];
        for _ in 0..draws {
            counts[(z.rank_in(seg, &mut rng) - a) as usize] += 1.0;
        }
        let w: Vec<f64> = (a..a + 8)
            .map(|k| (k as f64 / a as f64).powf(-theta))
            .collect();
        let total: f64 = w.iter().sum();
        let chi2: f64 = (0..8)
            .map(|i| {
                (counts[i] - w[i] / total * draws as f64).powi(2) / (w[i] / total * draws as f64)
            })
            .sum();
        // 7 degrees of freedom: P(chi2 > 30) < 1e-4.
        assert!(chi2 < 30.0, "chi2 {chi2}, counts {counts:?}");
    }

    #[test]
    fn alias_table_reproduces_the_weights_exactly() {
        let cases: Vec<Vec<f64>> = vec![
            vec![1.0],
            vec![1.0, 1.0],
            vec![5.0, 1.0, 1e-9, 3.0],
            (1..=1000).map(|k| (k as f64).powf(-1.2)).collect(),
        ];
        for weights in cases {
            let n = weights.len();
            let columns = alias_table(&weights);
            let mut p = vec![0.0; n];
            for (i, c) in columns.iter().enumerate() {
                assert!((0.0..=1.0).contains(&c.keep));
                p[i] += c.keep / n as f64;
                p[c.alias as usize] += (1.0 - c.keep) / n as f64;
            }
            let total: f64 = weights.iter().sum();
            for i in 0..n {
                assert!(
                    (p[i] - weights[i] / total).abs() < 1e-12,
                    "{i}: {} vs {}",
                    p[i],
                    weights[i] / total
                );
            }
        }
    }

    #[test]
    fn zipf_single_element() {
        let z = Zipf::new(1, 0.9);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        assert!((0..1000).all(|_| z.sample(&mut rng) == 1));
    }

    #[test]
    fn below_stays_in_range() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        for n in [1u64, 2, 3, 1000, u64::MAX] {
            for _ in 0..1000 {
                assert!(below(&mut rng, n) < n);
            }
        }
        let u = unit_f64(&mut rng);
        assert!((0.0..1.0).contains(&u));
    }
}
