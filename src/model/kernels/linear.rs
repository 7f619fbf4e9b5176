//! The products of a sublayer's inputs with its weights, `h w` for `h` `[B, T, k]` and a
//! weight `[k, m]`, in one of two forms (`KernelOps::tokens_matmul`). Where autodiff records
//! the product for a backward (training), one 2-D product over all the batch's tokens,
//! `[B T, k] x [k, m]`, as `nn.Linear` does, and backward `dh` and `dw = h^T g` as 2-D
//! products too. Elsewhere (inference, the evaluations during training) burn's `matmul` of
//! `h` by `w` as `[1, k, m]`, which libtorch runs as one product per sequence. Measured on
//! this project's 2-core host, the 2-D form trains 2.2-4.6% faster in every arm at every
//! size (burn's backward formed one weight gradient per sequence and summed them), and the
//! batched form runs a batch of 16 sequences' forward 1-4% faster with 2 threads
//! (git log -- docs/performance.md).

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Backend, Dispatch, TensorMetadata, tensor::FloatTensor};
use burn::tensor::{Shape, Tensor};

use super::KernelOps;

/// `h w` for every token: `h` `[B, T, k]`, `w` `[k, m]` -> `[B, T, m]`.
pub fn linear(h: Tensor<3>, w: Tensor<2>) -> Tensor<3> {
    let (h, w) = (h.into_dispatch(), w.into_dispatch());
    Tensor::from_dispatch(<Dispatch as KernelOps>::tokens_matmul(h, w, false))
}

#[cfg(feature = "tch")]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
pub(super) mod tch_kernel {
    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use burn::backend::tensor::FloatTensor;

    type T = FloatTensor<LibTorch>;

    /// `h w` for `h` `[B, T, k]` and `w` `[k, m]`: `mm` of `h` as `[B T, k]` where `flat`,
    /// else as burn's `matmul` forms it (libtorch's `matmul` of `h` and `w` as `[1, k, m]`:
    /// one product per sequence).
    pub fn linear(h: T, w: T, flat: bool) -> T {
        let (size, m) = (h.tensor.size(), w.tensor.size()[1]);
        let (n, k) = (size[0] * size[1], size[2]);
        let product = if flat {
            h.tensor.reshape([n, k]).mm(&w.tensor) // [B, T, k] -> [BT, k]
        } else {
            h.tensor.matmul(&w.tensor.unsqueeze(0)) // [k, m] -> [1, k, m]
        };
        TchTensor::new(product.view([size[0], size[1], m])) // [BT, m] or [B, T, m] -> [B, T, m]
    }
}

/// [`KernelOps::tokens_matmul`] composed: `h` as `[B T, k]` times `w` where `flat`, else
/// burn's `matmul` of `h` and `w` as `[1, k, m]`.
pub(super) fn composed_linear<B: Backend>(
    h: FloatTensor<B>,
    w: FloatTensor<B>,
    flat: bool,
) -> FloatTensor<B> {
    if !flat {
        return B::float_matmul(h, unsqueezed::<B>(w));
    }
    let [b, t, k] = h.shape().dims::<3>();
    let m = w.shape().dims::<2>()[1];
    let x = B::float_reshape(h, Shape::new([b * t, k])); // [B, T, k] -> [BT, k]
    B::float_reshape(B::float_matmul(x, w), Shape::new([b, t, m])) // [BT, m] -> [B, T, m]
}

/// `w` `[k, m]` -> `[1, k, m]`.
fn unsqueezed<B: Backend>(w: FloatTensor<B>) -> FloatTensor<B> {
    let [k, m] = w.shape().dims::<2>();
    B::float_reshape(w, Shape::new([1, k, m]))
}

/// The backward of [`KernelOps::tokens_matmul`]'s 2-D form: `dh = g w^T` and `dw = h^T g`,
/// each one 2-D product over the batch's tokens, as burn's `Matmul` backward forms them for
/// a 2-D product.
#[derive(Debug)]
struct Linear;

impl<B: Backend> Backward<B, 2> for Linear {
    /// `h` and `w`.
    type State = [FloatTensor<B>; 2];

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [h, w] = ops.state;
        let [h_node, w_node] = ops.parents;
        let g = grads.consume::<B>(&ops.node); // [B, T, m]
        let [b, t, m] = g.shape().dims::<3>();
        let k = w.shape().dims::<2>()[0];
        let g = B::float_reshape(g, Shape::new([b * t, m])); // [B, T, m] -> [BT, m]
        if let Some(node) = h_node {
            let dh = B::float_matmul(g.clone(), B::float_transpose(w)); // [BT, k]
            grads.register::<B>(node.id, B::float_reshape(dh, Shape::new([b, t, k]))); // [BT, k] -> [B, T, k]
        }
        if let Some(node) = w_node {
            let h = B::float_reshape(h, Shape::new([b * t, k])); // [B, T, k] -> [BT, k]
            let dw = B::float_matmul(B::float_transpose(h), g); // [k, m]
            grads.register::<B>(node.id, dw);
        }
    }
}

/// The autodiff [`KernelOps::tokens_matmul`]: the 2-D form, with [`Linear`] as its
/// backward, where the graph records it; the batched form where it does not.
pub(super) fn autodiff_linear<B: Backend + KernelOps, C: CheckpointStrategy>(
    h: FloatTensor<Autodiff<B, C>>,
    w: FloatTensor<Autodiff<B, C>>,
) -> FloatTensor<Autodiff<B, C>> {
    let parents = [h.node(), w.node()];
    let (h, w) = (h.into_primitive(), w.into_primitive());
    match Linear.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let y = B::tokens_matmul(h.clone(), w.clone(), true);
            prep.finish([h, w], y)
        }
        OpsKind::UnTracked(prep) => prep.finish(B::tokens_matmul(h, w, false)),
    }
}
