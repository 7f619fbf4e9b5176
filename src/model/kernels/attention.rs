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

use super::{KernelOps, composed};

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
mod tch_kernels {
    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use burn::backend::tensor::FloatTensor;

    use super::super::{KernelOps, composed};

    /// libtorch's flash attention for the CPU, forward and backward, in f32. Elsewhere (CUDA,
    /// bf16) the forward is libtorch's fused attention and the backward the composed one: the
    /// CUDA backward kernels are not tested here.
    fn flash(t: &TchTensor) -> bool {
        t.tensor.device() == tch::Device::Cpu && t.tensor.kind() == tch::Kind::Float
    }

    impl KernelOps for LibTorch {
        fn causal_attention(
            q: FloatTensor<Self>,
            k: FloatTensor<Self>,
            v: FloatTensor<Self>,
        ) -> (FloatTensor<Self>, FloatTensor<Self>) {
            if !flash(&q) {
                // libtorch's own pick of kernel (flash or memory-efficient on CUDA) for the
                // context; the composed backward recomputes the probabilities, so it needs
                // no log-sum-exp.
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

        fn causal_attention_backward(
            grad: FloatTensor<Self>,
            q: FloatTensor<Self>,
            k: FloatTensor<Self>,
            v: FloatTensor<Self>,
            out: FloatTensor<Self>,
            lse: FloatTensor<Self>,
        ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
            if !flash(&q) {
                return composed::causal_attention_backward::<Self>(grad, q, k, v, out);
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
}

#[cfg(feature = "flex")]
impl KernelOps for burn::backend::Flex {
    fn causal_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::causal_attention::<Self>(q, k, v)
    }

    fn causal_attention_backward(
        grad: FloatTensor<Self>,
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        out: FloatTensor<Self>,
        _lse: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        composed::causal_attention_backward::<Self>(grad, q, k, v, out)
    }
}

#[derive(Debug)]
struct CausalAttention;

/// What the backward keeps: the inputs, the context and its log-sum-exp.
type Saved<B> = [FloatTensor<B>; 5];

impl<B: Backend + KernelOps> Backward<B, 3> for CausalAttention {
    type State = Saved<B>;

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

impl<B: Backend + KernelOps, C: CheckpointStrategy> KernelOps for Autodiff<B, C> {
    fn causal_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
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
        (out, Self::from_inner(lse))
    }

    /// Not differentiable itself (no second derivatives): its outputs are constants.
    fn causal_attention_backward(
        grad: FloatTensor<Self>,
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        out: FloatTensor<Self>,
        lse: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let (dq, dk, dv) = B::causal_attention_backward(
            grad.into_primitive(),
            q.into_primitive(),
            k.into_primitive(),
            v.into_primitive(),
            out.into_primitive(),
            lse.into_primitive(),
        );
        (
            Self::from_inner(dq),
            Self::from_inner(dk),
            Self::from_inner(dv),
        )
    }
}
