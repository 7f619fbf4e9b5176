//! mhc_attnres (ours; docs/method.md): mHC with its stream mixing `H_res` replaced by Full
//! AttnRes inside each stream. Stream `j` keeps its own depth sources, the embedding and what
//! each layer wrote into it: `v_{j,0} = e`, `v_{j,i+1} = H_post[j] y_i`. Before layer `l` its
//! state is a softmax over them, with a pseudo-query and key norm of its own:
//! `h_j = sum_i softmax_i(w_{l,j} . KeyNorm_{l,j}(v_{j,i})) v_{j,i}`. mHC's read and write
//! stay: from `RMSNorm(vec(h))`, `H_pre = sigmoid(a_pre z P_pre + b_pre)` and
//! `H_post = 2 sigmoid(a_post z P_post + b_post)`; the layer reads `x = sum_j H_pre[j] h_j`.
//! The output step is one more mixing step in every stream; `x_L` is the streams' sum.
//!
//! At init (`w = 0`, `P = 0`, mHC's biases) every stream is the plain mean of the same
//! sources and the read weights sum to 1, so the model is Full AttnRes at init (the output,
//! `m` times Full's, up to the final norm's eps). One code path, this definition.

use burn::module::{Module, Param};
use burn::tensor::Tensor;
use burn::tensor::activation::{sigmoid, softmax};

use super::attnres::mean_weights;
use super::mhc::{GATE_SCALE_INIT, initial_bias};
use super::streams;
use super::{Sublayers, Trace};
use crate::model::init::Init;
use crate::model::norm::{RmsNorm, rms_normalize};

#[derive(Module, Debug)]
pub struct MhcAttnRes {
    /// `L + 1` mixing steps: one before each layer, one for the output.
    pub mixes: Vec<StreamMix>,
    /// One per layer: mHC's read and write weights.
    pub gates: Vec<ReadWrite>,
    pub streams: usize,
}

/// One depth-mixing step in every stream at once.
#[derive(Module, Debug)]
pub struct StreamMix {
    /// `[m, d]`: stream `j`'s pseudo-query `w_{l,j}`, zero at init (the plain mean).
    pub query: Param<Tensor<2>>,
    /// `[m, d]`: stream `j`'s key-norm gain, one at init.
    pub key_gain: Param<Tensor<2>>,
}

/// mHC's read and write weights of one layer, without its mixing matrix.
#[derive(Module, Debug)]
pub struct ReadWrite {
    /// Over the flattened `m d` state.
    pub norm: RmsNorm,
    /// `[m d, 2 m]`, zero at init: read then write logits.
    pub proj: Param<Tensor<2>>,
    /// `[2 m]`: `b_pre`, `b_post` (mHC's init).
    pub bias: Param<Tensor<1>>,
    /// `[2]`: `a_pre`, `a_post`.
    pub scale: Param<Tensor<1>>,
}

impl MhcAttnRes {
    pub fn init(n_layers: usize, d: usize, m: usize, init: &Init) -> Self {
        Self {
            mixes: (0..=n_layers)
                .map(|_| StreamMix {
                    query: init.constant([m, d], 0.0),
                    key_gain: init.constant([m, d], 1.0),
                })
                .collect(),
            gates: (0..n_layers)
                .map(|l| ReadWrite {
                    norm: RmsNorm::init(m * d, init),
                    proj: init.constant([m * d, 2 * m], 0.0),
                    bias: init.from_values(initial_bias(l, m, 0, false), [2 * m]),
                    scale: init.constant([2], GATE_SCALE_INIT),
                })
                .collect(),
            streams: m,
        }
    }

    /// With a trace: each step's weights over its sources, averaged over tokens and streams,
    /// and how far the streams are apart as the next step mixes them.
    pub fn forward(
        &self,
        e: Tensor<3>,
        layers: &dyn Sublayers,
        mut trace: Option<&mut Trace>,
    ) -> Tensor<3> {
        let first = streams::expand(e, self.streams); // [B, T, m, d]
        let mut keys = vec![rms_normalize(first.clone())];
        let mut values = vec![first];
        for (l, gates) in self.gates.iter().enumerate() {
            let (h, alpha) = self.mixes[l].forward(&values, &keys); // [B, T, m, d], [B, T, m, K]
            let (read, write) = gates.weights(&h); // [B, T, m, 1] each
            let x = streams::read(&h, read); // [B, T, d]
            let y = layers.apply(l, x.clone());
            if let Some(tr) = trace.as_deref_mut() {
                if l > 0 {
                    tr.streams(&h);
                }
                tr.layer(&x, &y);
                tr.depth(mean_weights(alpha));
            }
            let v = write * y.unsqueeze_dim::<4>(2); // [B, T, m, d]
            keys.push(rms_normalize(v.clone()));
            values.push(v);
        }
        let (h, alpha) = self.mixes[self.gates.len()].forward(&values, &keys);
        if let Some(tr) = trace {
            tr.streams(&h);
            tr.depth(mean_weights(alpha));
        }
        streams::collapse(h)
    }
}

impl StreamMix {
    /// `values`: `K` sources `[B, T, m, d]`; `keys`: the same normalised without gain.
    /// Returns every stream's state `[B, T, m, d]` and its weights `[B, T, m, K]`.
    pub fn forward(&self, values: &[Tensor<4>], keys: &[Tensor<4>]) -> (Tensor<4>, Tensor<4>) {
        let [_, _, m, d] = values[0].dims();
        // `w . (g * r(v)) = (w * g) . r(v)`: the key norm's gain folded into the query.
        let query = (self.query.val() * self.key_gain.val()).reshape([1, 1, m, d]);
        let logits = keys
            .iter()
            .map(|key| (key.clone() * query.clone()).sum_dim(3)) // [B, T, m, 1]
            .collect();
        let alpha = softmax(Tensor::cat(logits, 3), 3); // [B, T, m, K]
        let h = values
            .iter()
            .enumerate()
            .map(|(i, v)| v.clone() * alpha.clone().narrow(3, i, 1)) // [B, T, m, d]
            .reduce(|acc, term| acc + term)
            .expect("a mixing step has at least one source (the embedding)");
        (h, alpha)
    }
}

impl ReadWrite {
    /// The read and write weights `[B, T, m, 1]` for the streams' state `h` `[B, T, m, d]`.
    pub fn weights(&self, h: &Tensor<4>) -> (Tensor<4>, Tensor<4>) {
        let [b, t, m, _] = h.dims();
        let raw = self
            .norm
            .forward(streams::flatten(h))
            .matmul(self.proj.val().unsqueeze()); // [B, T, 2m]
        let gate = |i: usize| {
            let scale = self.scale.val().narrow(0, i, 1).reshape([1, 1, 1]);
            let bias = self.bias.val().narrow(0, i * m, m).reshape([1, 1, m]);
            raw.clone().narrow(2, i * m, m) * scale + bias // [B, T, m]
        };
        let read = sigmoid(gate(0)).reshape([b, t, m, 1]);
        let write = (sigmoid(gate(1)) * 2.0).reshape([b, t, m, 1]);
        (read, write)
    }
}
