//! `attnres export-metrics`: every run's scalars in one long table, CSV or JSON Lines (which
//! pandas, W&B and Aim import), or the sweep's TensorBoard event files rebuilt from its run
//! folders. The scalars are those the trainer writes to TensorBoard (store::tensorboard).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::sweep_args::SweepArgs;
use crate::runner::view;
use crate::spec::PlannedRun;
use crate::store::metrics::{read_depth, read_layers, read_steps};
use crate::store::tensorboard::{self, RunEvents, StepScalars};
use crate::store::{RunDir, read_json_opt};
use crate::train::Summary;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MetricsFormat {
    /// One row per run, step and tag: run,size,arm,seed,task,step,wall_s,tag,value.
    Csv,
    /// The same rows as JSON objects, one a line.
    Jsonl,
    /// Event files under RESULTS/NAME/tensorboard/, one folder a run, rebuilt from its
    /// metrics (runs that are training now write theirs live and are left alone).
    Tensorboard,
}

#[derive(Debug, Args)]
pub struct ExportMetricsArgs {
    #[command(flatten)]
    pub sweep: SweepArgs,
    #[arg(long, value_enum, default_value = "csv")]
    pub format: MetricsFormat,
    /// The file to write the table to (default: standard output); not with tensorboard.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn run(args: ExportMetricsArgs) -> anyhow::Result<()> {
    let (sweep, filters) = args.sweep.load()?;
    if args.format == MetricsFormat::Tensorboard && args.out.is_some() {
        anyhow::bail!(super::InputError::Arguments(
            "--out is for csv and jsonl; tensorboard writes RESULTS/NAME/tensorboard/".into()
        ));
    }
    let root = sweep.results_dir(&args.sweep.results);
    let mut table: Box<dyn Write> = match &args.out {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    if args.format == MetricsFormat::Csv {
        writeln!(table, "run,size,arm,seed,task,step,wall_s,tag,value")?;
    }
    let (mut written, mut live) = (0, 0);
    for run in sweep
        .runs
        .iter()
        .filter(|r| filters.iter().all(|f| f.matches(r)))
    {
        let dir = RunDir::new(root.join(&run.id));
        if !dir.steps().exists() {
            continue;
        }
        let summary: Option<Summary> = read_json_opt(&dir.summary())?;
        let history = run_history(run, &dir, summary.as_ref())?;
        match args.format {
            MetricsFormat::Tensorboard if view(&dir)?.holder.is_some() => live += 1,
            MetricsFormat::Tensorboard => {
                let folder = root.join("tensorboard").join(run.tensorboard_name());
                RunEvents::rewrite(
                    &folder,
                    start_time(&dir, summary.as_ref(), &history),
                    &history,
                )?;
                written += 1;
            }
            format => write_rows(&mut table, format, run, &history)?,
        }
    }
    table.flush()?;
    if args.format == MetricsFormat::Tensorboard {
        eprintln!(
            "export-metrics: event files of {written} runs in {}{}; open them with \
             `tensorboard --logdir {}`",
            root.join("tensorboard").display(),
            match live {
                0 => String::new(),
                n => format!(" ({n} training now write their own)"),
            },
            root.display()
        );
    }
    Ok(())
}

fn run_history(
    run: &PlannedRun,
    dir: &RunDir,
    summary: Option<&Summary>,
) -> anyhow::Result<Vec<StepScalars>> {
    let steps = read_steps(&dir.steps())?;
    let layers = read_layers(&dir.layers(), None)?;
    let depth = read_depth(&dir.depth_attn(), None)?;
    let peak = summary
        .and_then(|s| s.gpu.as_deref())
        .and_then(|gpu| crate::backend::peak_flops(gpu, run.spec.train.precision));
    let final_val = summary.and_then(|s| s.final_val).map(|f| f.loss);
    Ok(tensorboard::history(
        &steps, &layers, &depth, peak, final_val,
    ))
}

/// Unix time at which the run's clock (`wall_s`) was zero: from when it finished, or for an
/// unfinished run from when steps.csv was last written.
fn start_time(dir: &RunDir, summary: Option<&Summary>, history: &[StepScalars]) -> f64 {
    let finished = summary.and_then(|s| {
        let at = humantime::parse_rfc3339(&s.finished_at).ok()?;
        Some(tensorboard::unix_seconds(at) - s.wall_s)
    });
    let last_write = || {
        let modified = std::fs::metadata(dir.steps())
            .and_then(|m| m.modified())
            .ok();
        let last = history.last().map_or(0.0, |s| s.wall_s);
        modified.map_or_else(tensorboard::unix_now, tensorboard::unix_seconds) - last
    };
    finished.unwrap_or_else(last_write)
}

fn write_rows(
    out: &mut dyn Write,
    format: MetricsFormat,
    run: &PlannedRun,
    history: &[StepScalars],
) -> anyhow::Result<()> {
    for step in history {
        for (tag, value) in &step.values {
            match format {
                MetricsFormat::Jsonl => {
                    let row = serde_json::json!({
                        "run": run.id, "size": run.size, "arm": run.arm, "seed": run.seed,
                        "task": run.task(), "step": step.step, "wall_s": step.wall_s,
                        "tag": tag, "value": value,
                    });
                    writeln!(out, "{row}")?;
                }
                _ => writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{}",
                    run.id,
                    csv_field(&run.size),
                    csv_field(&run.arm),
                    run.seed,
                    csv_field(&run.task()),
                    step.step,
                    step.wall_s,
                    csv_field(tag),
                    value
                )?,
            }
        }
    }
    Ok(())
}

/// A CSV field, quoted (RFC 4180) where it holds a comma, a quote or a line break.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}
