//! Compute multipliers with bootstrap intervals (SPEC sections 10 and 11), and everything
//! else `fits.json` says about a comparison: the resampling scheme used, failed and
//! infinite resamples, the held-out prediction of the largest cell, and per-cell paired
//! tests against the baseline.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::bootstrap::{Linearised, Resampler, Resampling, linearise};
use super::degenerate::degenerate;
use super::design::Design;
pub use super::design::RunPoint;
pub use super::fit::multiplier_at;
use super::fit::{ArmPoints, EMode, Law, fit, fit_with};
use super::no_fit::NoFit;
use super::paired::{PairedTable, paired_table};
use super::stats::{LEVEL, ext_f64, normal_quantile, percentile, t_quantile};
use super::validation::{HoldOut, hold_out_largest};

/// A point estimate with its 95% bootstrap interval. `hi` is infinite when more than 2.5%
/// of the resamples gave an infinite multiplier; `lo` is 0 when failed resamples fill the
/// lower tail (they count at both ends, never dropped).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    #[serde(with = "ext_f64")]
    pub value: f64,
    #[serde(with = "ext_f64")]
    pub lo: f64,
    #[serde(with = "ext_f64")]
    pub hi: f64,
    /// Monte Carlo standard error of the interval's ends (the larger of the two), from the
    /// resamples' order statistics: how far another generator seed would move them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mc_error: Option<f64>,
}

impl Estimate {
    /// `value` with no interval (NaN ends): nothing to resample, or no resample gave one.
    pub fn without_interval(value: f64) -> Self {
        Self {
            value,
            lo: f64::NAN,
            hi: f64::NAN,
            mc_error: None,
        }
    }

    /// Decimals worth printing for this interval: down to the Monte Carlo error's first
    /// significant digit (1 to 3; 3 when there is no error estimate).
    pub fn digits(&self) -> usize {
        match self.mc_error {
            Some(e) if e.is_finite() && e > 0.0 => (-e.log10()).ceil().clamp(1.0, 3.0) as usize,
            _ => 3,
        }
    }
}

/// The delta-method interval of a multiplier: `exp(ln M ± t(0.975, ν) · se)`, with the
/// standard error of `ln M` linearised in the cell means and `ν` its Welch-Satterthwaite
/// degrees of freedom. No resampling, so no Monte Carlo error.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DeltaInterval {
    #[serde(with = "ext_f64")]
    pub lo: f64,
    #[serde(with = "ext_f64")]
    pub hi: f64,
    /// Standard error of `ln M`.
    pub se_ln: f64,
    /// Welch-Satterthwaite degrees of freedom.
    pub dof: f64,
}

impl DeltaInterval {
    fn of(l: &Linearised) -> Self {
        let se_ln = l.var.sqrt();
        let t = t_quantile(0.5 + LEVEL / 2.0, l.dof);
        Self {
            lo: (l.ln_m - t * se_ln).exp(),
            hi: (l.ln_m + t * se_ln).exp(),
            se_ln,
            dof: l.dof,
        }
    }
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
    /// The same multiplier's delta-method Student-t interval; None for the baseline and
    /// where the fit does not respond smoothly to its cell means or there is no seed noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<DeltaInterval>,
    /// Resamples in which this arm's multiplier at the largest compute was infinite (its
    /// law reaches a loss the baseline's never does). Kept in the percentiles.
    pub infinite_resamples: usize,
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
    /// How the resamples were drawn.
    pub resampling: Resampling,
    /// Resamples whose refit failed; each counts at both ends of every interval.
    pub failed_resamples: usize,
    pub seed: u64,
    pub arms: Vec<ArmFit>,
    /// The largest cell predicted by a fit without it (needs 4 cells per arm).
    pub hold_out: Option<HoldOut>,
    /// Per-cell paired differences to the baseline, Holm-corrected.
    pub paired: PairedTable,
    /// Why the laws are not to be read (see [`super::degenerate::degenerate`]): then no report
    /// draws them or prints a multiplier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degenerate: Option<String>,
    /// Each arm's multiplier per unit of training time on the machine that timed the runs
    /// (empty when fitted from points alone, or see `wall_clock_missing`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wall_clock: Vec<WallClock>,
    /// Why there is no wall-clock multiplier, where runs were loaded but it could not be had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_clock_missing: Option<String>,
}

impl FitReport {
    /// The header line of the fit table, for the command line and the report.
    pub fn summary_line(&self) -> String {
        let infinite: usize = self.arms.iter().map(|a| a.infinite_resamples).sum();
        format!(
            "{} resamples (seed {}): {}; {} failed, {} infinite (kept in the percentiles)",
            self.resamples,
            self.seed,
            self.resampling.describe(),
            self.failed_resamples,
            infinite
        )
    }
}

#[derive(Debug, Clone)]
pub struct FitOptions {
    pub baseline: String,
    pub e_mode: EMode,
    pub resamples: usize,
    pub seed: u64,
    pub curve_points: usize,
}

/// Percentile interval over `values` (NaN = failed for this arm), failures at both ends.
fn estimate(value: f64, values: impl Iterator<Item = f64>, failed: usize) -> Estimate {
    let mut v: Vec<f64> = Vec::new();
    let mut missing = failed;
    for x in values {
        if x.is_nan() {
            missing += 1;
        } else {
            v.push(x);
        }
    }
    if v.is_empty() {
        return Estimate::without_interval(value);
    }
    v.sort_by(f64::total_cmp);
    let mut low = vec![0.0; missing];
    low.extend_from_slice(&v);
    let mut high = v;
    high.extend(std::iter::repeat_n(f64::INFINITY, missing));
    let mc = [
        order_statistic_error(&low, 0.025),
        order_statistic_error(&high, 0.975),
    ];
    Estimate {
        value,
        lo: percentile(&low, 0.025),
        hi: percentile(&high, 0.975),
        mc_error: mc.into_iter().flatten().reduce(f64::max),
    }
}

/// Monte Carlo standard error of the `q` percentile of `sorted` (B resamples): the rank of
/// the `q` quantile among B draws is binomial, so its 95% range is `Bq ± 1.96 √(Bq(1-q))`
/// ranks; the values at those ranks span about ±1.96 standard errors. None when that span
/// reaches an infinite value or there are too few resamples to tell.
fn order_statistic_error(sorted: &[f64], q: f64) -> Option<f64> {
    let b = sorted.len() as f64;
    if b < 20.0 {
        return None;
    }
    let z = normal_quantile(0.975);
    let spread = z * (b * q * (1.0 - q)).sqrt();
    let rank = |r: f64| (r.round().max(0.0) as usize).min(sorted.len() - 1);
    let (lo, hi) = (sorted[rank(b * q - spread)], sorted[rank(b * q + spread)]);
    ((hi - lo).is_finite()).then(|| (hi - lo) / (2.0 * z))
}

/// Fits every arm and bootstraps the multipliers. Errors say which arm lacks points.
/// Each resample's multiplier of every arm, at `c_max` (index 0) and along `grid`; `None`
/// where the refit failed. Resample `b` draws from stream `b + 1` of `opts.seed`, so the
/// result does not depend on the thread count.
fn resample(
    design: &Design,
    scheme: &Resampling,
    laws: &[Law],
    opts: &FitOptions,
    c_max: f64,
    grid: &[f64],
) -> Vec<Option<Vec<Vec<f64>>>> {
    let resampler = Resampler::new(design, scheme, laws);
    (0..opts.resamples)
        .into_par_iter()
        .map(|b| {
            let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
            rng.set_stream(b as u64 + 1);
            let f = fit_with(&resampler.draw(&mut rng), opts.e_mode, Some(laws))?;
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
        .collect()
}

/// Refuses an arm with fewer than two sizes: a scaling fit needs two.
fn check_sizes(arms: &[String], data: &[ArmPoints]) -> Result<(), NoFit> {
    match arms.iter().zip(data).find(|(_, pts)| pts.compute.len() < 2) {
        Some((arm, pts)) => Err(NoFit::TooFewSizes {
            arm: arm.clone(),
            sizes: pts.compute.len(),
        }),
        None => Ok(()),
    }
}

/// `n` computes evenly spaced in log from `lo` to `hi`.
fn log_grid(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let steps = n.max(2) - 1;
    (0..n)
        .map(|i| (lo.ln() + (hi.ln() - lo.ln()) * i as f64 / steps as f64).exp())
        .collect()
}

/// How the intervals resample, and (resampling seeds) each arm's linearised interval at
/// `c_max`, whose smallest degrees of freedom the seed scheme then takes.
fn resampling_scheme(
    design: &Design,
    laws: &[Law],
    e_mode: EMode,
    c_max: f64,
) -> (Resampling, Vec<Option<Linearised>>) {
    let mut scheme = Resampling::choose(design, e_mode);
    let linearised = match scheme {
        Resampling::Seeds { .. } => linearise(design, laws, e_mode, c_max),
        _ => Vec::new(),
    };
    if let Resampling::Seeds { effective_dof, .. } = &mut scheme
        && let Some(dof) = linearised.iter().flatten().map(|l| l.dof).reduce(f64::min)
    {
        *effective_dof = dof;
    }
    (scheme, linearised)
}

pub fn analyse(points: &[RunPoint], opts: &FitOptions) -> Result<FitReport, NoFit> {
    if !points.iter().any(|p| p.arm == opts.baseline) {
        return Err(NoFit::NoBaseline(opts.baseline.clone()));
    }
    let design = Design::new(points, &opts.baseline);
    let data = design.arm_points();
    check_sizes(&design.arms, &data)?;
    let full = fit(&data, opts.e_mode).ok_or(NoFit::NotConverged)?;
    let c_max = design.largest_compute();
    let c_min = design.smallest_compute();
    let grid = log_grid(c_min, c_max, opts.curve_points);
    let (scheme, linearised) = resampling_scheme(&design, &full.laws, opts.e_mode, c_max);
    let available = !matches!(scheme, Resampling::Unavailable { .. });
    let samples = if available {
        resample(&design, &scheme, &full.laws, opts, c_max, &grid)
    } else {
        Vec::new()
    };
    let failed = samples.iter().filter(|s| s.is_none()).count();
    let ok: Vec<&Vec<Vec<f64>>> = samples.iter().flatten().collect();
    let at = |k: usize, j: usize, value: f64| match available {
        true => estimate(value, ok.iter().map(|s| s[k][j]), failed),
        false => Estimate::without_interval(value),
    };
    let base = &full.laws[0];
    let arm_fits = design
        .arms
        .iter()
        .enumerate()
        .map(|(k, arm)| {
            let law = full.laws[k];
            ArmFit {
                arm: arm.clone(),
                law,
                points: data[k].compute.len(),
                seeds: design.seed_count(k),
                multiplier: (k > 0).then(|| at(k, 0, multiplier_at(base, &law, c_max))),
                delta: k
                    .checked_sub(1)
                    .and_then(|i| linearised.get(i).copied().flatten())
                    .map(|l| DeltaInterval::of(&l)),
                infinite_resamples: ok.iter().filter(|s| s[k][0] == f64::INFINITY).count(),
                curve: if k == 0 {
                    Vec::new()
                } else {
                    grid.iter()
                        .enumerate()
                        .map(|(j, &c)| CurvePoint {
                            compute: c,
                            multiplier: at(k, j + 1, multiplier_at(base, &law, c)),
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
        resampling: scheme,
        failed_resamples: failed,
        seed: opts.seed,
        arms: arm_fits,
        // A refit that fails here leaves the validation out; the main fit stands.
        hold_out: hold_out_largest(&design, opts.e_mode).ok().flatten(),
        paired: paired_table(&design),
        degenerate: degenerate(&data, &full.laws, &design.arms, opts.e_mode),
        wall_clock: Vec::new(),
        wall_clock_missing: None,
    })
}

/// One arm's wall-clock multiplier against the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WallClock {
    pub arm: String,
    /// The size whose runs were timed (the largest, where the multiplier is read).
    pub size: String,
    /// The baseline's time per token over the arm's: below 1 when the arm is slower.
    pub speed_ratio: f64,
    /// The ratio's 95% Student-t interval over seeds (NaN with one seed).
    #[serde(with = "ext_f64")]
    pub speed_lo: f64,
    #[serde(with = "ext_f64")]
    pub speed_hi: f64,
    /// Seeds paired.
    pub seeds: usize,
    /// The compute multiplier times `speed_ratio`; its interval combines the compute
    /// multiplier's bootstrap interval and the ratio's (`wall_clock.rs`).
    pub multiplier: Estimate,
    /// Where the runs were timed: CPU or GPU, backend and threads.
    pub machine: String,
}
