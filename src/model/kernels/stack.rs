//! A forward pass's completed sources (the embedding, then each block's output) kept
//! stacked `[K, N, d]`, for the mixing steps of `kernels::mix`: grown by one source per block
//! in place, inside one buffer with room for all of them, instead of copied into a new stack
//! every time (SPEC section 3, docs/performance.md). Copying made Full AttnRes, which grows
//! its stack at every layer, write and keep `O(L^2)` sources' worth of memory a step where
//! it needs `O(L)`.
//!
//! The buffer's slots past a stack's are free for the next push, so every stack may be
//! pushed onto once; [`SourceStack`] owns the latest stack and is the only way in.

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Backend, Dispatch, TensorMetadata, tensor::FloatTensor};
use burn::tensor::{Shape, Tensor};

use super::KernelOps;
use super::composed::first_dim;
use super::mix::depth_mix;

/// The completed sources of a forward pass so far, `[K, N, d]`.
pub struct SourceStack {
    stacked: Tensor<3>,
    capacity: usize,
}

impl SourceStack {
    /// A stack of one source, `first` `[N, d]`, with room for `capacity` in all.
    pub fn new(first: Tensor<2>, capacity: usize) -> Self {
        let [n, d] = first.dims();
        let empty = Tensor::empty([0, n, d], &first.device());
        let stacked = push(empty, first, capacity);
        Self { stacked, capacity }
    }

    /// Appends the next completed source `v` `[N, d]`.
    pub fn push(&mut self, v: Tensor<2>) {
        self.stacked = push(self.stacked.clone(), v, self.capacity);
    }

    /// One mixing step over the completed sources and the block's partial sum, if any
    /// (`kernels::mix::depth_mix`): `[N, d]`.
    pub fn mix(&self, partial: Option<Tensor<2>>, q: Tensor<1>, key_norm: bool) -> Tensor<2> {
        depth_mix(self.stacked.clone(), partial, q, key_norm)
    }
}

fn push(stacked: Tensor<3>, v: Tensor<2>, capacity: usize) -> Tensor<3> {
    Tensor::from_dispatch(<Dispatch as KernelOps>::stack_push(
        stacked.into_dispatch(),
        v.into_dispatch(),
        capacity,
    ))
}

#[cfg(feature = "tch")]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
pub(super) mod tch_kernel {
    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use burn::backend::tensor::FloatTensor;

    type T = FloatTensor<LibTorch>;

    /// Grows `stacked` `[K, N, d]` by `v` over the same buffer when the buffer has a slot
    /// after it (a view made by an earlier push); otherwise copies both into a new buffer
    /// with room for `capacity` sources.
    pub fn push(stacked: T, v: T, capacity: usize) -> T {
        let size = stacked.tensor.size();
        let (k, n, d) = (size[0], size[1], size[2]);
        let v_row = v.tensor.reshape([1, n, d]); // [N, d] -> [1, N, d]
        if k > 0 && stacked.tensor.is_contiguous() {
            // The same first element (no offset given); libtorch refuses a view past the
            // end of its storage, and then the buffer has no room.
            if let Ok(grown) = stacked
                .tensor
                .f_as_strided([k + 1, n, d], [n * d, d, 1], None)
            {
                grown.narrow(0, k, 1).copy_(&v_row);
                return TchTensor::partial(grown, stacked.storage.clone());
            }
        }
        let slots = (capacity as i64).max(k + 1);
        let options = (stacked.tensor.kind(), stacked.tensor.device());
        let buffer = TchTensor::new(stacked.tensor.new_empty([slots, n, d], options));
        let view = buffer.tensor.narrow(0, 0, k + 1);
        if k > 0 {
            view.narrow(0, 0, k).copy_(&stacked.tensor);
        }
        view.narrow(0, k, 1).copy_(&v_row);
        TchTensor::partial(view, buffer.storage.clone())
    }
}

#[derive(Debug)]
struct StackPush;

impl<B: Backend> Backward<B, 2> for StackPush {
    /// The stack's length `K` before the push.
    type State = usize;

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let k = ops.state;
        let grad = grads.consume::<B>(&ops.node); // [K + 1, N, d]
        let [_, n, d] = grad.shape().dims::<3>();
        let [stacked, v] = ops.parents;
        if let Some(node) = v {
            let dv = first_dim::<B>(grad.clone(), k, k + 1);
            grads.register::<B>(node.id, B::float_reshape(dv, Shape::new([n, d])));
        }
        if let Some(node) = stacked {
            grads.register::<B>(node.id, first_dim::<B>(grad, 0, k));
        }
    }
}

/// The autodiff push: the backend's, with [`StackPush`] (slicing the gradient) as its
/// backward.
pub(super) fn autodiff_forward<B: Backend + KernelOps, C: CheckpointStrategy>(
    stacked: FloatTensor<Autodiff<B, C>>,
    v: FloatTensor<Autodiff<B, C>>,
    capacity: usize,
) -> FloatTensor<Autodiff<B, C>> {
    let parents = [stacked.node(), v.node()];
    let (stacked, v) = (stacked.into_primitive(), v.into_primitive());
    let k = stacked.shape().dims::<3>()[0];
    let out = B::stack_push(stacked, v, capacity);
    match StackPush.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish(k, out),
        OpsKind::UnTracked(prep) => prep.finish(out),
    }
}
