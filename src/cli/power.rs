//! `attnres power SWEEP`: how many seeds and sizes detect a compute multiplier at 80% power,
//! and what they cost, from the noise of finished runs or a given `--sigma`.

use std::path::PathBuf;

use clap::Args;

use super::InputError;
use super::power_print::{Found, SizeRow, print_plan};
use crate::analysis::design::Design;
use crate::analysis::fit::{EMode, Law};
use crate::analysis::multiplier::{FitOptions, FitReport, analyse};
use crate::analysis::power::{PlanCell, plan, pooled_sd, sd_interval};
use crate::analysis::views::fit_points;
use crate::model::flops::{PFLOPS_DAY, flops_exact};
use crate::spec::Sweep;

/// The report's baseline law (SPEC section 10), used when nothing of the sweep has run.
const PUBLISHED: Law = Law {
    a: 1.891,
    alpha: 0.057,
    e: 0.0,
};

#[derive(Debug, Args)]
pub struct PowerArgs {
    /// The sweep file (sweeps/NAME.yaml).
    pub sweep: PathBuf,
    /// The multiplier to detect (default: the arm's measured one).
    #[arg(long, allow_negative_numbers = true)]
    pub multiplier: Option<f64>,
    /// Seed standard deviation of one run's validation loss, nats (default: measured
    /// from the paired differences of finished runs).
    #[arg(long, allow_negative_numbers = true)]
    pub sigma: Option<f64>,
    /// The arm compared with the baseline (default: the sweep's first other arm).
    #[arg(long)]
    pub arm: Option<String>,
    /// The baseline's law `A,ALPHA,E` (`L = E + A C^-ALPHA`, C in PF-days) instead of the
    /// one fitted to finished runs.
    #[arg(long)]
    pub law: Option<String>,
    /// Sizes to plan the per-size test at, comma-separated (default: the largest, where
    /// the compute multiplier's interval is decided).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<String>,
    /// Plan for a loss difference of this many nats at one size instead of a multiplier:
    /// for one-size sweeps, which have no scaling law (every arm unless --arm).
    #[arg(long, allow_negative_numbers = true, conflicts_with_all = ["multiplier", "law", "sizes"])]
    pub difference: Option<f64>,
    /// The reference arm, by its label (`block S=8`); default: the sweep file's
    /// `reference_arm`, else `baseline`.
    #[arg(long = "baseline", value_name = "BASELINE")]
    pub baseline_arm: Option<String>,
    /// The reference arm as resolved from `--baseline` and the sweep file.
    #[arg(skip)]
    pub baseline: String,
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
}

pub fn run(mut args: PowerArgs) -> anyhow::Result<()> {
    let sweep = Sweep::load(&args.sweep)?;
    args.baseline = args
        .baseline_arm
        .clone()
        .or_else(|| sweep.file.reference_arm.clone())
        .unwrap_or_else(|| "baseline".into());
    let bad = |msg: String| InputError::file(&args.sweep, msg);
    check_sigma(args.sigma, &bad)?;
    if let Some(difference) = args.difference {
        let question = super::power_difference::Question {
            baseline: &args.baseline,
            arm: args.arm.as_deref(),
            sigma: args.sigma,
            results: &args.results,
        };
        return super::power_difference::run(question, &sweep, difference);
    }
    let arm = compared_arm(&args, &sweep, &bad)?;
    let mut cells = plan_cells(&sweep, &args.baseline, &arm);
    cells.sort_by(|a, b| a.compute.total_cmp(&b.compute));
    if cells.len() < 2 {
        anyhow::bail!(bad("a scaling comparison needs at least two sizes".into()));
    }
    let per_size = pick_sizes(&cells, &args.sizes, &bad)?;
    let runs = crate::analysis::load::load_runs(std::slice::from_ref(&sweep), &args.results)?;
    let points = fit_points(&runs, false);
    let fitted = analyse(
        &points,
        &FitOptions {
            baseline: args.baseline.clone(),
            e_mode: EMode::Shared,
            resamples: 0,
            seed: 0,
            curve_points: 2,
        },
    )
    .ok();
    let (law, law_source, m) =
        law_and_multiplier(&args, fitted.as_ref(), points.len(), &arm, &bad)?;
    let design = Design::new(&points, &args.baseline);
    // This arm's paired differences per cell (their spread is all the planner needs).
    let diffs: Vec<Vec<f64>> = match design.arms.iter().position(|a| *a == arm) {
        Some(k) => (0..design.cells.len())
            .map(|c| design.paired_differences(k, c))
            .collect(),
        None => Vec::new(),
    };
    let (sigma_d, noise, spread) = seed_noise(args.sigma, &diffs, &bad)?;
    let (deltas, rows) = plan(&cells, &law, m, sigma_d);
    let size_rows: Vec<SizeRow> = per_size
        .iter()
        .map(|c| {
            let at = cells.iter().position(|x| x.size == c.size).unwrap_or(0);
            // This size's own paired differences, where the design has a cell of that name.
            let own = design
                .cells
                .iter()
                .position(|label| *label == c.size)
                .and_then(|cell| diffs.get(cell))
                .and_then(|d| pooled_sd(std::slice::from_ref(d)));
            SizeRow::plan(c, deltas[at], sigma_d, spread, own)
        })
        .collect();
    let found = Found {
        baseline: &args.baseline,
        results: &args.results,
        arm: &arm,
        m,
        noise: &noise,
        law: &law,
        law_source: &law_source,
        sigma_d,
    };
    print_plan(&sweep, &found, &cells, &deltas, &rows, &size_rows);
    Ok(())
}

/// The baseline's law (`--law`, fitted, or the report's published one) with where it came
/// from, and the multiplier to detect (`--multiplier`, or the arm's fitted one; above 1).
fn law_and_multiplier(
    args: &PowerArgs,
    fitted: Option<&FitReport>,
    points: usize,
    arm: &str,
    bad: &impl Fn(String) -> InputError,
) -> anyhow::Result<(Law, String, f64)> {
    let (law, law_source) = match (&args.law, fitted) {
        (Some(text), _) => (
            text.parse::<Law>().map_err(|e| bad(format!("--law {text}: {e}")))?,
            "given by --law".to_string(),
        ),
        (None, Some(f)) => (f.arms[0].law, format!("fitted to {points} finished runs")),
        (None, None) => (
            PUBLISHED,
            "the report's published baseline law, since nothing of this sweep fits yet; its loss scale is the report's tokens, so pass --law A,ALPHA,E for your data".to_string(),
        ),
    };
    let m = match (args.multiplier, fitted) {
        (Some(m), _) => m,
        (None, Some(f)) => f
            .arms
            .iter()
            .find(|a| a.arm == arm)
            .and_then(|a| a.multiplier)
            .map_or(f64::NAN, |e| e.value),
        (None, None) => anyhow::bail!(bad(
            "no finished runs to measure a multiplier from; pass --multiplier".into()
        )),
    };
    if !(m.is_finite() && m > 1.0) {
        anyhow::bail!(bad(format!(
            "a multiplier of {m:.3} is nothing to detect (it must exceed 1); pass --multiplier, e.g. 1.1"
        )));
    }
    Ok((law, law_source, m))
}

/// `--sigma`, if given, must be a positive number of nats.
fn check_sigma(sigma: Option<f64>, bad: &impl Fn(String) -> InputError) -> anyhow::Result<()> {
    if let Some(s) = sigma.filter(|s| !(s.is_finite() && *s > 0.0)) {
        anyhow::bail!(bad(format!(
            "--sigma {s}: must be a positive number of nats"
        )));
    }
    Ok(())
}

/// The arm compared with the baseline: `--arm`, or the sweep's first other arm; both must
/// be arms of the sweep.
fn compared_arm(
    args: &PowerArgs,
    sweep: &Sweep,
    bad: &impl Fn(String) -> InputError,
) -> anyhow::Result<String> {
    let arm = match &args.arm {
        Some(a) => a.clone(),
        None => sweep
            .runs
            .iter()
            .map(|r| r.arm.clone())
            .find(|a| *a != args.baseline)
            .ok_or_else(|| bad("the sweep has no arm besides the baseline".into()))?,
    };
    for name in [&args.baseline, &arm] {
        if !sweep.runs.iter().any(|r| &r.arm == name) {
            anyhow::bail!(bad(format!(
                "no arm `{name}` in the sweep; pass --arm/--baseline with one of its arms"
            )));
        }
    }
    Ok(arm)
}

/// The sizes `--sizes` names (each must be one of the sweep's), or the largest.
fn pick_sizes<'a>(
    cells: &'a [PlanCell],
    sizes: &[String],
    bad: &impl Fn(String) -> InputError,
) -> anyhow::Result<Vec<&'a PlanCell>> {
    Ok(if sizes.is_empty() {
        cells.last().into_iter().collect()
    } else {
        let mut picked = Vec::new();
        for name in sizes {
            match cells.iter().find(|c| &c.size == name) {
                Some(c) => picked.push(c),
                None => anyhow::bail!(bad(format!(
                    "--sizes {name}: no such size in the sweep; it has {}",
                    cells
                        .iter()
                        .map(|c| c.size.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            }
        }
        picked
    })
}

/// The paired differences' seed SD: from `--sigma` (one run's, so times sqrt 2), or pooled
/// over the sizes' measured differences, with its 95% interval; and how it was found.
#[allow(clippy::type_complexity)] // the SD, its text and its interval
fn seed_noise(
    sigma: Option<f64>,
    diffs: &[Vec<f64>],
    bad: &impl Fn(String) -> InputError,
) -> anyhow::Result<(f64, String, Option<(f64, f64)>)> {
    Ok(match (sigma, pooled_sd(diffs)) {
        (Some(s), _) => (s * 2f64.sqrt(), format!("--sigma {s} per run, so {:.4} per paired difference (independent arms)", s * 2f64.sqrt()), None),
        (None, Some((sd, df))) => {
            let spread = sd_interval(sd, df);
            let within = spread.map(|(lo, hi)| format!("; its 95% interval is {lo:.4} to {hi:.4}")).unwrap_or_default();
            (sd, format!("{sd:.4} nats per paired difference, pooled over sizes ({df} df, measured){within}"), spread)
        }
        (None, None) => anyhow::bail!(bad(
            "no size has two finished seeds of both arms to measure the seed noise from; pass --sigma (the seed SD of one run's loss, e.g. 0.005)".into()
        )),
    })
}

/// The sweep's cells (size, budget), from the plan: the baseline's compute, both arms' FLOPs.
fn plan_cells(sweep: &Sweep, baseline: &str, arm: &str) -> Vec<PlanCell> {
    let mut cells: Vec<PlanCell> = Vec::new();
    for r in sweep.runs.iter().filter(|r| r.arm == baseline) {
        let label = format!(
            "{} ({} tokens)",
            r.size,
            crate::fmt::thousands(r.spec.total_tokens())
        );
        if cells.iter().any(|c| c.label == label) {
            continue;
        }
        let base = flops_exact(&r.spec.model, r.spec.total_tokens());
        let other = sweep
            .runs
            .iter()
            .find(|o| {
                o.arm == arm && o.size == r.size && o.spec.total_tokens() == r.spec.total_tokens()
            })
            .map(|o| flops_exact(&o.spec.model, o.spec.total_tokens()))
            .unwrap_or(base);
        cells.push(PlanCell {
            size: r.size.clone(),
            label,
            compute: base / PFLOPS_DAY,
            flops_per_seed: base + other,
        });
    }
    cells
}
