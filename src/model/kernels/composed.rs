//! The fused operations composed of primitive tensor operations, for any backend: what
//! flex, CUDA and bf16 run, and what the fused kernels are tested against.

use burn::backend::{Backend, TensorMetadata, tensor::FloatTensor};
use burn::tensor::{Shape, TensorData};

/// `softmax(q k^T / sqrt(hd) + causal mask)` `[B, H, T, T]` and the log-sum-exp of each row
/// `[B, H, T, 1]`.
fn causal_probabilities<B: Backend>(
    q: FloatTensor<B>,
    k: FloatTensor<B>,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let [b, h, t, hd] = q.shape().dims::<4>();
    let device = q.device();
    let scores = B::float_mul_scalar(
        B::float_matmul(q, B::float_transpose(k)),
        (1.0 / (hd as f64).sqrt()).into(),
    ); // [B, H, T, T]
    let future: Vec<bool> = (0..t * t).map(|i| i % t > i / t).collect();
    let mask = B::bool_from_data(TensorData::new(future, [1, 1, t, t]), &device);
    let mask = B::bool_expand(mask, Shape::new([b, h, t, t]));
    let scores = B::float_mask_fill(scores, mask, f32::NEG_INFINITY.into());
    // Every row has its diagonal unmasked, so its max is finite.
    let max = B::float_max_dim(scores.clone(), 3); // [B, H, T, 1]
    let exp = B::float_exp(B::float_sub(scores, max.clone()));
    let sum = B::float_sum_dim(exp.clone(), 3); // [B, H, T, 1]
    let lse = B::float_add(B::float_log(sum.clone()), max);
    (B::float_div(exp, sum), lse)
}

pub fn causal_attention<B: Backend>(
    q: FloatTensor<B>,
    k: FloatTensor<B>,
    v: FloatTensor<B>,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let (p, lse) = causal_probabilities::<B>(q, k);
    (B::float_matmul(p, v), lse)
}

/// With `P` recomputed from `q` and `k`: `dV = P^T dO`, `dS = P (dO V^T - rowsum(dO O))`,
/// `dQ = dS K / sqrt(hd)`, `dK = dS^T Q / sqrt(hd)`.
pub fn causal_attention_backward<B: Backend>(
    grad: FloatTensor<B>,
    q: FloatTensor<B>,
    k: FloatTensor<B>,
    v: FloatTensor<B>,
    out: FloatTensor<B>,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
    let hd = q.shape().dims::<4>()[3];
    let scale = 1.0 / (hd as f64).sqrt();
    let (p, _) = causal_probabilities::<B>(q.clone(), k.clone());
    let dv = B::float_matmul(B::float_transpose(p.clone()), grad.clone());
    let dp = B::float_matmul(grad.clone(), B::float_transpose(v)); // [B, H, T, T]
    let row = B::float_sum_dim(B::float_mul(grad, out), 3); // [B, H, T, 1]
    let ds = B::float_mul(p, B::float_sub(dp, row));
    let dq = B::float_mul_scalar(B::float_matmul(ds.clone(), k), scale.into());
    let dk = B::float_mul_scalar(B::float_matmul(B::float_transpose(ds), q), scale.into());
    (dq, dk, dv)
}
