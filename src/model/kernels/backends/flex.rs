//! [`KernelOps`] on burn-flex: the composed primitives.

use std::any::Any;

use burn::backend::tensor::FloatTensor;

use super::super::adamw::AdamWStep;
use super::super::stack::StackGrad;
use super::super::{KernelOps, at_push, composed, mix, norm, onto};

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

    fn block_merge(
        p: FloatTensor<Self>,
        o1: FloatTensor<Self>,
        q: FloatTensor<Self>,
        lse: FloatTensor<Self>,
        key_norm: bool,
    ) -> FloatTensor<Self> {
        composed::block_merge::<Self>(p, o1, q, lse, key_norm)
    }

    fn block_merge_backward(
        grad: FloatTensor<Self>,
        p: FloatTensor<Self>,
        o1: FloatTensor<Self>,
        q: FloatTensor<Self>,
        lse: FloatTensor<Self>,
        key_norm: bool,
    ) -> (
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
    ) {
        let [dp, do1, dq, dlse] =
            composed::block_merge_backward::<Self>(grad, p, o1, q, lse, key_norm);
        (dp, do1, dq, dlse)
    }

    fn depth_mix(
        stacked: FloatTensor<Self>,
        partial: FloatTensor<Self>,
        q: FloatTensor<Self>,
        key_norm: bool,
        _acc: StackGrad,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::depth_mix::<Self>(stacked, partial, q, key_norm)
    }

    fn depth_mix_normed(
        stacked: FloatTensor<Self>,
        partial: FloatTensor<Self>,
        q: FloatTensor<Self>,
        key_gain: FloatTensor<Self>,
        key_norm: bool,
        gain: FloatTensor<Self>,
        acc: StackGrad,
    ) -> FloatTensor<Self> {
        mix::mix_then_norm::<Self>(stacked, partial, q, key_gain, key_norm, gain, acc)
    }

    fn depth_mix_backward(
        grad: FloatTensor<Self>,
        stacked: FloatTensor<Self>,
        partial: FloatTensor<Self>,
        q: FloatTensor<Self>,
        _saved: FloatTensor<Self>,
        key_norm: bool,
        into: FloatTensor<Self>,
        written: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let (dv, dp, dq) =
            composed::depth_mix_backward::<Self>(grad, stacked, partial, q, key_norm);
        (
            composed::accumulate_slots::<Self>(into, written, dv),
            dp,
            dq,
        )
    }

    /// Declined: flex's stacks keep their gradient buffer.
    fn depth_mix_backward_at_push(
        _grad: FloatTensor<Self>,
        _stacked: FloatTensor<Self>,
        _partial: FloatTensor<Self>,
        _q: FloatTensor<Self>,
        _saved: FloatTensor<Self>,
        _x: FloatTensor<Self>,
        _key_norm: bool,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>)> {
        None
    }

    fn stack_source_grad(
        v: FloatTensor<Self>,
        lo: usize,
        sum: FloatTensor<Self>,
        steps: Vec<Box<dyn Any + Send>>,
    ) -> FloatTensor<Self> {
        composed::source_grad::<Self>(v, lo, sum, at_push::unbox::<Self>(steps))
    }

    fn stack_push(
        stacked: FloatTensor<Self>,
        v: FloatTensor<Self>,
        _capacity: usize,
        _acc: StackGrad,
    ) -> FloatTensor<Self> {
        composed::stack_push::<Self>(stacked, v)
    }

    fn rotary(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        composed::rotary::<Self>(x, cos, sin)
    }

    fn rotary_backward(
        grad: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        composed::rotary_backward::<Self>(grad, cos, sin)
    }

    fn swiglu(
        a: FloatTensor<Self>,
        b: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::swiglu::<Self>(a, b)
    }

    fn swiglu_backward(
        grad: FloatTensor<Self>,
        a: FloatTensor<Self>,
        b: FloatTensor<Self>,
        s: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::swiglu_backward::<Self>(grad, a, b, s)
    }

    fn sinkhorn(logits: FloatTensor<Self>, iters: usize) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::sinkhorn::<Self>(logits, iters)
    }

    fn sinkhorn_backward(
        grad: FloatTensor<Self>,
        exp: FloatTensor<Self>,
        iters: usize,
    ) -> FloatTensor<Self> {
        composed::sinkhorn_backward::<Self>(grad, exp, iters)
    }

    fn stream_read(h: FloatTensor<Self>, r: FloatTensor<Self>) -> FloatTensor<Self> {
        composed::stream_read::<Self>(h, r)
    }

    fn stream_read_backward(
        grad: FloatTensor<Self>,
        h: FloatTensor<Self>,
        r: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::stream_read_backward::<Self>(grad, h, r)
    }

    fn stream_update(
        h: FloatTensor<Self>,
        mix: FloatTensor<Self>,
        w: FloatTensor<Self>,
        y: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        composed::stream_update::<Self>(h, mix, w, y)
    }

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
        composed::stream_update_backward::<Self>(grad, h, mix, w, y)
    }

    fn rms_norm(x: FloatTensor<Self>, g: FloatTensor<Self>) -> FloatTensor<Self> {
        composed::rms_norm::<Self>(x, g)
    }

    fn add_rms_norm(
        x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        g: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        norm::add_then_norm::<Self>(x, y, g)
    }

    fn matmul_onto(
        c: FloatTensor<Self>,
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        onto::composed::<Self>(c, x, w)
    }

    fn matmul_onto_into(
        c: FloatTensor<Self>,
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        _into: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        onto::composed::<Self>(c, x, w)
    }

    fn tokens_matmul(h: FloatTensor<Self>, w: FloatTensor<Self>, flat: bool) -> FloatTensor<Self> {
        onto::composed_linear::<Self>(h, w, flat)
    }

    fn tokens_matmul_into(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        _into: FloatTensor<Self>,
        flat: bool,
    ) -> FloatTensor<Self> {
        onto::composed_linear::<Self>(h, w, flat)
    }

    /// No slots to offer: the stack is a tensor of its own (`composed::stack_push`).
    fn stack_slot(_stacked: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        None
    }

    fn rms_norm_backward(
        grad: FloatTensor<Self>,
        x: FloatTensor<Self>,
        g: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::rms_norm_backward::<Self>(grad, x, g)
    }

    fn adamw_step(
        p: FloatTensor<Self>,
        g: FloatTensor<Self>,
        m1: FloatTensor<Self>,
        m2: FloatTensor<Self>,
        step: AdamWStep,
        first: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        composed::adamw_step::<Self>(p, g, m1, m2, step, first)
    }
}
