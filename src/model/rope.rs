//! Rotary position embedding, base 10000, half-split pairs as in the HF Llama code.

use burn::module::Module;
use burn::tensor::{Device, Tensor, TensorData};

use super::kernels::rotary::rotary;

pub const ROPE_BASE: f64 = 10_000.0;

/// Precomputed cos/sin tables of shape `[T, head_dim]` (each half repeated).
/// Constant tensors, not parameters: they are neither trained nor saved.
#[derive(Module, Debug)]
pub struct Rope {
    cos: Tensor<2>,
    sin: Tensor<2>,
}

impl Rope {
    pub fn new(context: usize, head_dim: usize, device: &Device) -> Self {
        let half = head_dim / 2;
        let mut cos = Vec::with_capacity(context * head_dim);
        let mut sin = Vec::with_capacity(context * head_dim);
        for t in 0..context {
            for j in 0..head_dim {
                let i = j % half;
                let freq = ROPE_BASE.powf(-2.0 * i as f64 / head_dim as f64);
                let angle = t as f64 * freq;
                cos.push(angle.cos() as f32);
                sin.push(angle.sin() as f32);
            }
        }
        Self {
            cos: Tensor::from_data(TensorData::new(cos, [context, head_dim]), device),
            sin: Tensor::from_data(TensorData::new(sin, [context, head_dim]), device),
        }
    }

    /// Rotates `x` of shape `[B, T, H, hd]`: `x * cos + rotate_half(x) * sin`, as one
    /// operation (`kernels::rotary`).
    pub fn apply(&self, x: Tensor<4>) -> Tensor<4> {
        let t = x.dims()[1];
        let cos = self.cos.clone().narrow(0, 0, t); // [T, hd]
        let sin = self.sin.clone().narrow(0, 0, t);
        rotary(x, cos, sin)
    }
}
