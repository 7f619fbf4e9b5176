//! Parameter counts, FLOPs per token (SPEC section 9) and depth-source memory, from the
//! configuration alone.

use serde::Serialize;

use super::config::{HyperConfig, HyperKind, Mixing, ModelConfig, QueryKind, ResidualConfig};
use super::sources::{depth_source_counts, peak_stream_vectors};

/// FLOPs spent on one PFLOP/s-day.
pub const PFLOPS_DAY: f64 = 8.64e19;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ParamCounts {
    pub total: u64,
    pub embedding: u64,
    pub head: u64,
    /// `N_nonemb`: everything but the token embedding and the LM head.
    pub non_embedding: u64,
    /// Of `non_embedding`, the parameters the residual family adds (queries, key norms, ...),
    /// and the value residual's two weights per mixing layer.
    pub residual: u64,
}

/// Forward FLOPs per token, split as `attnres model` prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FlopsPerToken {
    /// `2 *` every matrix inside the layers, input-dependent query matrices included.
    pub matrices: u64,
    /// `4 * T * d` per attention layer.
    pub attention: u64,
    /// `4 * d` per (layer, source) pair for AttnRes; `2 * d` per (block, source) for
    /// DenseFormer; for HC, mHC and mHC-lite `2 m d (m + 2)` per layer (read, mix, write),
    /// `m d` for the final sum, and the coefficients' own arithmetic (docs/method.md);
    /// plus `3 d` per attention layer that mixes in the first layer's values.
    pub depth: u64,
    /// `2 * d * vocab`.
    pub head: u64,
}

impl FlopsPerToken {
    pub fn forward(&self) -> u64 {
        self.matrices + self.attention + self.depth + self.head
    }

    /// Training FLOPs per token: 3 x forward.
    pub fn training(&self) -> u64 {
        3 * self.forward()
    }
}

/// Parameters of the matrices of one Transformer block: attention `4 d^2`, SwiGLU `3 d h`.
fn block_matrix_params(c: &ModelConfig) -> u64 {
    let (d, h) = (c.d_model as u64, c.ff_hidden() as u64);
    4 * d * d + 3 * d * h
}

/// Input-dependent query matrices `W_l` (`d x d`, one per mixing step).
fn query_matrix_params(c: &ModelConfig) -> u64 {
    match &c.residual {
        ResidualConfig::AttnRes(a)
            if a.mixing == Mixing::Dynamic && a.query == QueryKind::InputDependent =>
        {
            (c.n_layers() as u64 + 1) * (c.d_model as u64).pow(2)
        }
        _ => 0,
    }
}

/// FLOPs per token of the multi-stream families' coefficient projections (input-dependent
/// matrices): HC applies `[d, m + 2]` to each of its `m` streams, mHC and mHC-lite apply
/// `[m d, 2 m + R]` to the flattened state, once per layer.
fn hyper_matrix_flops(c: &ModelConfig) -> u64 {
    let (d, l) = (c.d_model as u64, c.n_layers() as u64);
    match &c.residual {
        ResidualConfig::Hyper(h) => {
            let (m, r) = (h.streams as u64, h.mixing_logits() as u64);
            match h.kind {
                HyperKind::Hc { dynamic: true } => l * 2 * m * d * (m + 2),
                HyperKind::Hc { dynamic: false } => 0,
                _ => l * 2 * m * d * (2 * m + r),
            }
        }
        _ => 0,
    }
}

/// Parameters of one layer of a multi-stream family.
fn hyper_layer_params(h: &HyperConfig, d: u64) -> u64 {
    let (m, r) = (h.streams as u64, h.mixing_logits() as u64);
    match h.kind {
        // A_m, A_r, B; with the dynamic terms a norm gain, W [d, m + 2] and two scales.
        HyperKind::Hc { dynamic } => 2 * m + m * m + if dynamic { d + d * (m + 2) + 2 } else { 0 },
        // The norm over m d, the projection, its biases and the gate scales (read, write and,
        // but for mhc_attnres, mixing).
        HyperKind::MhcAttnRes => m * d + m * d * 2 * m + 2 * m + 2,
        _ => m * d + m * d * (2 * m + r) + (2 * m + r) + 3,
    }
}

/// Parameters the residual family adds, SPEC section 6.
fn residual_params(c: &ModelConfig) -> u64 {
    let d = c.d_model as u64;
    let sources = depth_source_counts(c);
    match &c.residual {
        ResidualConfig::Baseline => 0,
        ResidualConfig::Denseformer => sources.iter().map(|&k| k as u64).sum(),
        // mhc_attnres adds a pseudo-query and a key-norm gain per (mixing step, stream).
        ResidualConfig::Hyper(h) if h.kind == HyperKind::MhcAttnRes => {
            let (m, steps) = (h.streams as u64, sources.len() as u64);
            c.n_layers() as u64 * hyper_layer_params(h, d) + steps * m * 2 * d
        }
        ResidualConfig::Hyper(h) => c.n_layers() as u64 * hyper_layer_params(h, d),
        ResidualConfig::AttnRes(a) => {
            let steps = sources.len() as u64;
            let key_norm = if a.key_norm { d } else { 0 };
            match (a.mixing, a.query) {
                (Mixing::Static, _) => sources.iter().map(|&k| k as u64).sum(),
                (Mixing::Dynamic, QueryKind::Static) => steps * (d + key_norm),
                // W_l plus the RMSNorm gain on the source it reads.
                (Mixing::Dynamic, QueryKind::InputDependent) => steps * (d * d + d + key_norm),
            }
        }
    }
}

/// Attention layers that mix in the first layer's values (the value residual), each with
/// its two weights and `3 d` FLOPs per token (two multiplies and an add per element).
fn value_mixing_layers(c: &ModelConfig) -> u64 {
    if c.value_residual {
        c.n_blocks as u64 - 1
    } else {
        0
    }
}

pub fn param_counts(c: &ModelConfig) -> ParamCounts {
    let (d, v) = (c.d_model as u64, c.vocab_size as u64);
    let norms = (2 * c.n_blocks as u64 + 1) * d;
    let residual = residual_params(c) + 2 * value_mixing_layers(c);
    let non_embedding = c.n_blocks as u64 * block_matrix_params(c) + norms + residual;
    ParamCounts {
        total: non_embedding + 2 * v * d,
        embedding: v * d,
        head: d * v,
        non_embedding,
        residual,
    }
}

pub fn flops_per_token(c: &ModelConfig) -> FlopsPerToken {
    let (d, v, t) = (c.d_model as u64, c.vocab_size as u64, c.context as u64);
    let pairs: u64 = depth_source_counts(c).iter().map(|&k| k as u64).sum();
    let depth = match &c.residual {
        ResidualConfig::Baseline => 0,
        ResidualConfig::AttnRes(_) => 4 * d * pairs,
        // Ours (SPEC is silent): a weighted sum is one multiply-add per element.
        ResidualConfig::Denseformer => 2 * d * pairs,
        ResidualConfig::Hyper(h) => {
            let (m, l) = (h.streams as u64, c.n_layers() as u64);
            let r = h.mixing_logits() as u64;
            // Per layer: the read, the mixing and the write, `2 m d (m + 2)`, plus the gates
            // and normalisations of the coefficients, a few operations per logit.
            let streams = 2 * m * d * (m + 2);
            let per_layer = match h.kind {
                HyperKind::Hc { dynamic } => streams + u64::from(dynamic) * 4 * m * (m + 2),
                HyperKind::Mhc { sinkhorn_iters } => {
                    streams + 4 * m + 4 * m * m * sinkhorn_iters as u64
                }
                HyperKind::MhcLite => streams + 4 * m + 3 * r + 2 * r * m * m,
                // No mixing: the read (2 m d), the write (m d) and the two gates.
                HyperKind::MhcAttnRes => 3 * m * d + 4 * m,
            };
            // mhc_attnres: in each stream, Full AttnRes's 4 d per (step, source).
            let in_streams = match h.kind {
                HyperKind::MhcAttnRes => 4 * m * d * pairs,
                _ => 0,
            };
            l * per_layer + in_streams + m * d
        }
    };
    FlopsPerToken {
        matrices: 2 * (c.n_blocks as u64 * block_matrix_params(c) + query_matrix_params(c))
            + hyper_matrix_flops(c),
        attention: 4 * t * d * c.n_blocks as u64,
        depth: depth + 3 * d * value_mixing_layers(c),
        head: 2 * d * v,
    }
}

/// Bytes per token of the depth sources kept alive at once, in f32.
pub fn source_bytes_per_token(c: &ModelConfig) -> u64 {
    (peak_stream_vectors(c) * c.d_model * 4) as u64
}

/// `6 N_nonemb D`, the usual approximation that `flops_exact` is compared against.
pub fn flops_6nd(c: &ModelConfig, tokens: u64) -> f64 {
    6.0 * param_counts(c).non_embedding as f64 * tokens as f64
}

/// Training FLOPs for `tokens` tokens by the exact count.
pub fn flops_exact(c: &ModelConfig, tokens: u64) -> f64 {
    flops_per_token(c).training() as f64 * tokens as f64
}
