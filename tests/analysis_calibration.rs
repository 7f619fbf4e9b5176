//! Do the printed intervals mean what they say? Synthetic sweeps from a known law with
//! realistic seed noise: the 95% multiplier interval and the per-size t-interval must cover
//! the truth in 90-98% of trials, and the power planner's power must match the rejection
//! rate of the test it plans for. Seeded, so a failure reproduces.

use attnres::analysis::fit::{EMode, Law};
use attnres::analysis::multiplier::{FitOptions, RunPoint, analyse};
use attnres::analysis::power::{
    PlanCell, expected_difference, plan, power, power_at_size, rejects, rejects_at_size,
    seeds_at_size,
};
use attnres::analysis::stats::SeedMean;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// Close to the reference scaling sweep's baseline (C in PF-days): loss 1.66 at 2e-7.
const BASE: Law = Law {
    a: 0.4157,
    alpha: 0.0756,
    e: 0.3237,
};
/// Four sizes, a factor of 4 in compute apart.
const COMPUTE: [f64; 4] = [3.1e-9, 1.25e-8, 5e-8, 2e-7];
const TRUE_MULTIPLIER: f64 = 1.2;

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    // Box-Muller.
    (-2.0 * (1.0 - rng.random::<f64>()).ln()).sqrt()
        * (std::f64::consts::TAU * rng.random::<f64>()).cos()
}

/// Baseline and an arm worth `TRUE_MULTIPLIER` times compute, 3 seeds at each of 4 sizes,
/// seed noise `rel` of the loss, independent across arms.
fn sweep(rng: &mut ChaCha8Rng, rel: f64) -> Vec<RunPoint> {
    let arm = Law {
        a: BASE.a * TRUE_MULTIPLIER.powf(-BASE.alpha),
        ..BASE
    };
    let mut out = Vec::new();
    for (i, &c) in COMPUTE.iter().enumerate() {
        for seed in 0..3 {
            for (name, law) in [("baseline", BASE), ("arm", arm)] {
                out.push(RunPoint {
                    arm: name.into(),
                    cell: format!("s{i}"),
                    seed,
                    compute: c,
                    loss: law.loss(c) * (1.0 + rel * normal(rng)),
                });
            }
        }
    }
    out
}

#[test]
fn the_multiplier_interval_covers_the_truth_95_percent_of_the_time() {
    let trials = 200u64;
    let covered: usize = (0..trials)
        .into_par_iter()
        .map(|t| {
            let mut rng = ChaCha8Rng::seed_from_u64(1000 + t);
            // Seed noise between 0.5% and 1% of the loss.
            let rel = 0.005 + 0.005 * (t as f64 / trials as f64);
            let points = sweep(&mut rng, rel);
            let r = analyse(
                &points,
                &FitOptions {
                    baseline: "baseline".into(),
                    e_mode: EMode::Shared,
                    // Fewer than a report's 1000: the percentiles are noisier, not biased.
                    resamples: 100,
                    seed: t,
                    curve_points: 2,
                },
            )
            .unwrap();
            let m = r.arms[1].multiplier.unwrap();
            usize::from(m.lo <= TRUE_MULTIPLIER && TRUE_MULTIPLIER <= m.hi)
        })
        .sum();
    let rate = covered as f64 / trials as f64;
    eprintln!("multiplier interval coverage: {covered}/{trials}");
    assert!(
        (0.90..=0.98).contains(&rate),
        "the nominal 95% interval covered the true multiplier in {covered}/{trials} trials"
    );
}

#[test]
fn seed_t_intervals_cover_95_percent_and_z_intervals_do_not() {
    let trials = 4000;
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let (mut t_cover, mut z_cover) = (0, 0);
    for _ in 0..trials {
        let v: Vec<f64> = (0..3).map(|_| 1.66 + 0.008 * normal(&mut rng)).collect();
        let m = SeedMean::of(&v);
        t_cover += usize::from(m.lo() <= 1.66 && 1.66 <= m.hi());
        // What the reports printed before: mean ± 1.96 s / sqrt(n).
        let z_half = m.half / 4.3027 * 1.96;
        z_cover += usize::from((m.mean - 1.66).abs() <= z_half);
    }
    let (t_rate, z_rate) = (
        t_cover as f64 / trials as f64,
        z_cover as f64 / trials as f64,
    );
    eprintln!("seed interval coverage at n = 3: t {t_rate:.3}, z {z_rate:.3}");
    assert!(
        (0.93..=0.97).contains(&t_rate),
        "t-interval coverage {t_rate}"
    );
    assert!(z_rate < 0.90, "z-interval coverage {z_rate} at n = 3");
}

/// The planner's power against the rejection rate of its own test on simulated sweeps:
/// baseline and arm losses from the law plus Gaussian seed noise, at the seeds it plans.
#[test]
fn planned_power_matches_simulated_power() {
    let sigma = 0.006;
    let sigma_d = sigma * 2f64.sqrt();
    let cells: Vec<PlanCell> = COMPUTE
        .iter()
        .enumerate()
        .map(|(i, &c)| PlanCell {
            size: format!("s{i}"),
            label: format!("s{i}"),
            compute: c,
            flops_per_seed: 1.0,
        })
        .collect();
    let (_, rows) = plan(&cells, &BASE, 1.1, sigma_d);
    let mut checked = 0;
    for row in &rows {
        let Some(n) = row.seeds else { continue };
        let k = row.sizes.len();
        let computes = &COMPUTE[COMPUTE.len() - k..];
        // At the planned seeds, and at fewer seeds where the power is lower.
        for seeds in [n, (n / 2).max(2)] {
            let deltas: Vec<f64> = computes
                .iter()
                .map(|&c| expected_difference(&BASE, 1.1, c))
                .collect();
            let planned = power(&deltas, sigma_d, seeds);
            let sims = 4000;
            let mut rng = ChaCha8Rng::seed_from_u64(seeds as u64 * 31 + k as u64);
            let hits = (0..sims)
                .filter(|_| {
                    let d: Vec<Vec<f64>> = computes
                        .iter()
                        .map(|&c| {
                            (0..seeds)
                                .map(|_| {
                                    let base = BASE.loss(c) + sigma * normal(&mut rng);
                                    let arm = BASE.loss(1.1 * c) + sigma * normal(&mut rng);
                                    base - arm
                                })
                                .collect()
                        })
                        .collect();
                    rejects(&d)
                })
                .count();
            let simulated = hits as f64 / sims as f64;
            eprintln!(
                "{k} sizes, {seeds} seeds: planned power {planned:.3}, simulated {simulated:.3}"
            );
            assert!(
                (planned - simulated).abs() <= four_standard_errors(planned, sims),
                "{k} sizes, {seeds} seeds: planned power {planned:.3}, simulated {simulated:.3}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 4, "only {checked} configurations had a plan");
    // More seeds never lower the power, and the plan reaches 80%.
    let full = &rows[0];
    assert!(full.power >= 0.8, "{full:?}");
}

/// Four binomial standard errors of a rate `p` simulated `sims` times (about 0.025 at 80%
/// power over 4000 trials): a planner off by 0.05 in power fails.
fn four_standard_errors(p: f64, sims: usize) -> f64 {
    4.0 * (p * (1.0 - p) / sims as f64).sqrt()
}

/// The per-size test's planned power against its own rejection rate on simulated seeds at
/// the largest size, at the seeds it plans and at half of them.
#[test]
fn planned_per_size_power_matches_simulated_power() {
    let sigma = 0.006;
    let sigma_d = sigma * 2f64.sqrt();
    let c = COMPUTE[COMPUTE.len() - 1];
    let delta = expected_difference(&BASE, 1.1, c);
    let n = seeds_at_size(delta, sigma_d).expect("a plan within the seed limit");
    assert!(power_at_size(delta, sigma_d, n) >= 0.8);
    assert!(
        power_at_size(delta, sigma_d, n - 1) < 0.8,
        "the fewest seeds"
    );
    for seeds in [n, (n / 2).max(2)] {
        let planned = power_at_size(delta, sigma_d, seeds);
        let sims = 4000;
        let mut rng = ChaCha8Rng::seed_from_u64(977 + seeds as u64);
        let hits = (0..sims)
            .filter(|_| {
                let d: Vec<f64> = (0..seeds)
                    .map(|_| {
                        let base = BASE.loss(c) + sigma * normal(&mut rng);
                        let arm = BASE.loss(1.1 * c) + sigma * normal(&mut rng);
                        base - arm
                    })
                    .collect();
                rejects_at_size(&d)
            })
            .count();
        let simulated = hits as f64 / sims as f64;
        eprintln!("per size, {seeds} seeds: planned power {planned:.3}, simulated {simulated:.3}");
        assert!(
            (planned - simulated).abs() <= four_standard_errors(planned, sims),
            "per size, {seeds} seeds: planned power {planned:.3}, simulated {simulated:.3}"
        );
    }
}
