//! Which depth sources each mixing step sees, from the configuration alone (SPEC sections 3-4).
//!
//! Shared by the model (to size static logits) and by the FLOP and memory counts.

use super::config::{HyperKind, ModelConfig, ResidualConfig};

/// Number of sources seen by AttnRes layer `l` for `l in 0..L`, then by the output step
/// (index `L`), for blocks of `lengths` from the bottom up. Sources are the embedding, the
/// completed blocks and, after a block's first layer, the partial sum of the current block;
/// a window keeps the embedding plus the last `W` of the others.
pub fn attnres_source_counts(lengths: &[usize], window: Option<usize>) -> Vec<usize> {
    let cap = |others: usize| 1 + window.map_or(others, |w| others.min(w));
    let mut counts = Vec::new();
    for (completed, &len) in lengths.iter().enumerate() {
        counts.extend((0..len).map(|j| cap(completed + usize::from(j > 0))));
    }
    counts.push(cap(lengths.len()));
    counts
}

/// Completed sources stacked by the two-phase path, summed over its phase-1 steps (one per
/// block, then the output step): `sum_n (n + 1)` for blocks `n = 0..N`, what its batched
/// weighted sums keep for the backward pass. Full AttnRes stacks `O(L^2)`, Block `O(N^2)`.
pub fn two_phase_stacked_sources(blocks: usize) -> usize {
    (1..=blocks + 1).sum()
}

/// Depth sources per mixing step for any family: one entry per layer plus the output step
/// for AttnRes, one per Transformer block for DenseFormer, 1 (the running sum) per layer
/// for the baseline, `m` (the streams) per layer for HC, mHC and mHC-lite, and Full
/// AttnRes's for mhc_attnres (each of its streams attends over as many).
pub fn depth_source_counts(config: &ModelConfig) -> Vec<usize> {
    let n_layers = config.n_layers();
    match &config.residual {
        ResidualConfig::Baseline => vec![1; n_layers],
        ResidualConfig::AttnRes(c) => attnres_source_counts(&c.block_lengths(n_layers), c.window),
        // After block i (0-based) the average runs over the embedding and i + 1 block outputs.
        ResidualConfig::Denseformer => (0..config.n_blocks).map(|i| i + 2).collect(),
        ResidualConfig::Hyper(h) if h.kind == HyperKind::MhcAttnRes => {
            attnres_source_counts(&vec![1; n_layers], None)
        }
        // Every layer reads all m streams.
        ResidualConfig::Hyper(h) => vec![h.streams; n_layers],
    }
}

/// Largest number of `d`-vectors per token that the residual stream keeps alive at once.
pub fn peak_stream_vectors(config: &ModelConfig) -> usize {
    match &config.residual {
        ResidualConfig::Baseline => 1,
        // All completed sources plus the partial sum; a window does not shrink the cache that
        // the backward pass needs, only what each step reads.
        ResidualConfig::AttnRes(c) => {
            let lengths = c.block_lengths(config.n_layers());
            1 + lengths.len() + usize::from(lengths.iter().any(|&len| len > 1))
        }
        // The embedding, every block output, and the running input.
        ResidualConfig::Denseformer => config.n_blocks + 2,
        // Every stream keeps the embedding and every layer's write.
        ResidualConfig::Hyper(h) if h.kind == HyperKind::MhcAttnRes => {
            h.streams * (config.n_layers() + 1)
        }
        ResidualConfig::Hyper(h) => h.streams,
    }
}
