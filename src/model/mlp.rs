//! SwiGLU feed-forward block with no biases (SPEC section 7).

use super::kernels::linear::linear;
use super::kernels::swiglu::swiglu;
use burn::module::{Module, Param};
use burn::tensor::Tensor;

use super::init::Init;

#[derive(Module, Debug)]
pub struct Mlp {
    /// `[d, h]`: gate and up projections.
    pub w_gate: Param<Tensor<2>>,
    pub w_up: Param<Tensor<2>>,
    /// `[h, d]`: the residual-branch output projection.
    pub w_down: Param<Tensor<2>>,
}

impl Mlp {
    pub fn init(path: &str, d: usize, hidden: usize, out_std: f64, init: &Init) -> Self {
        Self {
            w_gate: init.normal(&format!("{path}.w_gate"), [d, hidden], 0.02),
            w_up: init.normal(&format!("{path}.w_up"), [d, hidden], 0.02),
            w_down: init.normal(&format!("{path}.w_down"), [hidden, d], out_std),
        }
    }

    /// `x`: `[B, T, d]` -> `[B, T, d]`.
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let gate = linear(x.clone(), self.w_gate.val()); // [B, T, h]
        let up = linear(x, self.w_up.val()); // [B, T, h]
        linear(swiglu(gate, up), self.w_down.val()) // [B, T, d]
    }
}
