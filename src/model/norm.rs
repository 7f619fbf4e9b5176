//! RMSNorm with a learnable gain (eps 1e-6, SPEC section 7), computed in f32.

use burn::module::{Module, Param};
use burn::tensor::Tensor;

use super::init::Init;
use super::kernels::norm::rms_norm;

pub const RMS_EPS: f64 = 1e-6;

#[derive(Module, Debug)]
pub struct RmsNorm {
    pub gain: Param<Tensor<1>>,
}

impl RmsNorm {
    pub fn init(d: usize, init: &Init) -> Self {
        Self {
            gain: init.constant([d], 1.0),
        }
    }

    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let dims = x.dims();
        let d = dims[D - 1];
        let rows = x.shape().num_elements() / d;
        rms_norm(x.reshape([rows, d]), self.gain.val()).reshape(dims) // [N, d] -> dims
    }
}

/// `x / rms(x)` over the last dimension, with no gain.
pub fn rms_normalize<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    let rms = (x.clone().square().mean_dim(D - 1) + RMS_EPS).sqrt();
    x / rms
}

/// RMS over the last dimension, averaged over every other position: a probe statistic.
pub fn mean_rms<const D: usize>(x: Tensor<D>) -> Tensor<1> {
    x.square().mean_dim(D - 1).sqrt().mean()
}
