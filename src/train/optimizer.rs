//! AdamW (fused, `adamw.rs`) with the parameter groups of SPEC section 7, global gradient-norm
//! clipping, and the per-sublayer gradient norms of SPEC section 8.

use burn::module::{Module, ModuleVisitor, Param, ParamGroup, ParamId};
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::{Tensor, TensorReadError};

use super::adamw::FusedAdamW;
use super::config::TrainConfig;
use crate::model::Lm;
use crate::model::params::{NamedParam, named_grads, named_params};

/// Weight decay applies to matrices only: never to norm gains, and never to anything of the
/// residual family (pseudo-queries, their projections, static mixing logits).
pub fn decays(p: &NamedParam) -> bool {
    p.shape.len() == 2 && !p.path.starts_with("residual")
}

pub fn build(config: &TrainConfig, model: &Lm) -> ModuleOptimizer {
    let adamw = |weight_decay: f64| FusedAdamW {
        beta_1: config.beta1 as f32,
        beta_2: config.beta2 as f32,
        epsilon: config.adam_eps as f32,
        weight_decay: weight_decay as f32,
    };
    let no_decay: Vec<ParamId> = named_params(model)
        .into_iter()
        .filter(|p| !decays(p))
        .map(|p| p.id)
        .collect();
    ModuleOptimizer::from(adamw(config.weight_decay)).with_group(
        ParamGroup::from_ids(no_decay),
        adamw(0.0),
        None,
    )
}

/// The gradients' global L2 norm before clipping; where it exceeds `clip` (0: never), the
/// gradients are scaled down to that norm.
pub fn clip_grads(
    model: &Lm,
    grads: &mut GradientsParams,
    clip: f32,
) -> Result<f32, TensorReadError> {
    let norm = global_norm(model, grads)?;
    if clip > 0.0 && norm > clip {
        scale_grads(model, grads, clip / norm);
    }
    Ok(norm)
}

/// The global L2 norm of all gradients.
fn global_norm(model: &Lm, grads: &GradientsParams) -> Result<f32, TensorReadError> {
    let squares: Vec<Tensor<1>> = named_grads(model, grads)
        .into_iter()
        .map(|g| g.value.square().sum())
        .collect();
    if squares.is_empty() {
        return Ok(0.0);
    }
    Tensor::cat(squares, 0)
        .sum()
        .sqrt()
        .try_into_scalar::<f32>()
}

/// Scales every gradient by `scale` (torch-style clipping after the global norm is known).
fn scale_grads(model: &Lm, grads: &mut GradientsParams, scale: f32) {
    struct Scale<'a> {
        grads: &'a mut GradientsParams,
        scale: f32,
    }
    impl ModuleVisitor for Scale<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(g) = self.grads.remove::<D>(param.id) {
                self.grads.register::<D>(param.id, g.mul_scalar(self.scale));
            }
        }
    }
    model.visit(&mut Scale { grads, scale });
}

/// L2 norm of the gradients of each sublayer's parameters (its PreNorm gain included),
/// `L = 2 * n_blocks` values.
pub fn layer_grad_norms(model: &Lm, grads: &GradientsParams) -> Result<Vec<f32>, TensorReadError> {
    let n_layers = 2 * model.blocks.len();
    let mut per_layer: Vec<Vec<Tensor<1>>> = vec![Vec::new(); n_layers];
    for g in named_grads(model, grads) {
        if let Some(layer) = sublayer_of(&g.path) {
            per_layer[layer].push(g.value.square().sum());
        }
    }
    let device = model.embed.val().device();
    let sums: Vec<Tensor<1>> = per_layer
        .into_iter()
        .map(|v| {
            if v.is_empty() {
                Tensor::zeros([1], &device)
            } else {
                Tensor::cat(v, 0).sum()
            }
        })
        .collect();
    Tensor::cat(sums, 0).sqrt().try_to_vec_as::<f32>()
}

/// `blocks.3.attn.wq` -> 6, `blocks.3.mlp_norm.gain` -> 7; other paths -> None.
fn sublayer_of(path: &str) -> Option<usize> {
    let mut parts = path.split('.');
    if parts.next()? != "blocks" {
        return None;
    }
    let block: usize = parts.next()?.parse().ok()?;
    match parts.next()? {
        "attn" | "attn_norm" => Some(2 * block),
        "mlp" | "mlp_norm" => Some(2 * block + 1),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::sublayer_of;

    #[test]
    fn paths_map_to_sublayers() {
        assert_eq!(sublayer_of("blocks.3.attn.wq"), Some(6));
        assert_eq!(sublayer_of("blocks.3.attn_norm.gain"), Some(6));
        assert_eq!(sublayer_of("blocks.0.mlp.w_down"), Some(1));
        assert_eq!(sublayer_of("residual.mixes.2.scorer.query"), None);
        assert_eq!(sublayer_of("embed"), None);
    }
}
