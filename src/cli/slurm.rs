//! `attnres run --executor slurm`, the hidden `attnres task` each array task runs, and
//! `attnres cancel` (docs/slurm.md).

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use super::InputError;
use super::sweep_args::SweepArgs;
use super::train::DeviceArgs;
use crate::runner::slurm::{self, SlurmOptions};
use crate::runner::{Filter, RunOutcome, runs_to_train, view};
use crate::spec::{PlannedRun, Sweep};
use crate::store::{RunDir, RunState};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Executor {
    /// Train here, `--jobs` at a time.
    Local,
    /// Submit job arrays to Slurm and return.
    Slurm,
}

/// Slurm settings of `attnres run --executor slurm`.
#[derive(Debug, Clone, Args)]
pub struct SlurmArgs {
    /// Where runs train.
    #[arg(long, value_enum, default_value = "local")]
    pub executor: Executor,
    /// Slurm partition.
    #[arg(long)]
    pub partition: Option<String>,
    /// Time limit per run (task), e.g. 2:00:00.
    #[arg(long)]
    pub time: Option<String>,
    /// CPUs per run (task); also its training threads.
    #[arg(long, default_value_t = 1)]
    pub cpus_per_run: usize,
    /// GPUs per run (task); each task sees only its own.
    #[arg(long, default_value_t = 0)]
    pub gpus_per_run: usize,
    /// Tasks of an array running at once (`--array=...%K`).
    #[arg(long)]
    pub max_parallel: Option<usize>,
    /// When Slurm warns a task before its time limit or preemption: it checkpoints and
    /// requeues itself.
    #[arg(long, default_value = "B:USR1@120")]
    pub signal: String,
    /// Extra `#SBATCH` lines, as sbatch takes them (repeatable), e.g. --sbatch-arg=--qos=low.
    #[arg(long = "sbatch-arg", allow_hyphen_values = true)]
    pub sbatch_args: Vec<String>,
}

/// Submits the sweep's unfinished selected runs as job arrays (or prints the scripts).
pub fn submit(
    sweep: &Sweep,
    filters: &[Filter],
    sweep_args: &SweepArgs,
    args: &SlurmArgs,
    retry_failed: bool,
    dry_run: bool,
    backend: Option<crate::backend::BackendKind>,
) -> anyhow::Result<()> {
    if args.cpus_per_run == 0 {
        anyhow::bail!(InputError::flag("--cpus-per-run 0", "give at least 1"));
    }
    let root = sweep.results_dir(&sweep_args.results);
    let todo = runs_to_submit(sweep, filters, &root, (retry_failed, dry_run))?;
    if todo.is_empty() {
        println!(
            "sweep {}: nothing to submit (every selected run is done or failed; --retry-failed)",
            sweep.file.name
        );
        return Ok(());
    }
    let opts = args.options(backend);
    let arrays = slurm::submit(sweep, &sweep_args.results, &todo, &opts, dry_run)?;
    for a in &arrays {
        match &a.job_id {
            None => {
                println!(
                    "# {}; manifest {} (not written: --dry-run)",
                    crate::fmt::count(a.runs, "run"),
                    a.manifest.display()
                );
                print!("{}", a.script);
            }
            Some(id) => println!(
                "submitted job array {id}: {} (manifest {})",
                crate::fmt::count(a.runs, "run"),
                a.manifest.display()
            ),
        }
    }
    if !dry_run {
        let results = super::sweep_args::results_flag(&sweep_args.results);
        println!(
            "logs: {}/logs/JOB_TASK.log; `attnres status {}{results}` shows progress, `attnres cancel {}{results}` stops it",
            root.display(),
            sweep.path.display(),
            sweep.path.display()
        );
    }
    Ok(())
}

/// The selected runs to submit: those a local run would train (`runner::runs_to_train`:
/// every one not done, and failed ones only with `retry_failed`); a failed one's status is
/// then removed (unless `dry_run`) so that its task trains it.
fn runs_to_submit<'s>(
    sweep: &'s Sweep,
    filters: &[Filter],
    root: &Path,
    (retry_failed, dry_run): (bool, bool),
) -> anyhow::Result<Vec<&'s PlannedRun>> {
    let (_, todo) = runs_to_train(sweep, (filters, retry_failed), root)?;
    if retry_failed && !dry_run {
        for run in &todo {
            let dir = RunDir::new(root.join(&run.id));
            if view(&dir)?.state == RunState::Failed {
                // The task trains a failed run only once its status no longer says failed.
                let _ = std::fs::remove_file(dir.status());
            }
        }
    }
    Ok(todo)
}

impl SlurmArgs {
    /// The options of the arrays these flags submit.
    fn options(&self, backend: Option<crate::backend::BackendKind>) -> SlurmOptions {
        SlurmOptions {
            partition: self.partition.clone(),
            time: self.time.clone(),
            cpus_per_run: self.cpus_per_run,
            gpus_per_run: self.gpus_per_run,
            max_parallel: self.max_parallel,
            signal: self.signal.clone(),
            sbatch_args: self.sbatch_args.clone(),
            device: if self.gpus_per_run > 0 {
                "cuda".into()
            } else {
                "cpu".into()
            },
            backend,
        }
    }
}

/// `attnres task`: what one array task runs.
#[derive(Debug, Args)]
pub struct TaskArgs {
    pub sweep: PathBuf,
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
    /// The array's manifest: one run id per line, by array index.
    #[arg(long)]
    pub manifest: PathBuf,
    /// Array index (default: $SLURM_ARRAY_TASK_ID).
    #[arg(long)]
    pub index: Option<usize>,
    #[command(flatten)]
    pub device: DeviceArgs,
}

pub fn run_task(args: TaskArgs) -> anyhow::Result<()> {
    let sweep = Sweep::load(&args.sweep)?;
    let index = match args.index {
        Some(i) => i,
        None => std::env::var("SLURM_ARRAY_TASK_ID")
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                InputError::Arguments("--index not given and SLURM_ARRAY_TASK_ID not set".into())
            })?,
    };
    let outcome = slurm::run_task(
        &sweep,
        &args.results,
        &args.manifest,
        index,
        &args.device.options(),
    )?;
    match outcome {
        RunOutcome::Failed(why) => anyhow::bail!("run failed: {why}"),
        _ => Ok(()),
    }
}

/// `attnres cancel SWEEP`: cancels the sweep's Slurm jobs.
pub fn run_cancel(args: SweepArgs) -> anyhow::Result<()> {
    if let Some(filter) = args.filter.first() {
        anyhow::bail!(InputError::flag(
            format!("--filter {filter}"),
            "cancel stops every Slurm job of the sweep and selects no runs; drop --filter, \
             or stop one job with scancel JOB_ID"
        ));
    }
    let sweep = Sweep::load(&args.sweep)?;
    let (ids, all) = crate::runner::slurm_queue::cancel(&sweep.results_dir(&args.results))?;
    match (ids.is_empty(), all.is_empty()) {
        (_, true) => println!("sweep {}: no Slurm jobs submitted", sweep.file.name),
        (true, false) => println!(
            "sweep {}: nothing queued or running (jobs {} have ended)",
            sweep.file.name,
            all.join(", ")
        ),
        (false, false) => println!("cancelled {}", ids.join(", ")),
    }
    Ok(())
}
