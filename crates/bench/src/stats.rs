//! Statistics over iterations, as the reports print them.
//!
//! mdtest and IOR print max, min, mean and the *population* standard
//! deviation (they divide by the number of iterations, not by one less);
//! [`Summary`] does the same so our figures read like theirs. The regression
//! suite needs an estimate of run-to-run noise instead, for which
//! [`sample_stddev`] divides by n - 1.

use serde::{Deserialize, Serialize};

/// Max, min, mean and population standard deviation of a set of figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Largest value.
    pub max: f64,
    /// Smallest value.
    pub min: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Population standard deviation (divides by n), as mdtest and IOR print.
    pub stddev: f64,
    /// Median: what comparisons quote, being robust to one noisy
    /// iteration on a shared machine.
    #[serde(default)]
    pub median: f64,
    /// How many values.
    pub count: usize,
}

impl Summary {
    /// Summarises `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() {
            return None;
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        let median = if sorted.len() % 2 == 1 {
            sorted[mid]
        } else {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        };
        Some(Summary {
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            mean,
            stddev: var.sqrt(),
            median,
            count: values.len(),
        })
    }
}

/// Sample standard deviation (divides by n - 1); 0 for fewer than two values.
pub fn sample_stddev(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
}

/// Geometric mean, as IO500 combines its phases; `None` when `values` is
/// empty or holds a value that is not positive (IO500 scores such a run 0).
pub fn geometric_mean(values: &[f64]) -> Option<f64> {
    if values.is_empty()
        || values
            .iter()
            .any(|v| v.is_nan() || *v <= 0.0 || !v.is_finite())
    {
        return None;
    }
    let log_sum: f64 = values.iter().map(|v| v.ln()).sum();
    Some((log_sum / values.len() as f64).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn summary_of_known_values_matches_population_formulas() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, population variance 4.
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).expect("values");
        assert!(close(s.mean, 5.0));
        assert!(close(s.stddev, 2.0));
        assert!(close(s.max, 9.0));
        assert!(close(s.min, 2.0));
        assert_eq!(s.count, 8);
    }

    #[test]
    fn summary_of_one_value_has_no_spread() {
        let s = Summary::of(&[42.5]).expect("one value");
        assert_eq!((s.max, s.min, s.mean, s.stddev), (42.5, 42.5, 42.5, 0.0));
    }

    #[test]
    fn summary_of_nothing_is_none() {
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn sample_stddev_divides_by_n_minus_one() {
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        // sum of squares 32 over 7.
        assert!(close(sample_stddev(&v), (32.0f64 / 7.0).sqrt()));
        assert_eq!(sample_stddev(&[3.0]), 0.0);
    }

    #[test]
    fn geometric_mean_of_powers_and_rejects_non_positive() {
        assert!(close(geometric_mean(&[1.0, 4.0]).expect("gm"), 2.0));
        assert!(close(geometric_mean(&[2.0, 8.0, 4.0]).expect("gm"), 4.0));
        assert!(geometric_mean(&[1.0, 0.0]).is_none());
        assert!(geometric_mean(&[1.0, -3.0]).is_none());
        assert!(geometric_mean(&[]).is_none());
    }

    proptest::proptest! {
        #[test]
        fn summary_is_bounded_and_shift_invariant(v in proptest::collection::vec(-1e6f64..1e6, 1..40), shift in -1e3f64..1e3) {
            let s = Summary::of(&v).expect("non-empty");
            proptest::prop_assert!(s.min <= s.mean + 1e-6 && s.mean <= s.max + 1e-6);
            proptest::prop_assert!(s.stddev >= 0.0);
            let shifted: Vec<f64> = v.iter().map(|x| x + shift).collect();
            let t = Summary::of(&shifted).expect("non-empty");
            proptest::prop_assert!((t.stddev - s.stddev).abs() <= 1e-6 * s.stddev.max(1.0));
        }
    }

    #[test]
    fn median_is_the_middle_value_or_the_mean_of_the_middle_two() {
        let odd = Summary::of(&[5.0, 1.0, 100.0]).expect("summary");
        assert_eq!(odd.median, 5.0);
        let even = Summary::of(&[4.0, 1.0, 3.0, 100.0]).expect("summary");
        assert_eq!(even.median, 3.5);
        assert_eq!(Summary::of(&[7.0]).expect("summary").median, 7.0);
    }
}
