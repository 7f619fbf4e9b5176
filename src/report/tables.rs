//! The report's tables: every run, every arm at the largest size, the fitted laws.

use super::doc::Doc;
use crate::analysis::load::LoadedRun;
use crate::analysis::multiplier::FitReport;
use crate::analysis::views;
use crate::cli::thousands;
use crate::model::flops::PFLOPS_DAY;

pub fn runs_table(doc: &mut Doc, runs: &[LoadedRun]) {
    doc.h(2, "Runs");
    let rows = runs
        .iter()
        .map(|r| {
            let s = &r.summary;
            vec![
                format!("`{}`", r.planned.id),
                r.planned.size.clone(),
                r.planned.arm.clone(),
                r.planned.seed.to_string(),
                thousands(s.params.non_embedding),
                thousands(s.tokens),
                format!("{:.3e}", s.flops_exact / PFLOPS_DAY),
                format!("{:.4}", s.loss_val),
                s.bpb_val
                    .map(|b| format!("{b:.4}"))
                    .or(s.acc_val.map(|a| format!("acc {a:.3}")))
                    .unwrap_or_default(),
                format!("{:.0}", s.wall_s),
            ]
        })
        .collect();
    doc.table(
        &[
            "run",
            "size",
            "variant",
            "seed",
            "params",
            "tokens",
            "PF-days",
            "val loss",
            "bits/byte",
            "wall s",
        ],
        rows,
    );
}

/// Every arm at the largest size: mean loss, interval over seeds, difference to baseline.
pub fn arms_table(doc: &mut Doc, runs: &[LoadedRun]) {
    let Some(size) = views::largest_size(runs) else {
        return;
    };
    let losses = |arm: &str| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.planned.size == size && r.planned.arm == arm)
            .map(|r| f64::from(r.summary.loss_val))
            .collect()
    };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let base = losses("baseline");
    let rows = views::arms(runs)
        .into_iter()
        .filter_map(|arm| {
            let v = losses(&arm);
            if v.is_empty() {
                return None;
            }
            let m = mean(&v);
            let sd = if v.len() > 1 {
                (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
            } else {
                f64::NAN
            };
            let delta = if base.is_empty() {
                String::new()
            } else {
                format!("{:+.4}", m - mean(&base))
            };
            Some(vec![
                arm,
                format!("{m:.4}"),
                if sd.is_nan() {
                    "-".into()
                } else {
                    format!("±{:.4}", 1.96 * sd / (v.len() as f64).sqrt())
                },
                delta,
                v.len().to_string(),
            ])
        })
        .collect();
    doc.h(2, format!("Variants at the largest size ({size})"));
    doc.table(
        &[
            "variant",
            "val loss",
            "95% interval",
            "vs baseline",
            "seeds",
        ],
        rows,
    );
}

pub fn fit_rows(r: &FitReport) -> Vec<Vec<String>> {
    r.arms
        .iter()
        .map(|a| {
            vec![
                a.arm.clone(),
                format!("{:.4}", a.law.a),
                format!("{:.4}", a.law.alpha),
                format!("{:.4}", a.law.e),
                a.multiplier
                    .map(|m| format!("{:.3}x", m.value))
                    .unwrap_or_else(|| "1 (reference)".into()),
                a.multiplier
                    .map(|m| format!("[{:.3}, {:.3}]", m.lo, m.hi))
                    .unwrap_or_default(),
                a.points.to_string(),
                a.seeds.to_string(),
            ]
        })
        .collect()
}
