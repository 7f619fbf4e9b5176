//! `attnres train`, `attnres export` and `attnres score`: one run from a RunSpec file, its
//! weights as safetensors, and its model's loss on a text file.

use std::path::{Path, PathBuf};

use anyhow::Context;
use burn::store::{ModuleSnapshot, SafetensorsStore};
use clap::Args;

use super::InputError;
use crate::backend::{self, BackendKind};
use crate::data::{Tokenizer, TokenizerConfig};
use crate::model::Lm;
use crate::spec::RunSpec;
use crate::store::lease::{Claim, Lease};
use crate::store::{RunDir, read_json};
use crate::train::eval::{BatchTensors, masked_cross_entropy};
use crate::train::{Outcome, TrainOptions, checkpoint, train};

/// Backend and device flags shared by every command that runs a model.
#[derive(Debug, Clone, Args)]
pub struct DeviceArgs {
    /// tch (libtorch) or flex (pure Rust). Default: tch when compiled in.
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// cpu, cuda or cuda:N (cuda needs tch).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// CPU threads for the backend (default: the backend's own choice).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl DeviceArgs {
    pub fn options(&self) -> TrainOptions {
        TrainOptions {
            backend: self.backend.unwrap_or_else(BackendKind::preferred),
            device: self.device.clone(),
            threads: self.threads,
            progress: None,
            stop: None,
            lost: None,
            events: None,
        }
    }
}

#[derive(Debug, Args)]
pub struct TrainArgs {
    /// A RunSpec YAML file: `model`, `data`, `train` and `seed`.
    pub spec: PathBuf,
    /// The run folder (default: results/runs/RUN_ID).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub device: DeviceArgs,
}

pub fn run_train(args: TrainArgs) -> anyhow::Result<()> {
    let spec = crate::spec::run_file::load(&args.spec)?;
    let dir = RunDir::new(
        args.out
            .unwrap_or_else(|| PathBuf::from("results").join("runs").join(spec.run_id())),
    );
    eprintln!(
        "train: run {} ({}) -> {} ({} steps, {} tokens)",
        spec.run_id(),
        spec.model.arm_label(),
        dir.root.display(),
        spec.total_steps(),
        spec.total_tokens()
    );
    let lease = match Lease::try_acquire(&dir)? {
        Claim::Held(lease) => lease,
        Claim::Busy(holder) => anyhow::bail!(
            "{} is being trained by {}; wait for it, or stop that process",
            dir.root.display(),
            holder.describe()
        ),
    };
    let opts = TrainOptions {
        lost: Some(lease.lost_flag()),
        events: Some(dir.root.join("tb")),
        ..args.device.options()
    };
    match train(&spec, &dir, &opts)? {
        Outcome::Done(s) => {
            println!(
                "done: {} steps, {} tokens, val loss {:.4}{}, {:.1} s",
                s.steps,
                s.tokens,
                s.loss_val,
                s.bpb_val
                    .map(|b| format!(" ({b:.4} bits/byte)"))
                    .unwrap_or_default(),
                s.wall_s
            );
            Ok(())
        }
        Outcome::AlreadyDone => {
            println!(
                "done already: {} (delete it to retrain)",
                dir.root.display()
            );
            Ok(())
        }
        Outcome::Failed { step, reason } => {
            anyhow::bail!("run {} failed at step {step}: {reason}", dir.root.display())
        }
        Outcome::Stopped { step } => {
            println!("stopped at step {step}; train again to resume");
            Ok(())
        }
        Outcome::Lost { step } => anyhow::bail!(
            "stopped at step {step}: another runner took over {}'s lease",
            dir.root.display()
        ),
    }
}

/// The run's spec and its final model on `device`, in the precision it trained in.
fn load_run(
    run: &Path,
    (kind, device): (BackendKind, &burn::tensor::Device),
) -> anyhow::Result<(RunSpec, Lm)> {
    let dir = RunDir::new(run);
    let spec: RunSpec = read_json(&dir.spec())
        .map_err(|e| InputError::file(run, format!("not a run folder: {e}")))?;
    backend::set_precision(kind, device, spec.train.precision)
        .map_err(|e| InputError::file(run, e))?;
    let Some(ckpt) = dir.find_checkpoint() else {
        anyhow::bail!(InputError::file(
            run,
            "no checkpoint; train it first (`attnres train`) or pick a finished run"
        ));
    };
    let model = checkpoint::load_model(&ckpt, Lm::init(&spec.model, spec.seed, device)?)?;
    Ok((spec, model))
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    pub run: PathBuf,
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run_export(args: ExportArgs) -> anyhow::Result<()> {
    let kind = BackendKind::preferred();
    let device = backend::device(kind, "cpu")?;
    let (_, model) = load_run(&args.run, (kind, &device))?;
    let mut store = SafetensorsStore::from_file(&args.out);
    model
        .save_into(&mut store)
        .map_err(|e| anyhow::anyhow!("{}: cannot write safetensors: {e:?}", args.out.display()))?;
    println!(
        "wrote {} ({} tensors; names in docs/weights.md)",
        args.out.display(),
        crate::model::params::named_params(&model).len()
    );
    Ok(())
}

#[derive(Debug, Args)]
pub struct ScoreArgs {
    pub run: PathBuf,
    /// A UTF-8 text file.
    pub file: PathBuf,
    #[command(flatten)]
    pub device: DeviceArgs,
}

pub fn run_score(args: ScoreArgs) -> anyhow::Result<()> {
    let opts = args.device.options();
    let device = backend::device(opts.backend, &opts.device)?;
    let (spec, model) = load_run(&args.run, (opts.backend, &device))?;
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let tokenizer = match &spec.data.tokenizer {
        TokenizerConfig::Byte => Tokenizer::Byte,
        _ => Tokenizer::load(&RunDir::new(&args.run).tokenizer())?,
    };
    let tokens = tokenizer.encode(&text)?;
    let t = spec.model.context;
    if tokens.len() < 2 {
        anyhow::bail!(InputError::file(
            &args.file,
            "fewer than two tokens; give a longer text"
        ));
    }
    // Non-overlapping windows of up to T predictions each; the last one may be shorter.
    let (mut nats, mut count) = (0.0f64, 0usize);
    let mut start = 0;
    while start + 1 < tokens.len() {
        let len = t.min(tokens.len() - 1 - start);
        let window = &tokens[start..start + len + 1];
        let batch = crate::data::Batch {
            rows: 1,
            context: len,
            input: window[..len].iter().map(|&x| i64::from(x)).collect(),
            target: window[1..].iter().map(|&x| i64::from(x)).collect(),
            mask: None,
        };
        let bt = BatchTensors::new(&batch, &device);
        let loss = masked_cross_entropy(model.forward(bt.input), bt.target, None)
            .try_into_scalar::<f32>()?;
        nats += f64::from(loss) * len as f64;
        count += len;
        start += len;
    }
    let loss = nats / count as f64;
    let bpb = nats / (text.len() as f64 * std::f64::consts::LN_2);
    println!(
        "{}: {count} tokens, {} bytes",
        args.file.display(),
        text.len()
    );
    println!("loss {loss:.4} nats/token, {bpb:.4} bits/byte");
    Ok(())
}
