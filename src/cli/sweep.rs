//! `attnres run`: a whole study from one sweep file (`plan.rs` shows it first).

use std::path::Path;

use clap::Args;

use super::InputError;
use super::plan::{PlanArgs, run_plan};
use super::sweep_args::{SweepArgs, check_environment, results_flag};
use super::train::DeviceArgs;
use crate::backend::BackendKind;
use crate::runner::{
    Filter, RunOutcome, RunnerOptions, SweepReport, outcome_text, run_sweep, runs_to_train,
};
use crate::spec::Sweep;

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// Runs trained in parallel (default: on a CPU one single-threaded run per core, or
    /// cores / --threads runs; on a GPU one; printed at the start).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Show what would be trained, and train nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Train again the runs whose last attempt failed.
    #[arg(long)]
    pub retry_failed: bool,
    /// Spread the runs over these devices (e.g. cuda:0,cuda:1,cuda:2,cuda:3), each job on its
    /// own device; replaces --device and --jobs.
    #[arg(long, value_delimiter = ',')]
    pub devices: Vec<String>,
    /// Runs trained at once on each of --devices (small runs share a large GPU).
    #[arg(long, default_value_t = 1)]
    pub jobs_per_device: usize,
    #[command(flatten)]
    pub slurm: super::slurm::SlurmArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
}

/// The default `--jobs` (`runner::capacity::default_jobs`) for the runs there are to train
/// (`runner::runs_to_train`), lowered until every selected run fits its share of memory, and printed. At worst
/// 1: a run that does not fit even alone is then refused by `check_environment`, as with
/// an explicit `--jobs`. With nothing left to train, 1 and nothing printed.
fn auto_jobs(
    sweep: &Sweep,
    filters: &[Filter],
    (device, threads): (&str, Option<usize>),
    (results, retry_failed): (&Path, bool),
) -> anyhow::Result<usize> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let root = sweep.results_dir(results);
    let runs = runs_to_train(sweep, (filters, retry_failed), &root)?
        .1
        .len();
    if runs == 0 {
        // Nothing left to train: no jobs to choose, and nothing to say about them.
        return Ok(1);
    }
    let (jobs, why) = crate::runner::capacity::default_jobs(device, threads, cores, runs);
    for j in (2..=jobs).rev() {
        let limit = crate::runner::capacity::memory_limit(device, j);
        let fits = sweep
            .check_environment(limit.as_ref(), &|r| filters.iter().all(|f| f.matches(r)))
            .is_ok();
        if fits {
            if j == jobs {
                println!("{why}");
            } else {
                println!("jobs: {j} at once (fewer than the default {jobs}: memory)");
            }
            return Ok(j);
        }
    }
    if jobs > 1 {
        println!("jobs: 1 at a time (the default {jobs} would not fit in memory)");
    } else {
        println!("{why}");
    }
    Ok(1)
}

/// The options of a local run that a Slurm submission has no use for, refused rather than
/// dropped: each run is an array task of its own, placed and sized by Slurm.
fn refuse_local_options(args: &RunArgs) -> anyhow::Result<()> {
    let refusals = [
        (
            args.jobs.is_some(),
            "--jobs",
            "each run is its own array task; --max-parallel caps how many run at once",
        ),
        (
            !args.devices.is_empty(),
            "--devices",
            "Slurm places each task; --gpus-per-run gives each task its GPUs",
        ),
        (
            args.jobs_per_device != 1,
            "--jobs-per-device",
            "Slurm places each task; --gpus-per-run gives each task its GPUs",
        ),
        (
            args.device.threads.is_some(),
            "--threads",
            "a task trains with --cpus-per-run threads",
        ),
        (
            args.device.device != "cpu",
            "--device",
            "a task trains on the GPU that --gpus-per-run gives it, or on its CPUs",
        ),
    ];
    match refusals.iter().find(|(given, ..)| *given) {
        Some((_, option, why)) => Err(InputError::Arguments(format!(
            "{option} does not apply to --executor slurm: {why}"
        ))
        .into()),
        None => Ok(()),
    }
}

/// Copies the selected runs that another sweep under the results root has finished, and
/// says so: `copied 21 finished runs from results/block_size; they are not retrained`.
fn reuse_runs(
    sweep: &crate::spec::Sweep,
    results: &std::path::Path,
    selected: &[&crate::spec::PlannedRun],
) -> anyhow::Result<()> {
    let copied = crate::runner::reuse::copy_done_elsewhere(sweep, results, selected)?;
    for (from, n) in copied {
        let runs = if n == 1 { "run" } else { "runs" };
        println!(
            "copied {n} finished {runs} from {}; they are not retrained",
            results.join(from).display()
        );
    }
    Ok(())
}

pub fn run_run(args: RunArgs) -> anyhow::Result<()> {
    let (sweep, filters) = args.sweep.load_to_train()?;
    let selected: Vec<&crate::spec::PlannedRun> = sweep
        .runs
        .iter()
        .filter(|r| filters.iter().all(|f| f.matches(r)))
        .collect();
    if args.slurm.executor == super::slurm::Executor::Slurm {
        refuse_local_options(&args)?;
        if !args.dry_run {
            reuse_runs(&sweep, &args.sweep.results, &selected)?;
        }
        return super::slurm::submit(
            &sweep,
            &filters,
            &args.sweep,
            &args.slurm,
            args.retry_failed,
            args.dry_run,
            args.device.backend,
        );
    }
    let backend = args.device.backend.unwrap_or_else(BackendKind::preferred);
    let jobs = match args.jobs {
        Some(jobs) => jobs,
        None if !args.devices.is_empty() => 1,
        None => auto_jobs(
            &sweep,
            &filters,
            (&args.device.device, args.device.threads),
            (&args.sweep.results, args.retry_failed),
        )?,
    };
    if args.dry_run {
        return run_plan(PlanArgs {
            sweep: args.sweep,
            device: args.device.device,
            jobs,
        });
    }
    if args.devices.is_empty() {
        check_environment(&sweep, &filters, (backend, &args.device.device), jobs)?;
    }
    for device in &args.devices {
        check_environment(&sweep, &filters, (backend, device), args.jobs_per_device)?;
    }
    // After the checks: bad input writes nothing.
    reuse_runs(&sweep, &args.sweep.results, &selected)?;
    let opts = RunnerOptions {
        results_root: args.sweep.results.clone(),
        jobs,
        filters,
        train: args.device.options(),
        retry_failed: args.retry_failed,
        devices: args.devices.clone(),
        jobs_per_device: args.jobs_per_device,
    };
    let report = run_sweep(&sweep, &opts)?;
    print_outcomes(&sweep, &report, &args.sweep.results);
    if !report.failures().is_empty() {
        anyhow::bail!(
            "{} run(s) failed; see above, fix the cause and re-run with --retry-failed (finished runs are kept)",
            report.failures().len()
        );
    }
    Ok(())
}

/// What the sweep did: counts by outcome, each run that failed, is busy elsewhere or was
/// lost, and how to follow runs that another process trains.
fn print_outcomes(sweep: &Sweep, report: &SweepReport, results: &Path) {
    let trained = report.count(|o| matches!(o, RunOutcome::Trained { .. }));
    println!(
        "\nsweep {}: {trained} trained, {} done already, {} busy elsewhere, {} failed before, {} failed now",
        sweep.file.name,
        report.count(|o| *o == RunOutcome::AlreadyDone),
        report.count(|o| matches!(o, RunOutcome::Busy(_))),
        report.count(|o| *o == RunOutcome::FailedBefore),
        report.failures().len()
    );
    for (run, outcome) in &report.outcomes {
        if matches!(
            outcome,
            RunOutcome::Failed(_)
                | RunOutcome::FailedBefore
                | RunOutcome::Busy(_)
                | RunOutcome::Lost(_)
        ) {
            println!(
                "  {} {} seed {} ({}): {}",
                run.id,
                run.arm,
                run.seed,
                run.size,
                outcome_text(outcome)
            );
        }
    }
    let busy = report.count(|o| matches!(o, RunOutcome::Busy(_)));
    if busy > 0 {
        println!(
            "{busy} run(s) are training in another process; `attnres status {}{}` shows their progress, and running this again once they finish trains whatever they left",
            sweep.path.display(),
            results_flag(results)
        );
    }
}
