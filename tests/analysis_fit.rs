//! The scaling fit and the bootstrap: recovery of a known law, the null case, determinism,
//! one seed per size, budgets as cells, and the report's published laws through
//! `attnres fit --points`. Coverage is calibrated in analysis_calibration.rs, and the
//! rules that refuse a fit are tested beside their code (analysis/degenerate.rs).

#[path = "common/run.rs"]
mod run;

use attnres::analysis::bootstrap::Resampling;
use attnres::analysis::fit::{ArmPoints, EMode, Law, fit};
use attnres::analysis::multiplier::{FitOptions, FitReport, RunPoint, analyse};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use run::*;

const COMPUTE: [f64; 5] = [1e-6, 4e-6, 1.6e-5, 6.4e-5, 2.56e-4];

/// Noisy runs of several arms at `COMPUTE`, `seeds` seeds each, multiplicative noise `sd`.
fn synthetic(laws: &[(&str, Law)], seeds: u64, sd: f64, rng: &mut ChaCha8Rng) -> Vec<RunPoint> {
    let mut out = Vec::new();
    for (size, &c) in COMPUTE.iter().enumerate() {
        for seed in 0..seeds {
            for (arm, law) in laws {
                // Box-Muller normal noise.
                let z = (-2.0 * (1.0 - rng.random::<f64>()).ln()).sqrt()
                    * (std::f64::consts::TAU * rng.random::<f64>()).cos();
                out.push(RunPoint {
                    arm: arm.to_string(),
                    cell: format!("s{size}"),
                    seed,
                    compute: c,
                    loss: law.loss(c) * (1.0 + sd * z),
                });
            }
        }
    }
    out
}

fn options(resamples: usize, seed: u64) -> FitOptions {
    FitOptions {
        baseline: "baseline".into(),
        e_mode: EMode::Shared,
        resamples,
        seed,
        curve_points: 8,
    }
}

const BASE: Law = Law {
    a: 0.35,
    alpha: 0.12,
    e: 1.2,
};

/// The same law, `k` times more compute-efficient: `L_m(C) = L_base(k C)`.
fn efficient(k: f64) -> Law {
    Law {
        a: BASE.a * k.powf(-BASE.alpha),
        ..BASE
    }
}

#[test]
fn the_fitter_recovers_a_known_law() {
    let truth = [
        Law {
            a: 0.35,
            alpha: 0.12,
            e: 1.2,
        },
        Law {
            a: 0.30,
            alpha: 0.14,
            e: 1.2,
        },
    ];
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let arms: Vec<ArmPoints> = truth
        .iter()
        .map(|law| {
            let compute: Vec<f64> = (0..8).map(|i| 1e-6 * 3f64.powi(i)).collect();
            let loss = compute
                .iter()
                .map(|&c| law.loss(c) * (1.0 + 0.001 * (rng.random::<f64>() - 0.5)))
                .collect();
            ArmPoints { compute, loss }
        })
        .collect();
    let f = fit(&arms, EMode::Shared).unwrap();
    for (got, want) in f.laws.iter().zip(&truth) {
        assert!(
            (got.alpha - want.alpha).abs() < 0.02,
            "alpha {} vs {}",
            got.alpha,
            want.alpha
        );
        assert!(
            (got.a / want.a - 1.0).abs() < 0.1,
            "A {} vs {}",
            got.a,
            want.a
        );
        assert!((got.e - want.e).abs() < 0.03, "E {} vs {}", got.e, want.e);
    }
    // A pure power law is recovered exactly with E fixed at 0.
    let pure = Law {
        a: 1.891,
        alpha: 0.057,
        e: 0.0,
    };
    let compute: Vec<f64> = (0..6).map(|i| 10f64.powi(i - 2)).collect();
    let arm = ArmPoints {
        loss: compute.iter().map(|&c| pure.loss(c)).collect(),
        compute,
    };
    let f = fit(&[arm], EMode::Zero).unwrap();
    assert!(
        (f.laws[0].a - 1.891).abs() < 1e-4 && (f.laws[0].alpha - 0.057).abs() < 1e-5,
        "{:?}",
        f.laws[0]
    );
}

#[test]
fn an_arm_identical_to_the_baseline_has_multiplier_one_within_its_interval() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let points = synthetic(&[("baseline", BASE), ("same", BASE)], 3, 0.004, &mut rng);
    let r = analyse(&points, &options(1000, 0)).unwrap();
    let m = r.arms[1].multiplier.unwrap();
    assert!(m.lo <= 1.0 && 1.0 <= m.hi, "{m:?}");
    assert!((m.value - 1.0).abs() < 0.25, "{m:?}");
}

#[test]
fn the_same_seed_gives_the_same_answer() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let points = synthetic(
        &[("baseline", BASE), ("attnres", efficient(1.2))],
        2,
        0.004,
        &mut rng,
    );
    let a: FitReport = analyse(&points, &options(300, 5)).unwrap();
    let b = analyse(&points, &options(300, 5)).unwrap();
    assert_eq!(a, b);
    let c = analyse(&points, &options(300, 6)).unwrap();
    assert_ne!(
        a.arms[1].multiplier, c.arms[1].multiplier,
        "another seed draws other resamples"
    );
}

/// The report's fits (C in PFLOP/s-days): baseline 1.891 C^-0.057, Block 1.870 C^-0.058,
/// Full 1.865 C^-0.057; Block is quoted as worth about 1.25x compute.
#[test]
fn published_laws_check_out_through_fit_points() {
    let tmp = TempDir::new("points");
    let mut csv = String::from("arm,compute,loss\n");
    for (arm, a, alpha) in [
        ("baseline", 1.891, 0.057),
        ("block", 1.870, 0.058),
        ("full", 1.865, 0.057),
    ] {
        for i in 0..5 {
            let c: f64 = 0.1 * 10f64.sqrt().powi(i); // 0.1 .. 10 PF-days
            csv.push_str(&format!("{arm},{c},{}\n", a * c.powf(-alpha)));
        }
    }
    let points = write(tmp.path(), "published.csv", &csv);
    let out = tmp.path().join("fits.json");
    let o = attnres()
        .args(["fit", "--e", "zero", "--resamples", "1000", "--points"])
        .arg(&points)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}{}", stderr(&o));
    let fits: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let arm = |name: &str| {
        fits["arms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["arm"] == name)
            .unwrap()
            .clone()
    };
    assert!((arm("block")["law"]["a"].as_f64().unwrap() - 1.870).abs() < 1e-3);
    assert!((arm("block")["law"]["alpha"].as_f64().unwrap() - 0.058).abs() < 1e-4);
    let m = arm("block")["multiplier"]["value"].as_f64().unwrap();
    assert!(
        (1.2..1.35).contains(&m),
        "Block's multiplier at the largest compute: {m}"
    );
    assert!(
        stdout.contains("block") && stdout.contains("multiplier"),
        "{stdout}"
    );
}

/// With one seed per size there is no seed noise: the bootstrap says so and resamples the
/// fit's residuals instead, with no failed resample.
#[test]
fn one_seed_per_size_falls_back_to_a_labelled_residual_bootstrap() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let points = synthetic(
        &[("baseline", BASE), ("attnres", efficient(1.2))],
        1,
        0.004,
        &mut rng,
    );
    let r = analyse(&points, &options(300, 0)).unwrap();
    assert!(
        matches!(r.resampling, Resampling::Residuals { .. }),
        "{:?}",
        r.resampling
    );
    assert!(
        r.summary_line().contains("residual bootstrap"),
        "{}",
        r.summary_line()
    );
    assert_eq!(r.failed_resamples, 0);
    let m = r.arms[1].multiplier.unwrap();
    assert!(m.lo < m.value && m.value < m.hi, "{m:?}");
}

/// Seeds are resampled within each size, so no resample loses a size: none fails, and the
/// point estimate sits inside its interval.
#[test]
fn the_stratified_bootstrap_never_drops_a_size() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let points = synthetic(
        &[("baseline", BASE), ("attnres", efficient(1.2))],
        2,
        0.004,
        &mut rng,
    );
    let r = analyse(&points, &options(500, 0)).unwrap();
    assert_eq!(r.failed_resamples, 0);
    assert!(
        matches!(
            r.resampling,
            Resampling::Seeds {
                cells: 5,
                fixed_cells: 0,
                dof: 5,
                ..
            }
        ),
        "{:?}",
        r.resampling
    );
    let m = r.arms[1].multiplier.unwrap();
    assert!(m.lo < m.value && m.value < m.hi, "{m:?}");
    // Five sizes: the largest is held out and predicted.
    let h = r.hold_out.as_ref().expect("a hold-out with five sizes");
    assert_eq!(h.cell, "s4");
    for a in &h.arms {
        assert!(a.error.abs() < 0.05, "{a:?}");
    }
    // Per-size paired tests: one row per (arm, size), all five tested.
    assert_eq!(r.paired.rows.len(), 5);
    assert_eq!(r.paired.comparisons, 5);
}

/// An arm whose law goes below the baseline's irreducible loss has an infinite multiplier in
/// some resamples: they are counted and kept, so the interval is open-ended, not shrunk.
#[test]
fn infinite_multipliers_are_counted_and_open_the_interval() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    // At the largest compute this law is below the baseline's irreducible loss (1.198 < 1.2).
    let better_floor = Law {
        a: 0.05,
        alpha: 0.3,
        e: 0.6,
    };
    let points = synthetic(
        &[("baseline", BASE), ("floor", better_floor)],
        3,
        0.004,
        &mut rng,
    );
    let mut opts = options(400, 0);
    opts.e_mode = EMode::PerArm;
    let r = analyse(&points, &opts).unwrap();
    let arm = &r.arms[1];
    let m = arm.multiplier.unwrap();
    assert!(arm.infinite_resamples > 10, "{arm:?}");
    assert_eq!(m.hi, f64::INFINITY, "{m:?}");
    let json = serde_json::to_string(&r).unwrap();
    assert!(
        json.contains("\"hi\":\"inf\""),
        "infinite ends are written as \"inf\""
    );
    let back: FitReport = serde_json::from_str(&json).unwrap();
    assert_eq!(back.arms[1].multiplier.unwrap().hi, f64::INFINITY);
}

/// A sweep with two budgets per size: each (size, budget) is its own point with its own
/// compute, not merged under the size name.
#[test]
fn two_budgets_of_one_size_are_two_points() {
    let tmp = TempDir::new("budgets");
    let sweep = write(
        tmp.path(),
        "budgets.yaml",
        "name: budgets
data: {corpus: {synthetic: {task: khop, hops: 2, n_vars: 5, train_examples: 2000, val_examples: 64}}}
model: {context: 48, head_dim: 16}
sizes: [nano]
residual: [baseline, full]
budgets: [{tokens: 4000}, {tokens: 8000}]
seeds: [0]
train: {batch_size: 8, lr: 0.003, budget: {tokens: 8000}, eval_every: 10, eval_batches: 2}
",
    );
    let results = tmp.path().join("results");
    let o = attnres()
        .arg("run")
        .arg(&sweep)
        .arg("--results")
        .arg(&results)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = tmp.path().join("fits.json");
    let o = attnres()
        .arg("fit")
        .arg(&sweep)
        .arg("--results")
        .arg(&results)
        .args(["--resamples", "50", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}{}", stderr(&o));
    let fits: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    for arm in fits["arms"].as_array().unwrap() {
        assert_eq!(arm["points"], 2, "{arm}");
    }
    let cells: Vec<&str> = fits["paired"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cell"].as_str().unwrap())
        .collect();
    assert_eq!(cells.len(), 2, "{cells:?}");
    assert!(cells.iter().all(|c| c.contains("tokens")), "{cells:?}");
}
