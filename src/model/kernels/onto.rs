//! A residual branch's last projection added onto the sum that the branch joins, `c + x w`,
//! as one operation. On libtorch it is `addmm`, whose matrix product adds `c` into its output
//! as it writes it, and writes it over `c` itself where nothing else holds `c` (in inference,
//! a block's partial sum once the layer's mixing step has read it). Composed, it is the
//! product and then an add that reads both `[N, m]` tensors and writes a third. Block
//! AttnRes's layers add onto their block's partial sum this way (`residual::stacked`); the
//! baseline's add goes through the next layer's PreNorm instead (`norm::add_rms_norm`).
//!
//! The backward is plain tensor operations on every backend: `dc = g`, `dx = g w^T`,
//! `dw = x^T g`.

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Backend, Dispatch, tensor::FloatTensor};
use burn::tensor::Tensor;

use super::KernelOps;

/// `c + x w`: `c` `[N, m]`, `x` `[N, k]`, `w` `[k, m]` -> `[N, m]`.
pub fn matmul_onto(c: Tensor<2>, x: Tensor<2>, w: Tensor<2>) -> Tensor<2> {
    Tensor::from_dispatch(<Dispatch as KernelOps>::matmul_onto(
        c.into_dispatch(),
        x.into_dispatch(),
        w.into_dispatch(),
    ))
}

/// A sublayer's output projection `h w` (`h` `[B, T, k]`, `w` `[k, m]`) -> `[B, T, m]`, added
/// onto `onto` `[B, T, m]` in the same operation where one is given.
pub fn project(h: Tensor<3>, w: Tensor<2>, onto: Option<Tensor<3>>) -> Tensor<3> {
    let Some(c) = onto else {
        return h.matmul(w.unsqueeze());
    };
    let [b, t, k] = h.dims();
    let m = w.dims()[1];
    let flat = matmul_onto(c.reshape([b * t, m]), h.reshape([b * t, k]), w); // [BT, m]
    flat.reshape([b, t, m]) // [BT, m] -> [B, T, m]
}

/// [`matmul_onto`] as the product and the add, for the backends without a fused form.
pub(super) fn composed<B: Backend>(
    c: FloatTensor<B>,
    x: FloatTensor<B>,
    w: FloatTensor<B>,
) -> FloatTensor<B> {
    B::float_add(c, B::float_matmul(x, w))
}

#[cfg(feature = "tch")]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
pub(super) mod tch_kernel {
    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use burn::backend::tensor::FloatTensor;

    type T = FloatTensor<LibTorch>;

    /// `addmm`, over `c`'s own memory where `c` is not shared.
    pub fn forward(mut c: T, x: T, w: T) -> T {
        let (x, w) = (&x.tensor, &w.tensor);
        match c.mut_ops(|c| c.addmm_(x, w)) {
            Some(sum) => sum,
            None => TchTensor::new(c.tensor.addmm(x, w)),
        }
    }
}

#[derive(Debug)]
struct MatmulOnto;

impl<B: Backend> Backward<B, 3> for MatmulOnto {
    /// `x` and `w`.
    type State = [FloatTensor<B>; 2];

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [x, w] = ops.state;
        let [c_node, x_node, w_node] = ops.parents;
        let g = grads.consume::<B>(&ops.node);
        if let Some(node) = x_node {
            grads.register::<B>(node.id, B::float_matmul(g.clone(), B::float_transpose(w)));
        }
        if let Some(node) = w_node {
            grads.register::<B>(node.id, B::float_matmul(B::float_transpose(x), g.clone()));
        }
        if let Some(node) = c_node {
            grads.register::<B>(node.id, g);
        }
    }
}

/// The autodiff forward: the backend's forward, with [`MatmulOnto`] as its backward.
pub(super) fn autodiff_forward<B: Backend + KernelOps, C: CheckpointStrategy>(
    c: FloatTensor<Autodiff<B, C>>,
    x: FloatTensor<Autodiff<B, C>>,
    w: FloatTensor<Autodiff<B, C>>,
) -> FloatTensor<Autodiff<B, C>> {
    let parents = [c.node(), x.node(), w.node()];
    let [c, x, w] = [c, x, w].map(|t| t.into_primitive());
    let y = B::matmul_onto(c, x.clone(), w.clone());
    match MatmulOnto.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish([x, w], y),
        OpsKind::UnTracked(prep) => prep.finish(y),
    }
}
