//! `attnres bench`: training throughput and MFU of baseline, Full and Block AttnRes at a
//! fixed reference config, per backend, against a matmul peak measured on this machine.

use std::time::Instant;

use anyhow::Context;
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor, TensorData};
use clap::Args;

use crate::backend::{self, BackendKind};
use crate::data::Batch;
use crate::model::flops::flops_per_token;
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
}

struct Row {
    label: String,
    step_s: f64,
    tokens_per_s: f64,
    mfu: f64,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let backends = if args.backend.is_empty() {
        BackendKind::compiled()
    } else {
        args.backend.clone()
    };
    let variants = [
        ResidualConfig::Baseline,
        ResidualConfig::full(),
        ResidualConfig::block(4),
    ];
    let reference = |residual: ResidualConfig| ModelConfig {
        vocab_size: 256,
        d_model: args.d_model,
        n_blocks: args.n_blocks,
        n_heads: (args.d_model / 64).max(1),
        ff_mult: 8.0 / 3.0,
        context: args.context,
        residual,
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
        let peak = matmul_peak(&device)?;
        println!(
            "\n{} on {}: matmul peak {:.1} GFLOP/s (f32, 1024^3, best of 5)",
            kind.name(),
            args.device,
            peak / 1e9
        );
        println!(
            "{:<12} {:>10} {:>12} {:>7} {:>10} {:>10}",
            "variant", "step ms", "tokens/s", "MFU", "tok/s vs", "step vs"
        );
        let mut rows = Vec::new();
        for residual in variants.clone() {
            let config = reference(residual);
            rows.push(
                measure(&config, &device, &args, peak)
                    .with_context(|| format!("benchmarking {}", config.residual.label()))?,
            );
        }
        let base = (rows[0].tokens_per_s, rows[0].step_s);
        for r in &rows {
            println!(
                "{:<12} {:>10.1} {:>12.0} {:>6.1}% {:>9.3}x {:>9.3}x",
                r.label,
                r.step_s * 1e3,
                r.tokens_per_s,
                r.mfu * 100.0,
                r.tokens_per_s / base.0,
                r.step_s / base.1
            );
        }
    }
    Ok(())
}

/// Best-of-5 f32 throughput of a 1024 x 1024 x 1024 matmul, in FLOP/s.
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

fn measure(
    config: &ModelConfig,
    device: &Device,
    args: &BenchArgs,
    peak: f64,
) -> anyhow::Result<Row> {
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
    let tokens_per_s = (b * t) as f64 / step_s;
    let flops = flops_per_token(config).training() as f64 * tokens_per_s;
    Ok(Row {
        label: config.residual.label(),
        step_s,
        tokens_per_s,
        mfu: flops / peak,
    })
}
