//! The PreNorm residual (SPEC section 2): every earlier output enters with weight 1.

use burn::module::Module;
use burn::tensor::Tensor;

use super::{Sublayers, Trace};
use crate::model::kernels::norm::add_rms_norm;

#[derive(Module, Debug)]
pub struct Baseline {
    pub n_layers: usize,
}

impl Baseline {
    pub fn new(n_layers: usize) -> Self {
        Self { n_layers }
    }

    /// Each residual add and the next layer's PreNorm are one operation
    /// (`kernels::norm::add_rms_norm`) where the layers have their PreNorms.
    pub fn forward(
        &self,
        e: Tensor<3>,
        layers: &dyn Sublayers,
        mut trace: Option<&mut Trace>,
    ) -> Tensor<3> {
        let [b, t, d] = e.dims();
        let mut x = e;
        // `x` through layer `l`'s PreNorm, where the add before it made it.
        let mut normed: Option<Tensor<3>> = None;
        for l in 0..self.n_layers {
            let y = match normed.take() {
                Some(h) => layers.apply_normed(l, h),
                None => layers.apply(l, x.clone()),
            };
            if let Some(t) = trace.as_deref_mut() {
                t.layer(&x, &y);
            }
            let next_norm = (l + 1 < self.n_layers)
                .then(|| layers.norm(l + 1))
                .flatten();
            x = match next_norm {
                Some(norm) => {
                    let [x2, y2] = [x, y].map(|v| v.reshape([b * t, d])); // [BT, d]
                    let (sum, h) = add_rms_norm(x2, y2, norm.gain.val());
                    normed = Some(h.reshape([b, t, d])); // [BT, d] -> [B, T, d]
                    sum.reshape([b, t, d])
                }
                None => x + y,
            };
        }
        x
    }
}
