//! One mixing step on libtorch: the row kernels (`mix_rows`) for f32 on the CPU, and
//! `mix_tch`'s few libtorch operations or the composed form for the tensors they do not
//! take; with each one's backward.

use burn::backend::LibTorch;
use burn::backend::libtorch::TchTensor;
use burn::backend::tensor::FloatTensor;

use crate::model::kernels::composed::{self, accumulate_slots};
use crate::model::kernels::mix_rows::{self, SAVED, SourceGrads, Sources};
use crate::model::kernels::mix_tch;
use crate::model::kernels::tch_memory::{
    cpu_f32, empty, floats, slice_mut, slots_of, slots_of_mut,
};

type T = FloatTensor<LibTorch>;

/// The row kernels' view of the sources, when they apply (f32 on the CPU).
pub(in crate::model::kernels) fn sources<'a>(
    stacked: &'a tch::Tensor,
    partial: &'a tch::Tensor,
) -> Option<Sources<'a>> {
    let size = stacked.size();
    let (n, d) = (size[1] as usize, size[2] as usize);
    let partial = match partial.size()[0] {
        0 => None,
        _ => Some(floats(partial)?),
    };
    let (stacked, slot) = slots_of(stacked)?;
    Some(Sources {
        stacked,
        completed: size[0] as usize,
        slot,
        partial,
        n,
        d,
    })
}

/// `t` itself where the row kernels read it as it is (a stack's slots, room between
/// them included), else a contiguous copy.
pub(in crate::model::kernels) fn slotted(t: &tch::Tensor) -> tch::Tensor {
    match slots_of(t) {
        Some(_) => t.shallow_clone(),
        None => t.contiguous(),
    }
}

/// `x` `[N, d]` and the softmax weights the backward reads, `[N, K', SAVED]`; for
/// tensors the row kernels do not take (CUDA, bf16), `mix_tch`'s.
pub fn forward(stacked: T, partial: T, q: T, key_norm: bool) -> (T, T) {
    let q_c = q.tensor.contiguous();
    floats(&q_c)
        .and_then(|qs| rows_forward(&stacked, &partial, qs, key_norm))
        .unwrap_or_else(|| other_forward(stacked, partial, q, key_norm))
}

/// The row kernels' forward, or `None` where they do not take these tensors.
fn rows_forward(stacked: &T, partial: &T, qs: &[f32], key_norm: bool) -> Option<(T, T)> {
    if !cpu_f32(&stacked.tensor) {
        return None;
    }
    let (v, p) = (slotted(&stacked.tensor), partial.tensor.contiguous());
    let src = sources(&v, &p)?;
    let (n, sources) = (src.n as i64, src.count() as i64);
    let mut x = empty(&[n, src.d as i64]);
    let mut saved = empty(&[n, sources, SAVED as i64]);
    let (xs, ss) = (slice_mut(&mut x), slice_mut(&mut saved));
    mix_rows::mix_forward(src, qs, key_norm, xs, ss);
    Some((TchTensor::new(x), TchTensor::new(saved)))
}

/// The forward for tensors the row kernels do not take: `mix_tch`'s off the CPU or in
/// bf16, the composed form for f32 on the CPU (a layout they cannot read).
fn other_forward(stacked: T, partial: T, q: T, key_norm: bool) -> (T, T) {
    if cpu_f32(&stacked.tensor) {
        return composed::depth_mix::<LibTorch>(stacked, partial, q, key_norm);
    }
    let (x, saved) = mix_tch::forward(&stacked.tensor, &partial.tensor, &q.tensor, key_norm);
    (TchTensor::new(x), TchTensor::new(saved))
}

/// See [`KernelOps::depth_mix_backward`](crate::model::kernels::KernelOps::depth_mix_backward)
/// for `into` and `written`.
#[allow(clippy::too_many_arguments)]
pub fn backward(
    grad: T,
    stacked: T,
    partial: T,
    q: T,
    saved: T,
    key_norm: bool,
    into: T,
    written: usize,
) -> (T, T, T) {
    if !cpu_f32(&stacked.tensor) {
        let (dv, dp, dq) = mix_tch::backward(
            &grad.tensor,
            &stacked.tensor,
            &partial.tensor,
            &q.tensor,
            &saved.tensor,
            key_norm,
            into.tensor,
            written,
        );
        return (TchTensor::new(dv), TchTensor::new(dp), TchTensor::new(dq));
    }
    let (g, v, p, q_c) = (
        grad.tensor.contiguous(),
        slotted(&stacked.tensor),
        partial.tensor.contiguous(),
        q.tensor.contiguous(),
    );
    // Where the forward was the composed one (which keeps no weights), so is this.
    let kept = floats(&saved.tensor).filter(|s| !s.is_empty());
    let found = (sources(&v, &p), floats(&q_c), floats(&g), kept);
    let fits = into.tensor.size()[0] == 0 || slots_of(&into.tensor).is_some();
    let (Some(src), Some(qs), Some(gs), Some(saved), true) =
        (found.0, found.1, found.2, found.3, fits)
    else {
        let (dv, dp, dq) =
            composed::depth_mix_backward::<LibTorch>(grad, stacked, partial, q, key_norm);
        return (accumulate_slots::<LibTorch>(into, written, dv), dp, dq);
    };
    let (mut dv, written) = match into.tensor.size()[0] {
        0 => (empty(&v.size()), 0),
        _ => (into.tensor, written),
    };
    let mut dp = empty(&p.size());
    let has_partial = src.partial.is_some();
    let (stacked, slot) = slots_of_mut(&mut dv).expect("a slotted buffer (checked above)");
    let grads = SourceGrads {
        stacked,
        slot,
        written,
        partial: has_partial.then(|| slice_mut(&mut dp)),
    };
    let dq = mix_rows::mix_backward(gs, src, qs, saved, key_norm, grads);
    let dq = tch::Tensor::from_slice(&dq);
    (TchTensor::new(dv), TchTensor::new(dp), TchTensor::new(dq))
}
