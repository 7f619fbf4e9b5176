//! [`KernelOps`], the fused operations' trait: each method's default is the operation
//! composed of burn's primitive tensor operations (`composed`), so a backend overrides only
//! what it fuses (libtorch, `backends/tch.rs`) or differentiates by hand (autodiff,
//! `backends/autodiff.rs`); flex takes every default.

use burn::backend::{Backend, backend_extension, tensor::FloatTensor};

use super::stack_grad::StackGrad;
use super::{adamw, composed, linear, step_record};

/// The fused operations, per backend. Call them through the functions of the submodules,
/// which take and return [`burn::tensor::Tensor`]s.
#[backend_extension(LibTorch: cfg(feature = "tch"), Flex: cfg(feature = "flex"), Autodiff)]
pub trait KernelOps: Backend {
    /// Causal softmax attention with scale `1/sqrt(hd)`: queries, keys and values
    /// `[B, H, T, hd]` -> (context `[B, H, T, hd]`, the log-sum-exp of each query's scores,
    /// in whatever shape this backend's backward wants it).
    fn causal_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::causal_attention::<Self>(q, k, v)
    }

    /// The gradients of [`Self::causal_attention`]'s context with respect to `q`, `k`, `v`,
    /// given the context's gradient and the forward's outputs.
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

    /// One single-head AttnRes mixing step, the softmax-weighted sum of the completed
    /// sources `stacked` `[K, N, d]` and the partial sum `partial` `[N, d]` (none if it has
    /// zero rows) with logits `v.q / rms(v)` (`v.q` without the key norm), `q` `[d]` ->
    /// (`x` `[N, d]`, what this backend's backward reads of the forward: the softmax
    /// weights, in whatever shape it wants them, or nothing).
    /// `acc`: where an autodiff backend's backward puts the stacked sources' gradient
    /// (`stack::StackGrad`; other backends ignore it).
    fn depth_mix(
        stacked: FloatTensor<Self>,
        partial: FloatTensor<Self>,
        q: FloatTensor<Self>,
        key_norm: bool,
        _acc: StackGrad,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::depth_mix::<Self>(stacked, partial, q, key_norm)
    }

    /// The gradients of [`Self::depth_mix`] with respect to `stacked`, `partial` and `q`,
    /// given what its forward kept (`saved`). The stacked sources' gradient goes into
    /// `into` `[C, N, d]` (`C >= K`), added to its first `written` slots and written over
    /// the next `K - written`, and comes back as that whole buffer; an `into` of zero slots
    /// asks for a fresh `[K, N, d]` instead.
    #[allow(clippy::too_many_arguments)]
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

    /// [`Self::depth_mix_backward`] for a stack whose sources get their gradients at their
    /// pushes (`stack::GradMode::AtPush`), reading none of the stacked sources: given the
    /// step's output `x`, each token's `g . x` `[N]` (which the pushes need), the partial
    /// sum's gradient and its share of the query's; or `None` where this backend does not
    /// (the stack's buffer then takes the step).
    #[allow(clippy::type_complexity, clippy::too_many_arguments)] // three tensors, or none
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

    /// The gradients `[G, N, d]` of stacked sources `lo..lo + G` (`G` >= 1), whose rows are
    /// `v` `[G, N, d]` (a view of the stack's slots), from the mixing steps that read all of
    /// them, in the order their backward ran: each source's first step's term, then the
    /// next ones' added; or, for one source, every term added to `sum` `[N, d]`, its
    /// gradient so far (`sum` of no entries: none). Each step's share of its query's
    /// gradient is added to the one its record holds, source by source from the last to the
    /// first, as their pushes would. The steps come as this backend's
    /// `step_record::StepRecord`s (boxed: a backend extension's arguments cannot be a list of
    /// structs of tensors).
    fn stack_source_grad(
        v: FloatTensor<Self>,
        lo: usize,
        sum: FloatTensor<Self>,
        steps: Vec<Box<dyn std::any::Any + Send>>,
    ) -> FloatTensor<Self> {
        composed::source_grad::<Self>(v, lo, sum, step_record::unbox::<Self>(steps))
    }

    /// The product of a sublayer's input with a weight, `h w`, `h` `[B, T, k]`, `w`
    /// `[k, m]` -> `[B, T, m]`: where `flat`, `h` as `[B T, k]` times `w`, one 2-D product;
    /// else burn's `matmul` of `h` and `w` as `[1, k, m]` (one product per sequence on
    /// libtorch). The autodiff backend takes the 2-D form where it records the product for a
    /// backward, whatever `flat` asks, and the batched one elsewhere (`kernels::linear`).
    fn tokens_matmul(h: FloatTensor<Self>, w: FloatTensor<Self>, flat: bool) -> FloatTensor<Self> {
        linear::composed_linear::<Self>(h, w, flat)
    }

    /// A stack of completed sources grown by one: `stacked` `[K, N, d]` and the next source
    /// `v` `[N, d]` -> `[K + 1, N, d]`. Where the backend can (libtorch on the CPU) the result
    /// is a view of one buffer with room for `capacity` sources, `v` written into the slot
    /// after `stacked`'s, so that `stacked` must be the latest stack of its buffer: use it
    /// through [`stack::SourceStack`], which pushes onto each stack once.
    /// `acc` is the stack's gradient buffer, which an autodiff backend's backward hands `v`'s
    /// slot of (other backends ignore it).
    fn stack_push(
        stacked: FloatTensor<Self>,
        v: FloatTensor<Self>,
        _capacity: usize,
        _acc: StackGrad,
    ) -> FloatTensor<Self> {
        composed::stack_push::<Self>(stacked, v)
    }

    /// Rotary position embedding, `x cos + rotate_half(x) sin` over the last dimension:
    /// `x` `[B, T, H, hd]`, the tables `cos`, `sin` `[T, hd]` -> `[B, T, H, hd]`.
    fn rotary(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        composed::rotary::<Self>(x, cos, sin)
    }

    /// The gradient of [`Self::rotary`] with respect to `x` (the tables are constants).
    fn rotary_backward(
        grad: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        composed::rotary_backward::<Self>(grad, cos, sin)
    }

    /// SwiGLU's gating `silu(a) b` elementwise -> (the product, what this backend's
    /// backward reads of the forward: the sigmoid of `a`).
    fn swiglu(
        a: FloatTensor<Self>,
        b: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::swiglu::<Self>(a, b)
    }

    /// The gradients of [`Self::swiglu`] with respect to `a` and `b`, given the sigmoid its
    /// forward kept.
    fn swiglu_backward(
        grad: FloatTensor<Self>,
        a: FloatTensor<Self>,
        b: FloatTensor<Self>,
        sigmoid: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::swiglu_backward::<Self>(grad, a, b, sigmoid)
    }

    /// mHC's Sinkhorn-Knopp: `exp(logits - max)` `[..., m, m]` (the max over each matrix)
    /// scaled by `iters` rounds of a row then a column normalisation -> (the result, what
    /// this backend's backward reads of the forward: `exp(logits - max)`).
    fn sinkhorn(logits: FloatTensor<Self>, iters: usize) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::sinkhorn::<Self>(logits, iters)
    }

    /// The gradient of [`Self::sinkhorn`] with respect to the logits, given the
    /// `exp(logits - max)` its forward kept.
    fn sinkhorn_backward(
        grad: FloatTensor<Self>,
        exp: FloatTensor<Self>,
        iters: usize,
    ) -> FloatTensor<Self> {
        composed::sinkhorn_backward::<Self>(grad, exp, iters)
    }

    /// The multi-stream residual's read, `x = sum_i r_i h_i` per token: the streams `h`
    /// `[N, m, d]`, the read weights `r` `[N, m]` -> `[N, d]`.
    fn stream_read(h: FloatTensor<Self>, r: FloatTensor<Self>) -> FloatTensor<Self> {
        composed::stream_read::<Self>(h, r)
    }

    /// The gradients of [`Self::stream_read`] with respect to `h` and `r`.
    fn stream_read_backward(
        grad: FloatTensor<Self>,
        h: FloatTensor<Self>,
        r: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::stream_read_backward::<Self>(grad, h, r)
    }

    /// The multi-stream residual's update, `h'_j = sum_i M_ji h_i + w_j y` per token: the
    /// streams `h` `[N, m, d]`, the mixing matrices `M` `[N, m, m]`, the write weights `w`
    /// `[N, m]`, the layer's output `y` `[N, d]` -> `[N, m, d]`.
    fn stream_update(
        h: FloatTensor<Self>,
        mix: FloatTensor<Self>,
        w: FloatTensor<Self>,
        y: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        composed::stream_update::<Self>(h, mix, w, y)
    }

    /// The gradients of [`Self::stream_update`] with respect to `h`, `M`, `w` and `y`.
    #[allow(clippy::type_complexity)] // four gradients
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

    /// RMSNorm with a gain over the last dimension: `x` `[N, d]`, `g` `[d]` -> `[N, d]`.
    fn rms_norm(x: FloatTensor<Self>, g: FloatTensor<Self>) -> FloatTensor<Self> {
        composed::rms_norm::<Self>(x, g)
    }

    /// The gradients of [`Self::rms_norm`] with respect to `x` and `g`.
    fn rms_norm_backward(
        grad: FloatTensor<Self>,
        x: FloatTensor<Self>,
        g: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::rms_norm_backward::<Self>(grad, x, g)
    }

    /// One AdamW step of a parameter `p` with gradient `g` and moments `m1`, `m2` (all of
    /// one shape; the moments unread on the `first` step, which has none) -> the new
    /// parameter and moments. Not differentiable: an optimizer's step runs outside the graph.
    fn adamw_step(
        p: FloatTensor<Self>,
        g: FloatTensor<Self>,
        m1: FloatTensor<Self>,
        m2: FloatTensor<Self>,
        step: adamw::AdamWStep,
        first: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        composed::adamw_step::<Self>(p, g, m1, m2, step, first)
    }
}
