//! One AttnRes mixing step as one operation (SPEC section 3, docs/performance.md): the
//! softmax over a layer's sources of their pseudo-query logits, and the weighted sum, for a
//! single head. The sources come as the completed sources kept stacked `[K, N, d]`
//! (`kernels::stack`) and the block's partial sum `[N, d]` beside them (not copied in).
//! Composed, a step is a dozen kernels forward and twenty backward; fused, one pass over the
//! sources each way, by `mix_rows` on the CPU in f32.

use std::sync::{Arc, Mutex};

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{AutodiffBackend, Backend, Dispatch, TensorMetadata, tensor::FloatTensor};
use burn::tensor::Tensor;
use burn::tensor::activation::softmax;

use super::KernelOps;
use super::stack_grad::StackGrad;
use super::step_record::StepRecord;

/// `x = sum_k a_k v_k`, `a = softmax_k(v_k . q / rms(v_k))` (`v_k . q` without the key
/// norm), token by token: the completed sources `stacked` `[K, N, d]`, the partial sum
/// `partial` `[N, d]` as one more source (or `None`), the step's effective query `q` `[d]`
/// (the key norm's gain folded in) -> `x` `[N, d]`.
pub fn depth_mix(
    stacked: Tensor<3>,
    partial: Option<Tensor<2>>,
    q: Tensor<1>,
    key_norm: bool,
) -> Tensor<2> {
    depth_mix_into(stacked, partial, q, key_norm, StackGrad::none())
}

/// [`depth_mix`] whose backward adds the stacked sources' gradient into `acc`, the buffer of
/// the [`SourceStack`](super::stack::SourceStack) they come from (`StackGrad::none()`: it
/// registers its own).
pub(super) fn depth_mix_into(
    stacked: Tensor<3>,
    partial: Option<Tensor<2>>,
    q: Tensor<1>,
    key_norm: bool,
    acc: StackGrad,
) -> Tensor<2> {
    let [_, n, d] = stacked.dims();
    let partial = partial.unwrap_or_else(|| no_partial(&stacked, d));
    debug_assert!(matches!(partial.dims(), [0, _]) || partial.dims() == [n, d]);
    let (x, _saved) = <Dispatch as KernelOps>::depth_mix(
        stacked.into_dispatch(),
        partial.into_dispatch(),
        q.into_dispatch(),
        key_norm,
        acc,
    );
    Tensor::from_dispatch(x)
}

/// A partial sum of zero rows: the kernels' sign that the step has none.
fn no_partial(stacked: &Tensor<3>, d: usize) -> Tensor<2> {
    Tensor::empty([0, d], &stacked.device())
}

/// The composed form in tensor operations, differentiated op by op: what the kernel is
/// tested against.
pub fn depth_mix_composed(
    stacked: Tensor<3>,
    partial: Option<Tensor<2>>,
    q: Tensor<1>,
    key_norm: bool,
) -> Tensor<2> {
    let [_, n, d] = stacked.dims();
    let sources = match partial {
        Some(p) => Tensor::cat(vec![stacked, p.unsqueeze()], 0),
        None => stacked,
    }; // [K', N, d]
    let s = (sources.clone() * q.reshape([1, 1, d])).sum_dim(2); // [K', N, 1]
    let z = if key_norm {
        s * (sources.clone().square().mean_dim(2) + crate::model::norm::RMS_EPS)
            .sqrt()
            .recip()
    } else {
        s
    };
    let a = softmax(z, 0);
    (sources * a).sum_dim(0).reshape([n, d])
}

#[cfg(feature = "tch")]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
pub(super) mod tch_kernel;

#[derive(Debug)]
struct DepthMix;

impl<B: Backend + KernelOps> Backward<B, 3> for DepthMix {
    /// The inputs, what the forward kept for the backward, the output where the stack's
    /// sources get their gradients at their pushes, whether the key norm applies and where
    /// the stacked sources' gradient goes.
    type State = ([FloatTensor<B>; 4], Option<FloatTensor<B>>, bool, StackGrad);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let ([stacked, partial, q, saved], x, key_norm, acc) = ops.state;
        let grad = grads.consume::<B>(&ops.node);
        let k = stacked.shape().dims::<3>()[0];
        let [stacked_node, partial_node, q_node] = ops.parents;
        // The pushes add to the query's gradient, so its node must run its backward after
        // theirs; autodiff runs the deepest nodes first, and a query of depth <= 1 (a
        // parameter, or the product of two) lies above the embedding's push.
        let deferred = x
            .filter(|_| q_node.as_ref().is_none_or(|node| node.order <= 1))
            .and_then(|x| {
                let [g, v, p, qs, s] = [&grad, &stacked, &partial, &q, &saved].map(|t| t.clone());
                B::depth_mix_backward_at_push(g, v, p, qs, s, x, key_norm)
            });
        if let Some((gx, dp, dq)) = deferred {
            // The stacked sources' gradients, and the rest of the query's, come at their
            // pushes (`kernels::at_push`); the query's at the first source's.
            acc.record::<B>(StepRecord {
                g: grad,
                q,
                saved,
                gx,
                completed: k,
                key_norm,
                q_node: q_node.map(|node| node.id),
                dq: Arc::new(Mutex::new(dq)),
            });
            if let Some(node) = partial_node {
                grads.register::<B>(node.id, dp);
            }
            return;
        }
        let (into, written) = acc.take::<B>(&stacked);
        let (dv, dp, dq) =
            B::depth_mix_backward(grad, stacked, partial, q, saved, key_norm, into, written);
        // A stack's sources get their sums at their pushes (`kernels::stack`).
        let dv = if acc.is_some() {
            acc.put::<B>(dv, k);
            None
        } else {
            Some(dv)
        };
        let registered = [
            (stacked_node, dv),
            (partial_node, Some(dp)),
            (q_node, Some(dq)),
        ];
        for (parent, g) in registered {
            if let (Some(node), Some(g)) = (parent, g) {
                grads.register::<B>(node.id, g);
            }
        }
    }
}

/// The autodiff forward: the backend's forward, with [`DepthMix`] as its backward; returns
/// the mix and what the backend's forward kept (a constant, not differentiable).
#[allow(clippy::type_complexity)] // a pair of autodiff tensors
pub(super) fn autodiff_forward<B: Backend + KernelOps, C: CheckpointStrategy>(
    stacked: FloatTensor<Autodiff<B, C>>,
    partial: FloatTensor<Autodiff<B, C>>,
    q: FloatTensor<Autodiff<B, C>>,
    key_norm: bool,
    acc: StackGrad,
) -> (FloatTensor<Autodiff<B, C>>, FloatTensor<Autodiff<B, C>>) {
    let parents = [stacked.node(), partial.node(), q.node()];
    let [stacked, partial, q] = [stacked, partial, q].map(|t| t.into_primitive());
    let (x, saved) = B::depth_mix(
        stacked.clone(),
        partial.clone(),
        q.clone(),
        key_norm,
        StackGrad::none(),
    );
    let kept = Autodiff::<B, C>::from_inner(saved.clone());
    let x = match DepthMix.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let out = acc.at_push().then(|| x.clone());
            prep.finish(([stacked, partial, q, saved], out, key_norm, acc), x)
        }
        OpsKind::UnTracked(prep) => prep.finish(x),
    };
    (x, kept)
}
