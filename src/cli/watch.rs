//! `attnres watch`: a live view of a sweep, local or on Slurm. Each running run's step,
//! loss, tokens/s and time left; the finished, failed and waiting counts; and the sweep's
//! time left by FLOPs (runner::eta), redrawn every few seconds until no run is left to
//! train. It only reads the run folders (and `squeue` for Slurm sweeps).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};

use clap::Args;

use super::sweep_args::SweepArgs;
use crate::fmt::duration;
use crate::runner::eta::{Clock, flops_left};
use crate::runner::view;
use crate::spec::{PlannedRun, Sweep};
use crate::store::metrics::{StepRow, read_steps};
use crate::store::{RunDir, RunState};

#[derive(Debug, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// Seconds between redraws.
    #[arg(long, default_value_t = 5.0)]
    pub every: f64,
    /// Print the view once and exit (for logs and scripts).
    #[arg(long)]
    pub once: bool,
    /// Where the runs train (cpu, cuda, cuda:N): the speed assumed before any run finishes.
    #[arg(long, default_value = "cpu")]
    pub device: String,
}

pub fn run(args: WatchArgs) -> anyhow::Result<()> {
    let (sweep, filters) = args.sweep.load()?;
    if !(args.every > 0.0 && args.every.is_finite()) {
        anyhow::bail!(super::InputError::flag(
            format!("--every {}", args.every),
            "give a number of seconds above 0"
        ));
    }
    let selected: Vec<&PlannedRun> = sweep
        .runs
        .iter()
        .filter(|r| filters.iter().all(|f| f.matches(r)))
        .collect();
    let terminal = std::io::stdout().is_terminal();
    loop {
        let (text, waiting) = frame(&sweep, &selected, &args)?;
        let mut out = std::io::stdout().lock();
        if terminal && !args.once {
            // Home and clear: the view redraws in place.
            write!(out, "\x1b[H\x1b[2J")?;
        }
        write!(out, "{text}")?;
        out.flush()?;
        if args.once || waiting == 0 {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_secs_f64(args.every));
    }
}

/// One view of the sweep, and how many runs are still to train (running, partial, pending).
fn frame(sweep: &Sweep, runs: &[&PlannedRun], args: &WatchArgs) -> anyhow::Result<(String, usize)> {
    let root = sweep.results_dir(&args.sweep.results);
    let queue = crate::runner::slurm_queue::queue_states(&root);
    let clock = Clock::measure(
        &sweep.runs,
        &root,
        crate::backend::gpu_index(&args.device).is_some(),
    );
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let (mut seconds, mut flops, mut waiting) = (0.0, 0.0, 0);
    let mut rows = Vec::new();
    let mut sizes_left: Vec<&str> = Vec::new();
    for run in runs {
        let dir = RunDir::new(root.join(&run.id));
        let v = view(&dir)?;
        let queued = queue.get(&run.id).filter(|_| v.state != RunState::Done);
        let running = v.holder.is_some() || queued.is_some_and(|q| q.starts_with("running"));
        let state = match (running, v.state) {
            (true, _) => "running",
            (false, RunState::Done) => "done",
            (false, RunState::Failed) => "failed",
            (false, _) if queued.is_some() => "queued",
            (false, other) => other.name(),
        };
        *counts.entry(state).or_insert(0) += 1;
        if matches!(state, "done" | "failed") {
            continue;
        }
        waiting += 1;
        if !sizes_left.contains(&run.size.as_str()) {
            sizes_left.push(&run.size);
        }
        // Not done, so no summary: its tokens are its last logged step's.
        let steps = read_steps(&dir.steps()).unwrap_or_default();
        let done = steps.last().map_or(0, |r| r.tokens);
        seconds += clock.seconds_left(run, done);
        flops += flops_left(run, done);
        if running {
            rows.push(running_row(run, &steps, done));
        }
    }
    let mut text = format!(
        "{} ({}) at {}: {}\n",
        sweep.file.name,
        sweep.path.display(),
        humantime::format_rfc3339_seconds(std::time::SystemTime::now()),
        counts
            .iter()
            .map(|(state, n)| format!("{n} {state}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if waiting == 0 {
        text.push_str("nothing left to train\n");
        return Ok((text, 0));
    }
    text.push_str(&format!(
        "left: {flops:.3e} FLOPs, about {} ({})\n",
        duration(seconds),
        clock.describe(&sizes_left)
    ));
    if !rows.is_empty() {
        text.push_str(&format!(
            "\n{:<10} {:<10} {:<22} {:>4} {:>11} {:>8} {:>9} {:>8}\n",
            "id", "size", "arm", "seed", "step", "loss", "tokens/s", "ETA"
        ));
        for row in rows {
            text.push_str(&row);
            text.push('\n');
        }
    }
    Ok((text, waiting))
}

/// A running run's line: its last step and loss, its recent speed, and its time left at it.
fn running_row(run: &PlannedRun, steps: &[StepRow], done: u64) -> String {
    // The median of the last 20 steps: recent, and not moved by one slow step.
    let mut recent: Vec<f64> = steps
        .iter()
        .rev()
        .take(20)
        .map(|r| r.tokens_per_s)
        .filter(|v| *v > 0.0)
        .collect();
    recent.sort_by(f64::total_cmp);
    let speed = recent.get(recent.len() / 2).copied();
    let left = run.spec.total_tokens().saturating_sub(done) as f64;
    format!(
        "{:<10} {:<10} {:<22} {:>4} {:>11} {:>8} {:>9} {:>8}",
        run.id,
        run.size,
        run.arm,
        run.seed,
        format!(
            "{}/{}",
            steps.last().map_or(0, |r| r.step),
            run.spec.total_steps()
        ),
        steps
            .last()
            .map_or_else(|| "-".into(), |r| format!("{:.4}", r.loss_train)),
        speed.map_or_else(|| "-".into(), |s| format!("{s:.0}")),
        speed.map_or_else(|| "-".into(), |s| duration(left / s)),
    )
}
