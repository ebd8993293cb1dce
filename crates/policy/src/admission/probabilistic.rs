//! Probabilistic admission: each candidate is admitted with a fixed probability, drawn from a
//! seeded stream (libCacheSim's `prob` admissioner), so a cache admits a set fraction of the
//! one-off lines that would otherwise each displace a resident one.

use super::Admission;
use tiercache_core::splitmix::splitmix64;
use tiercache_core::LineKey;

/// Admits with probability `p`, deterministically: the `i`-th decision is a function of the
/// seed and `i` alone.
#[derive(Debug, Clone)]
pub struct Probabilistic {
    /// `p` scaled to `u64`: admit when the draw is below it.
    threshold: u64,
    /// Whether `p` is 1 (no draw is below `u64::MAX + 1`).
    always: bool,
    state: u64,
}

impl Probabilistic {
    /// Admits with `probability` (0.0..=1.0), its draws seeded by `seed`.
    pub fn new(probability: f64, seed: u64) -> Self {
        let p = probability.clamp(0.0, 1.0);
        Self {
            threshold: (p * u64::MAX as f64) as u64,
            always: p >= 1.0,
            state: seed,
        }
    }
}

impl Admission for Probabilistic {
    fn name(&self) -> &'static str {
        "probabilistic"
    }

    fn admit(&mut self, _key: LineKey, _victim: Option<LineKey>) -> bool {
        // A draw per decision, even at p = 1 or 0, so the stream's position is the decision count.
        let draw = splitmix64(&mut self.state);
        self.always || draw < self.threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against the binomial model: over 20,000 decisions the admitted fraction is within
        /// five standard deviations of `p`, and the same seed gives the same decisions.
        #[test]
        fn admits_the_expected_fraction_deterministically(p in 0.0f64..=1.0, seed in any::<u64>()) {
            let n = 20_000;
            let run = |seed| {
                let mut a = Probabilistic::new(p, seed);
                (0..n).map(|k| a.admit(LineKey(k), None)).collect::<Vec<_>>()
            };
            let decisions = run(seed);
            prop_assert_eq!(&decisions, &run(seed));
            let admitted = decisions.iter().filter(|&&d| d).count() as f64;
            let sd = (n as f64 * p * (1.0 - p)).sqrt();
            prop_assert!((admitted - n as f64 * p).abs() <= 5.0 * sd + 1.0,
                "{} of {} admitted at p = {}", admitted, n, p);
        }
    }

    #[test]
    fn zero_and_one_are_exact() {
        let mut never = Probabilistic::new(0.0, 1);
        let mut always = Probabilistic::new(1.0, 1);
        for k in 0..10_000 {
            assert!(!never.admit(LineKey(k), None));
            assert!(always.admit(LineKey(k), None));
        }
    }

    #[test]
    fn different_seeds_decide_differently() {
        let run = |seed| {
            let mut a = Probabilistic::new(0.5, seed);
            (0..64)
                .map(|k| a.admit(LineKey(k), None))
                .collect::<Vec<_>>()
        };
        assert_ne!(run(1), run(2));
    }
}
