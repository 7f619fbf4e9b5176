//! `attnres power --difference NATS`: the seeds that detect a loss difference of NATS
//! between an arm and the baseline at one size, with the report's paired t-test (two-sided,
//! alpha 0.05), at 80% power. For sweeps with no scaling law to turn a multiplier into a
//! difference: one size, many arms (block sizes, ablations, schedules).
//!
//! The noise is the SD of the paired differences (arm minus baseline, same seed) of the
//! finished runs, pooled over the arms and sizes compared; each arm's own is printed beside
//! it, and the answer is also given at both ends of the pooled SD's 95% interval.

use super::InputError;
use super::analyze::print_table;
use super::speed::Speed;
use crate::analysis::design::Design;
use crate::analysis::power::{TARGET, pooled_sd, power_at_size, sd_interval, seeds_at_size};
use crate::analysis::views::fit_points;
use crate::fmt::duration;
use crate::model::flops::flops_exact;
use crate::spec::Sweep;

/// What `attnres power --difference` is asked: the arms compared, the noise if given, and
/// where the runs are.
pub(super) struct Question<'a> {
    pub baseline: &'a str,
    pub arm: Option<&'a str>,
    pub sigma: Option<f64>,
    pub results: &'a std::path::Path,
}

pub(super) fn run(args: Question, sweep: &Sweep, difference: f64) -> anyhow::Result<()> {
    check_question(&args, sweep, difference)?;
    let bad = |msg: String| InputError::file(&sweep.path, msg);
    let runs = crate::analysis::load::load_runs(std::slice::from_ref(sweep), args.results)?;
    let design = Design::new(&fit_points(&runs, false), args.baseline);
    let compared: Vec<usize> = (1..design.arms.len())
        .filter(|&k| args.arm.is_none_or(|a| *a == design.arms[k]))
        .collect();
    let diffs = |k: usize| -> Vec<Vec<f64>> {
        (0..design.cells.len())
            .map(|c| design.paired_differences(k, c))
            .collect()
    };
    let all: Vec<Vec<f64>> = compared.iter().flat_map(|&k| diffs(k)).collect();
    let (sigma_d, noise, spread) = match (args.sigma, pooled_sd(&all)) {
        (Some(s), _) => (
            s * 2f64.sqrt(),
            format!(
                "--sigma {s} per run, so {:.4} per paired difference",
                s * 2f64.sqrt()
            ),
            None,
        ),
        (None, Some((sd, df))) => (
            sd,
            format!(
                "{sd:.4} nats per paired difference, pooled over {} arm(s) ({df} df, measured)",
                compared.len()
            ),
            sd_interval(sd, df),
        ),
        (None, None) => anyhow::bail!(bad(
            "no arm has two finished seeds paired with the baseline's to measure the noise \
             from; pass --sigma (the seed SD of one run's loss, e.g. 0.01)"
                .into()
        )),
    };
    let seeds = seeds_at_size(difference, sigma_d);
    let text = |n: Option<usize>| n.map_or("more than 200".to_string(), |n| n.to_string());
    println!(
        "power: seeds to detect a loss difference of {difference} nats from `{}` with {:.0}% \
         power (paired t-test at one size, two-sided, alpha 0.05)",
        args.baseline,
        TARGET * 100.0
    );
    println!("noise: {noise}");
    let power = seeds.map(|n| format!(" (power {:.2})", power_at_size(difference, sigma_d, n)));
    println!("seeds: {}{}", text(seeds), power.unwrap_or_default());
    if let Some((lo, hi)) = spread {
        println!(
            "  {} to {} over the noise's 95% interval ({lo:.4} to {hi:.4})",
            text(seeds_at_size(difference, lo)),
            text(seeds_at_size(difference, hi))
        );
    }
    let rows: Vec<Vec<String>> = compared
        .iter()
        .filter_map(|&k| {
            let (sd, df) = pooled_sd(&diffs(k))?;
            Some(vec![
                design.arms[k].clone(),
                format!("{sd:.4} ({df} df)"),
                text(seeds_at_size(difference, sd)),
            ])
        })
        .collect();
    if !rows.is_empty() {
        println!();
        print_table(&["arm", "its own noise", "seeds with it"], rows);
    }
    if let Some(n) = seeds {
        print_cost(&args, sweep, n);
    }
    Ok(())
}

/// Refuses an arm the sweep lacks and a difference that is not a positive number.
fn check_question(args: &Question, sweep: &Sweep, difference: f64) -> anyhow::Result<()> {
    let bad = |msg: String| InputError::file(&sweep.path, msg);
    for name in [Some(args.baseline), args.arm].into_iter().flatten() {
        if !sweep.runs.iter().any(|r| r.arm == name) {
            anyhow::bail!(bad(format!("no arm `{name}` in the sweep")));
        }
    }
    if !(difference.is_finite() && difference > 0.0) {
        anyhow::bail!(bad(format!(
            "--difference {difference}: give a positive number of nats, e.g. 0.02"
        )));
    }
    Ok(())
}

/// What `n` seeds cost: one run of every arm of the sweep (or of the baseline and --arm)
/// per seed, in FLOPs and in time at the speed of the finished runs.
fn print_cost(args: &Question, sweep: &Sweep, n: usize) {
    let per_seed: f64 = sweep
        .runs
        .iter()
        .filter(|r| r.seed == sweep.runs[0].seed)
        .filter(|r| {
            args.arm
                .is_none_or(|a| *a == r.arm || r.arm == *args.baseline)
        })
        .map(|r| flops_exact(&r.spec.model, r.spec.total_tokens()))
        .sum();
    let speed = Speed::of_finished(&sweep.results_dir(args.results));
    println!(
        "\ncost of {n} seeds: {:.3e} FLOPs, {} {}",
        per_seed * n as f64,
        duration(per_seed * n as f64 / speed.flops_per_s),
        speed.text()
    );
}
