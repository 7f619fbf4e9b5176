//! [`KernelOps`] on libtorch: libtorch's own kernels and ours (`rows`, `mix_rows`) on the
//! CPU in f32, `mix_tch` and the composed forms elsewhere.

use std::any::Any;

use burn::backend::tensor::FloatTensor;

use crate::model::kernels::adamw::AdamWStep;
use crate::model::kernels::stack::StackGrad;
use crate::model::kernels::{
    KernelOps, adamw, at_push, attention, composed, linear, mix, norm, rotary, sinkhorn, stack,
    streams, swiglu,
};

#[cfg(feature = "tch")]
impl KernelOps for burn::backend::LibTorch {
    fn causal_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        attention::tch_kernels::forward(q, k, v)
    }

    fn causal_attention_backward(
        grad: FloatTensor<Self>,
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        out: FloatTensor<Self>,
        lse: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        attention::tch_kernels::backward(grad, q, k, v, out, lse)
    }

    fn depth_mix(
        stacked: FloatTensor<Self>,
        partial: FloatTensor<Self>,
        q: FloatTensor<Self>,
        key_norm: bool,
        _acc: StackGrad,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        mix::tch_kernel::forward(stacked, partial, q, key_norm)
    }

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
        mix::tch_kernel::backward(grad, stacked, partial, q, saved, key_norm, into, written)
    }

    fn depth_mix_backward_at_push(
        grad: FloatTensor<Self>,
        stacked: FloatTensor<Self>,
        partial: FloatTensor<Self>,
        q: FloatTensor<Self>,
        saved: FloatTensor<Self>,
        x: FloatTensor<Self>,
        key_norm: bool,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>)> {
        at_push::tch_kernel::backward_at_push(grad, stacked, partial, q, saved, x, key_norm)
    }

    fn stack_source_grad(
        v: FloatTensor<Self>,
        lo: usize,
        sum: FloatTensor<Self>,
        steps: Vec<Box<dyn Any + Send>>,
    ) -> FloatTensor<Self> {
        at_push::tch_kernel::source_grad(v, lo, sum, steps)
    }

    fn stack_push(
        stacked: FloatTensor<Self>,
        v: FloatTensor<Self>,
        capacity: usize,
        _acc: StackGrad,
    ) -> FloatTensor<Self> {
        stack::tch_kernel::push(stacked, v, capacity)
    }

    fn rotary(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        rotary::tch_kernel::forward(x, cos, sin)
    }

    fn rotary_backward(
        grad: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        rotary::tch_kernel::backward(grad, cos, sin)
    }

    fn swiglu(
        a: FloatTensor<Self>,
        b: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        swiglu::tch_kernel::forward(a, b)
    }

    fn swiglu_backward(
        grad: FloatTensor<Self>,
        a: FloatTensor<Self>,
        b: FloatTensor<Self>,
        s: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        swiglu::tch_kernel::backward(grad, a, b, s)
    }

    fn sinkhorn(logits: FloatTensor<Self>, iters: usize) -> (FloatTensor<Self>, FloatTensor<Self>) {
        sinkhorn::tch_kernel::forward(logits, iters)
    }

    fn sinkhorn_backward(
        grad: FloatTensor<Self>,
        exp: FloatTensor<Self>,
        iters: usize,
    ) -> FloatTensor<Self> {
        sinkhorn::tch_kernel::backward(grad, exp, iters)
    }

    fn stream_read(h: FloatTensor<Self>, r: FloatTensor<Self>) -> FloatTensor<Self> {
        streams::tch_kernel::read(h, r)
    }

    fn stream_read_backward(
        grad: FloatTensor<Self>,
        h: FloatTensor<Self>,
        r: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        streams::tch_kernel::read_backward(grad, h, r)
    }

    fn stream_update(
        h: FloatTensor<Self>,
        mix: FloatTensor<Self>,
        w: FloatTensor<Self>,
        y: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        streams::tch_kernel::update(h, mix, w, y)
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
        streams::tch_kernel::update_backward(grad, h, mix, w, y)
    }

    fn rms_norm(x: FloatTensor<Self>, g: FloatTensor<Self>) -> FloatTensor<Self> {
        norm::tch_kernel::forward(x, g)
    }

    fn tokens_matmul(h: FloatTensor<Self>, w: FloatTensor<Self>, flat: bool) -> FloatTensor<Self> {
        linear::tch_kernel::linear(h, w, flat)
    }

    fn rms_norm_backward(
        grad: FloatTensor<Self>,
        x: FloatTensor<Self>,
        g: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        norm::tch_kernel::backward(grad, x, g)
    }

    fn adamw_step(
        p: FloatTensor<Self>,
        g: FloatTensor<Self>,
        m1: FloatTensor<Self>,
        m2: FloatTensor<Self>,
        step: AdamWStep,
        first: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        adamw::tch_kernel::step(&p, &g, &m1, &m2, step, first)
            .unwrap_or_else(|| composed::adamw_step::<Self>(p, g, m1, m2, step, first))
    }
}
