//! Block AttnRes's phase-2 merge (SPEC section 5) as one operation: scoring the block's
//! partial sum and folding it into the phase-1 result by the online-softmax update. Composed,
//! it is about ten elementwise kernels forward and fifteen backward over `[B, T, d]` per
//! layer; fused, one pass forward and one backward, by `rows::merge_forward` /
//! `merge_backward` on the CPU in f32 (docs/performance.md: it changed Block's training step
//! by 1-2%).

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Backend, Dispatch, tensor::FloatTensor};
use burn::tensor::Tensor;

use super::KernelOps;

/// `x = o1 + sigmoid(z - lse) (p - o1)` with `z = p.q / rms(p)` (`p.q` without the key
/// norm), per head: the partial sum `p` `[N, d]`, the phase-1 result `o1` `[H, N, 1, dh]`
/// and its log-sum-exp `lse` `[H, N, 1, 1]`, the step's effective query `q` `[d]` ->
/// `x` `[N, d]`, token-major.
pub fn block_merge(
    p: Tensor<2>,
    o1: Tensor<4>,
    q: Tensor<1>,
    lse: Tensor<4>,
    key_norm: bool,
) -> Tensor<2> {
    Tensor::from_dispatch(<Dispatch as KernelOps>::block_merge(
        p.into_dispatch(),
        o1.into_dispatch(),
        q.into_dispatch(),
        lse.into_dispatch(),
        key_norm,
    ))
}

/// The composed form, differentiated op by op: what the kernel is tested against.
pub fn block_merge_composed(
    p: Tensor<2>,
    o1: Tensor<4>,
    q: Tensor<1>,
    lse: Tensor<4>,
    key_norm: bool,
) -> Tensor<2> {
    let [n, d] = p.dims();
    let [h, _, _, dh] = o1.dims();
    let p3 = p.clone().reshape([n, h, dh]);
    let o1 = o1.reshape([h, n, dh]).swap_dims(0, 1); // [N, H, dh]
    let s = (p3.clone() * q.reshape([1, h, dh])).sum_dim(2); // [N, H, 1]
    let z = if key_norm {
        let u = (p.square().mean_dim(1) + crate::model::norm::RMS_EPS)
            .sqrt()
            .recip(); // [N, 1]
        s * u.reshape([n, 1, 1])
    } else {
        s
    };
    let lse = lse.reshape([h, n, 1]).swap_dims(0, 1); // [N, H, 1]
    let beta = burn::tensor::activation::sigmoid(z - lse);
    (o1.clone() + (p3 - o1) * beta).reshape([n, d])
}

#[cfg(feature = "tch")]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
pub(super) mod tch_kernel {
    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use burn::backend::tensor::FloatTensor;

    use super::super::composed;
    use super::super::rows::{self, Rows};
    use super::super::tch_memory::{empty, floats, rows_of, slice_mut};

    /// The kernel's inputs when it applies (one head, f32 on the CPU).
    struct Inputs<'a> {
        p: &'a [f32],
        o1: Rows<'a>,
        q: &'a [f32],
        lse: Rows<'a>,
    }

    fn inputs<'a>(
        p: &'a tch::Tensor,
        o1: &'a tch::Tensor,
        q: &'a tch::Tensor,
        lse: &'a tch::Tensor,
    ) -> Option<Inputs<'a>> {
        if o1.size()[0] != 1 {
            return None;
        }
        let (o1, o1_stride) = rows_of(o1, 1)?;
        let (lse, lse_stride) = rows_of(lse, 1)?;
        Some(Inputs {
            p: floats(p)?,
            o1: Rows {
                data: o1,
                stride: o1_stride,
            },
            q: floats(q)?,
            lse: Rows {
                data: lse,
                stride: lse_stride,
            },
        })
    }

    pub fn forward(
        p: FloatTensor<LibTorch>,
        o1: FloatTensor<LibTorch>,
        q: FloatTensor<LibTorch>,
        lse: FloatTensor<LibTorch>,
        key_norm: bool,
    ) -> FloatTensor<LibTorch> {
        let p_c = p.tensor.contiguous();
        let q_c = q.tensor.contiguous();
        let Some(i) = inputs(&p_c, &o1.tensor, &q_c, &lse.tensor) else {
            return composed::block_merge::<LibTorch>(p, o1, q, lse, key_norm);
        };
        let mut x = empty(&p_c.size());
        rows::merge_forward(i.p, i.o1, i.q, i.lse, key_norm, slice_mut(&mut x));
        TchTensor::new(x)
    }

    pub fn backward(
        grad: FloatTensor<LibTorch>,
        p: FloatTensor<LibTorch>,
        o1: FloatTensor<LibTorch>,
        q: FloatTensor<LibTorch>,
        lse: FloatTensor<LibTorch>,
        key_norm: bool,
    ) -> [FloatTensor<LibTorch>; 4] {
        let (p_c, q_c, g_c) = (
            p.tensor.contiguous(),
            q.tensor.contiguous(),
            grad.tensor.contiguous(),
        );
        let (Some(i), Some(g)) = (inputs(&p_c, &o1.tensor, &q_c, &lse.tensor), floats(&g_c)) else {
            return composed::block_merge_backward::<LibTorch>(grad, p, o1, q, lse, key_norm);
        };
        let n = p_c.size()[0];
        let mut dp = empty(&p_c.size());
        let mut do1 = empty(&o1.tensor.size());
        let mut dlse = empty(&[1, n, 1, 1]);
        let dq = rows::merge_backward(
            g,
            i.p,
            i.o1,
            i.q,
            i.lse,
            key_norm,
            slice_mut(&mut dp),
            slice_mut(&mut do1),
            slice_mut(&mut dlse),
        );
        let dq = tch::Tensor::from_slice(&dq);
        [dp, do1, dq, dlse].map(TchTensor::new)
    }
}

#[derive(Debug)]
struct BlockMerge;

impl<B: Backend + KernelOps> Backward<B, 4> for BlockMerge {
    /// The inputs and whether the key norm applies.
    type State = ([FloatTensor<B>; 4], bool);

    fn backward(self, ops: Ops<Self::State, 4>, grads: &mut Gradients, _: &mut Checkpointer) {
        let ([p, o1, q, lse], key_norm) = ops.state;
        let grad = grads.consume::<B>(&ops.node);
        let (dp, do1, dq, dlse) = B::block_merge_backward(grad, p, o1, q, lse, key_norm);
        for (parent, g) in ops.parents.into_iter().zip([dp, do1, dq, dlse]) {
            if let Some(node) = parent {
                grads.register::<B>(node.id, g);
            }
        }
    }
}

/// The autodiff forward: the backend's forward, with [`BlockMerge`] as its backward.
pub(super) fn autodiff_forward<B: Backend + KernelOps, C: CheckpointStrategy>(
    p: FloatTensor<Autodiff<B, C>>,
    o1: FloatTensor<Autodiff<B, C>>,
    q: FloatTensor<Autodiff<B, C>>,
    lse: FloatTensor<Autodiff<B, C>>,
    key_norm: bool,
) -> FloatTensor<Autodiff<B, C>> {
    let parents = [p.node(), o1.node(), q.node(), lse.node()];
    let inputs = [p, o1, q, lse].map(|t| t.into_primitive());
    let [p, o1, q, lse] = inputs.clone();
    let x = B::block_merge(p, o1, q, lse, key_norm);
    match BlockMerge.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish((inputs, key_norm), x),
        OpsKind::UnTracked(prep) => prep.finish(x),
    }
}
