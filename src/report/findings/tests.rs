//! The Findings on synthetic results with a known positive, a known null and a known
//! unstable arm.

use super::*;
use crate::analysis::fit::{EMode, Law};
use crate::analysis::multiplier::{ArmFit, Estimate};
use crate::analysis::paired::PairedRow;
use crate::analysis::stats::PairedTest;
use crate::analysis::validation::{HeldOutArm, HoldOut};

/// A paired table from `(arm, cell, differences)`, Holm-corrected as the report's is.
fn table(rows: &[(&str, &str, &[f64])]) -> PairedTable {
    let mut rows: Vec<PairedRow> = rows
        .iter()
        .map(|(arm, cell, d)| PairedRow {
            arm: arm.to_string(),
            cell: cell.to_string(),
            compute: 1.0,
            test: PairedTest::of(d),
            holm: false,
        })
        .collect();
    let p: Vec<f64> = rows.iter().map(|r| r.test.p).collect();
    for (r, keep) in rows.iter_mut().zip(crate::analysis::stats::holm(&p, 0.05)) {
        r.holm = keep;
    }
    PairedTable {
        comparisons: rows.len(),
        alpha: 0.05,
        rows,
    }
}

fn profile(arm: &str, in_rms: &[f64], grad: &[f64]) -> Profile {
    Profile {
        seeds: Vec::new(),
        arm: arm.into(),
        in_rms: in_rms.to_vec(),
        out_rms: vec![0.5; in_rms.len()],
        grad_norm: grad.to_vec(),
        block_out_rms: Vec::new(),
    }
}

fn fit(multipliers: &[(&str, f64, f64, f64)], hold_out: Option<HoldOut>) -> FitReport {
    let arm = |name: &str, m: Option<Estimate>| ArmFit {
        arm: name.into(),
        law: Law {
            a: 1.0,
            alpha: 0.1,
            e: 0.5,
        },
        points: 4,
        seeds: 3,
        multiplier: m,
        delta: None,
        infinite_resamples: 0,
        curve: Vec::new(),
    };
    let mut arms = vec![arm("baseline", None)];
    for &(name, value, lo, hi) in multipliers {
        arms.push(arm(
            name,
            Some(Estimate {
                value,
                lo,
                hi,
                mc_error: None,
            }),
        ));
    }
    FitReport {
        baseline: "baseline".into(),
        e_mode: EMode::Shared,
        compute_unit: "PF-days".into(),
        largest_compute: 1.0,
        resamples: 1000,
        resampling: Resampling::Seeds {
            cells: 4,
            fixed_cells: 0,
            dof: 8,
            effective_dof: 2.0,
        },
        failed_resamples: 0,
        seed: 0,
        arms,
        hold_out,
        paired: table(&[]),
        degenerate: None,
        wall_clock: Vec::new(),
        wall_clock_missing: None,
    }
}

fn evidence<'a>(
    paired: Option<&'a PairedTable>,
    fit: Option<&'a FitReport>,
    profiles: &'a [Profile],
    builds: &'a [String],
    min_seeds: usize,
) -> Evidence<'a> {
    Evidence {
        baseline: "baseline",
        paired,
        fit,
        profiles,
        builds,
        min_seeds,
        no_law: None,
        more: &[],
    }
}

#[test]
fn a_known_positive_is_reported_with_its_interval_and_test() {
    // `block` is 0.05 nats better on every seed, with little spread: p far below 0.05/2.
    let t = table(&[
        ("block", "mini", &[-0.050, -0.052, -0.049, -0.051, -0.050]),
        ("full", "mini", &[0.01, -0.02, 0.015, -0.01, 0.004]),
    ]);
    let f = fit(
        &[("block", 1.31, 1.12, 1.55), ("full", 1.02, 0.85, 1.30)],
        None,
    );
    let builds = vec!["abc".to_string()];
    let out = findings(&evidence(Some(&t), Some(&f), &[], &builds, 5));
    let text = out.join("\n");
    assert!(
        text.contains("1 of 2 paired comparisons survives Holm's correction"),
        "{text}"
    );
    assert!(
        text.contains("95% bootstrap over seeds, 1000 resamples, at least 5 seeds per size"),
        "{text}"
    );
    assert!(
        text.contains("`block` at `mini` is better than `baseline` by 0.050 nats"),
        "{text}"
    );
    assert!(
        text.contains("`block` 1.31x, bootstrap [1.12, 1.55]"),
        "{text}"
    );
    assert!(
        text.contains("`block` clears 1 in both intervals"),
        "{text}"
    );
    assert!(!text.contains("no compute multiplier is shown"), "{text}");
    assert!(!text.contains("Warning"), "{text}");
}

#[test]
fn a_known_null_is_stated_as_one() {
    let t = table(&[
        ("block", "micro", &[0.02, -0.03, 0.01]),
        ("full", "micro", &[-0.01, 0.02, -0.02]),
    ]);
    let f = fit(
        &[
            ("block", 1.16, 0.89, 1.56),
            ("full", 1.05, 0.86, f64::INFINITY),
        ],
        None,
    );
    let builds = vec!["abc".to_string()];
    let out = findings(&evidence(Some(&t), Some(&f), &[], &builds, 3));
    let text = out.join("\n");
    assert!(
        text.contains("No arm differs from `baseline` at `micro` after Holm's correction over 2 paired comparisons"),
        "{text}"
    );
    assert!(
        text.contains("no arm has every interval above 1 or every interval below 1, so no compute multiplier is shown"),
        "{text}"
    );
    assert!(text.contains("`full` 1.05x, bootstrap [0.86, ∞]"), "{text}");
    assert!(!text.contains("strongest difference"), "{text}");
    // The bounded null: block's differences 0.02, -0.03, 0.01 have mean 0 and half-width
    // t(0.975, 2) 0.0265 / sqrt(3) = 0.066; full's reach 0.003 + 0.052 = 0.055.
    assert!(
        text.contains("With the most seeds (3), the differences from `baseline` in nats, with 95% t-intervals, are `block` +0.000 [-0.066, +0.066], `full` -0.003 [-0.055, +0.048]: none is larger than 0.066 nats either way."),
        "{text}"
    );
    assert!((3..=7).contains(&out.len()), "{out:?}");
}

#[test]
fn a_known_unstable_arm_and_a_missed_hold_out_are_warned_about() {
    let calm = [0.05, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4];
    let calm_grad = [0.2, 0.2, 0.25, 0.2, 0.3, 0.2, 0.25, 0.2];
    let profiles = vec![
        profile("baseline", &calm, &calm_grad),
        profile("full", &calm, &calm_grad),
        profile("block", &calm, &calm_grad),
        profile(
            "full window=2",
            &[0.05, 0.6, 5.7, 0.4, 0.06, 0.1, 0.2, 0.3],
            &[0.1, 0.01, 0.01, 0.01, 0.2, 0.2, 1.1, 0.2],
        ),
    ];
    let miss = |arm: &str, error: f64, k: f64| HeldOutArm {
        arm: arm.into(),
        compute: 1.0,
        observed: crate::analysis::stats::SeedMean {
            mean: 1.66,
            half: 0.01,
            n: 3,
        },
        predicted: 1.66 + error,
        error,
        error_in_intervals: k,
    };
    let hold = HoldOut {
        cell: "mini".into(),
        arms: vec![miss("baseline", -0.020, -2.59), miss("block", -0.01, -1.3)],
    };
    let f = fit(&[("block", 1.16, 0.89, 1.56)], Some(hold));
    let builds = vec!["abc-dirty".to_string(), "def".to_string()];
    let text = findings(&evidence(None, Some(&f), &profiles, &builds, 1)).join("\n");
    assert!(
        text.contains("`full window=2` looks unstable: its hidden-state RMS peaks at 5.70"),
        "{text}"
    );
    assert!(
        !text.contains("`full` looks unstable") && !text.contains("`block` looks"),
        "{text}"
    );
    assert!(text.contains("misses it by more than 2 seed half-widths for `baseline` (-0.02 nats, -2.6 half-widths)"), "{text}");
    assert!(!text.contains("`block` (-0.01"), "{text}");
    assert!(
        text.contains("2 builds trained these runs, 1 from uncommitted trees"),
        "{text}"
    );
    assert!(text.contains("some runs have one seed"), "{text}");
}

#[test]
fn a_degenerate_fit_is_named_first_and_no_multiplier_is_quoted() {
    let mut e = evidence(None, None, &[], &[], 3);
    e.no_law = Some("the runs span 1.1x in compute, under the 4x a law needs");
    let text = findings(&e);
    assert!(
        text[0].starts_with("No compute multiplier is read from these runs: the runs span 1.1x"),
        "{text:?}"
    );
    assert!(
        !text.iter().any(|s| s.contains("Compute multipliers")),
        "{text:?}"
    );
}

/// An interval that ends past 1 by less than its Monte Carlo error is not called clear of
/// 1: another generator seed could put it on the other side.
#[test]
fn an_interval_end_within_its_monte_carlo_error_of_one_is_said_so() {
    let mut f = fit(
        &[("full", 1.06, 1.003, 1.12), ("block", 1.19, 1.12, 1.26)],
        None,
    );
    for a in &mut f.arms {
        if let Some(m) = a.multiplier.as_mut() {
            m.mc_error = Some(0.004);
        }
    }
    let builds = vec!["abc".to_string()];
    let text = findings(&evidence(None, Some(&f), &[], &builds, 11)).join("\n");
    assert!(
        text.contains("`block` clears 1 in both intervals"),
        "{text}"
    );
    assert!(!text.contains("`full` clears"), "{text}");
    assert!(
        text.contains("`full`'s bootstrap interval ends at 1.003, within its Monte Carlo error (0.004) of 1, so it is not shown to differ from 1"),
        "{text}"
    );
}
