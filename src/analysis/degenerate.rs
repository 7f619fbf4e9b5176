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
