//! The report's tables: every run, every arm at the largest size, the fitted laws.

use super::doc::Doc;
use crate::analysis::load::LoadedRun;
use crate::analysis::multiplier::{Estimate, FitReport};
use crate::analysis::paired::PairedTable;
use crate::analysis::stats::{SeedMean, fmt_interval};
use crate::analysis::validation::HoldOut;
use crate::analysis::views;
use crate::fmt::thousands;
use crate::model::flops::PFLOPS_DAY;

/// One row per run. A task column appears when the runs train on several tasks, and the
/// last quality column is bits per byte for text or answer accuracy for synthetic tasks.
pub fn runs_table(doc: &mut Doc, runs: &[LoadedRun]) {
    doc.h(2, "Runs");
    let mut tasks: Vec<String> = runs.iter().map(|r| r.planned.task()).collect();
    tasks.sort();
    tasks.dedup();
    let with_task = tasks.len() > 1;
    let accuracy = runs.iter().any(|r| r.accuracy().is_some());
    let rows = runs
        .iter()
        .map(|r| {
            let s = &r.summary;
            let mut row = vec![format!("`{}`", r.planned.id)];
            if with_task {
                row.push(r.planned.task());
            }
            row.extend([
                r.planned.size.clone(),
                r.planned.arm.clone(),
                r.planned.seed.to_string(),
                thousands(s.params.non_embedding),
                thousands(s.tokens),
                format!("{:.3e}", s.flops_exact / PFLOPS_DAY),
                format!("{:.4}", r.loss()),
                if accuracy {
                    r.accuracy().map(|a| format!("{:.1}", 100.0 * a))
                } else {
                    r.bits_per_byte().map(|b| format!("{b:.4}"))
                }
                .unwrap_or_default(),
                format!("{:.0}", s.wall_s),
            ]);
            row
        })
        .collect();
    let mut header = vec!["run"];
    if with_task {
        header.push("task");
    }
    header.extend([
        "size",
        "variant",
        "seed",
        "params",
        "tokens",
        "PF-days",
        "val loss",
        if accuracy { "accuracy, %" } else { "bits/byte" },
        "wall s",
    ]);
    doc.table(&header, rows);
}

/// Every arm at the largest size: mean loss with its t-interval over seeds, difference to
/// the baseline.
pub fn arms_table(doc: &mut Doc, runs: &[LoadedRun], baseline: &str) {
    let Some(size) = views::largest_size(runs) else {
        return;
    };
    let losses = |arm: &str| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.planned.size == size && r.planned.arm == arm)
            .map(|r| r.loss())
            .collect()
    };
    let base = losses(baseline);
    let base_mean = (!base.is_empty()).then(|| SeedMean::of(&base).mean);
    let rows = views::arms(runs)
        .into_iter()
        .filter_map(|arm| {
            let v = losses(&arm);
            if v.is_empty() {
                return None;
            }
            let m = SeedMean::of(&v);
            let delta = base_mean
                .map(|b| format!("{:+.4}", m.mean - b))
                .unwrap_or_default();
            Some(vec![
                arm,
                format!("{:.4}", m.mean),
                if m.half.is_finite() {
                    format!("±{:.4}", m.half)
                } else {
                    "-".into()
                },
                delta,
                v.len().to_string(),
            ])
        })
        .collect();
    doc.h(2, format!("Variants at the largest size ({size})"));
    doc.p("Mean over seeds with its two-sided 95% Student-t interval, `t(0.975, n-1)·s/√n` (no interval with one seed).");
    let versus = format!("vs {baseline}");
    doc.table(
        &["variant", "val loss", "95% t-interval", &versus, "seeds"],
        rows,
    );
}

/// The columns of [`fit_rows`].
pub const FIT_HEADER: [&str; 9] = [
    "arm",
    "A",
    "α",
    "E",
    "multiplier",
    "95% bootstrap ± MC error",
    "95% delta-method t (df)",
    "points",
    "seeds",
];

pub fn fit_rows(r: &FitReport) -> Vec<Vec<String>> {
    r.arms
        .iter()
        .map(|a| {
            if r.degenerate.is_some() {
                let mut row = vec![a.arm.clone()];
                row.extend([a.law.a, a.law.alpha, a.law.e].map(|x| format!("{x:.4}")));
                row.extend(["-".into(), "-".into(), "-".into()]);
                row.extend([a.points.to_string(), a.seeds.to_string()]);
                return row;
            }
            vec![
                a.arm.clone(),
                format!("{:.4}", a.law.a),
                format!("{:.4}", a.law.alpha),
                format!("{:.4}", a.law.e),
                a.multiplier
                    .map(|m| {
                        if m.value.is_finite() {
                            format!("{:.3}x", m.value)
                        } else {
                            "∞".into()
                        }
                    })
                    .unwrap_or_else(|| "1 (reference)".into()),
                a.multiplier
                    .map(|m| match m.mc_error {
                        Some(e) => format!("{} ±{e:.1$}", multiplier_interval(&m), m.digits()),
                        None => multiplier_interval(&m),
                    })
                    .unwrap_or_default(),
                a.delta
                    .map(|d| format!("{} ({:.1})", fmt_interval(d.lo, d.hi, 3), d.dof))
                    .unwrap_or_default(),
                a.points.to_string(),
                a.seeds.to_string(),
            ]
        })
        .collect()
}

/// The columns of [`wall_clock_rows`].
pub const WALL_CLOCK_HEADER: [&str; 6] = [
    "arm",
    "size",
    "time per token vs baseline (95% t)",
    "compute multiplier x speed",
    "95% interval",
    "seeds",
];

/// Each arm's wall-clock multiplier: the arm's time per token relative to the baseline's,
/// and the compute multiplier scaled by the inverse.
pub fn wall_clock_rows(r: &FitReport) -> Vec<Vec<String>> {
    r.wall_clock
        .iter()
        .map(|w| {
            vec![
                w.arm.clone(),
                w.size.clone(),
                format!(
                    "{:.3}x {}",
                    1.0 / w.speed_ratio,
                    fmt_interval(1.0 / w.speed_hi, 1.0 / w.speed_lo, 3)
                ),
                format!("{:.3}x", w.multiplier.value),
                multiplier_interval(&w.multiplier),
                w.seeds.to_string(),
            ]
        })
        .collect()
}

/// `[1.053, 1.341]`, `[1.05, ∞)`, or `none` when no interval could be had.
pub fn multiplier_interval(m: &Estimate) -> String {
    if m.lo.is_nan() && m.hi.is_nan() {
        "none".into()
    } else {
        fmt_interval(m.lo, m.hi, m.digits())
    }
}

/// Per cell and arm: the paired difference to the baseline, its t-interval, p and Holm.
pub fn paired_rows(t: &PairedTable) -> Vec<Vec<String>> {
    t.rows
        .iter()
        .map(|r| {
            let d = &r.test.diff;
            vec![
                r.arm.clone(),
                r.cell.clone(),
                format!("{:+.4}", d.mean),
                if d.half.is_finite() {
                    format!("[{:+.4}, {:+.4}]", d.lo(), d.hi())
                } else {
                    "-".into()
                },
                d.n.to_string(),
                crate::fmt::p_value(r.test.p),
                if r.holm { "yes".into() } else { String::new() },
            ]
        })
        .collect()
}

/// The paired table's columns; the difference is named after the reference arm.
pub fn paired_header(baseline: &str) -> Vec<String> {
    [
        "arm",
        "size",
        &format!("arm - {baseline}"),
        "95% t-interval",
        "pairs",
        "p",
        "Holm",
    ]
    .map(String::from)
    .to_vec()
}

/// The held-out cell: each arm's observed loss, the prediction without it, and the error.
pub fn hold_out_rows(h: &HoldOut) -> Vec<Vec<String>> {
    h.arms
        .iter()
        .map(|a| {
            vec![
                a.arm.clone(),
                a.observed.display(4),
                format!("{:.4}", a.predicted),
                format!("{:+.4}", a.error),
                if a.error_in_intervals.is_finite() {
                    format!("{:+.2}", a.error_in_intervals)
                } else {
                    "-".into()
                },
            ]
        })
        .collect()
}

pub const HOLD_OUT_HEADER: [&str; 5] = [
    "arm",
    "observed (95% t)",
    "predicted",
    "error (nats)",
    "error / half-width",
];
