//! `attnres status`: every run of a sweep with its state (done, partial, failed, pending, or
//! what the Slurm queue says), its last step and losses, and why a failed run failed.

use super::sweep_args::SweepArgs;
use crate::runner::view;
use crate::store::metrics::read_steps;
use crate::store::{RunDir, RunState, Status};

/// ` khop hops=2` after a run's row when the sweep has a `tasks` axis, else nothing.
pub(super) fn task_column(sweep: &crate::spec::Sweep, run: &crate::spec::PlannedRun) -> String {
    if sweep.file.tasks.is_empty() {
        String::new()
    } else {
        format!(" {}", run.task())
    }
}

pub fn run_status(args: SweepArgs) -> anyhow::Result<()> {
    let (sweep, filters) = args.load()?;
    let root = sweep.results_dir(&args.results);
    let queue = crate::runner::slurm_queue::queue_states(&root);
    println!(
        "{:<10} {:<22} {:<10} {:>4} {:<16} {:>11} {:>10} {:>10}{}",
        "id",
        "variant",
        "size",
        "seed",
        "state",
        "step",
        "loss",
        "val",
        if sweep.file.tasks.is_empty() {
            ""
        } else {
            " task"
        }
    );
    let mut counts = std::collections::BTreeMap::new();
    for run in sweep
        .runs
        .iter()
        .filter(|r| filters.iter().all(|f| f.matches(r)))
    {
        let dir = RunDir::new(root.join(&run.id));
        let v = view(&dir)?;
        let rows = if dir.steps().exists() {
            read_steps(&dir.steps()).unwrap_or_default()
        } else {
            Vec::new()
        };
        let last_val = rows.iter().rev().find_map(|r| r.loss_val);
        let state = match queue.get(&run.id) {
            // squeue is a hint: a finished run's folder wins over a stale queue entry.
            Some(q) if v.state != RunState::Done => q.as_str(),
            _ if v.holder.is_some() => "running",
            _ => v.state.name(),
        };
        *counts.entry(state).or_insert(0) += 1;
        // A partial run that nobody trains resumes from its checkpoint, whose step its
        // status holds; steps logged after it will be trained again.
        let step = match dir.read_status() {
            Ok(Some(Status::Running { step, .. }))
                if v.holder.is_none() && v.state == RunState::Partial =>
            {
                step
            }
            _ => rows.last().map_or(0, |r| r.step),
        };
        println!(
            "{:<10} {:<22} {:<10} {:>4} {:<16} {:>11} {:>10} {:>10}{}",
            run.id,
            run.arm,
            run.size,
            run.seed,
            state,
            format!("{step}/{}", run.spec.total_steps()),
            rows.last()
                .map(|r| format!("{:.4}", r.loss_train))
                .unwrap_or_else(|| "-".into()),
            last_val
                .map(|v| format!("{v:.4}"))
                .unwrap_or_else(|| "-".into()),
            task_column(&sweep, run)
        );
        if let (RunState::Failed, Ok(Some(Status::Failed { reason, .. }))) =
            (&v.state, dir.read_status())
        {
            println!("           failed: {reason}");
            if let Some(log) = crate::runner::slurm_queue::log_of(&root, &run.id) {
                println!("           log: {}", log.display());
            }
        }
    }
    let summary: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    println!("\n{}", summary.join(", "));
    Ok(())
}
