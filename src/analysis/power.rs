//! The power planner (SPEC section 11): how many seeds per size detect a given compute
//! multiplier, before anyone spends the compute.
//!
//! *Detect* means a one-sided paired t-test over sizes rejects "the arm is no better than
//! the baseline" at α = 0.05. Per size `c` and seed, `d = L_base - L_arm` (positive when
//! the arm is better); the statistic is the mean over the `K` sizes of the per-size mean
//! differences over its standard error with the pooled seed variance, a t statistic on
//! `K (n - 1)` degrees of freedom. If the arm is worth `M` times compute at every size, the
//! expected difference at compute `C` is `Δ(C) = L_base(C) - L_base(M C)`, read off the
//! baseline's fitted law. Its power is the noncentral-t tail, integrated numerically over
//! the chi-squared variance; a test checks it against simulated sweeps.
//!
//! The pooled test is weaker than a multiplier's claim: it holds when the arm is better on
//! average over sizes, even if the effect reverses with size. The multiplier's interval
//! rests mostly on the largest size, so the planner also plans the *per-size* test: the
//! report's paired t-test at one size (two-sided at α = 0.05, `n - 1` degrees of freedom),
//! counted as a detection when it rejects in the arm's favour.

use serde::Serialize;

use super::fit::Law;
use statrs::distribution::{ChiSquared, ContinuousCDF};

use super::stats::{mean_sd, normal_cdf, t_quantile};

/// One-sided level of the test.
pub const ALPHA: f64 = 0.05;
/// The power asked for.
pub const TARGET: f64 = 0.8;
/// The most seeds per size the planner considers.
pub const MAX_SEEDS: usize = 200;
/// Two-sided level of the per-size test, as the report's paired table uses.
pub const ALPHA_PER_SIZE: f64 = 0.05;

/// One size of the sweep as the planner sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanCell {
    /// The size's name, e.g. `mini`.
    pub size: String,
    pub label: String,
    /// The baseline's training compute, PFLOP/s-days.
    pub compute: f64,
    /// FLOPs of one seed of the pair (baseline run + arm run).
    pub flops_per_seed: f64,
}

/// The expected improvement `L(C) - L(M C)` of a multiplier-`m` arm at compute `c`.
pub fn expected_difference(law: &Law, m: f64, c: f64) -> f64 {
    law.loss(c) - law.loss(m * c)
}

/// Power of the pooled paired t-test with `seeds` seeds per size, for per-size expected
/// differences `deltas` and a standard deviation `sigma_d` of one paired difference.
pub fn power(deltas: &[f64], sigma_d: f64, seeds: usize) -> f64 {
    let k = deltas.len() as f64;
    if seeds < 2 || deltas.is_empty() || sigma_d <= 0.0 {
        return f64::NAN;
    }
    let n = seeds as f64;
    let df = k * (n - 1.0);
    // Mean over sizes of the per-size means: variance sigma_d^2 / (n K).
    let ncp = (deltas.iter().sum::<f64>() / k) / (sigma_d / (n * k).sqrt());
    noncentral_t_tail(t_quantile(1.0 - ALPHA, df), df, ncp)
}

/// `P(T > crit)` for a noncentral t with `df` degrees of freedom and noncentrality `ncp`:
/// `T = (Z + ncp) / sqrt(V / df)` with `V ~ chi²(df)`, so the tail is the mean over `V` of
/// `Φ(ncp - crit·sqrt(V / df))`, integrated at evenly spaced quantiles of `V`.
pub fn noncentral_t_tail(crit: f64, df: f64, ncp: f64) -> f64 {
    const NODES: usize = 2000;
    let Ok(chi) = ChiSquared::new(df) else {
        return f64::NAN;
    };
    (0..NODES)
        .map(|i| {
            let v = chi.inverse_cdf((i as f64 + 0.5) / NODES as f64);
            normal_cdf(ncp - crit * (v / df).sqrt())
        })
        .sum::<f64>()
        / NODES as f64
}

/// Power of the per-size test with `seeds` seeds at a size where the expected difference is
/// `delta`: the chance it rejects "no difference" in the arm's favour.
pub fn power_at_size(delta: f64, sigma_d: f64, seeds: usize) -> f64 {
    if seeds < 2 || sigma_d <= 0.0 {
        return f64::NAN;
    }
    let df = (seeds - 1) as f64;
    let ncp = delta / (sigma_d / (seeds as f64).sqrt());
    noncentral_t_tail(t_quantile(1.0 - ALPHA_PER_SIZE / 2.0, df), df, ncp)
}

/// The fewest seeds for which [`power_at_size`] reaches `TARGET`; None past `MAX_SEEDS`.
pub fn seeds_at_size(delta: f64, sigma_d: f64) -> Option<usize> {
    (2..=MAX_SEEDS).find(|&n| power_at_size(delta, sigma_d, n) >= TARGET)
}

/// The per-size test on one size's observed differences `d[seed]` (`base - arm`): true
/// when the two-sided paired t-test rejects with the arm better.
pub fn rejects_at_size(d: &[f64]) -> bool {
    let (mean, sd, n) = mean_sd(d);
    if n < 2 || sd <= 0.0 {
        return false;
    }
    mean / (sd / (n as f64).sqrt()) > t_quantile(1.0 - ALPHA_PER_SIZE / 2.0, (n - 1) as f64)
}

/// The 95% interval of a standard deviation `sd` measured with `df` degrees of freedom
/// (chi-squared): how far the noise, and so the seeds a plan asks for, could be off.
pub fn sd_interval(sd: f64, df: usize) -> Option<(f64, f64)> {
    let chi = ChiSquared::new(df as f64).ok()?;
    let df = df as f64;
    Some((
        sd * (df / chi.inverse_cdf(0.975)).sqrt(),
        sd * (df / chi.inverse_cdf(0.025)).sqrt(),
    ))
}

/// The test the planner's power is about, on observed differences `d[size][seed]`
/// (`base - arm`): true when it rejects "no better" at `ALPHA`.
pub fn rejects(d: &[Vec<f64>]) -> bool {
    let k = d.len() as f64;
    let (mut sum_means, mut ss, mut df) = (0.0, 0.0, 0.0);
    let mut n_total = 0.0;
    for cell in d {
        let (mean, sd, n) = mean_sd(cell);
        sum_means += mean;
        ss += sd * sd * (n - 1) as f64;
        df += (n - 1) as f64;
        n_total += n as f64;
    }
    if df < 1.0 {
        return false;
    }
    let pooled = (ss / df).sqrt();
    // Equal n per size: the mean of the size means has variance sigma^2 / (n K) = sigma^2 / N.
    let t = (sum_means / k) / (pooled / n_total.sqrt());
    t > t_quantile(1.0 - ALPHA, df)
}

/// One line of the plan: the `k` largest sizes, the seeds they need and what that costs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanRow {
    pub sizes: Vec<String>,
    /// Seeds per size for `TARGET` power; None when more than `MAX_SEEDS`.
    pub seeds: Option<usize>,
    /// Power at `seeds` (or at `MAX_SEEDS`).
    pub power: f64,
    /// Runs in both arms.
    pub runs: usize,
    pub flops: f64,
}

/// Per-size expected differences and, for each `K` from all sizes down to 2 (the `K`
/// largest), the seeds needed.
pub fn plan(cells: &[PlanCell], law: &Law, m: f64, sigma_d: f64) -> (Vec<f64>, Vec<PlanRow>) {
    let deltas: Vec<f64> = cells
        .iter()
        .map(|c| expected_difference(law, m, c.compute))
        .collect();
    let rows = (2..=cells.len())
        .rev()
        .map(|k| {
            let first = cells.len() - k;
            let d = &deltas[first..];
            let seeds = (2..=MAX_SEEDS).find(|&n| power(d, sigma_d, n) >= TARGET);
            let n = seeds.unwrap_or(MAX_SEEDS);
            PlanRow {
                sizes: cells[first..].iter().map(|c| c.label.clone()).collect(),
                seeds,
                power: power(d, sigma_d, n),
                runs: 2 * k * n,
                flops: n as f64 * cells[first..].iter().map(|c| c.flops_per_seed).sum::<f64>(),
            }
        })
        .collect();
    (deltas, rows)
}

/// Pooled standard deviation of paired differences: `d[size]` holds one size's
/// differences. Returns the SD and its degrees of freedom.
pub fn pooled_sd(d: &[Vec<f64>]) -> Option<(f64, usize)> {
    let (mut ss, mut df) = (0.0, 0usize);
    for cell in d.iter().filter(|c| c.len() > 1) {
        let (_, sd, n) = mean_sd(cell);
        ss += sd * sd * (n - 1) as f64;
        df += n - 1;
    }
    (df > 0).then(|| ((ss / df as f64).sqrt(), df))
}
