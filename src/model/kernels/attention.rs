//! Causal self-attention with a fused backward. burn's autodiff differentiates attention as
//! its composition (scores, mask, softmax, weighted sum: a `[B, H, T, T]` tensor through a
//! dozen kernels each way); here libtorch's flash-attention kernels for the CPU do the
//! forward and the backward in one pass each, skipping the masked half of the scores, as
//! PyTorch's `scaled_dot_product_attention` does.

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{AutodiffBackend, Backend, Dispatch, tensor::FloatTensor};
use burn::tensor::Tensor;

use super::KernelOps;

/// Causal softmax attention, scale `1/sqrt(hd)`: `[B, H, T, hd]` x3 -> `[B, H, T, hd]`.
pub fn causal_attention(q: Tensor<4>, k: Tensor<4>, v: Tensor<4>) -> Tensor<4> {
    let (out, _lse) = <Dispatch as KernelOps>::causal_attention(
        q.into_dispatch(),
        k.into_dispatch(),
        v.into_dispatch(),
    );
    Tensor::from_dispatch(out)
}

/// The composed form, whatever the backend: what the kernels are tested against.
pub fn causal_attention_composed(q: Tensor<4>, k: Tensor<4>, v: Tensor<4>) -> Tensor<4> {
    let options = burn::tensor::ops::AttentionModuleOptions {
        is_causal: true,
        ..Default::default()
    };
    burn::tensor::module::attention_fallback(q, k, v, None, None, options)
}

#[cfg(feature = "tch")]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
pub(super) mod tch_kernels {
    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use burn::backend::tensor::FloatTensor;

    use crate::model::kernels::composed;
    use crate::model::kernels::tch_memory::cpu_f32;

    type T = FloatTensor<LibTorch>;

    /// libtorch's flash attention for the CPU, forward and backward, in f32. Elsewhere (CUDA,
    /// bf16) the forward is libtorch's fused attention and the backward the composed one: the
    /// CUDA backward kernels are not tested here.
    fn flash(t: &TchTensor) -> bool {
        cpu_f32(&t.tensor)
    }

    pub fn forward(q: T, k: T, v: T) -> (T, T) {
        if !flash(&q) {
            // libtorch's own pick of kernel for the context; the composed backward
            // recomputes the probabilities, so it needs no log-sum-exp.
            let out = tch::Tensor::scaled_dot_product_attention(
                &q.tensor,
                &k.tensor,
                &v.tensor,
                None::<tch::Tensor>,
                0.0,
                true,
                None,
                false,
            );
            let none = tch::Tensor::empty([0], (q.tensor.kind(), q.tensor.device()));
            return (TchTensor::new(out), TchTensor::new(none));
        }
        let (out, lse) = tch::Tensor::internal_scaled_dot_product_flash_attention_for_cpu(
            &q.tensor,
            &k.tensor,
            &v.tensor,
            0.0,
            true,
            None::<tch::Tensor>,
            None,
        );
        (TchTensor::new(out), TchTensor::new(lse))
    }

    pub fn backward(grad: T, q: T, k: T, v: T, out: T, lse: T) -> (T, T, T) {
        if !flash(&q) {
            return composed::causal_attention_backward::<LibTorch>(grad, q, k, v, out);
        }
        let (dq, dk, dv) =
            tch::Tensor::internal_scaled_dot_product_flash_attention_for_cpu_backward(
                &grad.tensor.contiguous(),
                &q.tensor,
                &k.tensor,
                &v.tensor,
                &out.tensor,
                &lse.tensor,
                0.0,
                true,
                None::<tch::Tensor>,
                None,
            );
        (TchTensor::new(dq), TchTensor::new(dk), TchTensor::new(dv))
    }
}

#[derive(Debug)]
struct CausalAttention;

impl<B: Backend + KernelOps> Backward<B, 3> for CausalAttention {
    /// The inputs, the context and its log-sum-exp.
    type State = [FloatTensor<B>; 5];

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [q, k, v, out, lse] = ops.state;
        let grad = grads.consume::<B>(&ops.node);
        let (dq, dk, dv) = B::causal_attention_backward(grad, q, k, v, out, lse);
        for (parent, g) in ops.parents.into_iter().zip([dq, dk, dv]) {
            if let Some(node) = parent {
                grads.register::<B>(node.id, g);
            }
        }
    }
}

/// A float tensor of the autodiff backend over `B`.
type Tracked<B, C> = FloatTensor<Autodiff<B, C>>;

/// The autodiff forward: the backend's forward, with [`CausalAttention`] as its backward.
pub(super) fn autodiff_forward<B: Backend + KernelOps, C: CheckpointStrategy>(
    q: Tracked<B, C>,
    k: Tracked<B, C>,
    v: Tracked<B, C>,
) -> (Tracked<B, C>, Tracked<B, C>) {
    let parents = [q.node(), k.node(), v.node()];
    let (q, k, v) = (q.into_primitive(), k.into_primitive(), v.into_primitive());
    let (out, lse) = B::causal_attention(q.clone(), k.clone(), v.clone());
    let out = match CausalAttention
        .prepare::<C>(parents)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish([q, k, v, out.clone(), lse.clone()], out),
        OpsKind::UnTracked(prep) => prep.finish(out),
    };
    (out, Autodiff::<B, C>::from_inner(lse))
}
