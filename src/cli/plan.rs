//! `attnres plan`: what a sweep will train, each run's size, FLOPs, memory and time, and
//! what is left, without training anything.

use clap::Args;

use super::status::task_column;
use super::sweep_args::{SweepArgs, check_environment};
use super::thousands;
use crate::backend::BackendKind;
use crate::fmt::{bytes_text, duration};
use crate::model::flops::{PFLOPS_DAY, param_counts};
use crate::runner::eta::{Clock, Source, tokens_done};
use crate::runner::{RunView, view};
use crate::spec::{PlannedRun, Sweep};
use crate::store::{RunDir, RunState};

/// `attnres plan`: the sweep, and the device and parallelism whose memory it must fit.
#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// The device the runs will train on (cpu, cuda, cuda:N): its memory bounds each run.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Runs to be trained at once, which share the device's memory.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
}

pub fn run_plan(plan: PlanArgs) -> anyhow::Result<()> {
    let args = plan.sweep;
    let (sweep, filters) = args.load_to_train()?;
    check_environment(
        &sweep,
        &filters,
        (BackendKind::preferred(), &plan.device),
        plan.jobs,
    )?;
    let root = sweep.results_dir(&args.results);
    let clock = Clock::measure(
        &sweep.runs,
        &root,
        crate::backend::gpu_index(&plan.device).is_some(),
    );
    print_plan_header(&sweep);
    let (mut tokens, mut flops, mut seconds, mut n) = (0u64, 0f64, 0f64, 0);
    let mut left_sizes: Vec<&str> = Vec::new();
    for run in sweep
        .runs
        .iter()
        .filter(|r| filters.iter().all(|f| f.matches(r)))
    {
        let spec = &run.spec;
        let f = crate::model::flops::flops_exact(&spec.model, spec.total_tokens());
        let dir = RunDir::new(root.join(&run.id));
        let state = view(&dir)?;
        print_plan_row(&sweep, run, f, &clock, &state);
        n += 1;
        tokens += spec.total_tokens();
        flops += f;
        if state.state != RunState::Done {
            if !left_sizes.contains(&run.size.as_str()) {
                left_sizes.push(&run.size);
            }
            seconds += clock.seconds_left(run, tokens_done(run, &dir));
        }
    }
    let left = match left_sizes.is_empty() {
        true => "nothing left to train".to_string(),
        false => format!(
            "left to train: ~{} by FLOPs left ({})",
            duration(seconds),
            clock.describe(&left_sizes)
        ),
    };
    println!(
        "\ntotal: {n} runs, {} tokens, {flops:.3e} FLOPs ({:.3e} PF-days); {left}",
        thousands(tokens),
        flops / PFLOPS_DAY,
    );
    if left_sizes
        .iter()
        .any(|size| clock.speed(size).1 == Source::Assumed)
    {
        println!(
            "the assumed speed is the same for every arm; `attnres bench --split --sizes {}` \
             measures it arm by arm beforehand",
            sweep.path.display()
        );
    }
    Ok(())
}

/// The plan's first lines: the sweep, its run count and cost, and the table's header.
fn print_plan_header(sweep: &Sweep) {
    println!(
        "sweep {} ({}): {} runs{}",
        sweep.file.name,
        sweep.path.display(),
        sweep.runs.len(),
        if sweep.merged_duplicates > 0 {
            format!(", {} duplicate grid points merged", sweep.merged_duplicates)
        } else {
            String::new()
        }
    );
    if let Some(cost) = &sweep.file.cost {
        println!("cost: {cost}");
    }
    println!(
        "\n{:<10} {:<22} {:>3} {:<14} {:>11} {:>12} {:>10} {:>9} {:>9} {:<8}{}",
        "id",
        "variant",
        "S",
        "size",
        "params",
        "tokens",
        "FLOPs",
        "memory",
        "est.",
        "status",
        if sweep.file.tasks.is_empty() {
            ""
        } else {
            " task"
        }
    );
}

/// One run's line of the plan: `f` its FLOPs, `state` what its folder says.
fn print_plan_row(sweep: &Sweep, run: &PlannedRun, f: f64, clock: &Clock, state: &RunView) {
    let spec = &run.spec;
    println!(
        "{:<10} {:<22} {:>3} {:<14} {:>11} {:>12} {:>10.3e} {:>9} {:>9} {:<8}{}",
        run.id,
        run.arm,
        run.block_size
            .map(|s| s.to_string())
            .unwrap_or_else(|| "-".into()),
        format!("{} s{}", run.size, run.seed),
        thousands(param_counts(&spec.model).non_embedding),
        thousands(spec.total_tokens()),
        f,
        bytes_text(spec.memory().total()),
        duration(f / clock.speed(&run.size).0),
        if state.holder.is_some() {
            "running"
        } else {
            state.state.name()
        },
        task_column(sweep, run)
    );
}
