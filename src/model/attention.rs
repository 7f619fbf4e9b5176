//! Causal multi-head self-attention with rotary embeddings and no biases (SPEC section 7),
//! optionally with ResFormer's value residual (SPEC section 6).

use burn::module::{Module, Param};
use burn::tensor::Tensor;

use super::init::Init;
use super::kernels::attention::causal_attention;
use super::kernels::linear::linear;
use super::rope::Rope;

#[derive(Module, Debug)]
pub struct Attention {
    /// `[d, d]` each; applied as `x @ W`.
    pub wq: Param<Tensor<2>>,
    pub wk: Param<Tensor<2>>,
    pub wv: Param<Tensor<2>>,
    /// The residual-branch output projection, with the smaller init of SPEC section 7.
    pub wo: Param<Tensor<2>>,
    /// `[2]`: `(λ1, λ2)` of the value residual, `V = λ1·V_n + λ2·V_1`; only on attention
    /// layers after the first of a model with `value_residual`.
    pub value_mix: Option<Param<Tensor<1>>>,
    pub n_heads: usize,
}

/// ResFormer's init of both value-residual weights (arXiv 2410.17897): an even mix.
pub const VALUE_MIX_INIT: f32 = 0.5;

impl Attention {
    /// `value_mix`: whether this layer mixes in the first layer's values.
    pub fn init(
        path: &str,
        d: usize,
        n_heads: usize,
        out_std: f64,
        value_mix: bool,
        init: &Init,
    ) -> Self {
        Self {
            wq: init.normal(&format!("{path}.wq"), [d, d], 0.02),
            wk: init.normal(&format!("{path}.wk"), [d, d], 0.02),
            wv: init.normal(&format!("{path}.wv"), [d, d], 0.02),
            wo: init.normal(&format!("{path}.wo"), [d, d], out_std),
            value_mix: value_mix.then(|| init.constant([2], VALUE_MIX_INIT)),
            n_heads,
        }
    }

    /// `x`: `[B, T, d]` -> (`[B, T, d]`, this layer's own values `[B, H, T, hd]`). With a
    /// value mix, `first` (the first attention layer's values) is mixed into its own.
    pub fn forward(
        &self,
        x: Tensor<3>,
        rope: &Rope,
        first: Option<Tensor<4>>,
    ) -> (Tensor<3>, Tensor<4>) {
        let [b, t, d] = x.dims();
        let (h, hd) = (self.n_heads, d / self.n_heads);
        let heads = |w: &Param<Tensor<2>>| {
            linear(x.clone(), w.val()).reshape([b, t, h, hd]) // [B, T, d] -> [B, T, H, hd]
        };
        let q = rope.apply(heads(&self.wq)).swap_dims(1, 2); // [B, H, T, hd]
        let k = rope.apply(heads(&self.wk)).swap_dims(1, 2);
        let own = heads(&self.wv).swap_dims(1, 2);
        let v = match (&self.value_mix, first) {
            (Some(mix), Some(first)) => {
                let mix = mix.val();
                let l1 = mix.clone().narrow(0, 0, 1).reshape([1, 1, 1, 1]);
                let l2 = mix.narrow(0, 1, 1).reshape([1, 1, 1, 1]);
                own.clone() * l1 + first * l2
            }
            _ => own.clone(),
        };
        let ctx = causal_attention(q, k, v); // [B, H, T, hd]
        let ctx = ctx.swap_dims(1, 2).reshape([b, t, d]); // [B, T, d]
        (linear(ctx, self.wo.val()), own)
    }
}
