//! The shapes of a depth/width family (the report's Fig. 7): per fixed parameter count or
//! FLOPs per token, one shape per `d_model / n_blocks` ratio.

use super::error::SpecError;
use super::presets::Size;
use super::presets::{Fixed, depth_width_shapes};
use super::wire::{DepthWidth, SweepFile};
use crate::model::ModelConfig;
use crate::model::config::ResidualConfig;

/// Per target of a depth/width family, its shapes `(d_model, n_blocks)`, one per ratio.
pub type FamilyShapes = Vec<(Fixed, Vec<(usize, usize)>)>;

/// The shapes `(d_model, n_blocks)` of a `depth_width` family per target, one per ratio in
/// the order of `ratios` (a shape may serve two targets), validated.
pub fn family_shapes(file: &SweepFile, dw: &DepthWidth) -> Result<FamilyShapes, SpecError> {
    let head_dim = file.model.head_dim;
    let targets: Vec<Fixed> = match (
        dw.non_embedding_params.is_empty(),
        dw.flops_per_token.is_empty(),
    ) {
        (false, true) => dw
            .non_embedding_params
            .iter()
            .map(|&n| Fixed::NonEmbeddingParams(n))
            .collect(),
        (true, false) => dw
            .flops_per_token
            .iter()
            .map(|&f| Fixed::FlopsPerToken(f))
            .collect(),
        _ => {
            return Err(SpecError::at(
                "depth_width",
                "give exactly one positive target: non_embedding_params or flops_per_token (a number or a list)",
            ));
        }
    };
    if targets.iter().any(|t| match t {
        Fixed::NonEmbeddingParams(x) | Fixed::FlopsPerToken(x) => !(x.is_finite() && *x > 0.0),
    }) {
        return Err(SpecError::at(
            "depth_width",
            "targets must be positive numbers",
        ));
    }
    if dw.ratios.is_empty() || dw.ratios.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
        return Err(SpecError::at(
            "depth_width.ratios",
            "give positive d_model/n_blocks ratios, e.g. [16, 32, 64]",
        ));
    }
    let template = ModelConfig {
        vocab_size: file.model.vocab_size,
        d_model: head_dim,
        n_blocks: 1,
        n_heads: 1,
        ff_mult: file.model.ff_mult,
        context: file.model.context,
        residual: ResidualConfig::Baseline,
        value_residual: false,
    };
    Ok(targets
        .into_iter()
        .map(|fixed| {
            let shapes = depth_width_shapes(&dw.ratios, fixed, head_dim, &template);
            (fixed, shapes)
        })
        .collect())
}

/// The shapes of a `depth_width` family: for each target, every d_model / n_blocks ratio at
/// that fixed non-embedding parameter count or FLOPs per token, each shape once.
pub(crate) fn depth_width_sizes(
    file: &SweepFile,
    dw: &DepthWidth,
    heads: &dyn Fn(usize, &str) -> Result<usize, SpecError>,
) -> Result<Vec<Size>, SpecError> {
    let mut shapes: Vec<Size> = Vec::new();
    for (_, family) in family_shapes(file, dw)? {
        for (i, (d, n)) in family.into_iter().enumerate() {
            if shapes.iter().any(|s| s.d_model == d && s.n_blocks == n) {
                continue;
            }
            shapes.push(Size {
                name: format!("d{d}x{n}"),
                d_model: d,
                n_blocks: n,
                n_heads: heads(d, &format!("depth_width.ratios.{i}"))?,
                path: format!("depth_width.ratios.{i}"),
            });
        }
    }
    Ok(shapes)
}
