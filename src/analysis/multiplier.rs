//! Compute multipliers with bootstrap intervals (SPEC section 10).
//!
//! The unit of resampling is a run group: every arm's run at one (size, seed). Drawing
//! groups with replacement keeps seeds paired across arms; each resample averages the
//! seeds of each point, refits, and recomputes the multipliers.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::fit::{ArmPoints, EMode, Law, fit};

/// One finished run as the fit sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPoint {
    pub arm: String,
    pub size: String,
    pub seed: u64,
    /// PFLOP/s-days.
    pub compute: f64,
    pub loss: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    pub compute: f64,
    pub multiplier: Estimate,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmFit {
    pub arm: String,
    pub law: Law,
    pub points: usize,
    pub seeds: usize,
    /// Against the baseline at the largest compute; None for the baseline itself.
    pub multiplier: Option<Estimate>,
    pub curve: Vec<CurvePoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitReport {
    pub baseline: String,
    pub e_mode: EMode,
    /// Compute unit of `law` and `curve`.
    pub compute_unit: String,
    pub largest_compute: f64,
    pub resamples: usize,
    /// Resamples whose refit failed (an arm left with one distinct size); excluded.
    pub failed_resamples: usize,
    pub seed: u64,
    pub arms: Vec<ArmFit>,
}

#[derive(Debug, Clone)]
pub struct FitOptions {
    pub baseline: String,
    pub e_mode: EMode,
    pub resamples: usize,
    pub seed: u64,
    pub curve_points: usize,
}

/// Arms in first-seen order, the baseline first.
fn arm_names(points: &[RunPoint], baseline: &str) -> Vec<String> {
    let mut arms = vec![baseline.to_string()];
    for p in points {
        if !arms.contains(&p.arm) {
            arms.push(p.arm.clone());
        }
    }
    arms
}

/// Per-arm points with seeds averaged, counting each group `weights[g]` times.
fn aggregate(
    points: &[RunPoint],
    arms: &[String],
    groups: &[(String, u64)],
    weights: &[usize],
) -> Vec<ArmPoints> {
    arms.iter()
        .map(|arm| {
            let mut sizes: Vec<(&str, f64, f64, usize)> = Vec::new(); // size, compute, loss sum, n
            for p in points.iter().filter(|p| &p.arm == arm) {
                let g = groups
                    .iter()
                    .position(|(s, seed)| *s == p.size && *seed == p.seed)
                    .unwrap_or(0);
                let w = weights[g];
                if w == 0 {
                    continue;
                }
                match sizes.iter_mut().find(|s| s.0 == p.size) {
                    Some(s) => {
                        s.2 += p.loss * w as f64;
                        s.3 += w;
                    }
                    None => sizes.push((&p.size, p.compute, p.loss * w as f64, w)),
                }
            }
            ArmPoints {
                compute: sizes.iter().map(|s| s.1).collect(),
                loss: sizes.iter().map(|s| s.2 / s.3 as f64).collect(),
            }
        })
        .collect()
}

/// `C_base(L_m(C)) / C`: how much more compute the baseline needs to match arm `m` at `C`.
pub fn multiplier_at(base: &Law, arm: &Law, c: f64) -> f64 {
    base.compute_for(arm.loss(c)) / c
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

/// Fits every arm and bootstraps the multipliers. Errors say which arm lacks points.
pub fn analyse(points: &[RunPoint], opts: &FitOptions) -> Result<FitReport, String> {
    if !points.iter().any(|p| p.arm == opts.baseline) {
        return Err(format!(
            "no runs of the baseline arm `{}`; pass --baseline with one of the arms",
            opts.baseline
        ));
    }
    let arms = arm_names(points, &opts.baseline);
    let mut groups: Vec<(String, u64)> = points.iter().map(|p| (p.size.clone(), p.seed)).collect();
    groups.sort();
    groups.dedup();
    let all = vec![1; groups.len()];
    let data = aggregate(points, &arms, &groups, &all);
    for (arm, pts) in arms.iter().zip(&data) {
        if pts.compute.len() < 2 {
            return Err(format!(
                "arm `{arm}` has {} size(s); a scaling fit needs at least two",
                pts.compute.len()
            ));
        }
    }
    let full = fit(&data, opts.e_mode).ok_or("the scaling fit did not converge")?;
    let c_max = points.iter().map(|p| p.compute).fold(f64::MIN, f64::max);
    let c_min = points.iter().map(|p| p.compute).fold(f64::MAX, f64::min);
    let grid: Vec<f64> = (0..opts.curve_points)
        .map(|i| {
            (c_min.ln()
                + (c_max.ln() - c_min.ln()) * i as f64 / (opts.curve_points.max(2) - 1) as f64)
                .exp()
        })
        .collect();
    // Each resample: the multiplier of every arm at C_max and along the grid.
    let samples: Vec<Option<Vec<Vec<f64>>>> = (0..opts.resamples)
        .into_par_iter()
        .map(|b| {
            let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
            rng.set_stream(b as u64 + 1);
            let mut weights = vec![0; groups.len()];
            for _ in 0..groups.len() {
                weights[rng.random_range(0..groups.len())] += 1;
            }
            let resampled = aggregate(points, &arms, &groups, &weights);
            let f = super::fit::fit_from(&resampled, opts.e_mode, &full.laws)?;
            Some(
                f.laws
                    .iter()
                    .map(|law| {
                        std::iter::once(c_max)
                            .chain(grid.iter().copied())
                            .map(|c| multiplier_at(&f.laws[0], law, c))
                            .collect()
                    })
                    .collect(),
            )
        })
        .collect();
    let ok: Vec<&Vec<Vec<f64>>> = samples.iter().flatten().collect();
    let estimate = |k: usize, j: usize, value: f64| {
        let mut v: Vec<f64> = ok
            .iter()
            .map(|s| s[k][j])
            .filter(|x| x.is_finite())
            .collect();
        v.sort_by(f64::total_cmp);
        Estimate {
            value,
            lo: percentile(&v, 0.025),
            hi: percentile(&v, 0.975),
        }
    };
    let arm_fits = arms
        .iter()
        .enumerate()
        .map(|(k, arm)| {
            let law = full.laws[k];
            let base = &full.laws[0];
            let seeds = {
                let mut s: Vec<u64> = points
                    .iter()
                    .filter(|p| &p.arm == arm)
                    .map(|p| p.seed)
                    .collect();
                s.sort();
                s.dedup();
                s.len()
            };
            ArmFit {
                arm: arm.clone(),
                law,
                points: data[k].compute.len(),
                seeds,
                multiplier: (k > 0).then(|| estimate(k, 0, multiplier_at(base, &law, c_max))),
                curve: if k == 0 {
                    Vec::new()
                } else {
                    grid.iter()
                        .enumerate()
                        .map(|(j, &c)| CurvePoint {
                            compute: c,
                            multiplier: estimate(k, j + 1, multiplier_at(base, &law, c)),
                        })
                        .collect()
                },
            }
        })
        .collect();
    Ok(FitReport {
        baseline: opts.baseline.clone(),
        e_mode: opts.e_mode,
        compute_unit: "PFLOP/s-days".into(),
        largest_compute: c_max,
        resamples: opts.resamples,
        failed_resamples: samples.len() - ok.len(),
        seed: opts.seed,
        arms: arm_fits,
    })
}
