//! Peak memory of training one run, estimated from the configuration alone (docs/cost.md,
//! "Training memory"): parameters with their gradients and Adam moments, the activations
//! autodiff keeps for the backward pass at the tokens in flight, a fixed runtime share, and
//! what the allocator's kept heap holds beyond them.
//!
//! Counts are in f32 elements per token and follow what this crate's layers keep. Attention's
//! fused backward (`kernels::attention`) keeps no `T x T` scores, only each query's
//! log-sum-exp, so the count does not grow with context.
//! `attnres bench` prints the estimate next to the measured peak.

use serde::Serialize;

use super::config::{HyperKind, ModelConfig, ResidualConfig};
use super::flops::param_counts;
use super::sources::{depth_source_counts, peak_stream_vectors, two_phase_stacked_sources};

/// Bytes of one f32.
const F32: f64 = 4.0;
/// libtorch, the binary, the corpus in memory and the allocator's slack: measured at 0.2 to
/// 0.3 GB for the smallest runs; taken as 0.4 GB.
pub const RUNTIME_BYTES: f64 = 0.4e9;

/// What glibc's heap holds beyond the live tensors, as a share of the state and activations
/// (everything a step allocates anew: activations, gradients, the updated weights and
/// moments). `src/main.rs` keeps the heap between steps and never trims it, for speed; it
/// fragments, and a run's resident memory grows over its first minutes to a plateau. Measured
/// (d 512, 8 blocks, 8 x 256 tokens, 150-400 steps; git log -- docs/performance.md): the
/// baseline 1.75-1.85 GB after a few steps, 2.05-2.09 GB at the plateau, against 1.76 GB for
/// the other parts, which a slack of 0.25 would have met with no margin (2.10 GB). Trimming
/// the heap once a minute did not hold it lower (1.86-2.05 GB).
pub const HEAP_SLACK: f64 = 0.3;

/// Peak training memory of one run, in bytes, by part.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MemoryEstimate {
    /// Weights, gradients and Adam's two moments: `16` bytes per parameter (`8` in bf16).
    pub state: f64,
    /// Activations kept for the backward pass, for every token in flight at once.
    pub activations: f64,
    /// What the process holds whatever the model.
    pub runtime: f64,
    /// What the allocator's kept heap holds beyond the live tensors ([`HEAP_SLACK`]).
    pub heap: f64,
}

impl MemoryEstimate {
    pub fn total(&self) -> f64 {
        self.state + self.activations + self.runtime + self.heap
    }
}

/// f32 elements per token one Transformer block keeps for the backward pass:
/// attention `12 d` (norm in and out, q k v, rotated q k, context, its copy, output, the
/// residual sum), the log-sum-exp of each head's query `H`, SwiGLU
/// `2 d + 4 h` (norm in and out, gate, up, the gate's sigmoid, which the fused gating keeps
/// for its backward, and the product).
fn block_elements(c: &ModelConfig) -> f64 {
    let (d, h) = (c.d_model as f64, c.ff_hidden() as f64);
    let lse = c.n_heads as f64;
    12.0 * d + lse + 2.0 * d + 4.0 * h
}

/// f32 elements per token the residual family keeps beyond the baseline's stream.
///
/// AttnRes on its stacked path (single-head softmax: the method, Full, the key-norm
/// ablation) keeps one stack of the completed sources, `N + 1` slots (the embedding and the
/// blocks' outputs), and in the backward pass up to two gradient stacks of that size in
/// flight, freshly allocated at every layer: `6 d` per slot with the allocator's slack for
/// buffers of changing sizes, set above `attnres bench`'s measured peaks (d 256, 8 x 256
/// tokens; extra over the baseline, Full 59, 191, 320 MB and Block S = 4 36, 62, 150 MB at
/// 4, 8, 16 blocks; estimate 113, 220, 410 and 63, 120, 210 MB). Each layer after its
/// block's first keeps its partial sum, and its gradient, `2 d`. Both grow as `L` for Full
/// and as `N + L` for Block: every layer's partial sum is an input of its mixing step.
/// Each mixing step also keeps its softmax weights for the backward, 3 floats per (step,
/// source) pair: `L^2` pairs for Full, but a few floats against `d`.
///
/// On its two-phase path (multi-head and sigmoid mixing) it holds every source (`2 d` each
/// with its gradient's bookkeeping), the completed sources each block's batched weighted
/// sum stacks (`d` per stacked source), and about `3 d` per layer for the partial sum's
/// merge. On the naive path (the ablations it cannot batch) it holds every source and its
/// normalised key, a re-normalised partial per layer and `2 d` per (mixing step, source)
/// pair. Measured by `attnres bench` at d 256, 8 blocks, 8 x 256 tokens, before the stacked
/// path: Full 0.45 GB and Block S = 4 0.17 GB over the baseline on the two-phase path
/// (estimate 0.50 and 0.16 GB); 0.75 and 0.30 GB on the naive one. There Full's memory
/// grows as `L^2`, Block's as `N^2`. DenseFormer holds the embedding and every block output.
fn residual_elements(c: &ModelConfig) -> f64 {
    let d = c.d_model as f64;
    let layers = c.n_layers() as f64;
    match &c.residual {
        ResidualConfig::Baseline => 0.0,
        ResidualConfig::AttnRes(a) if a.stacked() => {
            let blocks = a.block_lengths(c.n_layers()).len() as f64;
            let pairs: usize = depth_source_counts(c).iter().sum();
            d * (6.0 * (blocks + 1.0) + 2.0 * (layers - blocks)) + 3.0 * pairs as f64
        }
        ResidualConfig::AttnRes(a) if a.two_phase() => {
            let stacked = two_phase_stacked_sources(a.block_lengths(c.n_layers()).len()) as f64;
            d * (2.0 * peak_stream_vectors(c) as f64 + stacked + 3.0 * layers)
        }
        ResidualConfig::AttnRes(_) => {
            let pairs: usize = depth_source_counts(c).iter().sum();
            2.0 * d * peak_stream_vectors(c) as f64 + d * layers + 2.0 * d * pairs as f64
        }
        ResidualConfig::Denseformer => d * peak_stream_vectors(c) as f64,
        // Full AttnRes's naive path in each of `m` streams (every source and its key, each
        // weighted term), plus per layer the mixed streams, their normalisation and the read.
        ResidualConfig::Hyper(h) if h.kind == HyperKind::MhcAttnRes => {
            let (m, pairs) = (
                h.streams as f64,
                depth_source_counts(c).iter().sum::<usize>(),
            );
            2.0 * d * peak_stream_vectors(c) as f64
                + 3.0 * m * d * layers
                + 2.0 * m * d * pairs as f64
        }
        // Per layer the streams, their normalisation, the read-in product and the mixed
        // streams: about 4 m d (ours, not yet checked against `attnres bench`).
        ResidualConfig::Hyper(h) => 4.0 * d * h.streams as f64 * layers,
    }
}

/// Peak training memory in f32 for `sequences` sequences of `c.context` tokens in flight at
/// once (one micro-batch).
pub fn training_memory(c: &ModelConfig, sequences: usize) -> MemoryEstimate {
    training_memory_in(c, sequences, F32)
}

/// The same with every float `element_bytes` wide: bf16 training (2 bytes) keeps weights,
/// gradients and both Adam moments in bf16 (8 bytes per parameter) and bf16 activations.
pub fn training_memory_in(c: &ModelConfig, sequences: usize, element_bytes: f64) -> MemoryEstimate {
    let tokens = sequences as f64 * c.context as f64;
    let d = c.d_model as f64;
    let v = c.vocab_size as f64;
    let blocks = c.n_blocks as f64 * block_elements(c);
    // The embedding output, the final norm's input and output; logits, log-softmax and
    // their gradient over the vocabulary. The backward pass adds one block's gradients.
    let ends = 3.0 * d + 3.0 * v;
    let backward = block_elements(c);
    // The value residual keeps the first layer's values and each mixing layer's two
    // scaled terms: about `2 d` per later attention layer (ours, from the ops it records).
    let value_mix = if c.value_residual {
        2.0 * d * (c.n_blocks as f64 - 1.0)
    } else {
        0.0
    };
    let per_token = blocks + residual_elements(c) + value_mix + ends + backward;
    let state = 4.0 * element_bytes * param_counts(c).total as f64;
    let activations = element_bytes * per_token * tokens;
    MemoryEstimate {
        state,
        activations,
        runtime: RUNTIME_BYTES,
        heap: HEAP_SLACK * (state + activations),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::ResidualConfig;

    fn model(residual: ResidualConfig, n_blocks: usize) -> ModelConfig {
        ModelConfig {
            vocab_size: 256,
            d_model: 64,
            n_blocks,
            n_heads: 4,
            ff_mult: 8.0 / 3.0,
            context: 128,
            residual,
            value_residual: false,
        }
    }

    #[test]
    fn activations_scale_with_tokens_and_state_with_parameters() {
        let c = model(ResidualConfig::Baseline, 4);
        let (one, two) = (training_memory(&c, 1), training_memory(&c, 2));
        assert_eq!(one.state, two.state);
        assert!((two.activations / one.activations - 2.0).abs() < 1e-12);
        assert_eq!(one.state, 16.0 * param_counts(&c).total as f64);
        let half = training_memory_in(&c, 2, 2.0);
        assert_eq!(half.state, one.state / 2.0);
        assert_eq!(half.activations, two.activations / 2.0);
    }

    /// Whole training runs' peak resident memory, measured (git log -- docs/performance.md:
    /// `attnres run`, 8 blocks, head_dim 64, 8 x 256 tokens, evals and checkpoints every
    /// 100 steps, 150-300 steps), lies under the estimate: before the heap's part, the three
    /// at d 512 did not.
    #[test]
    fn the_estimate_covers_whole_runs_peaks_measured_at_d_256_and_512() {
        let measured = [
            (256, ResidualConfig::Baseline, 0.763e9),
            (256, ResidualConfig::full(), 0.853e9),
            (256, ResidualConfig::block(4), 0.809e9),
            (512, ResidualConfig::Baseline, 2.092e9),
            (512, ResidualConfig::full(), 2.214e9),
            (512, ResidualConfig::block(4), 2.310e9),
        ];
        for (d, residual, peak) in measured {
            let c = ModelConfig {
                d_model: d,
                n_heads: d / 64,
                context: 256,
                ..model(residual, 8)
            };
            let e = training_memory(&c, 8);
            let label = c.residual.label();
            assert!(
                e.total() > peak,
                "d {d} {label}: {:.3e} < {peak:.3e}",
                e.total()
            );
            if d == 512 {
                assert!(
                    e.total() - e.heap < peak,
                    "d {d} {label} without the heap's part"
                );
            }
        }
    }

    /// Full AttnRes keeps every layer's output in its stack, Block only its blocks' (and a
    /// partial sum per layer): Full's extra memory grows faster with depth.
    #[test]
    fn full_attnres_memory_grows_faster_with_depth_than_block() {
        let extra = |r: ResidualConfig, n: usize| {
            training_memory(&model(r, n), 1).activations
                - training_memory(&model(ResidualConfig::Baseline, n), 1).activations
        };
        let full = extra(ResidualConfig::full(), 16) / extra(ResidualConfig::full(), 4);
        let block = extra(ResidualConfig::block(8), 16) / extra(ResidualConfig::block(8), 4);
        assert!(full > block, "full x{full:.2} vs block x{block:.2}");
        assert!(extra(ResidualConfig::Baseline, 4) == 0.0);
    }
}
