//! `attnres power SWEEP`: how many seeds and sizes detect a compute multiplier at 80% power,
//! and what they cost, from the noise of finished runs or a given `--sigma`.

use std::path::PathBuf;

use clap::Args;

use super::InputError;
use super::analyze::print_table;
use super::speed::Speed;
use crate::analysis::design::Design;
use crate::analysis::fit::{EMode, Law};
use crate::analysis::multiplier::{FitOptions, analyse};
use crate::analysis::power::{
    ALPHA, ALPHA_PER_SIZE, MAX_SEEDS, PlanCell, PlanRow, TARGET, plan, pooled_sd, power_at_size,
    sd_interval, seeds_at_size,
};
use crate::analysis::views::fit_points;
use crate::fmt::duration;
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
    #[arg(long)]
    pub multiplier: Option<f64>,
    /// Seed standard deviation of one run's validation loss, nats (default: measured
    /// from the paired differences of finished runs).
    #[arg(long)]
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
    #[arg(long, conflicts_with_all = ["multiplier", "law", "sizes"])]
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
    let sweep = Sweep::load(&args.sweep).map_err(|e| InputError(e.to_string()))?;
    args.baseline = args
        .baseline_arm
        .clone()
        .or_else(|| sweep.file.reference_arm.clone())
        .unwrap_or_else(|| "baseline".into());
    let bad = |msg: String| InputError(format!("{}: {msg}", args.sweep.display()));
    if let Some(difference) = args.difference {
        let question = super::power_difference::Question {
            baseline: &args.baseline,
            arm: args.arm.as_ref(),
            sigma: args.sigma,
            results: &args.results,
        };
        return super::power_difference::run(question, &sweep, difference);
    }
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
    if let Some(s) = args.sigma.filter(|s| !(s.is_finite() && *s > 0.0)) {
        anyhow::bail!(bad(format!(
            "--sigma {s}: must be a positive number of nats"
        )));
    }
    let mut cells = plan_cells(&sweep, &args.baseline, &arm);
    cells.sort_by(|a, b| a.compute.total_cmp(&b.compute));
    if cells.len() < 2 {
        anyhow::bail!(bad("a scaling comparison needs at least two sizes".into()));
    }
    let per_size: Vec<&PlanCell> = if args.sizes.is_empty() {
        cells.last().into_iter().collect()
    } else {
        let mut picked = Vec::new();
        for name in &args.sizes {
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
    };
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
    let (law, law_source) = match (&args.law, &fitted) {
        (Some(text), _) => (
            text.parse::<Law>().map_err(|e| bad(format!("--law {text}: {e}")))?,
            "given by --law".to_string(),
        ),
        (None, Some(f)) => (f.arms[0].law, format!("fitted to {} finished runs", points.len())),
        (None, None) => (
            PUBLISHED,
            "the report's published baseline law, since nothing of this sweep fits yet; its loss scale is the report's tokens, so pass --law A,ALPHA,E for your data".to_string(),
        ),
    };
    let m = match (args.multiplier, &fitted) {
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
    let design = Design::new(&points, &args.baseline);
    // This arm's paired differences, per cell.
    // This arm's paired differences per cell (their spread is all the planner needs).
    let diffs: Vec<Vec<f64>> = match design.arms.iter().position(|a| *a == arm) {
        Some(k) => (0..design.cells.len())
            .map(|c| design.paired_differences(k, c))
            .collect(),
        None => Vec::new(),
    };
    let (sigma_d, noise, spread) = match (args.sigma, pooled_sd(&diffs)) {
        (Some(s), _) => (s * 2f64.sqrt(), format!("--sigma {s} per run, so {:.4} per paired difference (independent arms)", s * 2f64.sqrt()), None),
        (None, Some((sd, df))) => {
            let spread = sd_interval(sd, df);
            let within = spread.map(|(lo, hi)| format!("; its 95% interval is {lo:.4} to {hi:.4}")).unwrap_or_default();
            (sd, format!("{sd:.4} nats per paired difference, pooled over sizes ({df} df, measured){within}"), spread)
        }
        (None, None) => anyhow::bail!(bad(
            "no size has two finished seeds of both arms to measure the seed noise from; pass --sigma (the seed SD of one run's loss, e.g. 0.005)".into()
        )),
    };
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
        arm: &arm,
        m,
        noise: &noise,
        law: &law,
        law_source: &law_source,
        sigma_d,
    };
    print_plan(&args, &sweep, &found, &cells, &deltas, &rows, &size_rows);
    Ok(())
}

/// The per-size test's plan at one size.
struct SizeRow {
    size: String,
    delta: f64,
    seeds: Option<usize>,
    power: f64,
    /// Seeds needed if the noise is at the low and the high end of its 95% interval.
    at_noise_ends: Option<(Option<usize>, Option<usize>)>,
    /// This size's own noise (SD, df) and the seeds it alone would ask for: the pooled noise
    /// assumes every size is as noisy as the rest.
    own: Option<(f64, usize, Option<usize>)>,
    flops_per_seed: f64,
}

impl SizeRow {
    fn plan(
        cell: &PlanCell,
        delta: f64,
        sigma_d: f64,
        spread: Option<(f64, f64)>,
        own: Option<(f64, usize)>,
    ) -> Self {
        let seeds = seeds_at_size(delta, sigma_d);
        Self {
            size: cell.size.clone(),
            delta,
            seeds,
            power: power_at_size(delta, sigma_d, seeds.unwrap_or(MAX_SEEDS)),
            at_noise_ends: spread
                .map(|(lo, hi)| (seeds_at_size(delta, lo), seeds_at_size(delta, hi))),
            own: own.map(|(sd, df)| (sd, df, seeds_at_size(delta, sd))),
            flops_per_seed: cell.flops_per_seed,
        }
    }
}

/// A seed count, or `> MAX_SEEDS` when none up to it reaches the target.
fn seeds_text(seeds: Option<usize>) -> String {
    seeds.map_or(format!("> {MAX_SEEDS}"), |n| n.to_string())
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

/// What `power` measured or was given, for printing.
struct Found<'a> {
    arm: &'a str,
    m: f64,
    noise: &'a str,
    law: &'a Law,
    law_source: &'a str,
    sigma_d: f64,
}

fn print_plan(
    args: &PowerArgs,
    sweep: &Sweep,
    found: &Found,
    cells: &[PlanCell],
    deltas: &[f64],
    rows: &[PlanRow],
    size_rows: &[SizeRow],
) {
    let Found {
        arm,
        m,
        noise,
        law,
        law_source,
        sigma_d,
    } = *found;
    let speed = Speed::of_finished(&sweep.results_dir(&args.results));
    println!(
        "power: seeds to detect `{arm}` worth {m:.3}x the compute of `{}` with {:.0}% power",
        args.baseline,
        TARGET * 100.0
    );
    println!("noise: {noise}");
    println!(
        "baseline law: L = {:.4} + {:.4} C^-{:.4} (C in PF-days), {law_source}",
        law.e, law.a, law.alpha
    );
    println!("expected loss difference at {m:.3}x, per size:");
    for (c, d) in cells.iter().zip(deltas) {
        println!(
            "  {:<28} {:.5} nats ({:.2} paired-difference SDs)",
            c.label,
            d,
            d / sigma_d
        );
    }
    println!(
        "\nper-size test: the report's paired t-test at one size (two-sided, alpha {ALPHA_PER_SIZE}, before Holm), in the arm's favour. It matches the compute multiplier's claim, whose interval rests almost wholly on the largest size."
    );
    let table = size_rows
        .iter()
        .map(|r| {
            let n = r.seeds.unwrap_or(MAX_SEEDS);
            vec![
                r.size.clone(),
                format!("{:.5}", r.delta),
                seeds_text(r.seeds),
                format!("{:.2}", r.power),
                r.at_noise_ends.map_or("-".into(), |(lo, hi)| {
                    format!("{} to {}", seeds_text(lo), seeds_text(hi))
                }),
                r.own.map_or("-".into(), |(sd, df, n)| {
                    format!("{} ({sd:.4}, {df} df)", seeds_text(n))
                }),
                (2 * n).to_string(),
                format!("{:.3e}", n as f64 * r.flops_per_seed),
                duration(n as f64 * r.flops_per_seed / speed.flops_per_s),
            ]
        })
        .collect();
    print_table(
        &[
            "size",
            "expected diff.",
            "seeds",
            "power",
            "seeds over the noise's 95% interval",
            "seeds with this size's own noise",
            "runs",
            "FLOPs",
            "time",
        ],
        table,
    );
    println!(
        "\npooled test: the mean over the K largest sizes of their paired differences (one-sided, alpha {ALPHA}). Weaker: it passes when the arm is better on average, even if the effect reverses with size."
    );
    let table = rows
        .iter()
        .map(|r| {
            vec![
                r.sizes.len().to_string(),
                r.sizes
                    .iter()
                    .map(|s| s.split(' ').next().unwrap_or(s))
                    .collect::<Vec<_>>()
                    .join(", "),
                r.seeds.map_or(format!("> {MAX_SEEDS}"), |n| n.to_string()),
                format!("{:.2}", r.power),
                r.runs.to_string(),
                format!("{:.3e}", r.flops),
                duration(r.flops / speed.flops_per_s),
            ]
        })
        .collect();
    print_table(
        &[
            "sizes",
            "which (largest)",
            "seeds/size",
            "power",
            "runs",
            "FLOPs",
            "time",
        ],
        table,
    );
    println!("\ntime {}; runs count both arms.", speed.text());
    println!(
        "the plan assumes the multiplier holds at every size; where it grows with compute (see the report's per-size paired differences), the small sizes add less and more seeds are needed."
    );
}
