//! The fused operations composed of primitive tensor operations, for any backend: what
//! flex, CUDA and bf16 run, and what the fused kernels are tested against.

use burn::backend::tensor::{BoolTensor, FloatTensor};
use burn::backend::{Backend, BoolDType, IntDType, TensorMetadata};
use burn::tensor::{Shape, Slice};

use super::adamw::AdamWStep;
use crate::model::norm::RMS_EPS;

mod mix;
mod streams;
pub(super) use mix::first_dim;
pub use mix::{accumulate_slots, depth_mix, depth_mix_backward, source_grad, stack_push};
pub use streams::{
    sinkhorn, sinkhorn_backward, stream_read, stream_read_backward, stream_update,
    stream_update_backward,
};

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
    let mask = B::bool_expand(future_mask::<B>(t, &device), Shape::new([b, h, t, t]));
    let scores = B::float_mask_fill(scores, mask, f32::NEG_INFINITY.into());
    // Every row has its diagonal unmasked, so its max is finite.
    let max = B::float_max_dim(scores.clone(), 3); // [B, H, T, 1]
    let exp = B::float_exp(B::float_sub(scores, max.clone()));
    let sum = B::float_sum_dim(exp.clone(), 3); // [B, H, T, 1]
    let lse = B::float_add(B::float_log(sum.clone()), max);
    (B::float_div(exp, sum), lse)
}

/// `[1, 1, T, T]`, true where the key comes after the query (column > row), made on the
/// device: made on the host, it was a copy per call that on CUDA waits for the GPU's queue
/// to drain (libtorch copies pageable host memory synchronously), twice per layer a step.
fn future_mask<B: Backend>(t: usize, device: &B::Device) -> BoolTensor<B> {
    let positions = |shape: [usize; 2]| {
        let p = B::int_arange(0..t as i64, device, IntDType::I64);
        B::int_expand(B::int_reshape(p, Shape::new(shape)), Shape::new([t, t]))
    };
    let future = B::int_greater(positions([1, t]), positions([t, 1]), BoolDType::Native);
    B::bool_reshape(future, Shape::new([1, 1, t, t]))
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

/// Entries `start..end` of the last dimension of a 4-d tensor.
fn last_dim<B: Backend>(t: FloatTensor<B>, start: usize, end: usize) -> FloatTensor<B> {
    let all = Slice::from(..);
    let range = Slice::new(start as isize, Some(end as isize), 1);
    B::float_slice(t, &[all, all, all, range])
}

/// `[x1, x2]` -> `[a(x2), b(x1)]` over the last dimension, by halves.
fn swap_halves<B: Backend>(
    x: FloatTensor<B>,
    first: fn(FloatTensor<B>) -> FloatTensor<B>,
    second: fn(FloatTensor<B>) -> FloatTensor<B>,
) -> FloatTensor<B> {
    let hd = x.shape().dims::<4>()[3];
    let (x1, x2) = (
        last_dim::<B>(x.clone(), 0, hd / 2),
        last_dim::<B>(x, hd / 2, hd),
    );
    B::float_cat(vec![first(x2), second(x1)], 3)
}

/// The tables `[T, hd]` as `[1, T, 1, hd]`, to broadcast over `[B, T, H, hd]`.
fn per_position<B: Backend>(table: FloatTensor<B>) -> FloatTensor<B> {
    let [t, hd] = table.shape().dims::<2>();
    B::float_reshape(table, Shape::new([1, t, 1, hd]))
}

/// `x cos + rotate_half(x) sin`, `rotate_half([x1, x2]) = [-x2, x1]`: `x` `[B, T, H, hd]`,
/// `cos`, `sin` `[T, hd]`.
pub fn rotary<B: Backend>(
    x: FloatTensor<B>,
    cos: FloatTensor<B>,
    sin: FloatTensor<B>,
) -> FloatTensor<B> {
    let rotated = swap_halves::<B>(x.clone(), B::float_neg, |x| x);
    B::float_add(
        B::float_mul(x, per_position::<B>(cos)),
        B::float_mul(rotated, per_position::<B>(sin)),
    )
}

/// The gradient of [`rotary`] given `g`: `g cos + [g2 sin2, -g1 sin1]` by halves.
pub fn rotary_backward<B: Backend>(
    g: FloatTensor<B>,
    cos: FloatTensor<B>,
    sin: FloatTensor<B>,
) -> FloatTensor<B> {
    let back = swap_halves::<B>(
        B::float_mul(g.clone(), per_position::<B>(sin)),
        |x| x,
        B::float_neg,
    );
    B::float_add(B::float_mul(g, per_position::<B>(cos)), back)
}

/// `silu(a) b = (a s) b` with `s = sigmoid(a)`, and `s`.
pub fn swiglu<B: Backend>(
    a: FloatTensor<B>,
    b: FloatTensor<B>,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let s = B::sigmoid(a.clone());
    (B::float_mul(B::float_mul(a, s.clone()), b), s)
}

/// The gradients of [`swiglu`] (`da`, `db`), by the formulas of `swiglu::rows::backward`
/// with the backend's own sigmoid derivative, as burn's autodiff of `silu` takes it.
pub fn swiglu_backward<B: Backend>(
    g: FloatTensor<B>,
    a: FloatTensor<B>,
    b: FloatTensor<B>,
    s: FloatTensor<B>,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let db = B::float_mul(g.clone(), B::float_mul(a.clone(), s.clone()));
    let h = B::float_mul(g, b);
    let through_sigmoid = B::sigmoid_backward(s.clone(), B::float_mul(h.clone(), a));
    (B::float_add(B::float_mul(h, s), through_sigmoid), db)
}

/// `1 / rms(x)` over dimension `dim` of `x` (kept, as 1).
fn inv_rms<B: Backend>(x: FloatTensor<B>, dim: usize) -> FloatTensor<B> {
    let mean = B::float_mean_dim(B::float_mul(x.clone(), x), dim);
    B::float_recip(B::float_sqrt(B::float_add_scalar(mean, RMS_EPS.into())))
}

/// `x g / rms(x)`: `x` `[N, d]`, `g` `[d]`.
pub fn rms_norm<B: Backend>(x: FloatTensor<B>, g: FloatTensor<B>) -> FloatTensor<B> {
    let d = g.shape().dims::<1>()[0];
    let u = inv_rms::<B>(x.clone(), 1); // [N, 1]
    B::float_mul(B::float_mul(x, u), B::float_reshape(g, Shape::new([1, d])))
}

/// The gradients of [`rms_norm`] (`dx`, `dg`), by the formulas of `rows::rms_norm_backward`.
pub fn rms_norm_backward<B: Backend>(
    dy: FloatTensor<B>,
    x: FloatTensor<B>,
    g: FloatTensor<B>,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let d = g.shape().dims::<1>()[0];
    let u = inv_rms::<B>(x.clone(), 1); // [N, 1]
    let h = B::float_mul(dy.clone(), B::float_reshape(g, Shape::new([1, d])));
    let hx = B::float_sum_dim(B::float_mul(h.clone(), x.clone()), 1); // [N, 1]
    let u3 = B::float_mul(B::float_mul(u.clone(), u.clone()), u.clone());
    let c = B::float_mul_scalar(B::float_mul(u3, hx), (1.0 / d as f64).into());
    let dx = B::float_sub(B::float_mul(h, u.clone()), B::float_mul(x.clone(), c));
    let dg = B::float_sum_dim(B::float_mul(B::float_mul(dy, x), u), 0); // [1, d]
    (dx, B::float_reshape(dg, Shape::new([d])))
}

/// One AdamW step, burn's `AdamW` operation for operation: `(param, m1, m2)` after the step
/// (`m1`, `m2` unread on the `first` step).
pub fn adamw_step<B: Backend>(
    p: FloatTensor<B>,
    g: FloatTensor<B>,
    m1: FloatTensor<B>,
    m2: FloatTensor<B>,
    step: AdamWStep,
    first: bool,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
    let s = step.scalars(first);
    let scaled = |t: FloatTensor<B>, by: f32| B::float_mul_scalar(t, by.into());
    let squared = B::float_powi_scalar(g.clone(), 2.into());
    let (m1, m2) = if s.first {
        (scaled(g, s.factor_1), scaled(squared, s.factor_2))
    } else {
        (
            B::float_add(scaled(m1, s.beta_1), scaled(g, s.factor_1)),
            B::float_add(scaled(m2, s.beta_2), scaled(squared, s.factor_2)),
        )
    };
    let m1_corrected = B::float_div_scalar(m1.clone(), s.correction_1.into());
    let m2_corrected = B::float_div_scalar(m2.clone(), s.correction_2.into());
    let denominator = B::float_add_scalar(B::float_sqrt(m2_corrected), s.epsilon.into());
    let delta = B::float_div(m1_corrected, denominator);
    let kept = match s.keep {
        Some(keep) => B::float_mul_scalar(p, keep.into()),
        None => p,
    };
    let p = B::float_sub(kept, B::float_mul_scalar(delta, s.lr.into()));
    (p, m1, m2)
}

#[cfg(all(test, feature = "tch"))]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
mod tests {
    use burn::backend::LibTorch;

    /// The mask made on the device is the one the host used to make: key after query.
    #[test]
    fn the_future_mask_marks_every_later_key_and_nothing_else() {
        let t = 7;
        let mask = super::future_mask::<LibTorch>(t, &Default::default()).tensor;
        assert_eq!(mask.size(), [1, 1, t as i64, t as i64]);
        let got: Vec<bool> = Vec::try_from(mask.flatten(0, -1)).unwrap();
        let want: Vec<bool> = (0..t * t).map(|i| i % t > i / t).collect();
        assert_eq!(got, want);
    }
}
