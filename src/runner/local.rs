//! The local executor: trains a sweep's pending and partial runs on this machine.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::one_run::{RunOutcome, outcome_text, train_leased};
use super::{Filter, describe, view};
use crate::spec::{PlannedRun, Sweep};
use crate::store::{RunDir, RunState, write_atomic};
use crate::train::TrainOptions;

#[derive(Debug, Clone)]
pub struct RunnerOptions {
    pub results_root: PathBuf,
    /// Runs trained at once.
    pub jobs: usize,
    pub filters: Vec<Filter>,
    pub train: TrainOptions,
    /// Re-train runs whose last attempt failed.
    pub retry_failed: bool,
    /// Devices to spread the jobs over (`cuda:0`, `cuda:1`, ...), `jobs_per_device` each;
    /// empty: every job trains on `train.device`.
    pub devices: Vec<String>,
    pub jobs_per_device: usize,
}

/// The device of each job slot: `per_device` slots for each of `devices`, ordered so that the
/// first slots land on distinct devices (a sweep with fewer runs than slots still spreads
/// out); without `devices`, `jobs` slots on `fallback`.
pub fn job_devices(
    devices: &[String],
    per_device: usize,
    fallback: &str,
    jobs: usize,
) -> Vec<String> {
    if devices.is_empty() {
        return vec![fallback.to_string(); jobs.max(1)];
    }
    (0..per_device.max(1))
        .flat_map(|_| devices.iter().cloned())
        .collect()
}

#[derive(Debug, Default)]
pub struct SweepReport {
    pub outcomes: Vec<(PlannedRun, RunOutcome)>,
}

impl SweepReport {
    pub fn count(&self, f: impl Fn(&RunOutcome) -> bool) -> usize {
        self.outcomes.iter().filter(|(_, o)| f(o)).count()
    }

    pub fn failures(&self) -> Vec<(&PlannedRun, &str)> {
        self.outcomes
            .iter()
            .filter_map(|(r, o)| match o {
                RunOutcome::Failed(why) => Some((r, why.as_str())),
                _ => None,
            })
            .collect()
    }
}

/// Trains every selected run that is not done. Runs already done, failed before (unless
/// `retry_failed`) or held by another process are reported, not trained.
pub fn run_sweep(sweep: &Sweep, opts: &RunnerOptions) -> anyhow::Result<SweepReport> {
    let root = sweep.results_dir(&opts.results_root);
    std::fs::create_dir_all(&root)?;
    // The sweep file beside its runs, so the results folder describes itself.
    write_atomic(
        &root.join("sweep.yaml"),
        std::fs::read(&sweep.path)?.as_slice(),
    )?;
    let (mut report, todo) = runs_to_train(sweep, (&opts.filters, opts.retry_failed), &root)?;
    if todo.is_empty() {
        return Ok(report);
    }
    let mut slots = job_devices(
        &opts.devices,
        opts.jobs_per_device,
        &opts.train.device,
        opts.jobs,
    );
    slots.truncate(todo.len());
    let threads = opts
        .train
        .threads
        .unwrap_or_else(|| (num_cpus() / slots.len()).max(1));
    let terminal = std::io::stdout().is_terminal();
    let (multi, overall) = sweep_bars(terminal, todo.len(), &sweep.file.name);
    // Plain threads pulling from a shared queue, not a rayon pool: a rayon worker that
    // waits on another pool (polars writes parquet on its own pool) keeps busy by starting
    // the next queued job on the same stack, which interleaves whole training runs.
    let jobs = Jobs {
        root: &root,
        opts,
        threads,
        queue: Mutex::new(todo.iter()),
        active: Mutex::new(Vec::new()),
        finished: Mutex::new(Vec::new()),
        multi,
        overall,
        terminal,
        total: todo.len(),
    };
    std::thread::scope(|scope| {
        if terminal {
            let gpu =
                crate::backend::gpu_index(&opts.train.device).is_some() || !opts.devices.is_empty();
            let left = || -> Vec<&PlannedRun> {
                let done = lock(&jobs.finished);
                todo.iter()
                    .filter(|r| !done.iter().any(|(d, _): &(PlannedRun, _)| d.id == r.id))
                    .copied()
                    .collect()
            };
            let (bar, root, active) = (&jobs.overall, &root, &jobs.active);
            scope.spawn(move || super::eta::keep_bar_current(bar, sweep, root, gpu, left, active));
        }
        for device in &slots {
            scope.spawn(|| jobs.work(device));
        }
    });
    jobs.overall.finish_and_clear();
    let mut outcomes = jobs
        .finished
        .into_inner()
        .unwrap_or_else(|e| e.into_inner());
    // Report in sweep order, whatever order the jobs finished in.
    outcomes.sort_by_key(|(run, _)| todo.iter().position(|r| r.id == run.id));
    report.outcomes.extend(outcomes);
    Ok(report)
}

/// What the jobs of one sweep share: the queue of runs to train, the runs training now and
/// the finished ones, and the progress bars.
struct Jobs<'a> {
    root: &'a Path,
    opts: &'a RunnerOptions,
    threads: usize,
    queue: Mutex<std::slice::Iter<'a, &'a PlannedRun>>,
    active: Mutex<Vec<(&'a PlannedRun, ProgressBar)>>,
    finished: Mutex<Vec<(PlannedRun, RunOutcome)>>,
    multi: MultiProgress,
    overall: ProgressBar,
    terminal: bool,
    total: usize,
}

impl Jobs<'_> {
    /// One job: trains runs from the queue on `device` until it is empty.
    fn work(&self, device: &str) {
        loop {
            let next = lock(&self.queue).next();
            let Some(run) = next else { break };
            let dir = RunDir::new(self.root.join(&run.id));
            let bar = self.multi.insert_before(&self.overall, ProgressBar::new(0));
            bar.set_prefix(format!("{} {}", run.size, run.arm));
            lock(&self.active).push((run, bar.clone()));
            let train_opts = TrainOptions {
                threads: Some(self.threads),
                progress: Some(bar.clone()),
                device: device.to_string(),
                ..self.opts.train.clone()
            };
            let outcome = train_leased(run, &dir, &train_opts);
            lock(&self.active).retain(|(r, _)| r.id != run.id);
            bar.finish_and_clear();
            self.multi.remove(&bar);
            self.overall.inc(1);
            let mut done = lock(&self.finished);
            if !self.terminal {
                println!(
                    "[{}/{}] {}: {}",
                    done.len() + 1,
                    self.total,
                    describe(run),
                    outcome_text(&outcome)
                );
            }
            done.push(((*run).clone(), outcome));
        }
    }
}

/// The selected runs that need training, and the report of those that do not: done
/// already, or failed before (unless `retry_failed`).
pub fn runs_to_train<'s>(
    sweep: &'s Sweep,
    (filters, retry_failed): (&[Filter], bool),
    root: &Path,
) -> anyhow::Result<(SweepReport, Vec<&'s PlannedRun>)> {
    let mut report = SweepReport::default();
    let mut todo = Vec::new();
    let selected = sweep
        .runs
        .iter()
        .filter(|r| filters.iter().all(|f| f.matches(r)));
    for run in selected {
        match view(&RunDir::new(root.join(&run.id)))?.state {
            RunState::Done => report.outcomes.push((run.clone(), RunOutcome::AlreadyDone)),
            RunState::Failed if !retry_failed => report
                .outcomes
                .push((run.clone(), RunOutcome::FailedBefore)),
            _ => todo.push(run),
        }
    }
    Ok((report, todo))
}

/// The sweep's progress bars (drawn on a terminal only) and its overall bar over `runs`.
fn sweep_bars(terminal: bool, runs: usize, name: &str) -> (MultiProgress, ProgressBar) {
    let multi = MultiProgress::with_draw_target(if terminal {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    let overall = multi.add(ProgressBar::new(runs as u64));
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:>12} [{bar:30}] {pos}/{len} runs (elapsed {elapsed}, {msg})",
    ) {
        overall.set_style(style.progress_chars("=> "));
    }
    overall.set_prefix(name.to_string());
    (multi, overall)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Job slots take distinct devices first, then a second slot on each.
    #[test]
    fn jobs_are_spread_over_devices_first() {
        let gpus: Vec<String> = ["cuda:0", "cuda:1", "cuda:2"].map(String::from).to_vec();
        assert_eq!(
            job_devices(&gpus, 2, "cpu", 99),
            ["cuda:0", "cuda:1", "cuda:2", "cuda:0", "cuda:1", "cuda:2"]
        );
        // Two runs on three GPUs: two different GPUs.
        let mut two = job_devices(&gpus, 4, "cpu", 99);
        two.truncate(2);
        assert_eq!(two, ["cuda:0", "cuda:1"]);
        assert_eq!(job_devices(&[], 3, "cpu", 2), ["cpu", "cpu"]);
        assert_eq!(
            job_devices(&gpus[..1], 0, "cpu", 5),
            ["cuda:0"],
            "at least one job per device"
        );
    }
}
