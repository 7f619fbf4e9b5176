//! `attnres bench`: training throughput, MFU and peak memory of baseline, Full and Block
//! AttnRes at a fixed reference config, per backend, against a matmul peak measured on this
//! machine. Each variant trains in a child process of its own, so that its peak resident
//! memory (`VmHWM`) is its own and can be set beside the estimate `plan` uses.

use std::time::Instant;

use anyhow::{Context, bail};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor, TensorData};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::backend::{self, BackendKind, Precision};
use crate::data::Batch;
use crate::fmt::bytes_text;
use crate::model::flops::flops_per_token;
use crate::model::memory::training_memory_in;
use crate::model::{Lm, ModelConfig, ResidualConfig};
use crate::train::config::TrainConfig;
use crate::train::eval::{BatchTensors, masked_cross_entropy};
use crate::train::optimizer;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Backends to measure (default: every one compiled in).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub backend: Vec<BackendKind>,
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Timed training steps per variant (after 2 warm-up steps).
    #[arg(long, default_value_t = 10)]
    pub steps: usize,
    /// Reference model width and depth.
    #[arg(long, default_value_t = 256)]
    pub d_model: usize,
    #[arg(long, default_value_t = 8)]
    pub n_blocks: usize,
    #[arg(long, default_value_t = 256)]
    pub context: usize,
    #[arg(long, default_value_t = 8)]
    pub batch_size: usize,
    /// Float type of weights, activations and optimizer state (bf16: tch only); the matmul
    /// peak behind MFU is measured in the same type.
    #[arg(long, value_enum, default_value = "f32")]
    pub precision: Precision,
    /// Internal: measure only variant I with backend B and print its row as JSON.
    #[arg(long, hide = true, num_args = 2, value_names = ["B", "I"])]
    pub child: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Row {
    label: String,
    step_s: f64,
    tokens_per_s: f64,
    mfu: f64,
    /// Peak resident memory of the process that trained it, where the OS tells.
    peak_bytes: Option<f64>,
    estimate_bytes: f64,
}

fn variants() -> [ResidualConfig; 3] {
    [
        ResidualConfig::Baseline,
        ResidualConfig::full(),
        ResidualConfig::block(4),
    ]
}

fn reference(args: &BenchArgs, residual: ResidualConfig) -> ModelConfig {
    ModelConfig {
        vocab_size: 256,
        d_model: args.d_model,
        n_blocks: args.n_blocks,
        n_heads: (args.d_model / 64).max(1),
        ff_mult: 8.0 / 3.0,
        context: args.context,
        residual,
    }
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if let [backend, index] = args.child.as_slice() {
        return run_child(&args, backend, index);
    }
    let backends = if args.backend.is_empty() {
        BackendKind::compiled()
    } else {
        args.backend.clone()
    };
    println!(
        "reference: d_model {}, n_blocks {}, context {}, batch {} ({} tokens/step), {} timed steps",
        args.d_model,
        args.n_blocks,
        args.context,
        args.batch_size,
        args.batch_size * args.context,
        args.steps
    );
    for kind in backends {
        let device = backend::device(kind, &args.device)?;
        backend::set_precision(kind, &device, args.precision)?;
        let peak = matmul_peak(&device)?;
        println!(
            "\n{} on {}: matmul peak {:.1} GFLOP/s ({}, 1024^3, best of 5)",
            kind.name(),
            args.device,
            peak / 1e9,
            args.precision.name()
        );
        println!(
            "{:<12} {:>10} {:>12} {:>7} {:>10} {:>10} {:>10} {:>10} {:>9}",
            "variant",
            "step ms",
            "tokens/s",
            "MFU",
            "tok/s vs",
            "step vs",
            "peak mem",
            "estimate",
            "mem vs"
        );
        let mut rows = Vec::new();
        for (i, residual) in variants().into_iter().enumerate() {
            rows.push(
                measure_in_child(&args, kind, i, peak)
                    .with_context(|| format!("benchmarking {}", residual.label()))?,
            );
        }
        let base = &rows[0];
        let (base_tps, base_step, base_peak) = (base.tokens_per_s, base.step_s, base.peak_bytes);
        for r in &rows {
            let mem = |b: Option<f64>| b.map_or("-".to_string(), bytes_text);
            println!(
                "{:<12} {:>10.1} {:>12.0} {:>6.1}% {:>9.3}x {:>9.3}x {:>10} {:>10} {:>9}",
                r.label,
                r.step_s * 1e3,
                r.tokens_per_s,
                r.mfu * 100.0,
                r.tokens_per_s / base_tps,
                r.step_s / base_step,
                mem(r.peak_bytes),
                bytes_text(r.estimate_bytes),
                match (r.peak_bytes, base_peak) {
                    (Some(p), Some(b)) => format!("{:.3}x", p / b),
                    _ => "-".into(),
                }
            );
        }
    }
    println!(
        "\npeak mem: the peak resident memory of the process that trained the variant (VmHWM; CPU only); estimate: what `plan` checks against the machine (docs/cost.md)"
    );
    Ok(())
}

/// Runs variant `index` in a fresh process of this binary and reads back its row.
fn measure_in_child(
    args: &BenchArgs,
    kind: BackendKind,
    index: usize,
    peak: f64,
) -> anyhow::Result<Row> {
    let exe = std::env::current_exe().context("locating the attnres binary")?;
    let out = std::process::Command::new(exe)
        .args(["bench", "--device", &args.device])
        .args(["--steps", &args.steps.to_string()])
        .args(["--d-model", &args.d_model.to_string()])
        .args(["--n-blocks", &args.n_blocks.to_string()])
        .args(["--context", &args.context.to_string()])
        .args(["--batch-size", &args.batch_size.to_string()])
        .args(["--precision", args.precision.name()])
        .args(["--child", kind.name(), &index.to_string()])
        .output()
        .context("starting a benchmark child process")?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let mut row: Row = serde_json::from_slice(&out.stdout).context("reading the child's row")?;
    row.mfu = flops_per_token(&reference(args, variants()[index].clone())).training() as f64
        * row.tokens_per_s
        / peak;
    Ok(row)
}

fn run_child(args: &BenchArgs, backend: &str, index: &str) -> anyhow::Result<()> {
    let kind = BackendKind::compiled()
        .into_iter()
        .find(|k| k.name() == backend)
        .with_context(|| format!("backend {backend} is not compiled in"))?;
    let residual = index
        .parse::<usize>()
        .ok()
        .and_then(|i| variants().get(i).cloned())
        .with_context(|| format!("no variant {index}"))?;
    let device = backend::device(kind, &args.device)?;
    backend::set_precision(kind, &device, args.precision)?;
    let row = measure(&reference(args, residual), &device, args)?;
    println!("{}", serde_json::to_string(&row)?);
    Ok(())
}

/// Peak resident memory of this process, from `/proc/self/status` (Linux).
fn peak_resident_bytes() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0)
}

/// Best-of-5 throughput of a 1024 x 1024 x 1024 matmul in the device's float type, in FLOP/s.
fn matmul_peak(device: &Device) -> anyhow::Result<f64> {
    let n = 1024;
    let data = |seed: f32| {
        TensorData::new(
            (0..n * n)
                .map(|i| (i as f32 * seed).sin())
                .collect::<Vec<f32>>(),
            [n, n],
        )
    };
    let a = Tensor::<2>::from_data(data(0.37), device);
    let b = Tensor::<2>::from_data(data(0.11), device);
    let mut best = f64::MAX;
    for _ in 0..6 {
        let t = Instant::now();
        let c = a.clone().matmul(b.clone());
        let _ = c.sum().try_into_scalar::<f32>()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(2.0 * (n as f64).powi(3) / best)
}

fn measure(config: &ModelConfig, device: &Device, args: &BenchArgs) -> anyhow::Result<Row> {
    let train_device = device.clone().autodiff();
    let mut model = Lm::init(config, 0, &train_device)?;
    let train: TrainConfig =
        serde_yaml_ng::from_str("batch_size: 1\nlr: 0.001\nbudget: {tokens: 1}")?;
    let mut optim = optimizer::build(&train, &model);
    let (b, t) = (args.batch_size, args.context);
    let tokens: Vec<i64> = (0..b * (t + 1))
        .map(|i| ((i * 7919) % 256) as i64)
        .collect();
    let batch = Batch {
        rows: b,
        context: t,
        input: tokens.chunks(t + 1).flat_map(|r| r[..t].to_vec()).collect(),
        target: tokens.chunks(t + 1).flat_map(|r| r[1..].to_vec()).collect(),
        mask: None,
    };
    let mut timed = 0.0;
    for step in 0..args.steps + 2 {
        let start = Instant::now();
        let bt = BatchTensors::new(&batch, &train_device);
        let loss = masked_cross_entropy(model.forward(bt.input), bt.target, None);
        let _ = loss.clone().try_into_scalar::<f32>()?;
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(1e-3, model, grads);
        // Reading a weight waits for the update to finish on asynchronous devices.
        let _ = model
            .head
            .val()
            .slice([0..1, 0..1])
            .try_into_scalar::<f32>()?;
        if step >= 2 {
            timed += start.elapsed().as_secs_f64();
        }
    }
    let step_s = timed / args.steps as f64;
    Ok(Row {
        label: config.residual.label(),
        step_s,
        tokens_per_s: (b * t) as f64 / step_s,
        mfu: 0.0, // set by the parent, which measured the matmul peak
        peak_bytes: if args.device == "cpu" {
            peak_resident_bytes()
        } else {
            None
        },
        estimate_bytes: training_memory_in(config, b, args.precision.bytes()).total(),
    })
}
