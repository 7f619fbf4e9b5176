//! The products of a sublayer's inputs with its weights, each one 2-D product over all the
//! batch's tokens ([`linear`]), and a residual branch's last projection added onto the sum
//! that the branch joins, `c + x w`, as one operation. On libtorch that is `addmm`, whose
//! matrix product adds `c` into its output as it writes it, and writes it over `c` itself
//! where nothing else holds `c` (in inference, a block's partial sum once the layer's mixing
//! step has read it). Composed, it is the product and then an add that reads both `[N, m]`
//! tensors and writes a third. Block AttnRes's layers add onto their block's partial sum
//! this way (`residual::stacked`); the baseline's add goes through the next layer's PreNorm
//! instead (`norm::add_rms_norm`).
//!
//! A product of `[B, T, k]` by a weight `[k, m]` is formed as `[B T, k] x [k, m]`, not as
//! burn's `matmul` of `[B, T, k]` by `[1, k, m]`, which libtorch runs as a batched product
//! (one per sequence, each `T` rows) and whose backward forms one weight gradient per
//! sequence and sums them. The 2-D product is one larger GEMM each way, as `nn.Linear`
//! forms it (docs/performance.md, session 30).
//!
//! A projection whose result completes a block of AttnRes (each of Full AttnRes's layers, the
//! last of each block in Block AttnRes) may be given the source stack's next slot to write
//! it into ([`Dest::into`], `kernels::stack`), so that the push that follows has nothing to
//! copy. libtorch writes there with the `_out` form of the same product (`addmm_out`, or
//! `mm_out` where there is no sum to join), the same floats; elsewhere the slot is not
//! offered and nothing changes.
//!
//! The backward is plain tensor operations on every backend: `dc = g`, `dx = g w^T`,
//! `dw = x^T g`, the terms of burn's own `matmul` backward for a 2-D product, so that the
//! gradients have the same floats with a slot or without one.

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Backend, Dispatch, TensorMetadata, tensor::FloatTensor};
use burn::tensor::Tensor;

use super::KernelOps;

/// `h w` for every token: `h` `[B, T, k]`, `w` `[k, m]` -> `[B, T, m]`, one 2-D product.
pub fn linear(h: Tensor<3>, w: Tensor<2>) -> Tensor<3> {
    let [b, t, k] = h.dims();
    let m = w.dims()[1];
    let flat = h.reshape([b * t, k]).matmul(w); // [B, T, k] -> [BT, k] -> [BT, m]
    flat.reshape([b, t, m]) // [BT, m] -> [B, T, m]
}

/// `c + x w`: `c` `[N, m]`, `x` `[N, k]`, `w` `[k, m]` -> `[N, m]`.
pub fn matmul_onto(c: Tensor<2>, x: Tensor<2>, w: Tensor<2>) -> Tensor<2> {
    onto_into(Some(c), x, w, None)
}

/// `c + x w` (`x w` without `c`), written into `into` `[N, m]` where the backend can.
fn onto_into(
    c: Option<Tensor<2>>,
    x: Tensor<2>,
    w: Tensor<2>,
    into: Option<Tensor<2>>,
) -> Tensor<2> {
    let none = || Tensor::empty([0, w.dims()[1]], &w.device());
    let (c, into) = (c.unwrap_or_else(none), into.unwrap_or_else(none));
    Tensor::from_dispatch(<Dispatch as KernelOps>::matmul_onto(
        c.into_dispatch(),
        x.into_dispatch(),
        w.into_dispatch(),
        into.into_dispatch(),
    ))
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
    if to.onto.is_none() && to.into.is_none() {
        return linear(h, w);
    }
    let c = to.onto.map(|c| c.reshape([b * t, m])); // [B, T, m] -> [BT, m]
    let flat = onto_into(c, h.reshape([b * t, k]), w, to.into); // [BT, m]
    flat.reshape([b, t, m]) // [BT, m] -> [B, T, m]
}

/// [`matmul_onto`] as the product and the add (the product alone where `c` has no rows),
/// for the backends without a fused form (which offer no slot to write into).
pub(super) fn composed<B: Backend>(
    c: FloatTensor<B>,
    x: FloatTensor<B>,
    w: FloatTensor<B>,
) -> FloatTensor<B> {
    let product = B::float_matmul(x, w);
    match c.shape().dims::<2>()[0] {
        0 => product,
        _ => B::float_add(c, product),
    }
}

#[cfg(feature = "tch")]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
pub(super) mod tch_kernel {
    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use burn::backend::tensor::FloatTensor;

    type T = FloatTensor<LibTorch>;

    /// `addmm` (`mm` where `c` has no rows): into `into` where it has the product's shape
    /// (the same floats as in place), else over `c`'s own memory where `c` is not shared.
    pub fn forward(mut c: T, x: T, w: T, into: T) -> T {
        let (x, w) = (&x.tensor, &w.tensor);
        let shape = [x.size()[0], w.size()[1]];
        let into_fits = into.tensor.size() == shape;
        if c.tensor.size()[0] == 0 {
            return match into_fits {
                true => TchTensor::partial(x.mm_out(&into.tensor, w), into.storage.clone()),
                false => TchTensor::new(x.mm(w)),
            };
        }
        if into_fits {
            let sum = c.tensor.addmm_out(&into.tensor, x, w);
            return TchTensor::partial(sum, into.storage.clone());
        }
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
    into: FloatTensor<Autodiff<B, C>>,
) -> FloatTensor<Autodiff<B, C>> {
    let parents = [c.node(), x.node(), w.node()];
    let [c, x, w, into] = [c, x, w, into].map(|t| t.into_primitive());
    let y = B::matmul_onto(c, x.clone(), w.clone(), into);
    match MatmulOnto.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish([x, w], y),
        OpsKind::UnTracked(prep) => prep.finish(y),
    }
}

#[cfg(all(test, feature = "tch"))]
#[allow(deprecated)] // burn-tch, as above.
mod tests {
    use burn::backend::libtorch::TchTensor;
    use tch::{Device, Kind, Tensor};

    use super::tch_kernel::forward;

    /// The products written into a slot of a padded stack buffer land there, with the bits
    /// of the products that allocate their own output (`mm`, `addmm`), at a sweep size and
    /// at the bench's reference size.
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

            let x = h.reshape([n, k]);
            let wrap = |t: &Tensor| TchTensor::new(t.shallow_clone());
            let none = || TchTensor::new(Tensor::empty([0, m], options));
            let into = forward(none(), wrap(&x), wrap(&w), slot());
            assert_eq!(into.tensor.data_ptr(), at, "mm_out wrote elsewhere");
            assert!(into.tensor.equal(&x.mm(&w)), "mm_out's bits differ from mm");
            let alone = forward(none(), wrap(&x), wrap(&w), none());
            assert!(
                alone.tensor.equal(&x.mm(&w)),
                "the product without a slot differs"
            );

            let in_place = c.copy().addmm_(&x, &w);
            let wrap = |t: &Tensor| TchTensor::new(t.shallow_clone());
            let onto = forward(wrap(&c), wrap(&x), wrap(&w), slot());
            assert_eq!(onto.tensor.data_ptr(), at, "addmm wrote elsewhere");
            assert!(
                onto.tensor.equal(&in_place),
                "addmm_out's bits differ from addmm_"
            );
            assert!(
                onto.tensor.equal(&c.addmm(&x, &w)),
                "addmm_out's bits differ from addmm"
            );
        }
    }
}
