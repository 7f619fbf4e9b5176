//! What `attnres power` prints: the plan's law and noise, seeds and compute per size, and
//! what a seed costs.

use std::path::Path;

use super::analyze::print_table;
use super::speed::Speed;
use crate::analysis::fit::Law;
use crate::analysis::power::{
    ALPHA, ALPHA_PER_SIZE, MAX_SEEDS, PlanCell, PlanRow, TARGET, power_at_size, seeds_at_size,
};
use crate::fmt::duration;
use crate::spec::Sweep;

/// The report's baseline law (SPEC section 10), used when nothing of the sweep has run.
/// The per-size test's plan at one size.
pub(super) struct SizeRow {
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
    pub(super) fn plan(
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

/// What `power` measured or was given, for printing.
pub(super) struct Found<'a> {
    pub baseline: &'a str,
    pub results: &'a Path,
    pub arm: &'a str,
    pub m: f64,
    pub noise: &'a str,
    pub law: &'a Law,
    pub law_source: &'a str,
    pub sigma_d: f64,
}

pub(super) fn print_plan(
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
        ..
    } = *found;
    let speed = Speed::of_finished(&sweep.results_dir(found.results));
    println!(
        "power: seeds to detect `{arm}` worth {m:.3}x the compute of `{}` with {:.0}% power",
        found.baseline,
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
    print_per_size(size_rows, &speed);
    println!(
        "\npooled test: the mean over the K largest sizes of their paired differences (one-sided, alpha {ALPHA}). Weaker: it passes when the arm is better on average, even if the effect reverses with size."
    );
    print_pooled(rows, &speed);
    println!("\ntime {}; runs count both arms.", speed.text());
    println!(
        "the plan assumes the multiplier holds at every size; where it grows with compute (see the report's per-size paired differences), the small sizes add less and more seeds are needed."
    );
}

/// The per-size test's table: seeds, power, runs, FLOPs and time at each size.
fn print_per_size(size_rows: &[SizeRow], speed: &Speed) {
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
}

/// The pooled test's table: seeds per size over the K largest sizes, for each K.
fn print_pooled(rows: &[PlanRow], speed: &Speed) {
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
}
