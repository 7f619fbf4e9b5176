//! SwiGLU's gating, `silu(a) b = a sigmoid(a) b`, as one operation (SPEC section 7): composed
//! in burn, it is three kernels forward and about ten backward (the sigmoid again, its
//! derivative in four, two products per multiplication, a sum) over `[B, T, h]` for every
//! feed-forward layer; fused, the sigmoid (libtorch's own kernel, kept for the backward) and
//! one pass each way, on the CPU in f32. The passes compute the composition's products and
//! sums in its order, so the results equal it bit for bit.

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{AutodiffBackend, Backend, Dispatch, tensor::FloatTensor};
use burn::tensor::Tensor;
use burn::tensor::activation::silu;

use super::KernelOps;

/// `silu(a) b` elementwise: `a`, `b` of one shape -> that shape.
pub fn swiglu<const D: usize>(a: Tensor<D>, b: Tensor<D>) -> Tensor<D> {
    let (y, _sigmoid) = <Dispatch as KernelOps>::swiglu(a.into_dispatch(), b.into_dispatch());
    Tensor::from_dispatch(y)
}

/// The composed form, differentiated op by op: what the model ran before the fused kernel,
/// and what it is tested against.
pub fn swiglu_composed<const D: usize>(a: Tensor<D>, b: Tensor<D>) -> Tensor<D> {
    silu(a) * b
}

/// The row kernels, over contiguous f32.
#[cfg(feature = "tch")]
mod rows {
    /// `y = (a s) b` with `s = sigmoid(a)`.
    pub fn forward(a: &[f32], s: &[f32], b: &[f32], y: &mut [f32]) {
        for (((y, a), s), b) in y.iter_mut().zip(a).zip(s).zip(b) {
            *y = a * s * b;
        }
    }

    /// The gradients of [`forward`] given `g`, as burn's composition forms them: `db = g
    /// (a s)`; with `h = g b`, `da = h s + (s (1 - s)) (h a)` (the product's and the
    /// sigmoid's paths, in that order).
    pub fn backward(g: &[f32], a: &[f32], s: &[f32], b: &[f32], da: &mut [f32], db: &mut [f32]) {
        let inputs = g.iter().zip(a).zip(s.iter().zip(b));
        for ((da, db), ((g, a), (s, b))) in da.iter_mut().zip(db.iter_mut()).zip(inputs) {
            *db = g * (a * s);
            let h = g * b;
            *da = h * s + s * (-s + 1.0) * (h * a);
        }
    }
}

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

    /// Entries per task (any split gives the same results).
    const TASK: usize = 1 << 14;

    /// `silu(a) b` and the sigmoid of `a`, kept for the backward.
    pub fn forward(a: T, b: T) -> (T, T) {
        let (a_c, b_c) = (a.tensor.contiguous(), b.tensor.contiguous());
        let (Some(av), Some(bv)) = (floats(&a_c), floats(&b_c)) else {
            return composed::swiglu::<LibTorch>(a, b);
        };
        if a_c.size() != b_c.size() {
            return composed::swiglu::<LibTorch>(a, b);
        }
        let s = a_c.sigmoid();
        let sv = floats(&s).expect("the sigmoid of a CPU f32 tensor is one");
        let mut y = empty(&a_c.size());
        let tasks: Vec<&mut [f32]> = slice_mut(&mut y).chunks_mut(TASK).collect();
        for_each_task(tasks, &|task, y| {
            let at = task * TASK..task * TASK + y.len();
            rows::forward(&av[at.clone()], &sv[at.clone()], &bv[at], y)
        });
        (TchTensor::new(y), TchTensor::new(s))
    }

    pub fn backward(grad: T, a: T, b: T, s: T) -> (T, T) {
        let (g, a_c, b_c, s_c) = (
            grad.tensor.contiguous(),
            a.tensor.contiguous(),
            b.tensor.contiguous(),
            s.tensor.contiguous(),
        );
        let (Some(gv), Some(av), Some(bv), Some(sv)) =
            (floats(&g), floats(&a_c), floats(&b_c), floats(&s_c))
        else {
            return composed::swiglu_backward::<LibTorch>(grad, a, b, s);
        };
        let (mut da, mut db) = (empty(&a_c.size()), empty(&b_c.size()));
        let tasks: Vec<(&mut [f32], &mut [f32])> = slice_mut(&mut da)
            .chunks_mut(TASK)
            .zip(slice_mut(&mut db).chunks_mut(TASK))
            .collect();
        for_each_task(tasks, &|task, (da, db)| {
            let at = task * TASK..task * TASK + da.len();
            let (g, a, s, b) = (&gv[at.clone()], &av[at.clone()], &sv[at.clone()], &bv[at]);
            rows::backward(g, a, s, b, da, db)
        });
        (TchTensor::new(da), TchTensor::new(db))
    }
}

#[derive(Debug)]
struct SwiGlu;

impl<B: Backend + KernelOps> Backward<B, 2> for SwiGlu {
    /// The inputs and the sigmoid of the first.
    type State = [FloatTensor<B>; 3];

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [a, b, s] = ops.state;
        let grad = grads.consume::<B>(&ops.node);
        let (da, db) = B::swiglu_backward(grad, a, b, s);
        for (parent, grad) in ops.parents.into_iter().zip([da, db]) {
            if let Some(node) = parent {
                grads.register::<B>(node.id, grad);
            }
        }
    }
}

/// The autodiff forward: the backend's forward, with [`SwiGlu`] as its backward; returns
/// the product and the sigmoid (a constant, not differentiable).
#[allow(clippy::type_complexity)] // a pair of autodiff tensors
pub(super) fn autodiff_forward<B: Backend + KernelOps, C: CheckpointStrategy>(
    a: FloatTensor<Autodiff<B, C>>,
    b: FloatTensor<Autodiff<B, C>>,
) -> (FloatTensor<Autodiff<B, C>>, FloatTensor<Autodiff<B, C>>) {
    let parents = [a.node(), b.node()];
    let [a, b] = [a, b].map(|t| t.into_primitive());
    let (y, s) = B::swiglu(a.clone(), b.clone());
    let kept = Autodiff::<B, C>::from_inner(s.clone());
    let y = match SwiGlu.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish([a, b, s], y),
        OpsKind::UnTracked(prep) => prep.finish(y),
    };
    (y, kept)
}
