//! `attnres cost`: the systems side of the report for one model shape and parallel layout:
//! depth I/O per token per layer of each residual scheme (Table 1), pipeline communication
//! with and without cross-stage caching (Eqs. 7-8 and an exact count), the prefill memory of
//! the block cache, and training FLOPs and memory of this crate's implementation.

use clap::Args;

use super::InputError;
use crate::cost::io::{Scheme, table1_schemes};
use crate::cost::pipeline::{self, Blocks, Communication, Layout};
use crate::cost::prefill::{Prefill, block_cache, report_example};
use crate::cost::{Dtype, io};
use crate::fmt::{bytes_text, thousands};
use crate::model::config::{ModelConfig, ResidualConfig};
use crate::model::flops::{flops_per_token, param_counts};
use crate::model::memory::training_memory;

#[derive(Debug, Args)]
pub struct CostArgs {
    /// Print the report's Table 1 at its typical values (L = 128, N = 8, S = 16, m = 4)
    /// and its prefill example, and nothing else.
    #[arg(long)]
    pub report_table1: bool,
    /// Model width d.
    #[arg(long, default_value_t = 7168)]
    pub d_model: usize,
    /// Transformer blocks; the sublayers ("layers" in the report) are L = 2 x n_blocks.
    #[arg(long, default_value_t = 64)]
    pub n_blocks: usize,
    /// Layers per AttnRes block S (default: L / 8, the report's N = 8). Full AttnRes is
    /// costed under the same grouping, which for it is an inference schedule only.
    #[arg(long)]
    pub block_size: Option<usize>,
    /// Streams m of mHC.
    #[arg(long, default_value_t = 4)]
    pub streams: usize,
    /// Pipeline-parallel physical stages P.
    #[arg(long, default_value_t = 1)]
    pub pp: usize,
    /// Virtual stages per physical stage V (interleaved schedule).
    #[arg(long, default_value_t = 1)]
    pub virtual_stages: usize,
    /// Tensor-parallel ranks T: prefill shards the block cache along the sequence over them.
    #[arg(long, default_value_t = 1)]
    pub tp: usize,
    /// Microbatches per step (pipeline communication is per microbatch, times this per step).
    #[arg(long, default_value_t = 1)]
    pub microbatches: usize,
    /// Sequences per microbatch.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Context length in tokens.
    #[arg(long, default_value_t = 4096)]
    pub context: usize,
    /// Chunk length for chunked prefill (0: none).
    #[arg(long, default_value_t = 16384)]
    pub chunk: usize,
    /// Storage type of activations and block summaries: f32, bf16, fp8.
    #[arg(long, default_value = "bf16")]
    pub dtype: String,
    /// Vocabulary size, for parameters, FLOPs and training memory.
    #[arg(long, default_value_t = 256)]
    pub vocab_size: usize,
    /// Attention heads (default: d_model / 128, at least 1).
    #[arg(long)]
    pub n_heads: Option<usize>,
}

/// The shape everything below is costed at.
struct Shape {
    d: f64,
    layers: usize,
    block_size: usize,
    blocks: usize,
    streams: f64,
}

pub fn run(args: CostArgs) -> anyhow::Result<()> {
    let dtype = Dtype::parse(&args.dtype).ok_or_else(|| {
        InputError::flag(format!("--dtype {}", args.dtype), "use f32, bf16 or fp8")
    })?;
    if args.report_table1 {
        print_table1();
        return Ok(());
    }
    let shape = shape(&args)?;
    print_io(&shape, dtype);
    if args.pp > 1 || args.virtual_stages > 1 {
        print_pipeline(&args, &shape, dtype);
    }
    print_prefill(&args, &shape, dtype);
    print_training(&args)?;
    Ok(())
}

fn shape(args: &CostArgs) -> anyhow::Result<Shape> {
    for (flag, value) in [
        ("--d-model", args.d_model),
        ("--n-blocks", args.n_blocks),
        ("--streams", args.streams),
        ("--pp", args.pp),
        ("--virtual-stages", args.virtual_stages),
        ("--tp", args.tp),
        ("--microbatches", args.microbatches),
        ("--batch", args.batch),
        ("--context", args.context),
    ] {
        if value == 0 {
            return Err(InputError::flag(format!("{flag} 0"), "give at least 1").into());
        }
    }
    let layers = 2 * args.n_blocks;
    let block_size = args.block_size.unwrap_or(layers.div_ceil(8).max(1));
    if block_size == 0 || block_size > layers {
        return Err(InputError::flag(
            format!("--block-size {block_size}"),
            format!("give 1 to L = {layers} layers per block"),
        )
        .into());
    }
    let chunks = args.pp * args.virtual_stages;
    if chunks > layers {
        return Err(InputError::Arguments(format!(
            "--pp {} x --virtual-stages {} = {chunks} chunks for only {layers} layers; each chunk \
             needs a layer",
            args.pp, args.virtual_stages
        ))
        .into());
    }
    Ok(Shape {
        d: args.d_model as f64,
        layers,
        block_size,
        blocks: layers.div_ceil(block_size),
        streams: args.streams as f64,
    })
}

fn print_table1() {
    println!(
        "Table 1 of the report: memory access per token per layer, typical values L = 128, N = 8, S = 16, m = 4"
    );
    for scheme in table1_schemes() {
        print_operations(&scheme);
    }
    println!(
        "(mHC's 48 are mixing coefficients, not d-vectors; the report's 34d leaves them out.)"
    );
    let m = block_cache(&report_example());
    println!(
        "\nprefill block cache, the report's example (8 blocks, 128K tokens; d = 7168 and bf16 are our reading, 8 TP ranks from 15 / 1.9): {} whole, {} per device sharded, {} per device with 16K chunks",
        bytes_text(m.whole),
        bytes_text(m.sharded),
        bytes_text(m.chunked)
    );
}

fn print_operations(scheme: &Scheme) {
    println!("\n{}: total {}", scheme.name(), scheme.total().text());
    for op in scheme.operations() {
        println!(
            "  {:<36} read {:<10} write {}",
            op.name,
            op.read.text(),
            op.write.text()
        );
    }
}

fn schemes(shape: &Shape) -> Vec<Scheme> {
    let (s, n) = (shape.block_size as f64, shape.blocks as f64);
    vec![
        Scheme::Standard,
        Scheme::Mhc { m: shape.streams },
        Scheme::Full { s, n },
        Scheme::Block { s, n },
        Scheme::DenseFormer {
            blocks: shape.layers as f64 / 2.0,
        },
    ]
}

fn print_io(shape: &Shape, dtype: Dtype) {
    println!(
        "depth I/O per token per layer (d = {}, L = {} layers, S = {}, N = {}, m = {}, {}; two-phase schedule for AttnRes)",
        shape.d,
        shape.layers,
        shape.block_size,
        shape.blocks,
        shape.streams,
        dtype.name()
    );
    println!(
        "{:<44} {:>12} {:>12} {:>16}",
        "scheme", "I/O", "bytes", "extra state"
    );
    for scheme in schemes(shape) {
        let total = scheme.total();
        println!(
            "{:<44} {:>12} {:>12} {:>14}d",
            scheme.name(),
            total.text(),
            bytes_text(total.elements(shape.d) * dtype.bytes()),
            io::Traffic::d(scheme.extra_state())
                .text()
                .trim_end_matches('d')
        );
    }
    println!(
        "extra state: d-vectors per token kept beyond the one hidden state of a standard residual"
    );
}

fn print_pipeline(args: &CostArgs, shape: &Shape, dtype: Dtype) {
    let layout = Layout {
        stages: args.pp,
        virtual_stages: args.virtual_stages,
    };
    let chunks = layout.chunks();
    let n_p = shape.blocks as f64 / chunks as f64;
    // One block summary of one microbatch.
    let block_bytes = shape.d * dtype.bytes() * (args.batch * args.context) as f64;
    let (sim_naive, sim_cached) = pipeline::simulate(
        layout,
        Blocks {
            layers: shape.layers,
            block_size: shape.block_size,
            embedding: true,
        },
    );
    println!(
        "\npipeline communication of block summaries, P = {} stages x V = {} virtual = C = {chunks} chunks, N = {} blocks (N_p = {n_p:.3} per chunk), per microbatch of {} tokens, forward (the backward pass mirrors it)",
        args.pp,
        args.virtual_stages,
        shape.blocks,
        thousands((args.batch * args.context) as u64)
    );
    println!(
        "{:<46} {:>10} {:>12} {:>10} {:>12}",
        "", "blocks", "bytes", "peak", "peak bytes"
    );
    let row = |name: &str, c: Communication| {
        println!(
            "{:<46} {:>10.2} {:>12} {:>10.2} {:>12}",
            name,
            c.total,
            bytes_text(c.total * block_bytes),
            c.peak,
            bytes_text(c.peak * block_bytes)
        );
    };
    let naive = pipeline::naive(layout, n_p);
    let cached = pipeline::cached_report(layout, n_p);
    row("without caching (Eq. 7)", naive);
    row("with cross-stage caching (Eq. 8)", cached);
    row(
        "with caching, exact (P - 1) N_p increments",
        pipeline::cached_exact(layout, n_p),
    );
    row("without caching, counted (+ embedding)", sim_naive);
    row("with caching, counted (+ embedding)", sim_cached);
    println!(
        "peak per link without / with caching: {:.3}x by Eqs. 7-8 ((C - 1) / P = V - 1/P; the report: \"a V x improvement\"), {:.3}x counted",
        naive.peak / cached.peak,
        sim_naive.peak / sim_cached.peak
    );
    println!(
        "per step ({} microbatches): {} without caching, {} with",
        args.microbatches,
        bytes_text(naive.total * block_bytes * args.microbatches as f64),
        bytes_text(cached.total * block_bytes * args.microbatches as f64)
    );
}

fn print_prefill(args: &CostArgs, shape: &Shape, dtype: Dtype) {
    let p = Prefill {
        blocks: shape.blocks as f64,
        context: args.context as f64,
        d_model: shape.d,
        dtype,
        tp: args.tp as f64,
        chunk: (args.chunk > 0).then_some(args.chunk as f64),
    };
    let m = block_cache(&p);
    println!(
        "\nprefill block cache ({} blocks x {} tokens x d, {}): {} per sequence; {} per device sharded over {} TP ranks; {} per device with {}",
        shape.blocks,
        thousands(args.context as u64),
        dtype.name(),
        bytes_text(m.whole),
        bytes_text(m.sharded),
        args.tp,
        bytes_text(m.chunked),
        if args.chunk > 0 {
            format!("{}-token chunks", thousands(args.chunk as u64))
        } else {
            "no chunking".into()
        }
    );
}

fn print_training(args: &CostArgs) -> anyhow::Result<()> {
    let d = args.d_model;
    let base = ModelConfig {
        vocab_size: args.vocab_size,
        d_model: d,
        n_blocks: args.n_blocks,
        n_heads: args.n_heads.unwrap_or((d / 128).max(1)),
        ff_mult: 8.0 / 3.0,
        context: args.context,
        residual: ResidualConfig::Baseline,
        value_residual: false,
    };
    base.validate()
        .map_err(|e| InputError::Arguments(format!("model: {e}")))?;
    let block_size = args
        .block_size
        .unwrap_or((2 * args.n_blocks).div_ceil(8).max(1));
    println!(
        "\ntraining in this crate (f32, Adam, no recomputation; vocab {}, {} heads, batch {} x {} tokens; docs/cost.md)",
        args.vocab_size,
        base.n_heads,
        args.batch,
        thousands(args.context as u64)
    );
    println!(
        "{:<16} {:>16} {:>16} {:>12} {:>12}",
        "variant", "params", "FLOPs/token", "memory", "vs baseline"
    );
    let mut baseline_memory = None;
    for residual in [
        ResidualConfig::Baseline,
        ResidualConfig::full(),
        ResidualConfig::block(block_size),
    ] {
        let c = ModelConfig {
            residual,
            ..base.clone()
        };
        let memory = training_memory(&c, args.batch).total();
        let base_memory = *baseline_memory.get_or_insert(memory);
        println!(
            "{:<16} {:>16} {:>16} {:>12} {:>11.3}x",
            c.residual.label(),
            thousands(param_counts(&c).total),
            thousands(flops_per_token(&c).training()),
            bytes_text(memory),
            memory / base_memory
        );
    }
    Ok(())
}
