//! Command-line interface: clap derive types and the dispatch to each subcommand.

mod analyze;
mod bench;
mod cost;
mod data;
mod metrics;
mod model;
mod plan;
mod power;
mod power_difference;
mod power_print;
mod report;
mod slurm;
mod speed;
mod status;
mod sweep;
mod sweep_args;
mod train;
mod watch;

use clap::{Parser, Subcommand};

pub use crate::error::InputError;

#[derive(Debug, Parser)]
#[command(
    name = "attnres",
    version,
    about = "Scaling-law and ablation experiments for Attention Residuals"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print parameters, FLOPs per token, depth sources and their memory for model settings.
    Model(model::ModelArgs),
    /// Print every run of a sweep (id, variant, size, params, tokens, FLOPs, time, status).
    Plan(plan::PlanArgs),
    /// Train every run of a sweep that is not done (resumes partial runs, skips done ones).
    Run(sweep::RunArgs),
    /// Show done / partial / failed / pending runs of a sweep, with their last loss.
    Status(sweep_args::SweepArgs),
    /// Fit scaling laws and compute multipliers (with bootstrap intervals) and write fits.json.
    Fit(analyze::FitCmd),
    /// Write REPORTS/NAME/report.md, a self-contained report.html and figures from the results.
    Report(report::ReportCmd),
    /// Print the multipliers and losses of several sweeps side by side.
    Compare(report::CompareCmd),
    /// Train one run from a RunSpec YAML file into a run folder (resumes a partial one).
    Train(train::TrainArgs),
    /// Write a run's final weights as safetensors.
    Export(train::ExportArgs),
    /// Every run's scalars in one table (CSV, JSON Lines), or the sweep's TensorBoard files
    /// rebuilt from its run folders.
    ExportMetrics(metrics::ExportMetricsArgs),
    /// Mean next-token loss and bits per byte of a run's model on a text file.
    Score(train::ScoreArgs),
    /// Corpus set-up (fetch the built-in corpora once).
    Data(data::DataArgs),
    /// Tokens/s, step time and MFU of baseline, Full and Block S=4, per backend.
    Bench(bench::BenchArgs),
    /// Seeds and sizes needed to detect a compute multiplier at 80% power, and their cost.
    Power(power::PowerArgs),
    /// Depth I/O, pipeline communication, prefill cache and training memory of a model shape.
    Cost(cost::CostArgs),
    /// Cancel a sweep's Slurm jobs.
    Cancel(sweep_args::SweepArgs),
    /// A live view of a sweep: running runs, counts, and the time left by FLOPs.
    Watch(watch::WatchArgs),
    /// One Slurm array task: train the manifest's run at this index (used by `--executor slurm`).
    #[command(hide = true)]
    Task(slurm::TaskArgs),
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Model(args) => model::run(args),
        Command::Plan(args) => plan::run_plan(args),
        Command::Run(args) => sweep::run_run(args),
        Command::Status(args) => status::run_status(args),
        Command::Fit(args) => analyze::run_fit(args),
        Command::Report(args) => report::run_report(args),
        Command::Compare(args) => report::run_compare(args),
        Command::Train(args) => train::run_train(args),
        Command::Export(args) => train::run_export(args),
        Command::ExportMetrics(args) => metrics::run(args),
        Command::Score(args) => train::run_score(args),
        Command::Data(args) => data::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Power(args) => power::run(args),
        Command::Cost(args) => cost::run(args),
        Command::Cancel(args) => slurm::run_cancel(args),
        Command::Watch(args) => watch::run(args),
        Command::Task(args) => slurm::run_task(args),
    }
}

/// The exit status for an error: 2 for bad input (an [`InputError`], a sweep or run file's
/// [`SpecError`](crate::spec::SpecError), a `--results` folder that cannot take the runs), 1 for everything else.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    let input = |c: &(dyn std::error::Error + 'static)| {
        c.is::<InputError>()
            || c.is::<crate::spec::SpecError>()
            || c.is::<crate::store::root::ResultsFolderError>()
    };
    if e.chain().any(input) { 2 } else { 1 }
}

pub use crate::fmt::thousands;
