//! A forward pass's completed sources (the embedding, then each block's output) kept
//! stacked `[K, N, d]`, for the mixing steps of `kernels::mix`: grown by one source per block
//! in place, inside one buffer with room for all of them, instead of copied into a new stack
//! every time (SPEC section 3, docs/performance.md). Copying made Full AttnRes, which grows
//! its stack at every layer, write and keep `O(L^2)` sources' worth of memory a step where
//! it needs `O(L)`.
//!
//! The buffer's slots past a stack's are free for the next push, so every stack may be
//! pushed onto once; [`SourceStack`] owns the latest stack and is the only way in. Slots
//! (and the gradient buffer's) are a spare row apart (`padded_slots`), so that a stack is
//! a view `[K, N, d]` whose slot stride is `(N + 1) d`.
//!
//! Backward, the stack's mixing steps add their gradients for the sources into one buffer of
//! the same shape, [`StackGrad`], in place, instead of each registering a gradient of its own
//! `[K, N, d]` for burn to sum: a push hands the slot of the source it pushed to that source.
//! The sums are the same floats in the same order (each mixing step's backward runs after every
//! later one, and a push's after every mixing step that reads its source), with one write of
//! the buffer per step where registering took a fresh tensor and libtorch's add of two.
//!
//! Or ([`GradMode::AtPush`], Full AttnRes) a step's backward reads none of the stacked
//! sources and keeps its `g` instead, and each push reads its source once and forms its
//! gradient from what every step that read it kept (`kernels::at_push`): the same function
//! within float rounding, with each (step, source) pair costing one read of the step's `g`
//! row where the buffer costs a read of the source's row and a read and a write of its
//! gradient row, for one `g` row kept per step where the buffer keeps one per source. Where
//! enough steps read a source, its push begins the gradients of the few sources below it
//! too, which the same steps read, so that each of those steps' `g` rows is read once for
//! the group (`stack_grad.rs`).

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Backend, Dispatch, TensorMetadata, tensor::FloatTensor};
use burn::tensor::{FloatDType, Shape, Tensor};

use super::KernelOps;
use super::composed::first_dim;
use super::mix::depth_mix_into;

pub use super::stack_grad::{GradMode, StackGrad};

/// The completed sources of a forward pass so far, `[K, N, d]`.
pub struct SourceStack {
    stacked: Tensor<3>,
    capacity: usize,
    grad: StackGrad,
}

impl SourceStack {
    /// A stack of one source, `first` `[N, d]`, with room for `capacity` in all.
    pub fn new(first: Tensor<2>, capacity: usize, mode: GradMode) -> Self {
        let [n, d] = first.dims();
        let empty = Tensor::empty([0, n, d], &first.device());
        let grad = StackGrad::new(capacity, mode);
        let stacked = push(empty, first, capacity, &grad);
        Self {
            stacked,
            capacity,
            grad,
        }
    }

    /// Appends the next completed source `v` `[N, d]`.
    pub fn push(&mut self, v: Tensor<2>) {
        self.stacked = push(self.stacked.clone(), v, self.capacity, &self.grad);
    }

    /// One mixing step over the completed sources and the block's partial sum, if any
    /// (`kernels::mix::depth_mix`): `[N, d]`.
    pub fn mix(&self, partial: Option<Tensor<2>>, q: Tensor<1>, key_norm: bool) -> Tensor<2> {
        depth_mix_into(
            self.stacked.clone(),
            partial,
            q,
            key_norm,
            self.grad.clone(),
        )
    }
}

fn push(stacked: Tensor<3>, v: Tensor<2>, capacity: usize, grad: &StackGrad) -> Tensor<3> {
    Tensor::from_dispatch(<Dispatch as KernelOps>::stack_push(
        stacked.into_dispatch(),
        v.into_dispatch(),
        capacity,
        grad.clone(),
    ))
}

#[cfg(feature = "tch")]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
pub(super) mod tch_kernel {
    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use burn::backend::tensor::FloatTensor;

    use crate::model::kernels::stack_grad::padded_slots;

    type T = FloatTensor<LibTorch>;

    /// `stacked` `[K, N, d]` grown by one slot over the same buffer, `[K + 1, N, d]`, when
    /// the buffer has a slot after it (a view made by an earlier push).
    fn grown(stacked: &T) -> Option<tch::Tensor> {
        let size = stacked.tensor.size();
        let (k, n, d) = (size[0], size[1], size[2]);
        let stride = stacked.tensor.stride();
        if k == 0 || stride[1..] != [d, 1] {
            return None;
        }
        // The same first element (no offset given) and slot distance; libtorch refuses a
        // view past the end of its storage, and then the buffer has no room.
        stacked
            .tensor
            .f_as_strided([k + 1, n, d], [stride[0], d, 1], None)
            .ok()
    }

    /// Grows `stacked` `[K, N, d]` by `v` over the same buffer when the buffer has a slot
    /// after it, copying `v` there; otherwise copies both into a new buffer with room for
    /// `capacity` sources.
    pub fn push(stacked: T, v: T, capacity: usize) -> T {
        let size = stacked.tensor.size();
        let (k, n, d) = (size[0], size[1], size[2]);
        let v_row = v.tensor.reshape([1, n, d]); // [N, d] -> [1, N, d]
        if let Some(grown) = grown(&stacked) {
            grown.narrow(0, k, 1).copy_(&v_row);
            return TchTensor::partial(grown, stacked.storage.clone());
        }
        let slots = (capacity as i64).max(k + 1);
        let options = (stacked.tensor.kind(), stacked.tensor.device());
        let shape = padded_slots(slots as usize, n as usize, d as usize).map(|x| x as i64);
        let padded = stacked.tensor.new_empty(shape, options);
        let buffer = TchTensor::new(padded);
        let view = buffer.tensor.narrow(0, 0, k + 1).narrow(1, 0, n); // [C, N + 1, d] -> [K + 1, N, d]
        if k > 0 {
            view.narrow(0, 0, k).copy_(&stacked.tensor);
        }
        view.narrow(0, k, 1).copy_(&v_row);
        TchTensor::partial(view, buffer.storage.clone())
    }
}

#[derive(Debug)]
struct StackPush;

impl<B: Backend + KernelOps> Backward<B, 2> for StackPush {
    /// The stack's length `K` before the push, the stack after it, the source's device and
    /// float type, and where the stack's mixing steps left their gradients.
    type State = (usize, FloatTensor<B>, (B::Device, FloatDType), StackGrad);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (k, stack, like, acc) = ops.state;
        if acc.is_some() {
            // Nothing was registered for the stack: its mixing steps wrote into `acc`, and
            // the earlier sources' slots go to them at their own pushes.
            if let Some(node) = &ops.parents[1] {
                let (dv, queries) = acc.slot::<B>(k, &stack, &like);
                grads.register::<B>(node.id, dv);
                // A query's node runs its backward after every push's (autodiff runs the
                // deepest first): `DepthMix` defers only queries of depth <= 1, and the
                // embedding's push lies deeper.
                for (id, dq) in queries {
                    grads.register::<B>(id, dq);
                }
            }
            return;
        }
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

/// The autodiff push: the backend's, with [`StackPush`] (handing the source its slot of the
/// stack's gradient) as its backward.
pub(super) fn autodiff_forward<B: Backend + KernelOps, C: CheckpointStrategy>(
    stacked: FloatTensor<Autodiff<B, C>>,
    v: FloatTensor<Autodiff<B, C>>,
    capacity: usize,
    acc: StackGrad,
) -> FloatTensor<Autodiff<B, C>> {
    let parents = [stacked.node(), v.node()];
    let (stacked, v) = (stacked.into_primitive(), v.into_primitive());
    let k = stacked.shape().dims::<3>()[0];
    let like = (v.device(), v.dtype().into());
    let out = B::stack_push(stacked, v, capacity, StackGrad::none());
    match StackPush.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            if k == 0 {
                acc.mark_first_tracked();
            }
            prep.finish((k, out.clone(), like, acc), out)
        }
        OpsKind::UnTracked(prep) => prep.finish(out),
    }
}

#[cfg(all(test, feature = "tch"))]
#[allow(deprecated)] // burn-tch, as above.
mod tests {
    use burn::backend::libtorch::TchTensor;
    use tch::{Device, Kind, Tensor};

    use super::tch_kernel::push;
    use crate::model::kernels::tch_memory::slots_of;

    /// A stack's slots start a row further apart than their own rows (the padded layout),
    /// grown in place, and the row kernels read it as it is: slot `k` at `k (N + 1) d`.
    #[test]
    fn pushed_slots_sit_a_row_apart_and_are_read_in_place() {
        let (n, d) = (4i64, 8i64);
        let source = |x: f64| TchTensor::new(Tensor::full([n, d], x, (Kind::Float, Device::Cpu)));
        let empty = TchTensor::new(Tensor::empty([0, n, d], (Kind::Float, Device::Cpu)));
        let one = push(empty, source(1.0), 3);
        let first = one.tensor.data_ptr();
        let two = push(one, source(2.0), 3);
        assert_eq!(two.tensor.data_ptr(), first, "grown in place");
        assert_eq!(two.tensor.stride(), vec![(n + 1) * d, d, 1]);
        let (data, slot) = slots_of(&two.tensor).expect("read in place");
        assert_eq!(slot, ((n + 1) * d) as usize);
        assert_eq!(data.len(), slot + (n * d) as usize);
        assert!(data[..(n * d) as usize].iter().all(|&x| x == 1.0));
        assert!(data[slot..].iter().all(|&x| x == 2.0));
    }
}
