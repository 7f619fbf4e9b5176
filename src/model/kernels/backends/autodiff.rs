//! [`KernelOps`] under autodiff: the inner backend's forward, each with its hand-written
//! backward pass (or the separate operations, where a backward must read what a fused
//! forward would not write).

use std::any::Any;
use std::sync::{Arc, Mutex};

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::{AutodiffBackend, Backend, tensor::FloatTensor};

use crate::model::kernels::adamw::AdamWStep;
use crate::model::kernels::stack::StackGrad;
use crate::model::kernels::step_record::{StepRecord, unbox};
use crate::model::kernels::{
    KernelOps, attention, linear, mix, norm, rotary, sinkhorn, stack, streams, swiglu,
};

impl<B: Backend + KernelOps, C: CheckpointStrategy> KernelOps for Autodiff<B, C> {
    fn causal_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        attention::autodiff_forward::<B, C>(q, k, v)
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
        let [grad, q, k, v, out, lse] = [grad, q, k, v, out, lse].map(|t| t.into_primitive());
        let (dq, dk, dv) = B::causal_attention_backward(grad, q, k, v, out, lse);
        (
            Self::from_inner(dq),
            Self::from_inner(dk),
            Self::from_inner(dv),
        )
    }

    fn depth_mix(
        stacked: FloatTensor<Self>,
        partial: FloatTensor<Self>,
        q: FloatTensor<Self>,
        key_norm: bool,
        acc: StackGrad,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        mix::autodiff_forward::<B, C>(stacked, partial, q, key_norm, acc)
    }

    /// Not differentiable itself, as above.
    fn depth_mix_backward(
        grad: FloatTensor<Self>,
        stacked: FloatTensor<Self>,
        partial: FloatTensor<Self>,
        q: FloatTensor<Self>,
        saved: FloatTensor<Self>,
        key_norm: bool,
        into: FloatTensor<Self>,
        written: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let inner = [grad, stacked, partial, q, saved, into].map(|t| t.into_primitive());
        let [grad, stacked, partial, q, saved, into] = inner;
        let (dv, dp, dq) =
            B::depth_mix_backward(grad, stacked, partial, q, saved, key_norm, into, written);
        (
            Self::from_inner(dv),
            Self::from_inner(dp),
            Self::from_inner(dq),
        )
    }

    /// Not differentiable itself, as above.
    fn depth_mix_backward_at_push(
        grad: FloatTensor<Self>,
        stacked: FloatTensor<Self>,
        partial: FloatTensor<Self>,
        q: FloatTensor<Self>,
        saved: FloatTensor<Self>,
        x: FloatTensor<Self>,
        key_norm: bool,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>)> {
        let inner = [grad, stacked, partial, q, saved, x].map(|t| t.into_primitive());
        let [grad, stacked, partial, q, saved, x] = inner;
        let (gx, dp, dq) =
            B::depth_mix_backward_at_push(grad, stacked, partial, q, saved, x, key_norm)?;
        Some((
            Self::from_inner(gx),
            Self::from_inner(dp),
            Self::from_inner(dq),
        ))
    }

    /// Not differentiable itself, as above; the records' tensors are taken as constants.
    fn stack_source_grad(
        v: FloatTensor<Self>,
        lo: usize,
        sum: FloatTensor<Self>,
        steps: Vec<Box<dyn Any + Send>>,
    ) -> FloatTensor<Self> {
        let outer = unbox::<Self>(steps);
        let inner: Vec<StepRecord<B>> = outer
            .iter()
            .map(|s| StepRecord::<B> {
                g: s.g.clone().into_primitive(),
                q: s.q.clone().into_primitive(),
                saved: s.saved.clone().into_primitive(),
                gx: s.gx.clone().into_primitive(),
                completed: s.completed,
                key_norm: s.key_norm,
                q_node: s.q_node,
                dq: Arc::new(Mutex::new(s.dq().into_primitive())),
            })
            .collect();
        let boxed = inner
            .iter()
            .map(|s| Box::new(s.clone()) as Box<dyn Any + Send>);
        let (v, sum) = (v.into_primitive(), sum.into_primitive());
        let dv = B::stack_source_grad(v, lo, sum, boxed.collect());
        for (outer, inner) in outer.iter().zip(&inner) {
            *outer.dq.lock().unwrap_or_else(|e| e.into_inner()) = Self::from_inner(inner.dq());
        }
        Self::from_inner(dv)
    }

    fn stack_push(
        stacked: FloatTensor<Self>,
        v: FloatTensor<Self>,
        capacity: usize,
        acc: StackGrad,
    ) -> FloatTensor<Self> {
        stack::autodiff_forward::<B, C>(stacked, v, capacity, acc)
    }

    fn rotary(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        rotary::autodiff_forward::<B, C>(x, cos, sin)
    }

    /// Not differentiable itself, as above.
    fn rotary_backward(
        grad: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let [grad, cos, sin] = [grad, cos, sin].map(|t| t.into_primitive());
        Self::from_inner(B::rotary_backward(grad, cos, sin))
    }

    fn swiglu(
        a: FloatTensor<Self>,
        b: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        swiglu::autodiff_forward::<B, C>(a, b)
    }

    /// Not differentiable itself, as above.
    fn swiglu_backward(
        grad: FloatTensor<Self>,
        a: FloatTensor<Self>,
        b: FloatTensor<Self>,
        s: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let [grad, a, b, s] = [grad, a, b, s].map(|t| t.into_primitive());
        let (da, db) = B::swiglu_backward(grad, a, b, s);
        (Self::from_inner(da), Self::from_inner(db))
    }

    fn sinkhorn(logits: FloatTensor<Self>, iters: usize) -> (FloatTensor<Self>, FloatTensor<Self>) {
        sinkhorn::autodiff_forward::<B, C>(logits, iters)
    }

    /// Not differentiable itself, as above.
    fn sinkhorn_backward(
        grad: FloatTensor<Self>,
        exp: FloatTensor<Self>,
        iters: usize,
    ) -> FloatTensor<Self> {
        let [grad, exp] = [grad, exp].map(|t| t.into_primitive());
        Self::from_inner(B::sinkhorn_backward(grad, exp, iters))
    }

    fn stream_read(h: FloatTensor<Self>, r: FloatTensor<Self>) -> FloatTensor<Self> {
        streams::autodiff_read::<B, C>(h, r)
    }

    /// Not differentiable itself, as above.
    fn stream_read_backward(
        grad: FloatTensor<Self>,
        h: FloatTensor<Self>,
        r: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let [grad, h, r] = [grad, h, r].map(|t| t.into_primitive());
        let (dh, dr) = B::stream_read_backward(grad, h, r);
        (Self::from_inner(dh), Self::from_inner(dr))
    }

    fn stream_update(
        h: FloatTensor<Self>,
        mix: FloatTensor<Self>,
        w: FloatTensor<Self>,
        y: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        streams::autodiff_update::<B, C>(h, mix, w, y)
    }

    /// Not differentiable itself, as above.
    fn stream_update_backward(
        grad: FloatTensor<Self>,
        h: FloatTensor<Self>,
        mix: FloatTensor<Self>,
        w: FloatTensor<Self>,
        y: FloatTensor<Self>,
    ) -> (
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
    ) {
        let [grad, h, mix, w, y] = [grad, h, mix, w, y].map(|t| t.into_primitive());
        let (dh, dmix, dw, dy) = B::stream_update_backward(grad, h, mix, w, y);
        let [dh, dmix, dw, dy] = [dh, dmix, dw, dy].map(Self::from_inner);
        (dh, dmix, dw, dy)
    }

    fn rms_norm(x: FloatTensor<Self>, g: FloatTensor<Self>) -> FloatTensor<Self> {
        norm::autodiff_forward::<B, C>(x, g)
    }

    fn tokens_matmul(h: FloatTensor<Self>, w: FloatTensor<Self>, _flat: bool) -> FloatTensor<Self> {
        linear::autodiff_linear::<B, C>(h, w)
    }

    fn rms_norm_backward(
        grad: FloatTensor<Self>,
        x: FloatTensor<Self>,
        g: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let [grad, x, g] = [grad, x, g].map(|t| t.into_primitive());
        let (dx, dg) = B::rms_norm_backward(grad, x, g);
        (Self::from_inner(dx), Self::from_inner(dg))
    }

    /// On the inner backend, outside the graph (an optimizer steps untracked tensors).
    fn adamw_step(
        p: FloatTensor<Self>,
        g: FloatTensor<Self>,
        m1: FloatTensor<Self>,
        m2: FloatTensor<Self>,
        step: AdamWStep,
        first: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let [p, g, m1, m2] = [p, g, m1, m2].map(|t| t.into_primitive());
        let (p, m1, m2) = B::adamw_step(p, g, m1, m2, step, first);
        (
            Self::from_inner(p),
            Self::from_inner(m1),
            Self::from_inner(m2),
        )
    }
}
