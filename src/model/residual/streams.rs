//! The multi-stream residual shared by hyper-connections, mHC and mHC-lite: the hidden state
//! is `m` residual streams, `[B, T, m, d]`, all equal to the embedding at the start. Before a
//! layer, one weighted sum of the streams is its input; after it, the streams are mixed by an
//! `m x m` matrix and the layer's output is added into each with its own weight. The output
//! step sums the streams.

use burn::tensor::Tensor;

use super::{Sublayers, Trace};
use crate::model::kernels::streams::{stream_read, stream_update};

/// Read `[B, T, m, 1]`, mix `[B, T, m, m]` (row `j`: what stream `j` takes from each) and
/// write `[B, T, m, 1]` weights, or shapes that broadcast to them.
pub type StreamWeights = (Tensor<4>, Tensor<4>, Tensor<4>);

/// The whole multi-stream forward: `m` copies of `e`, then for each of `n_layers` layers
/// the family's `weights(l, h)`, the read, the layer and the update; the streams' sum at the
/// end. With a trace, each layer's read weights averaged over tokens are its depth weights,
/// and how far the streams are apart after it is recorded.
pub fn forward(
    e: Tensor<3>,
    m: usize,
    n_layers: usize,
    layers: &dyn Sublayers,
    mut trace: Option<&mut Trace>,
    weights: impl Fn(usize, &Tensor<4>) -> StreamWeights,
) -> Tensor<3> {
    let [b, t, _] = e.dims();
    let mut h = expand(e, m); // [B, T, m, d]
    for l in 0..n_layers {
        let (read_w, mix, write) = weights(l, &h);
        let x = read(&h, read_w.clone());
        let y = layers.apply(l, x.clone());
        if let Some(tr) = trace.as_deref_mut() {
            tr.layer(&x, &y);
            let mean = read_w.expand([b, t, m, 1]).detach().mean_dims(&[0, 1]);
            tr.depth(mean.reshape([m]));
        }
        h = update(h, mix, write, y);
        if let Some(tr) = trace.as_deref_mut() {
            tr.streams(&h);
        }
    }
    collapse(h)
}

/// `e` `[B, T, d]` copied into `m` streams: `[B, T, m, d]`.
pub fn expand(e: Tensor<3>, m: usize) -> Tensor<4> {
    e.unsqueeze_dim::<4>(2).repeat_dim(2, m)
}

/// The layer input `sum_i read_i h_i`: `read` `[B, T, m, 1]` (or broadcast), `h`
/// `[B, T, m, d]` -> `[B, T, d]`; one fused operation (`kernels::streams`).
pub fn read(h: &Tensor<4>, read: Tensor<4>) -> Tensor<3> {
    let [b, t, m, d] = h.dims();
    let r = read.expand([b, t, m, 1]).reshape([b * t, m]); // [B, T, m, 1] -> [BT, m]
    let h = h.clone().reshape([b * t, m, d]); // [B, T, m, d] -> [BT, m, d]
    stream_read(h, r).reshape([b, t, d]) // [BT, d] -> [B, T, d]
}

/// `h'_j = sum_i mix_ji h_i + write_j y`: `mix` `[B, T, m, m]` (row `j` is what stream `j`
/// takes from each stream, or broadcast), `write` `[B, T, m, 1]`, `y` `[B, T, d]`; one
/// fused operation (`kernels::streams`).
pub fn update(h: Tensor<4>, mix: Tensor<4>, write: Tensor<4>, y: Tensor<3>) -> Tensor<4> {
    let [b, t, m, d] = h.dims();
    let mix = mix.expand([b, t, m, m]).reshape([b * t, m, m]); // [BT, m, m]
    let w = write.expand([b, t, m, 1]).reshape([b * t, m]); // [B, T, m, 1] -> [BT, m]
    let h = h.reshape([b * t, m, d]); // [B, T, m, d] -> [BT, m, d]
    let y = y.reshape([b * t, d]); // [B, T, d] -> [BT, d]
    stream_update(h, mix, w, y).reshape([b, t, m, d]) // [BT, m, d] -> [B, T, m, d]
}

/// The output step: the sum of the streams, `[B, T, d]`.
pub fn collapse(h: Tensor<4>) -> Tensor<3> {
    let [b, t, _, d] = h.dims();
    h.sum_dim(2).reshape([b, t, d])
}

/// `[B, T, m, d]` -> `[B, T, m * d]`, the flattened state mHC scores its coefficients from.
pub fn flatten(h: &Tensor<4>) -> Tensor<3> {
    let [b, t, m, d] = h.dims();
    h.clone().reshape([b, t, m * d])
}
