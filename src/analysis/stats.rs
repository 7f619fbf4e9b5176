//! Small-sample statistics of SPEC section 11: Student-t intervals over seeds, paired
//! t-tests, Holm's step-down correction, percentiles that keep infinite values, and the
//! distribution-free interval for a median that `bench` gives its ratios.
//!
//! Everything here is for 2 to ~10 seeds, where z = 1.96 is far too narrow (t = 4.30 at
//! n = 3), so nothing in this file uses a normal quantile for an interval over seeds.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use statrs::distribution::{Binomial, ContinuousCDF, DiscreteCDF, Normal, StudentsT};

/// Two-sided confidence level of every interval we print.
pub const LEVEL: f64 = 0.95;

/// The `q` quantile of Student's t with `df` degrees of freedom (`df >= 1`).
pub fn t_quantile(q: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.inverse_cdf(q),
        Err(_) => f64::NAN,
    }
}

/// `P(T <= x)` for Student's t with `df` degrees of freedom.
pub fn t_cdf(x: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.cdf(x),
        Err(_) => f64::NAN,
    }
}

/// The standard normal CDF.
pub fn normal_cdf(x: f64) -> f64 {
    Normal::standard().cdf(x)
}

/// The standard normal quantile.
pub fn normal_quantile(q: f64) -> f64 {
    Normal::standard().inverse_cdf(q)
}

/// Mean, sample standard deviation (n - 1) and count.
pub fn mean_sd(values: &[f64]) -> (f64, f64, usize) {
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    let sd = if n > 1 {
        (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        f64::NAN
    };
    (mean, sd, n)
}

/// A mean over seeds with its two-sided 95% Student-t interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SeedMean {
    pub mean: f64,
    /// Half-width `t(0.975, n-1) s / sqrt(n)`; NaN with one seed (no interval).
    #[serde(with = "ext_f64")]
    pub half: f64,
    pub n: usize,
}

impl SeedMean {
    pub fn of(values: &[f64]) -> Self {
        let (mean, sd, n) = mean_sd(values);
        let half = if n > 1 {
            t_quantile(0.5 + LEVEL / 2.0, (n - 1) as f64) * sd / (n as f64).sqrt()
        } else {
            f64::NAN
        };
        Self { mean, half, n }
    }
    pub fn lo(&self) -> f64 {
        self.mean - self.half
    }
    pub fn hi(&self) -> f64 {
        self.mean + self.half
    }
    /// `1.6607 ± 0.0077` (`1.6607` alone with one seed), `digits` decimals.
    pub fn display(&self, digits: usize) -> String {
        if self.half.is_finite() {
            format!("{:.digits$} ± {:.digits$}", self.mean, self.half)
        } else {
            format!("{:.digits$}", self.mean)
        }
    }
}

/// A paired comparison over seeds: `arm - baseline` on the same seed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairedTest {
    /// Mean difference with its t-interval.
    pub diff: SeedMean,
    /// Two-sided p-value of the paired t-test (NaN with fewer than two pairs or no spread).
    #[serde(with = "ext_f64")]
    pub p: f64,
}

impl PairedTest {
    pub fn of(differences: &[f64]) -> Self {
        let diff = SeedMean::of(differences);
        let (mean, sd, n) = mean_sd(differences);
        let p = if n > 1 && sd > 0.0 {
            let t = mean / (sd / (n as f64).sqrt());
            2.0 * (1.0 - t_cdf(t.abs(), (n - 1) as f64))
        } else {
            f64::NAN
        };
        Self { diff, p }
    }
}

/// Holm's step-down correction: which of `p` are rejected at family-wise level `alpha`.
/// NaN p-values are never rejected but still count in the family size.
pub fn holm(p: &[f64], alpha: f64) -> Vec<bool> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut rejected = vec![false; m];
    for (rank, &i) in order.iter().enumerate() {
        if p[i].is_finite() && p[i] <= alpha / (m - rank) as f64 {
            rejected[i] = true;
        } else {
            break;
        }
    }
    rejected
}

/// The `q` percentile of `sorted` (ascending, infinities allowed), by nearest rank.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

/// A distribution-free interval for the median of the population `sorted` (ascending) was
/// drawn from, at two-sided level at least `level`: the order statistics `x_(k)` and
/// `x_(n+1-k)` (1-based) for the largest `k` with `2 P(B <= k - 1) <= 1 - level`, `B ~
/// Binomial(n, 1/2)`, since the median lies below `x_(k)` only when fewer than `k` draws fall
/// below it. Returns `(low, high, coverage)` with the exact coverage `1 - 2 P(B <= k - 1)`,
/// or `None` when even the whole range falls short of `level` (fewer than 6 draws at 95%).
/// It assumes the draws independent and from one population, nothing about its shape.
pub fn median_interval(sorted: &[f64], level: f64) -> Option<(f64, f64, f64)> {
    let n = sorted.len();
    let binomial = Binomial::new(0.5, n as u64).ok()?;
    let miss = |k: usize| 2.0 * binomial.cdf(k as u64 - 1);
    let k = (1..=n.div_ceil(2))
        .take_while(|&k| miss(k) <= 1.0 - level)
        .last()?;
    Some((sorted[k - 1], sorted[n - k], 1.0 - miss(k)))
}

/// `[1.053, 1.341]`, or `[1.05, ∞)` when the upper end is infinite, `(0, 1.3]` when the
/// lower end is unknown (failed resamples fill the lower tail).
pub fn fmt_interval(lo: f64, hi: f64, digits: usize) -> String {
    let left = if lo.is_finite() && lo > 0.0 {
        format!("[{lo:.digits$}")
    } else {
        "(0".to_string()
    };
    let right = if hi.is_finite() {
        format!("{hi:.digits$}]")
    } else {
        "∞)".to_string()
    };
    format!("{left}, {right}")
}

/// Serde for floats that may be infinite or NaN: JSON has no such numbers, so they are
/// written as the strings "inf", "-inf" and "nan" rather than silently as `null`.
pub mod ext_f64 {
    use super::*;

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else if v.is_nan() {
            s.serialize_str("nan")
        } else if *v > 0.0 {
            s.serialize_str("inf")
        } else {
            s.serialize_str("-inf")
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Num(f64),
            Text(String),
            Null(()),
        }
        Ok(match Wire::deserialize(d)? {
            Wire::Num(v) => v,
            Wire::Text(t) => match t.as_str() {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                _ => f64::NAN,
            },
            Wire::Null(()) => f64::NAN,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_tables() {
        for (df, want) in [(1.0, 12.706), (2.0, 4.303), (3.0, 3.182), (4.0, 2.776)] {
            assert!((t_quantile(0.975, df) - want).abs() < 1e-3, "df {df}");
        }
    }

    #[test]
    fn median_intervals_take_the_binomial_order_statistics() {
        let draws: Vec<f64> = (1..=20).map(f64::from).collect();
        // n = 20: P(B <= 5) = 0.0207, P(B <= 6) = 0.0577, so k = 6: x_(6) and x_(15).
        let (lo, hi, coverage) = median_interval(&draws, LEVEL).expect("20 draws");
        assert_eq!((lo, hi), (6.0, 15.0));
        assert!((coverage - 0.9586).abs() < 1e-4, "{coverage}");
        // n = 6: only the whole range, at 1 - 2/64.
        let (lo, hi, coverage) = median_interval(&draws[..6], LEVEL).expect("6 draws");
        assert_eq!((lo, hi), (1.0, 6.0));
        assert!((coverage - 0.96875).abs() < 1e-12);
        // n = 5: the whole range covers 0.9375 only.
        assert_eq!(median_interval(&draws[..5], LEVEL), None);
        assert_eq!(median_interval(&[], LEVEL), None);
    }

    #[test]
    fn median_intervals_cover_at_their_level() {
        // Draws from a skewed population (exponential, median ln 2) by a seeded generator:
        // the interval holds the true median about as often as its coverage says.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(13);
        let mut uniform = || rng.random::<f64>();
        let (trials, n) = (4000, 20);
        let mut held = 0;
        for _ in 0..trials {
            let mut draws: Vec<f64> = (0..n).map(|_| -(1.0 - uniform()).ln()).collect();
            draws.sort_by(f64::total_cmp);
            let (lo, hi, _) = median_interval(&draws, LEVEL).unwrap();
            held += usize::from(lo <= 2f64.ln() && 2f64.ln() <= hi);
        }
        // Coverage 0.9586; 4000 trials put 3 standard errors at 0.0095.
        let rate = held as f64 / trials as f64;
        assert!((rate - 0.9586).abs() < 0.0095, "held {rate}");
    }

    #[test]
    fn three_seeds_use_t_not_z() {
        // s = 1, n = 3: half-width 4.303 / sqrt(3).
        let m = SeedMean::of(&[-1.0, 0.0, 1.0]);
        assert!((m.half - 4.303 / 3f64.sqrt()).abs() < 1e-3, "{m:?}");
    }

    #[test]
    fn holm_steps_down_and_stops() {
        // m = 4: thresholds 0.0125, 0.0167, 0.025, 0.05.
        assert_eq!(
            holm(&[0.01, 0.04, 0.016, 0.3], 0.05),
            vec![true, false, true, false]
        );
        assert_eq!(holm(&[0.03, 0.03], 0.05), vec![false, false]);
        assert_eq!(holm(&[0.02, 0.02], 0.05), vec![true, true]);
        assert_eq!(holm(&[f64::NAN, 0.001], 0.05), vec![false, true]);
    }

    #[test]
    fn paired_t_test_p_value() {
        // Differences 1, 2, 3: t = 2 / (1 / sqrt 3) = 3.464 on 2 df, p = 0.0742.
        let t = PairedTest::of(&[1.0, 2.0, 3.0]);
        assert!((t.p - 0.0742).abs() < 1e-3, "{t:?}");
    }

    #[test]
    fn infinite_values_survive_json() {
        #[derive(Serialize, Deserialize)]
        struct W {
            #[serde(with = "ext_f64")]
            x: f64,
        }
        let text = serde_json::to_string(&W { x: f64::INFINITY }).unwrap();
        assert_eq!(text, r#"{"x":"inf"}"#);
        let back: W = serde_json::from_str(&text).unwrap();
        assert_eq!(back.x, f64::INFINITY);
        assert_eq!(fmt_interval(1.05, f64::INFINITY, 2), "[1.05, ∞)");
    }
}
