//! When a fitted scaling law is not one to read a multiplier from: too few or too close
//! computes, a rising or flat curve, or an offset fitted with too few points.

use super::fit::{ArmPoints, EMode, Law, distinct, parameter_count};

/// Why fitted `laws` are not laws to read a multiplier from, if they are not: an arm with
/// fewer than three compute values, computes spanning under 4x, an exponent that is not
/// positive, a power term that is flat over the data (under 1% of the loss at the smallest
/// compute), or `E` driven to zero with under three residual degrees of freedom.
pub fn degenerate(
    arms: &[ArmPoints],
    laws: &[Law],
    names: &[String],
    mode: EMode,
) -> Option<String> {
    let computes: Vec<f64> = arms
        .iter()
        .flat_map(|a| a.compute.iter().copied())
        .collect();
    let (lo, hi) = computes
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), &c| {
            (lo.min(c), hi.max(c))
        });
    for (arm, name) in arms.iter().zip(names) {
        let n = distinct(&arm.compute);
        if n < 3 {
            return Some(format!(
                "`{name}` has {n} compute values, and a law with an exponent and an offset needs at least three"
            ));
        }
    }
    if hi / lo < 4.0 {
        return Some(format!(
            "the runs span {:.1}x in compute, under the 4x a law needs",
            hi / lo
        ));
    }
    for ((law, arm), name) in laws.iter().zip(arms).zip(names) {
        if law.alpha <= 0.0 {
            return Some(format!(
                "`{name}`'s fitted exponent is {:.3}, so its loss would not fall with compute",
                law.alpha
            ));
        }
        let floor = arm.loss.iter().copied().fold(f64::INFINITY, f64::min);
        if law.a * lo.powf(-law.alpha) < 0.01 * floor {
            return Some(format!(
                "`{name}`'s power term is under 1% of its loss at the smallest compute (A = {:.1e}, exponent {:.2}): the fit is flat",
                law.a, law.alpha
            ));
        }
    }
    let points: usize = arms.iter().map(|a| a.compute.len()).sum();
    let dof = points.saturating_sub(parameter_count(arms.len(), mode));
    let floor = arms
        .iter()
        .flat_map(|a| a.loss.iter().copied())
        .fold(f64::INFINITY, f64::min);
    if mode != EMode::Zero && laws.iter().any(|l| l.e < 1e-3 * floor) && dof < 3 {
        return Some(format!(
            "E went to zero with {dof} residual degrees of freedom: too few points to fit it (try --e zero, or more sizes)"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fit::fit;

    /// Four computes, 4x apart.
    const COMPUTE: [f64; 4] = [1e-6, 4e-6, 1.6e-5, 6.4e-5];

    /// A law is read only where there is one: each rule of `degenerate` fires on its case, and
    /// a clean four-size fit passes.
    #[test]
    fn degenerate_fits_are_named_and_a_clean_one_is_not() {
        let law = Law {
            a: 0.4,
            alpha: 0.08,
            e: 0.3,
        };
        let arm = |computes: &[f64], law: &Law| ArmPoints {
            compute: computes.to_vec(),
            loss: computes.iter().map(|&c| law.loss(c)).collect(),
        };
        let names = vec!["baseline".to_string(), "block".to_string()];
        let four = &COMPUTE[..];
        // An arm as efficient as 1.2x the compute: the same law with `A` scaled by 1.2^-alpha.
        let efficient = Law {
            a: law.a * 1.2f64.powf(-law.alpha),
            ..law
        };
        let clean = [arm(four, &law), arm(four, &efficient)];
        let fitted = fit(&clean, EMode::Shared).expect("a fit");
        assert_eq!(
            degenerate(&clean, &fitted.laws, &names, EMode::Shared),
            None
        );
        let why = |arms: &[ArmPoints], laws: &[Law], mode| {
            degenerate(arms, laws, &names, mode).unwrap_or_default()
        };
        let two = [arm(&COMPUTE[..2], &law), arm(&COMPUTE[..2], &law)];
        assert!(why(&two, &[law, law], EMode::Shared).contains("has 2 compute values"));
        let narrow = [1e-6, 1.5e-6, 2e-6];
        let close = [arm(&narrow, &law), arm(&narrow, &law)];
        assert!(why(&close, &[law, law], EMode::Shared).contains("span 2.0x"));
        let rising = Law {
            alpha: -0.01,
            ..law
        };
        assert!(why(&clean, &[law, rising], EMode::Shared).contains("exponent is -0.010"));
        let flat = Law {
            a: 2.7e-8,
            alpha: 0.9,
            e: 1.68,
        };
        assert!(why(&clean, &[flat, law], EMode::Shared).contains("the fit is flat"));
        // Three computes per arm and E at zero: 6 points, 5 shared-E parameters, 1 df.
        let three = &COMPUTE[..3];
        let pure = Law { e: 1e-9, ..law };
        let few = [arm(three, &pure), arm(three, &pure)];
        assert!(why(&few, &[pure, pure], EMode::Shared).contains("E went to zero with 1 residual"));
        // The same points fitted with E fixed at zero have nothing to flag.
        assert_eq!(degenerate(&few, &[pure, pure], &names, EMode::Zero), None);
    }
}
