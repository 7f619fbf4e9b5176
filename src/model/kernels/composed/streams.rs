//! The multi-stream families' fused operations composed of primitive tensor operations:
//! mHC's Sinkhorn-Knopp (`kernels::sinkhorn`) and the streams' read and update
//! (`kernels::streams`).

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, TensorMetadata};
use burn::tensor::Shape;

/// Sinkhorn-Knopp: `exp(logits - max)` `[..., m, m]` (the max over each matrix) and the
/// result of `iters` rounds of dividing by each row's sum, then by each column's.
pub fn sinkhorn<B: Backend>(
    logits: FloatTensor<B>,
    iters: usize,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let dims = logits.shape().num_dims();
    let max = B::float_max_dim(B::float_max_dim(logits.clone(), dims - 1), dims - 2);
    let exp = B::float_exp(B::float_sub(logits, max));
    let mut p = exp.clone();
    for _ in 0..iters {
        for dim in [dims - 1, dims - 2] {
            p = B::float_div(p.clone(), B::float_sum_dim(p, dim));
        }
    }
    (p, exp)
}

/// The gradient of [`sinkhorn`] with respect to the logits, by the formulas of
/// `sinkhorn::rows::backward`: the rounds again from `exp`, then back through each
/// division as burn's autodiff takes it, then through `exp`.
pub fn sinkhorn_backward<B: Backend>(
    g: FloatTensor<B>,
    exp: FloatTensor<B>,
    iters: usize,
) -> FloatTensor<B> {
    let dims = exp.shape().num_dims();
    let mut steps = Vec::with_capacity(2 * iters);
    let mut p = exp.clone();
    for _ in 0..iters {
        for dim in [dims - 1, dims - 2] {
            let sum = B::float_sum_dim(p.clone(), dim);
            steps.push((p.clone(), sum.clone(), dim));
            p = B::float_div(p, sum);
        }
    }
    let mut g = g;
    for (p, sum, dim) in steps.into_iter().rev() {
        let square = B::float_mul(sum.clone(), sum.clone());
        let per_entry = B::float_mul(g.clone(), B::float_div(B::float_neg(p), square));
        let through_sum = B::float_sum_dim(per_entry, dim);
        g = B::float_add(B::float_mul(g, B::float_recip(sum)), through_sum);
    }
    B::float_mul(g, exp)
}

/// `[N, m]` -> `[N, m, 1]`, or `[N, d]` -> `[N, 1, d]` (`at` 2 or 1).
fn per_token<B: Backend>(t: FloatTensor<B>, at: usize) -> FloatTensor<B> {
    let [n, k] = t.shape().dims::<2>();
    let shape = if at == 2 { [n, k, 1] } else { [n, 1, k] };
    B::float_reshape(t, Shape::new(shape))
}

/// `[N, 1, k]` or `[N, k, 1]` -> `[N, k]`.
fn per_token_back<B: Backend>(t: FloatTensor<B>) -> FloatTensor<B> {
    let [n, a, b] = t.shape().dims::<3>();
    B::float_reshape(t, Shape::new([n, a * b]))
}

/// The multi-stream read `sum_i r_i h_i`: `h` `[N, m, d]`, `r` `[N, m]` -> `[N, d]`.
pub fn stream_read<B: Backend>(h: FloatTensor<B>, r: FloatTensor<B>) -> FloatTensor<B> {
    per_token_back::<B>(B::float_sum_dim(B::float_mul(h, per_token::<B>(r, 2)), 1))
}

/// The gradients of [`stream_read`]: `dh_i = r_i g`, `dr_i = g . h_i`.
pub fn stream_read_backward<B: Backend>(
    g: FloatTensor<B>,
    h: FloatTensor<B>,
    r: FloatTensor<B>,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let g = per_token::<B>(g, 1); // [N, 1, d]
    let dh = B::float_mul(g.clone(), per_token::<B>(r, 2));
    let dr = per_token_back::<B>(B::float_sum_dim(B::float_mul(h, g), 2));
    (dh, dr)
}

/// The multi-stream update `h'_j = sum_i M_ji h_i + w_j y`: `h` `[N, m, d]`, `mix`
/// `[N, m, m]`, `w` `[N, m]`, `y` `[N, d]` -> `[N, m, d]`.
pub fn stream_update<B: Backend>(
    h: FloatTensor<B>,
    mix: FloatTensor<B>,
    w: FloatTensor<B>,
    y: FloatTensor<B>,
) -> FloatTensor<B> {
    let written = B::float_mul(per_token::<B>(w, 2), per_token::<B>(y, 1));
    B::float_add(B::float_matmul(mix, h), written)
}

/// The gradients of [`stream_update`]: `dh = M^T g`, `dM = g h^T`, `dw_j = g_j . y`,
/// `dy = sum_j w_j g_j`.
pub fn stream_update_backward<B: Backend>(
    g: FloatTensor<B>,
    h: FloatTensor<B>,
    mix: FloatTensor<B>,
    w: FloatTensor<B>,
    y: FloatTensor<B>,
) -> (
    FloatTensor<B>,
    FloatTensor<B>,
    FloatTensor<B>,
    FloatTensor<B>,
) {
    let dh = B::float_matmul(B::float_swap_dims(mix, 1, 2), g.clone());
    let dmix = B::float_matmul(g.clone(), B::float_swap_dims(h, 1, 2));
    let dw = per_token_back::<B>(B::float_sum_dim(
        B::float_mul(g.clone(), per_token::<B>(y, 1)),
        2,
    ));
    let dy = per_token_back::<B>(B::float_sum_dim(B::float_mul(g, per_token::<B>(w, 2)), 1));
    (dh, dmix, dw, dy)
}
