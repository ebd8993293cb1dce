//! Tick positions and nice bounds of a linear axis.

/// "Nice" tick positions covering `[lo, hi]` on a linear axis (about `n` of them, never more
/// than `2n + 2`). A range too narrow (or with no nice value in it) for its magnitude (a few ulps at 1e10, where a step
/// would not move a tick) gets its two bounds as ticks; an empty or non-finite one, `[lo]`.
pub fn linear_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !lo.is_finite() || !hi.is_finite() || hi <= lo {
        return vec![lo];
    }
    let n = n.max(1);
    let raw = (hi - lo) / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil();
    // Degenerate: the step is lost against the values (or overflowed), so stepping from tick
    // to tick would not advance.
    if !(step.is_finite() && step > 0.0 && first.is_finite()) || lo + step == lo || hi + step == hi
    {
        return vec![lo, hi];
    }
    let most = 2 * n + 2;
    let mut t: Vec<f64> = Vec::new();
    for i in 0..most {
        // Multiples of the step, not a running sum: no drift, and no loop on a stuck sum.
        let x = (first + i as f64) * step;
        if x > hi + step * 1e-9 {
            break;
        }
        let x = if x.abs() < step * 1e-9 { 0.0 } else { x };
        if t.last().is_some_and(|&prev| x <= prev) {
            break;
        }
        t.push(x);
    }
    // One tick requested over a range no multiple of the step falls in: show its bounds.
    if t.is_empty() {
        return vec![lo, hi];
    }
    t
}

/// Extends `[lo, hi]` to nice bounds (and to include 0 when `zero`).
pub(crate) fn nice_range(mut lo: f64, mut hi: f64, zero: bool) -> (f64, f64) {
    if zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    if hi.is_nan() || lo.is_nan() || hi <= lo {
        let pad = if hi == 0.0 { 1.0 } else { hi.abs() * 0.1 };
        return (lo - if zero && lo == 0.0 { 0.0 } else { pad }, hi + pad);
    }
    let t = linear_ticks(lo, hi, 5);
    let step = if t.len() > 1 { t[1] - t[0] } else { hi - lo };
    // Rounding at large values can put a multiple of a tiny step just inside the data.
    let a = (lo / step).floor() * step;
    let b = (hi / step).ceil() * step;
    (a.min(lo), b.max(hi))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_range_of_one_ulp_at_a_large_value_gets_its_bounds() {
        let hi = f64::next_up(1e10);
        assert_eq!(linear_ticks(1e10, hi, 6), [1e10, hi]);
        let (a, b) = nice_range(1e10, hi, false);
        assert!(a <= 1e10 && b >= hi && a.is_finite() && b.is_finite());
        assert_eq!(linear_ticks(f64::MIN, f64::MAX, 5), [f64::MIN, f64::MAX]);
    }

    proptest! {
        /// Ticks are increasing, evenly spaced, within the range (up to rounding) and few.
        #[test]
        fn linear_ticks_are_nice(lo in -1e6f64..1e6, span in 1e-3f64..1e7) {
            let hi = lo + span;
            let t = linear_ticks(lo, hi, 5);
            prop_assert!(!t.is_empty() && t.len() <= 12, "{t:?}");
            prop_assert!(t.windows(2).all(|w| w[1] > w[0]));
            let step = if t.len() > 1 { t[1] - t[0] } else { span };
            prop_assert!(t.iter().all(|x| *x >= lo - step * 1e-6 && *x <= hi + step * 1e-6));
        }

        /// Large values over tiny spans (down to one ulp) end, with few increasing ticks.
        #[test]
        fn narrow_ranges_at_large_values_end(
            exp in 3i32..300,
            mantissa in 1.0f64..10.0,
            negative: bool,
            ulps in 1u32..5000,
            n in 1usize..12,
        ) {
            let lo = mantissa * 10f64.powi(exp) * if negative { -1.0 } else { 1.0 };
            let mut hi = lo;
            for _ in 0..ulps {
                hi = f64::next_up(hi);
            }
            let t = linear_ticks(lo, hi, n);
            prop_assert!(!t.is_empty() && t.len() <= 2 * n + 2, "{t:?}");
            prop_assert!(t.windows(2).all(|w| w[1] > w[0]), "{t:?}");
            prop_assert!(t.iter().all(|x| x.is_finite()));
            let (a, b) = nice_range(lo, hi, false);
            prop_assert!(a.is_finite() && b.is_finite() && a <= lo && b >= hi, "{a} {b}");
        }
    }
}
