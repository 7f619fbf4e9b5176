//! Hyper-connections (Zhu et al., arXiv 2409.19606; SPEC section 6, docs/method.md): `m`
//! residual streams with, per layer, a width connection (the layer reads `sum_i A_m[i] h_i`
//! and the streams mix by `A_r`) and a depth connection (the output enters stream `j` with
//! weight `B[j]`). Static weights, plus with `dynamic` the input-dependent terms
//! `s * tanh(RMSNorm(h_i) W)`. At init (`A_m` one-hot at stream `l mod m`, `A_r = I`,
//! `B = 1`, `W = 0`) every stream equals the baseline's, and with one stream the family is
//! the baseline exactly.

use burn::module::{Module, Param};
use burn::tensor::Tensor;

use super::streams::{self, StreamWeights};
use super::{Sublayers, Trace};
use crate::model::init::Init;
use crate::model::kernels::linear::linear;
use crate::model::norm::RmsNorm;

/// The `s_alpha` and `s_beta` scales of the dynamic terms at init (ours; the paper's code
/// starts them small so that the static connection dominates early).
const DYNAMIC_SCALE_INIT: f32 = 0.01;

#[derive(Module, Debug)]
pub struct HyperConnections {
    pub layers: Vec<HcLayer>,
    pub streams: usize,
}

#[derive(Module, Debug)]
pub struct HcLayer {
    /// `[m]`: `A_m`, the static read weights.
    pub read: Param<Tensor<1>>,
    /// `[m, m]`: `A_r`, entry `[i, j]` the weight of stream `i` in the new stream `j`.
    pub mix: Param<Tensor<2>>,
    /// `[m]`: `B`, the static write weights.
    pub write: Param<Tensor<1>>,
    pub dynamic: Option<HcDynamic>,
}

#[derive(Module, Debug)]
pub struct HcDynamic {
    pub norm: RmsNorm,
    /// `[d, m + 2]`, zero at init: per stream, its read logit, its write logit and its `m`
    /// mixing logits.
    pub proj: Param<Tensor<2>>,
    /// `[2]`: `s_alpha` (read and mix) and `s_beta` (write).
    pub scale: Param<Tensor<1>>,
}

impl HyperConnections {
    pub fn init(n_layers: usize, d: usize, m: usize, dynamic: bool, init: &Init) -> Self {
        let layers = (0..n_layers)
            .map(|l| {
                let one_hot: Vec<f32> = (0..m).map(|i| f32::from(i == l % m)).collect();
                let identity: Vec<f32> = (0..m * m).map(|k| f32::from(k / m == k % m)).collect();
                HcLayer {
                    read: init.from_values(one_hot, [m]),
                    mix: init.from_values(identity, [m, m]),
                    write: init.constant([m], 1.0),
                    dynamic: dynamic.then(|| HcDynamic {
                        norm: RmsNorm::init(d, init),
                        proj: init.constant([d, m + 2], 0.0),
                        scale: init.constant([2], DYNAMIC_SCALE_INIT),
                    }),
                }
            })
            .collect();
        Self { layers, streams: m }
    }

    pub fn forward(
        &self,
        e: Tensor<3>,
        layers: &dyn Sublayers,
        trace: Option<&mut Trace>,
    ) -> Tensor<3> {
        let n = self.layers.len();
        streams::forward(e, self.streams, n, layers, trace, |l, h| {
            self.layers[l].weights(h)
        })
    }
}

impl HcLayer {
    /// The weights for the state `h` `[B, T, m, d]` (broadcast shapes when static).
    fn weights(&self, h: &Tensor<4>) -> StreamWeights {
        let m = self.write.dims()[0];
        let read = self.read.val().reshape([1, 1, m, 1]);
        let mix = self.mix.val().reshape([1, 1, m, m]);
        let write = self.write.val().reshape([1, 1, m, 1]);
        let Some(dy) = &self.dynamic else {
            return (read, mix.swap_dims(2, 3), write);
        };
        let [b, t, _, d] = h.dims();
        let normed = dy.norm.forward(h.clone()).reshape([b, t * m, d]); // [B, T m, d]
        // One 2-D product over every token's streams: as a 4-D `matmul` it was one tiny
        // product per token.
        let logits = linear(normed, dy.proj.val()) // [B, T m, m + 2]
            .reshape([b, t, m, m + 2])
            .tanh();
        let s_alpha = dy.scale.val().narrow(0, 0, 1).reshape([1, 1, 1, 1]);
        let s_beta = dy.scale.val().narrow(0, 1, 1).reshape([1, 1, 1, 1]);
        let read = read + logits.clone().narrow(3, 0, 1) * s_alpha.clone(); // [B, T, m, 1]
        let write = write + logits.clone().narrow(3, 1, 1) * s_beta; // [B, T, m, 1]
        let mix = mix + logits.narrow(3, 2, m) * s_alpha; // [B, T, m(from), m(to)]
        (read, mix.swap_dims(2, 3), write)
    }
}
