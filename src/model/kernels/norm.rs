//! RMSNorm with a gain as one operation: composed, it is six kernels forward (square, mean,
//! add, sqrt, divide, scale) and about ten backward over `[B, T, d]`, for every norm of every
//! layer; fused, one pass each way, by `rows::rms_norm_forward` / `rms_norm_backward` on the
//! CPU in f32.

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Backend, Dispatch, tensor::FloatTensor};
use burn::tensor::Tensor;

use super::KernelOps;

/// `x g / rms(x)` over the last dimension: `x` `[N, d]`, `g` `[d]` -> `[N, d]`.
pub fn rms_norm(x: Tensor<2>, gain: Tensor<1>) -> Tensor<2> {
    Tensor::from_dispatch(<Dispatch as KernelOps>::rms_norm(
        x.into_dispatch(),
        gain.into_dispatch(),
    ))
}

#[cfg(feature = "tch")]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
pub(super) mod tch_kernel {
    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use burn::backend::tensor::FloatTensor;

    use crate::model::kernels::{composed, rows, tch_memory as mem};

    type T = FloatTensor<LibTorch>;

    pub fn forward(x: T, g: T) -> T {
        let (x_c, g_c) = (x.tensor.contiguous(), g.tensor.contiguous());
        let (Some(xs), Some(gs)) = (mem::floats(&x_c), mem::floats(&g_c)) else {
            return composed::rms_norm::<LibTorch>(x, g);
        };
        let mut y = mem::empty(&x_c.size());
        rows::rms_norm_forward(xs, gs, mem::slice_mut(&mut y));
        TchTensor::new(y)
    }

    pub fn backward(dy: T, x: T, g: T) -> (T, T) {
        let (dy_c, x_c, g_c) = (
            dy.tensor.contiguous(),
            x.tensor.contiguous(),
            g.tensor.contiguous(),
        );
        let (Some(dys), Some(xs), Some(gs)) =
            (mem::floats(&dy_c), mem::floats(&x_c), mem::floats(&g_c))
        else {
            return composed::rms_norm_backward::<LibTorch>(dy, x, g);
        };
        let mut dx = mem::empty(&x_c.size());
        let dg = rows::rms_norm_backward(dys, xs, gs, mem::slice_mut(&mut dx));
        (
            TchTensor::new(dx),
            TchTensor::new(tch::Tensor::from_slice(&dg)),
        )
    }
}

#[derive(Debug)]
struct RmsNorm;

impl<B: Backend + KernelOps> Backward<B, 2> for RmsNorm {
    /// The input and the gain.
    type State = [FloatTensor<B>; 2];

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [x, g] = ops.state;
        let grad = grads.consume::<B>(&ops.node);
        let (dx, dg) = B::rms_norm_backward(grad, x, g);
        for (parent, grad) in ops.parents.into_iter().zip([dx, dg]) {
            if let Some(node) = parent {
                grads.register::<B>(node.id, grad);
            }
        }
    }
}

/// The autodiff forward: the backend's forward, with [`RmsNorm`] as its backward.
pub(super) fn autodiff_forward<B: Backend + KernelOps, C: CheckpointStrategy>(
    x: FloatTensor<Autodiff<B, C>>,
    g: FloatTensor<Autodiff<B, C>>,
) -> FloatTensor<Autodiff<B, C>> {
    let parents = [x.node(), g.node()];
    let (x, g) = (x.into_primitive(), g.into_primitive());
    let y = B::rms_norm(x.clone(), g.clone());
    match RmsNorm.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish([x, g], y),
        OpsKind::UnTracked(prep) => prep.finish(y),
    }
}
