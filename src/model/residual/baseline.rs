//! The PreNorm residual (SPEC section 2): every earlier output enters with weight 1.

use burn::module::Module;
use burn::tensor::Tensor;

use super::{Sublayers, Trace};

#[derive(Module, Debug)]
pub struct Baseline {
    pub n_layers: usize,
}

impl Baseline {
    pub fn new(n_layers: usize) -> Self {
        Self { n_layers }
    }

    pub fn forward(
        &self,
        e: Tensor<3>,
        layers: &dyn Sublayers,
        mut trace: Option<&mut Trace>,
    ) -> Tensor<3> {
        let mut x = e;
        for l in 0..self.n_layers {
            let y = layers.apply(l, x.clone());
            if let Some(t) = trace.as_deref_mut() {
                t.layer(&x, &y);
            }
            x = x + y;
        }
        x
    }
}
