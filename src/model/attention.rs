//! Causal multi-head self-attention with rotary embeddings and no biases (SPEC section 7).

use burn::module::{Module, Param};
use burn::tensor::Tensor;
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;

use super::init::Init;
use super::rope::Rope;

#[derive(Module, Debug)]
pub struct Attention {
    /// `[d, d]` each; applied as `x @ W`.
    pub wq: Param<Tensor<2>>,
    pub wk: Param<Tensor<2>>,
    pub wv: Param<Tensor<2>>,
    /// The residual-branch output projection, with the smaller init of SPEC section 7.
    pub wo: Param<Tensor<2>>,
    pub n_heads: usize,
}

impl Attention {
    pub fn init(path: &str, d: usize, n_heads: usize, out_std: f64, init: &Init) -> Self {
        Self {
            wq: init.normal(&format!("{path}.wq"), [d, d], 0.02),
            wk: init.normal(&format!("{path}.wk"), [d, d], 0.02),
            wv: init.normal(&format!("{path}.wv"), [d, d], 0.02),
            wo: init.normal(&format!("{path}.wo"), [d, d], out_std),
            n_heads,
        }
    }

    /// `x`: `[B, T, d]` -> `[B, T, d]`.
    pub fn forward(&self, x: Tensor<3>, rope: &Rope) -> Tensor<3> {
        let [b, t, d] = x.dims();
        let (h, hd) = (self.n_heads, d / self.n_heads);
        let heads = |w: &Param<Tensor<2>>| {
            x.clone()
                .matmul(w.val().unsqueeze()) // [B, T, d]
                .reshape([b, t, h, hd])
                .swap_dims(1, 2) // [B, H, T, hd]
        };
        let q = rope.apply(heads(&self.wq));
        let k = rope.apply(heads(&self.wk));
        let v = heads(&self.wv);
        let options = AttentionModuleOptions {
            is_causal: true,
            ..Default::default()
        };
        let ctx = attention(q, k, v, None, None, options); // [B, H, T, hd]
        ctx.swap_dims(1, 2)
            .reshape([b, t, d]) // [B, T, d]
            .matmul(self.wo.val().unsqueeze())
    }
}
