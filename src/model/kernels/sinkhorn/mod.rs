//! mHC's Sinkhorn-Knopp projection (SPEC section 6) as one operation: `exp(logits - max)`
//! `[..., m, m]` scaled to unit row and column sums by `iters` rounds of a row step then a
//! column step. Composed in burn, each round is four kernels forward (two sums, two
//! divisions) and about a dozen backward over every token's `m x m` matrix, for each of a
//! model's layers: at the default 20 rounds, mHC's training step at `micro` was 4.3x the
//! baseline's where mHC-lite's, with no Sinkhorn, was 2.4x. Fused, the `exp` stays
//! libtorch's and the rounds run per matrix in one pass each way, on the CPU in f32.
//!
//! The passes compute the composition's floats bit for bit: the sums in libtorch's order
//! for four entries (left to right), the division as one, and the backward as burn
//! differentiates a division, `g (1/r)` for the dividend and `g (-p / r^2)` summed over the
//! broadcast for the divisor; the backward recomputes each matrix's rounds instead of
//! keeping them. Elsewhere (flex, CUDA, bf16) it is the composition.

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{AutodiffBackend, Backend, Dispatch, tensor::FloatTensor};
use burn::tensor::Tensor;

use super::KernelOps;

/// Sinkhorn-Knopp on `exp(logits)` `[B, T, m, m]`: `iters` rounds of row then column
/// normalisation (the last a column step, so columns sum to 1 exactly and rows to within
/// the iteration's convergence). The max over each matrix is subtracted first, which
/// changes nothing after normalisation and keeps `exp` finite.
pub fn sinkhorn(logits: Tensor<4>, iters: usize) -> Tensor<4> {
    let (p, _exp) = <Dispatch as KernelOps>::sinkhorn(logits.into_dispatch(), iters);
    Tensor::from_dispatch(p)
}

/// The composed form, differentiated op by op: what the model ran before the fused kernel,
/// and what it is tested against.
pub fn sinkhorn_composed(logits: Tensor<4>, iters: usize) -> Tensor<4> {
    let max = logits.clone().max_dim(3).max_dim(2).detach(); // [B, T, 1, 1]
    let mut p = (logits - max).exp();
    for _ in 0..iters {
        p = p.clone() / p.sum_dim(3);
        p = p.clone() / p.sum_dim(2);
    }
    p
}

#[cfg(feature = "tch")]
mod rows;

#[cfg(feature = "tch")]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
pub(super) mod tch_kernel {
    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use burn::backend::tensor::FloatTensor;

    use super::rows;
    use crate::model::kernels::composed;
    use crate::model::kernels::omp::for_each_task;
    use crate::model::kernels::tch_memory::{empty, floats, slice_mut};

    type T = FloatTensor<LibTorch>;

    /// Matrices per task, a multiple of a tile's (any split gives the same results).
    const TASK: usize = 16 * rows::LANES;

    /// The side `m` of `t`'s square matrices, where the row kernels take `t`.
    fn side(t: &tch::Tensor) -> Option<usize> {
        let size = t.size();
        let m = *size.last()?;
        (size.len() >= 2 && size[size.len() - 2] == m && m > 0 && floats(t).is_some())
            .then_some(m as usize)
    }

    /// The result and `exp(logits - max)`, kept for the backward.
    pub fn forward(logits: T, iters: usize) -> (T, T) {
        let l = logits.tensor.contiguous();
        let Some(m) = side(&l) else {
            return composed::sinkhorn::<LibTorch>(logits, iters);
        };
        let dims = l.size().len() as i64;
        // The max over each matrix, then libtorch's `exp`, as the composition takes them.
        let max = l.amax([dims - 2, dims - 1], true);
        let e = (&l - max).exp();
        let ev = floats(&e).expect("exp of a contiguous CPU f32 tensor is one");
        let mut p = empty(&l.size());
        let tasks: Vec<&mut [f32]> = slice_mut(&mut p).chunks_mut(TASK * m * m).collect();
        for_each_task(tasks, &|task, p| {
            let at = task * TASK * m * m..task * TASK * m * m + p.len();
            rows::forward(&mut rows::Scratch::new(m, iters), &ev[at], p);
        });
        (TchTensor::new(p), TchTensor::new(e))
    }

    pub fn backward(grad: T, e: T, iters: usize) -> T {
        let (g, e_c) = (grad.tensor.contiguous(), e.tensor.contiguous());
        let (Some(m), Some(gv), Some(ev)) = (side(&e_c), floats(&g), floats(&e_c)) else {
            return composed::sinkhorn_backward::<LibTorch>(grad, e, iters);
        };
        let mut dl = empty(&e_c.size());
        let tasks: Vec<&mut [f32]> = slice_mut(&mut dl).chunks_mut(TASK * m * m).collect();
        for_each_task(tasks, &|task, dl| {
            let at = task * TASK * m * m..task * TASK * m * m + dl.len();
            let scratch = &mut rows::Scratch::new(m, iters);
            rows::backward(scratch, &gv[at.clone()], &ev[at], dl);
        });
        TchTensor::new(dl)
    }
}

#[derive(Debug)]
struct Sinkhorn;

impl<B: Backend + KernelOps> Backward<B, 1> for Sinkhorn {
    /// `exp(logits - max)` and the rounds.
    type State = (FloatTensor<B>, usize);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (e, iters) = ops.state;
        let grad = grads.consume::<B>(&ops.node);
        let [parent] = ops.parents;
        if let Some(node) = parent {
            grads.register::<B>(node.id, B::sinkhorn_backward(grad, e, iters));
        }
    }
}

/// The autodiff forward: the backend's forward, with [`Sinkhorn`] as its backward; returns
/// the result and `exp(logits - max)` (a constant, not differentiable).
#[allow(clippy::type_complexity)] // a pair of autodiff tensors
pub(super) fn autodiff_forward<B: Backend + KernelOps, C: CheckpointStrategy>(
    logits: FloatTensor<Autodiff<B, C>>,
    iters: usize,
) -> (FloatTensor<Autodiff<B, C>>, FloatTensor<Autodiff<B, C>>) {
    let parents = [logits.node()];
    let (p, e) = B::sinkhorn(logits.into_primitive(), iters);
    let kept = Autodiff::<B, C>::from_inner(e.clone());
    let p = match Sinkhorn.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish((e, iters), p),
        OpsKind::UnTracked(prep) => prep.finish(p),
    };
    (p, kept)
}
