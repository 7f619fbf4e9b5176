//! Manifold-constrained hyper-connections, mHC (arXiv 2512.24880; SPEC section 6,
//! docs/method.md), and the frame mHC-lite shares. `m` residual streams; per layer, from
//! the RMS-normalised flattened state `x~ = RMSNorm(vec(h))` `[m d]`, one projection gives
//! the read weights `H_pre = sigmoid(a_pre x~ P_pre + b_pre)`, the write weights
//! `H_post = 2 sigmoid(a_post x~ P_post + b_post)` and the stream mixing `H_res`, a doubly
//! stochastic matrix: Sinkhorn-Knopp on `exp(a_res x~ P_res + b_res)` here, a convex
//! combination of permutations in mHC-lite (`mhc_lite.rs`). The layer reads
//! `x = sum_i H_pre[i] h_i`, and `h'_j = sum_i H_res[j, i] h_i + H_post[j] f(x)`.
//!
//! At init (`P = 0`, read weights 0.7 on stream `l mod m` and the rest shared by the others,
//! `b_post = 0` so each write weight is 1, `H_res` 0.9 identity) all streams equal the
//! baseline's stream and the output, their sum, is `m` times the baseline's.

use burn::module::{Module, Param};
use burn::tensor::Tensor;
use burn::tensor::activation::sigmoid;

use super::mhc_lite::Permutations;
use super::streams::{self, StreamWeights};
use super::{Sublayers, Trace};
use crate::model::init::Init;
use crate::model::norm::RmsNorm;

/// The read weight of a layer's own stream at init (ours; the rest share `1 - READ_MAIN`).
const READ_MAIN: f32 = 0.7;

/// How much of `H_res` is the identity at init (ours): each stream keeps 0.9 of itself.
/// With `H_res` uniform (the first init) every layer averaged the streams back together,
/// so they never came apart; near the identity, the residual identity mapping mHC is built
/// to keep holds from the start.
const KEEP_OWN: f32 = 0.9;

/// `a_pre`, `a_post`, `a_res` at init (ours: small, so the biases rule the first steps).
pub(super) const GATE_SCALE_INIT: f32 = 0.01;

#[derive(Module, Debug)]
pub struct Mhc {
    pub layers: Vec<MhcLayer>,
    pub streams: usize,
    /// Sinkhorn-Knopp iterations (mHC); unused by mHC-lite.
    pub sinkhorn_iters: usize,
    /// mHC-lite's permutation matrices; `None` for mHC.
    pub lite: Option<Permutations>,
}

#[derive(Module, Debug)]
pub struct MhcLayer {
    /// Over the flattened `m d` state.
    pub norm: RmsNorm,
    /// `[m d, 2 m + R]`, zero at init: read, write and `R` mixing logits (`R = m^2` for
    /// mHC, `m!` for mHC-lite).
    pub proj: Param<Tensor<2>>,
    /// `[2 m + R]`: `b_pre`, `b_post`, `b_res`.
    pub bias: Param<Tensor<1>>,
    /// `[3]`: `a_pre`, `a_post`, `a_res`.
    pub scale: Param<Tensor<1>>,
}

impl Mhc {
    /// mHC with `sinkhorn_iters`, or mHC-lite when `lite`.
    pub fn init(
        n_layers: usize,
        d: usize,
        m: usize,
        sinkhorn_iters: usize,
        lite: bool,
        init: &Init,
    ) -> Self {
        let lite = lite.then(|| Permutations::new(m, init));
        let r = lite.as_ref().map_or(m * m, Permutations::count);
        let layers = (0..n_layers)
            .map(|l| MhcLayer {
                norm: RmsNorm::init(m * d, init),
                proj: init.constant([m * d, 2 * m + r], 0.0),
                bias: init.from_values(initial_bias(l, m, r, lite.is_some()), [2 * m + r]),
                scale: init.constant([3], GATE_SCALE_INIT),
            })
            .collect();
        Self {
            layers,
            streams: m,
            sinkhorn_iters,
            lite,
        }
    }

    pub fn forward(
        &self,
        e: Tensor<3>,
        layers: &dyn Sublayers,
        trace: Option<&mut Trace>,
    ) -> Tensor<3> {
        let n = self.layers.len();
        streams::forward(e, self.streams, n, layers, trace, |l, h| {
            self.weights(&self.layers[l], h)
        })
    }

    /// The weights for the state `h`; the mixing matrix is doubly stochastic.
    fn weights(&self, layer: &MhcLayer, h: &Tensor<4>) -> StreamWeights {
        let m = self.streams;
        let [b, t, _, _] = h.dims();
        let raw = layer
            .norm
            .forward(streams::flatten(h))
            .matmul(layer.proj.val().unsqueeze()); // [B, T, 2m + R]
        let r = raw.dims()[2] - 2 * m;
        let scale = |i: usize| layer.scale.val().narrow(0, i, 1).reshape([1, 1, 1]);
        let bias =
            |start: usize, len: usize| layer.bias.val().narrow(0, start, len).reshape([1, 1, len]);
        let part = |i: usize, start: usize, len: usize| {
            raw.clone().narrow(2, start, len) * scale(i) + bias(start, len) // [B, T, len]
        };
        let read = sigmoid(part(0, 0, m)).reshape([b, t, m, 1]);
        let write = (sigmoid(part(1, m, m)) * 2.0).reshape([b, t, m, 1]);
        let logits = part(2, 2 * m, r);
        let mix = match &self.lite {
            Some(perms) => perms.combine(logits), // [B, T, m, m]
            None => sinkhorn(logits.reshape([b, t, m, m]), self.sinkhorn_iters),
        };
        (read, mix, write)
    }
}

/// `b_pre`, `b_post`, `b_res` of layer `l`: layer `l` reads stream `l mod m` with weight
/// `READ_MAIN` and each other with `(1 - READ_MAIN) / (m - 1)` (they sum to 1), every write
/// weight is `2 sigmoid(0) = 1`, and `H_res` is `KEEP_OWN` identity: mHC's diagonal logits
/// make each row `KEEP_OWN` on the diagonal and the rest shared (already doubly
/// stochastic, so Sinkhorn leaves it), mHC-lite's identity permutation (the first) gets
/// weight `KEEP_OWN`. Both break the streams' symmetry: with every read weight `1/m` all
/// streams get the same gradient, and with a uniform `H_res` every layer averages them
/// back together; either way they stayed equal for ever (seen: mHC and mHC-lite trained to
/// the same losses to four digits, the baseline's).
pub(super) fn initial_bias(l: usize, m: usize, r: usize, lite: bool) -> Vec<f32> {
    let logit = |p: f32| (p / (1.0 - p)).ln();
    let other = (1.0 - READ_MAIN) / (m - 1) as f32;
    // Against `n` other logits at 0: `e^z / (e^z + n) = KEEP_OWN`.
    let keep = |n: usize| (KEEP_OWN * n as f32 / (1.0 - KEEP_OWN)).ln();
    (0..2 * m + r)
        .map(|k| match k {
            k if k < m && k == l % m => logit(READ_MAIN),
            k if k < m => logit(other),
            k if k < 2 * m => 0.0,
            k if lite => {
                if k == 2 * m {
                    keep(r - 1)
                } else {
                    0.0
                }
            }
            k => {
                let (row, col) = ((k - 2 * m) / m, (k - 2 * m) % m);
                if row == col { keep(m - 1) } else { 0.0 }
            }
        })
        .collect()
}

/// Sinkhorn-Knopp: `exp(logits)` `[B, T, m, m]` scaled to unit row and column sums by
/// `iters` rounds of row then column normalisation (the last is a column step, so columns
/// sum to 1 exactly and rows to within the iteration's convergence); one fused operation
/// (`kernels::sinkhorn`).
pub fn sinkhorn(logits: Tensor<4>, iters: usize) -> Tensor<4> {
    crate::model::kernels::sinkhorn::sinkhorn(logits, iters)
}
