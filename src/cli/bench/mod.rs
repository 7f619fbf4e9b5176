//! `attnres bench`: step time, throughput, MFU and peak memory of residual variants, per
//! backend, against a matmul peak measured on this machine. Every case runs in a child
//! process of its own (so its peak resident memory is its own), and the children step in
//! turn, round after round, so that a noisy machine's drift hits every case alike (each
//! timed step right after an untimed one of the same case, `child.rs`). Each case
//! reports the median and quartiles of its step times and, paired round by round, its ratio
//! to the first case of its size (the baseline). With `--against`, another build runs every
//! case too, its child stepping beside this build's of the same case, for before-and-after
//! comparisons that the machine's drift between two runs would otherwise swamp. With
//! `--split`, it measures instead how a sweep should share the CPU's cores between runs at
//! once and threads per run (`split/`).

mod child;
mod measure;
mod split;
mod table;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use burn::tensor::{Device, Tensor, TensorData};
use clap::Args;

use self::child::Case;
use self::measure::{measure_group, row};
use self::table::{Report, print_table};
use super::InputError;
use crate::backend::{self, BackendKind, Precision};
use crate::model::{ModelConfig, ResidualConfig};
use crate::spec::Sweep;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Backends to measure (default: every one compiled in).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub backend: Vec<BackendKind>,
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Timed steps per case (after 2 warm-up steps), interleaved across cases; each follows
    /// an untimed step of its own case.
    #[arg(long, default_value_t = 20)]
    pub steps: usize,
    /// Reference model width and depth (ignored with --sizes).
    #[arg(long, default_value_t = 256)]
    pub d_model: usize,
    #[arg(long, default_value_t = 8)]
    pub n_blocks: usize,
    #[arg(long, default_value_t = 256)]
    pub context: usize,
    #[arg(long, default_value_t = 8)]
    pub batch_size: usize,
    /// Bench every size of this sweep file with its own arms, context and micro-batch
    /// (one run per size and arm), instead of the reference size.
    #[arg(long)]
    pub sizes: Option<PathBuf>,
    /// Time the inference forward (the path inference takes, docs/method.md) at --batch-size
    /// sequences, not training steps.
    #[arg(long)]
    pub inference: bool,
    /// Float type of weights, activations and optimizer state (bf16: tch only); the matmul
    /// peak behind MFU is measured in the same type.
    #[arg(long, value_enum, default_value = "f32")]
    pub precision: Precision,
    /// CPU threads per case (default: the backend's own choice). With 1, every child runs
    /// on the CPU the bench started them from (Linux), since they step one at a time.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Another attnres binary to compare with (the build before a change, say): every case
    /// also runs in a child of that binary, stepping right after this binary's child of the
    /// same case (right before it every other round), and its row's ratio is to that case
    /// here, round by round. It must serve bench's children as this build does.
    #[arg(long, value_name = "BINARY")]
    pub against: Option<PathBuf>,
    /// Start every case's child afresh this many times, the rounds shared out among them
    /// (each start warmed up again). A process keeps a speed of its own for all its rounds,
    /// a point or two either way (docs/performance.md), which one process per
    /// case leaves out of the intervals; several put it into the rounds' spread.
    #[arg(long, default_value_t = 1)]
    pub processes: usize,
    /// Print the results as JSON instead of a table, with every round's step and ratio.
    #[arg(long)]
    pub json: bool,
    /// Measure how a sweep should share this machine's CPU cores: the training tokens/s of
    /// every split into runs at once x threads per run (the runner's default, one
    /// single-thread run per core, and each thread count that divides the cores), all runs
    /// of a split stepping together, --steps rounds, the splits in turn; with --sizes, at
    /// the sweep's sizes and arms, the runs at once capped by its runs. Prints the
    /// `--jobs`/`--threads` to train with where a split beats the default measurably.
    #[arg(long)]
    pub split: bool,
    /// Internal: serve one case (JSON) to a parent bench.
    #[arg(long, hide = true)]
    pub serve: Option<String>,
}

fn reference_cases(args: &BenchArgs) -> Vec<Case> {
    [
        ResidualConfig::Baseline,
        ResidualConfig::full(),
        ResidualConfig::block(4),
    ]
    .into_iter()
    .map(|residual| ModelConfig {
        vocab_size: 256,
        d_model: args.d_model,
        n_blocks: args.n_blocks,
        n_heads: (args.d_model / 64).max(1),
        ff_mult: 8.0 / 3.0,
        context: args.context,
        residual,
        value_residual: false,
    })
    .map(|model| case(args, "reference", model, args.batch_size))
    .collect()
}

fn case(args: &BenchArgs, size: &str, model: ModelConfig, batch: usize) -> Case {
    Case {
        size: size.into(),
        label: model.residual.label(),
        model,
        batch,
        inference: args.inference,
        precision: args.precision,
        threads: args.threads,
    }
}

/// One case per (size, arm) of a sweep, in sweep order: its first run's model and
/// micro-batch (or --batch-size sequences with --inference).
fn sweep_cases(args: &BenchArgs, sweep: &Sweep) -> Vec<Vec<Case>> {
    let mut sizes: Vec<Vec<Case>> = Vec::new();
    for run in &sweep.runs {
        let batch = if args.inference {
            args.batch_size
        } else {
            run.spec.sequences_in_flight()
        };
        let c = case(args, &run.size, run.spec.model.clone(), batch);
        match sizes.iter_mut().find(|s| s[0].size == run.size) {
            Some(s) if s.iter().any(|x| x.label == c.label) => {}
            Some(s) => s.push(c),
            None => sizes.push(vec![c]),
        }
    }
    sizes
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let kind = |name: &str| {
        BackendKind::compiled()
            .into_iter()
            .find(|k| k.name() == name)
            .with_context(|| format!("backend {name} is not compiled in"))
    };
    if let Some(case) = &args.serve {
        let case: Case = serde_json::from_str(case).context("reading the bench case")?;
        let backend = args
            .backend
            .first()
            .copied()
            .unwrap_or_else(BackendKind::preferred);
        return child::serve(kind(backend.name())?, &args.device, &case);
    }
    check_args(&args)?;
    if args.split {
        split::check_args(&args)?;
    }
    let sweep = match &args.sizes {
        Some(path) => Some(Sweep::load(path)?),
        None => None,
    };
    let groups = match &sweep {
        Some(sweep) => sweep_cases(&args, sweep),
        None => vec![reference_cases(&args)],
    };
    if args.split {
        return split::run(&args, sweep.as_ref(), &groups);
    }
    let children = if args.against.is_some() { 2 } else { 1 };
    for cases in &groups {
        check_memory(&args, cases, children)?;
    }
    for backend in backends(&args) {
        bench_backend(&args, backend, &groups)?;
    }
    Ok(())
}

/// Measures every case of `groups` on `backend`, and prints the table (or the JSON).
fn bench_backend(
    args: &BenchArgs,
    backend: BackendKind,
    groups: &[Vec<Case>],
) -> anyhow::Result<()> {
    let device = backend::device(backend, &args.device)?;
    backend::set_precision(backend, &device, args.precision)?;
    // Probed before and after the cases, the better of the two: one probe taken while
    // the host is busy elsewhere read as low as 60% of the other, and every MFU with it.
    let on_gpu = backend::gpu_index(&args.device).is_some();
    let peak_size = if on_gpu { 8192 } else { 1024 };
    let before = matmul_peak(&device, peak_size)?;
    let mut measured = Vec::new();
    for cases in groups {
        measured.extend(
            measure_group(args, backend, cases)
                .with_context(|| format!("benchmarking size {}", cases[0].size))?,
        );
    }
    let probes = [before, matmul_peak(&device, peak_size)?];
    let peak = probes[0].max(probes[1]);
    let rows = measured.iter().map(|m| row(m, peak)).collect();
    let report = Report {
        machine: if on_gpu {
            backend::gpu_model(&args.device).unwrap_or_else(|| args.device.clone())
        } else {
            backend::cpu_model()
        },
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        threads: args.threads,
        backend: backend.name().into(),
        device: args.device.clone(),
        precision: args.precision.name(),
        mode: if args.inference {
            "inference"
        } else {
            "training"
        },
        matmul_peak_flops: peak,
        matmul_peak_probes: probes,
        matmul_peak_size: peak_size,
        processes: args.processes,
        rows,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
}

/// Refuses an `--against` that is not a file, no rounds, and more processes than rounds.
fn check_args(args: &BenchArgs) -> anyhow::Result<()> {
    if let Some(other) = &args.against
        && !other.is_file()
    {
        anyhow::bail!(InputError::flag(
            format!("--against {}", other.display()),
            "no such file; give the path of another attnres binary"
        ));
    }
    if args.steps < 1 {
        anyhow::bail!(InputError::flag(
            "--steps 0",
            "give at least 1 timed step (round) per case"
        ));
    }
    if args.processes < 1 || args.processes > args.steps {
        anyhow::bail!(InputError::flag(
            format!("--processes {}", args.processes),
            format!(
                "give 1 to --steps ({}), the rounds being shared out among them",
                args.steps
            )
        ));
    }
    Ok(())
}

/// The backends asked for, or every one compiled in.
fn backends(args: &BenchArgs) -> Vec<BackendKind> {
    if args.backend.is_empty() {
        BackendKind::compiled()
    } else {
        args.backend.clone()
    }
}

/// Refuses a size whose cases cannot train at once here: every case of a size lives in
/// `children` processes of its own (two with `--against`; with `--split`, one per run of
/// every split) for the whole of that size's rounds, so their memory adds up (`plan`'s
/// estimate, docs/cost.md; on a GPU it runs high for the baseline and Block and low for
/// Full, docs/gpu.md).
fn check_memory(args: &BenchArgs, cases: &[Case], children: usize) -> anyhow::Result<()> {
    if args.inference {
        return Ok(());
    }
    let Some(limit) = crate::runner::capacity::memory_limit(&args.device, 1) else {
        return Ok(());
    };
    let need: f64 = cases
        .iter()
        .map(|c| c.training_memory().total())
        .sum::<f64>()
        * children as f64;
    if need > limit.bytes {
        anyhow::bail!(InputError::Arguments(format!(
            "bench: size `{}`'s {} cases need about {} to train at once (each in a process of \
             its own, all alive together), more than {}; bench a micro-batch of fewer \
             sequences: {}",
            cases[0].size,
            cases.len() * children,
            crate::fmt::bytes_text(need),
            limit.what,
            match &args.sizes {
                Some(path) => format!("more train.micro_batches in {}", path.display()),
                None => "a smaller --batch-size".to_string(),
            }
        )));
    }
    Ok(())
}

/// Matmuls the peak is the best of, per probe, after one untimed.
const PEAK_REPEATS: usize = 5;

/// Best-of-[`PEAK_REPEATS`] throughput of an n x n x n matmul in the device's float type,
/// after one untimed, in FLOP/s: n = 1024 on a CPU, 8192 on a GPU, where a smaller one is
/// mostly launch and synchronisation (an H200 multiplies 1024 x 1024 in bf16 in ~3 µs).
fn matmul_peak(device: &Device, n: usize) -> anyhow::Result<f64> {
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
    for i in 0..=PEAK_REPEATS {
        let t = Instant::now();
        let c = a.clone().matmul(b.clone());
        let _ = c.sum().try_into_scalar::<f32>()?;
        if i > 0 {
            best = best.min(t.elapsed().as_secs_f64());
        }
    }
    Ok(2.0 * (n as f64).powi(3) / best)
}
