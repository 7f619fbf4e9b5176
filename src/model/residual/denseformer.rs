//! DenseFormer (arXiv 2402.02622): after each Transformer block, a static weighted average of
//! the embedding and every block output so far. Weights start at identity, so step 0 is the
//! baseline.

use burn::module::{Module, Param};
use burn::tensor::Tensor;

use super::{Sublayers, Trace};
use crate::model::init::Init;

#[derive(Module, Debug)]
pub struct DenseFormer {
    /// Block `i` has `i + 2` weights over `[e, h_0, ..., h_i]`.
    pub weights: Vec<Param<Tensor<1>>>,
}

impl DenseFormer {
    pub fn init(n_blocks: usize, init: &Init) -> Self {
        let identity = |i: usize| {
            let mut w = vec![0.0; i + 2];
            w[i + 1] = 1.0;
            init.from_values(w, [i + 2])
        };
        Self {
            weights: (0..n_blocks).map(identity).collect(),
        }
    }

    pub fn forward(
        &self,
        e: Tensor<3>,
        layers: &dyn Sublayers,
        mut trace: Option<&mut Trace>,
    ) -> Tensor<3> {
        let mut outputs = vec![e.clone()];
        let mut x = e;
        for (i, weights) in self.weights.iter().enumerate() {
            for l in [2 * i, 2 * i + 1] {
                let y = layers.apply(l, x.clone());
                if let Some(t) = trace.as_deref_mut() {
                    t.layer(&x, &y);
                }
                x = x + y;
            }
            outputs.push(x);
            let k = outputs.len();
            let w = weights.val();
            if let Some(t) = trace.as_deref_mut() {
                t.depth(w.clone());
            }
            let stacked = Tensor::stack::<4>(outputs.clone(), 0); // [K, B, T, d]
            x = (stacked * w.reshape([k, 1, 1, 1]))
                .sum_dim(0)
                .squeeze_dim::<3>(0); // [B, T, d]
        }
        x
    }
}
