//! The products of a sublayer's inputs with its weights ([`linear`]), and a residual
//! branch's last projection added onto the sum that the branch joins, `c + x w`, as one
//! operation. On libtorch that is `addmm`, whose matrix product adds `c` into its output as
//! it writes it, and writes it over `c` itself where nothing else holds `c` (in inference, a
//! block's partial sum once the layer's mixing step has read it). Composed, it is the
//! product and then an add that reads both `[N, m]` tensors and writes a third. Block
//! AttnRes's layers add onto their block's partial sum this way (`residual::stacked`); the
//! baseline's add goes through the next layer's PreNorm instead (`norm::add_rms_norm`).
//!
//! [`linear`] forms `h w` for `h` `[B, T, k]` and a weight `[k, m]` in one of two ways
//! (`KernelOps::tokens_matmul`). Where autodiff records it for a backward (training), as
//! one 2-D product over all the batch's tokens, `[B T, k] x [k, m]`, as `nn.Linear` does,
//! and backward `dh` and `dw = h^T g` as 2-D products too. Elsewhere (inference, the
//! evaluations during training) as burn's `matmul` of `h` by `w` as `[1, k, m]`, which
//! libtorch runs as one product per sequence. Measured on this project's 2-core host, the 2-D
//! form trains 2.2-4.6% faster in every arm at every size (burn's backward formed one
//! weight gradient per sequence and summed them), and the batched form runs a batch of 16
//! sequences' forward 1-4% faster with 2 threads (git log -- docs/performance.md).
//!
//! A projection whose result completes a block of AttnRes (each of Full AttnRes's layers, the
//! last of each block in Block AttnRes) may be given the source stack's next slot to write
//! it into ([`Dest::into`], `kernels::stack`), so that the push that follows has nothing to
//! copy. libtorch writes there with the `_out` form of the same product (`addmm_out`, or
//! `matmul_out` of the batched product), the same floats; elsewhere the slot is not offered
//! and nothing changes.
//!
//! The backward is plain tensor operations on every backend: `dc = g`, `dx = g w^T`,
//! `dw = x^T g`.

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Backend, Dispatch, TensorMetadata, tensor::FloatTensor};
use burn::tensor::{Shape, Tensor};

use super::KernelOps;

/// `h w` for every token: `h` `[B, T, k]`, `w` `[k, m]` -> `[B, T, m]`.
pub fn linear(h: Tensor<3>, w: Tensor<2>) -> Tensor<3> {
    linear_into(h, w, None)
}

/// [`linear`], written into `into` `[B T, m]` where the backend can.
fn linear_into(h: Tensor<3>, w: Tensor<2>, into: Option<Tensor<2>>) -> Tensor<3> {
    let (h, w) = (h.into_dispatch(), w.into_dispatch());
    Tensor::from_dispatch(match into {
        Some(into) => {
            <Dispatch as KernelOps>::tokens_matmul_into(h, w, into.into_dispatch(), false)
        }
        None => <Dispatch as KernelOps>::tokens_matmul(h, w, false),
    })
}

/// `c + x w`: `c` `[N, m]`, `x` `[N, k]`, `w` `[k, m]` -> `[N, m]`.
pub fn matmul_onto(c: Tensor<2>, x: Tensor<2>, w: Tensor<2>) -> Tensor<2> {
    onto_into(c, x, w, None)
}

/// [`matmul_onto`], written into `into` `[N, m]` where the backend can.
fn onto_into(c: Tensor<2>, x: Tensor<2>, w: Tensor<2>, into: Option<Tensor<2>>) -> Tensor<2> {
    let [c, x, w] = [c, x, w].map(Tensor::into_dispatch);
    Tensor::from_dispatch(match into {
        Some(into) => <Dispatch as KernelOps>::matmul_onto_into(c, x, w, into.into_dispatch()),
        None => <Dispatch as KernelOps>::matmul_onto(c, x, w),
    })
}

/// Where a sublayer's output projection puts its product.
#[derive(Clone, Debug, Default)]
pub struct Dest {
    /// The sum the branch joins, `[B, T, m]`: the projection adds its product onto it.
    pub onto: Option<Tensor<3>>,
    /// Memory `[B T, m]` that the result may be written into (the source stack's next slot,
    /// `stack::SourceStack::next_slot`): the backend takes it where it can, and the result
    /// is the returned tensor either way.
    pub into: Option<Tensor<2>>,
}

/// A sublayer's output projection `h w` (`h` `[B, T, k]`, `w` `[k, m]`) -> `[B, T, m]`, added
/// onto `to.onto` in the same operation where one is given, and written into `to.into`
/// where the backend can.
pub fn project(h: Tensor<3>, w: Tensor<2>, to: Dest) -> Tensor<3> {
    let [b, t, k] = h.dims();
    let m = w.dims()[1];
    match (to.onto, to.into) {
        (None, into) => linear_into(h, w, into),
        (Some(c), into) => {
            let flat = onto_into(c.reshape([b * t, m]), h.reshape([b * t, k]), w, into); // [BT, m]
            flat.reshape([b, t, m]) // [BT, m] -> [B, T, m]
        }
    }
}

/// [`matmul_onto`] as the product and the add, for the backends without a fused form (which
/// offer no slot to write into).
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

    /// `addmm`: into `into` where it is given with `c`'s shape (the same floats as in
    /// place), else over `c`'s own memory where `c` is not shared.
    pub fn forward(mut c: T, x: T, w: T, into: Option<T>) -> T {
        let (x, w) = (&x.tensor, &w.tensor);
        if let Some(into) = into.filter(|i| i.tensor.size() == c.tensor.size()) {
            let sum = c.tensor.addmm_out(&into.tensor, x, w);
            return TchTensor::partial(sum, into.storage.clone());
        }
        match c.mut_ops(|c| c.addmm_(x, w)) {
            Some(sum) => sum,
            None => TchTensor::new(c.tensor.addmm(x, w)),
        }
    }

    /// `h w` for `h` `[B, T, k]` and `w` `[k, m]`: `mm` of `h` as `[B T, k]` where `flat`,
    /// else as burn's `matmul` forms it (libtorch's `matmul` of `h` and `w` as `[1, k, m]`:
    /// one product per sequence); written into `into` `[B T, m]` where it is given with that
    /// shape.
    pub fn linear(h: T, w: T, into: Option<T>, flat: bool) -> T {
        let (size, m) = (h.tensor.size(), w.tensor.size()[1]);
        let (n, k) = (size[0] * size[1], size[2]);
        let into = into.filter(|i| i.tensor.size() == [n, m] && i.tensor.is_contiguous());
        let shaped = [size[0], size[1], m];
        let product = match (flat, &into) {
            (true, Some(into)) => h.tensor.reshape([n, k]).mm_out(&into.tensor, &w.tensor), // [B, T, k] -> [BT, k]
            (true, None) => h.tensor.reshape([n, k]).mm(&w.tensor), // [B, T, k] -> [BT, k]
            // A view of exactly the product's shape, so that libtorch writes it where it is.
            (false, Some(into)) => {
                let out = into.tensor.view(shaped); // [BT, m] -> [B, T, m]
                h.tensor.matmul_out(&out, &w.tensor.unsqueeze(0)) // [k, m] -> [1, k, m]
            }
            (false, None) => h.tensor.matmul(&w.tensor.unsqueeze(0)), // [k, m] -> [1, k, m]
        };
        let product = product.view(shaped); // [BT, m] or [B, T, m] -> [B, T, m]
        match into {
            Some(into) => TchTensor::partial(product, into.storage.clone()),
            None => TchTensor::new(product),
        }
    }
}

/// [`KernelOps::tokens_matmul`] composed (and [`KernelOps::tokens_matmul_into`], with no
/// slot to write into): `h` as `[B T, k]` times `w` where `flat`, else
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
    into: Option<FloatTensor<Autodiff<B, C>>>,
) -> FloatTensor<Autodiff<B, C>> {
    let parents = [c.node(), x.node(), w.node()];
    let [c, x, w] = [c, x, w].map(|t| t.into_primitive());
    let into = into.map(|t| t.into_primitive());
    let y = match into {
        Some(into) => B::matmul_onto_into(c, x.clone(), w.clone(), into),
        None => B::matmul_onto(c, x.clone(), w.clone()),
    };
    match MatmulOnto.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish([x, w], y),
        OpsKind::UnTracked(prep) => prep.finish(y),
    }
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

/// The autodiff [`KernelOps::tokens_matmul`] and [`KernelOps::tokens_matmul_into`]: the
/// 2-D form, with [`Linear`] as its backward, where the graph records it; the batched form
/// where it does not. `into` is memory to write in, not an input.
pub(super) fn autodiff_linear<B: Backend + KernelOps, C: CheckpointStrategy>(
    h: FloatTensor<Autodiff<B, C>>,
    w: FloatTensor<Autodiff<B, C>>,
    into: Option<FloatTensor<Autodiff<B, C>>>,
) -> FloatTensor<Autodiff<B, C>> {
    let parents = [h.node(), w.node()];
    let (h, w) = (h.into_primitive(), w.into_primitive());
    let into = into.map(|t| t.into_primitive());
    let product = |h, w, flat| match into {
        Some(into) => B::tokens_matmul_into(h, w, into, flat),
        None => B::tokens_matmul(h, w, flat),
    };
    match Linear.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let y = product(h.clone(), w.clone(), true);
            prep.finish([h, w], y)
        }
        OpsKind::UnTracked(prep) => prep.finish(product(h, w, false)),
    }
}

#[cfg(all(test, feature = "tch"))]
#[allow(deprecated)] // burn-tch, as above.
mod tests {
    use burn::backend::libtorch::TchTensor;
    use tch::{Device, Kind, Tensor};

    use super::tch_kernel::{forward, linear};

    /// The products written into a slot of a padded stack buffer land there, with the bits
    /// of the products that allocate their own output (`matmul` of `[1, k, m]` as burn's
    /// `matmul` runs it, `mm` of `[B T, k]`, `addmm`), at a sweep size and at the bench's
    /// reference size.
    #[test]
    fn products_written_into_a_slot_are_the_same_floats_in_place() {
        tch::manual_seed(7);
        for (b, t, k, m) in [(16, 128, 256, 64), (8, 256, 1024, 256), (3, 5, 7, 9)] {
            let n = b * t;
            let options = (Kind::Float, Device::Cpu);
            let buffer = TchTensor::new(Tensor::zeros([3, n + 1, m], options));
            let slot = || {
                let view = buffer
                    .tensor
                    .narrow(0, 1, 1)
                    .narrow(1, 0, n)
                    .reshape([n, m]); // [N, m]
                TchTensor::partial(view, buffer.storage.clone())
            };
            let at = slot().tensor.data_ptr();
            let h = Tensor::randn([b, t, k], options);
            let w = Tensor::randn([k, m], options) * 0.05;
            let c = Tensor::randn([n, m], options);

            let batched = h.matmul(&w.unsqueeze(0)).reshape([n, m]);
            let flat = h.reshape([n, k]).mm(&w);
            for (is_flat, alone) in [(false, &batched), (true, &flat)] {
                let wrap = |t: &Tensor| TchTensor::new(t.shallow_clone());
                let into = linear(wrap(&h), wrap(&w), Some(slot()), is_flat);
                assert_eq!(
                    into.tensor.data_ptr(),
                    at,
                    "flat {is_flat}: wrote elsewhere"
                );
                assert!(
                    into.tensor.reshape([n, m]).equal(alone),
                    "flat {is_flat}: the bits differ from the product alone"
                );
                let own = linear(wrap(&h), wrap(&w), None, is_flat);
                assert!(
                    own.tensor.reshape([n, m]).equal(alone),
                    "flat {is_flat}: no slot"
                );
            }

            let x = h.reshape([n, k]);
            let in_place = c.copy().addmm_(&x, &w);
            let wrap = |t: &Tensor| TchTensor::new(t.shallow_clone());
            let onto = forward(wrap(&c), wrap(&x), wrap(&w), Some(slot()));
            assert_eq!(onto.tensor.data_ptr(), at, "addmm wrote elsewhere");
            assert!(
                onto.tensor.equal(&in_place),
                "addmm_out's bits differ from addmm_"
            );
            assert!(
                onto.tensor.equal(&c.addmm(&x, &w)),
                "addmm_out's bits differ from addmm"
            );
            let own = forward(wrap(&c.copy()), wrap(&x), wrap(&w), None);
            assert_ne!(own.tensor.data_ptr(), at, "no slot, yet it wrote there");
            assert!(own.tensor.equal(&in_place), "no slot: the bits differ");
        }
    }
}
