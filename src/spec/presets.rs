//! Named model sizes, and the depth/width family of the report's Fig. 7.

use crate::model::ModelConfig;
use crate::model::flops::{flops_per_token, param_counts};

/// `(name, d_model, n_blocks)`, smallest first: CPU sizes up to `medium`, GPU sizes above.
pub const PRESETS: &[(&str, usize, usize)] = &[
    ("nano", 32, 2),
    ("micro", 64, 4),
    ("tiny", 96, 4),
    ("mini", 128, 6),
    ("small", 192, 6),
    ("medium", 256, 8),
    ("base", 384, 8),
    ("large", 512, 10),
    ("xl", 640, 12),
    ("xxl", 768, 14),
];

pub fn preset(name: &str) -> Option<(usize, usize)> {
    PRESETS
        .iter()
        .find(|(n, ..)| *n == name)
        .map(|&(_, d, b)| (d, b))
}

/// What a depth/width family holds fixed across its shapes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fixed {
    NonEmbeddingParams(f64),
    /// Training FLOPs per token.
    FlopsPerToken(f64),
}

/// For each `d_model / n_blocks` ratio, the shape (d_model a multiple of `head_dim`) whose
/// non-embedding parameters or FLOPs per token come closest to the target.
pub fn depth_width_shapes(
    ratios: &[f64],
    fixed: Fixed,
    head_dim: usize,
    template: &ModelConfig,
) -> Vec<(usize, usize)> {
    let measure = |d: usize, n: usize| {
        let c = ModelConfig {
            d_model: d,
            n_blocks: n,
            n_heads: d / head_dim,
            ..template.clone()
        };
        match fixed {
            Fixed::NonEmbeddingParams(_) => param_counts(&c).non_embedding as f64,
            Fixed::FlopsPerToken(_) => flops_per_token(&c).training() as f64,
        }
    };
    let target = match fixed {
        Fixed::NonEmbeddingParams(x) | Fixed::FlopsPerToken(x) => x,
    };
    ratios
        .iter()
        .map(|&ratio| {
            (1..=256)
                .map(|n| {
                    let d =
                        ((ratio * n as f64 / head_dim as f64).round() as usize).max(1) * head_dim;
                    (d, n)
                })
                .min_by(|a, b| {
                    let err = |&(d, n): &(usize, usize)| (measure(d, n) / target).ln().abs();
                    err(a).total_cmp(&err(b))
                })
                .unwrap_or((head_dim, 1))
        })
        .collect()
}
