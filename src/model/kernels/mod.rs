//! Operations that burn's tensor API composes out of many small kernels, given a kernel (or
//! a backward pass) of their own through burn's backend extensions: causal attention with a
//! fused backward, RMSNorm, rotary position embedding, SwiGLU's gating, mHC's Sinkhorn-Knopp, the multi-stream residual's
//! read and update, one AttnRes mixing
//! step (alone, or through the PreNorm of the layer that reads it), Block AttnRes's phase-2
//! merge, a residual branch's output projection added onto its sum, and one AdamW step of a
//! parameter.
//!
//! Each operation has three implementations behind one trait, [`KernelOps`]: libtorch's own
//! fused kernels where libtorch has them (f32 on the CPU), the same operation composed of
//! primitive tensor operations everywhere else (flex, CUDA, bf16; on tch, CUDA and bf16 the
//! mixing step takes a few libtorch operations of its own instead, `mix_tch`), and an
//! autodiff wrapper whose backward calls the backend's backward kernel instead of
//! differentiating the composition op by op. `tests/kernels.rs` holds each to the composed form, in
//! value and in every input's gradient; the Sinkhorn kernel's unit test also checks its
//! backward against central differences.

pub mod adamw;
mod at_push;
pub mod attention;
mod backends;
mod composed;
pub mod merge;
pub mod mix;
#[cfg(feature = "tch")]
mod mix_rows;
#[cfg(feature = "tch")]
mod mix_tch;
pub mod norm;
#[cfg(feature = "tch")]
mod omp;
pub mod onto;
pub mod rotary;
#[cfg(feature = "tch")]
mod rows;
pub mod sinkhorn;
pub mod stack;
pub mod streams;
pub mod swiglu;
#[cfg(feature = "tch")]
mod tch_memory;
#[cfg(feature = "tch")]
mod vml;
#[cfg(feature = "tch")]
pub use vml::warm_up_vml;

use burn::backend::{Backend, backend_extension, tensor::FloatTensor};

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
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// The gradients of [`Self::causal_attention`]'s context with respect to `q`, `k`, `v`,
    /// given the context's gradient and the forward's outputs.
    fn causal_attention_backward(
        grad: FloatTensor<Self>,
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        out: FloatTensor<Self>,
        lse: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>);

    /// Block AttnRes's phase-2 merge, `x = o1 + sigmoid(p.q / rms(p) - lse) (p - o1)` per
    /// head (`p.q` without the key norm): the partial sum `p` `[N, d]`, the phase-1 result
    /// `o1` `[H, N, 1, dh]` and its log-sum-exp `lse` `[H, N, 1, 1]`, the step's effective
    /// query `q` `[d]` -> `x` `[N, d]`.
    fn block_merge(
        p: FloatTensor<Self>,
        o1: FloatTensor<Self>,
        q: FloatTensor<Self>,
        lse: FloatTensor<Self>,
        key_norm: bool,
    ) -> FloatTensor<Self>;

    /// The gradients of [`Self::block_merge`] with respect to `p`, `o1`, `q` and `lse`.
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
    );

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
        acc: stack::StackGrad,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

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
        saved: FloatTensor<Self>,
        key_norm: bool,
        into: FloatTensor<Self>,
        written: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>);

    /// [`Self::depth_mix_backward`] for a stack whose sources get their gradients at their
    /// pushes (`stack::GradMode::AtPush`), reading none of the stacked sources: given the
    /// step's output `x`, each token's `g . x` `[N]` (which the pushes need), the partial
    /// sum's gradient and its share of the query's; or `None` where this backend does not
    /// (the stack's buffer then takes the step).
    #[allow(clippy::type_complexity, clippy::too_many_arguments)] // three tensors, or none
    fn depth_mix_backward_at_push(
        grad: FloatTensor<Self>,
        stacked: FloatTensor<Self>,
        partial: FloatTensor<Self>,
        q: FloatTensor<Self>,
        saved: FloatTensor<Self>,
        x: FloatTensor<Self>,
        key_norm: bool,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>)>;

    /// The gradients `[G, N, d]` of stacked sources `lo..lo + G` (`G` >= 1), whose rows are
    /// `v` `[G, N, d]` (a view of the stack's slots), from the mixing steps that read all of
    /// them, in the order their backward ran: each source's first step's term, then the
    /// next ones' added; or, for one source, every term added to `sum` `[N, d]`, its
    /// gradient so far (`sum` of no entries: none). Each step's share of its query's
    /// gradient is added to the one its record holds, source by source from the last to the
    /// first, as their pushes would. The steps come as this backend's
    /// `at_push::StepRecord`s (boxed: a backend extension's arguments cannot be a list of
    /// structs of tensors).
    fn stack_source_grad(
        v: FloatTensor<Self>,
        lo: usize,
        sum: FloatTensor<Self>,
        steps: Vec<Box<dyn std::any::Any + Send>>,
    ) -> FloatTensor<Self>;

    /// [`Self::depth_mix`]'s `x` normalised by the PreNorm of the layer that reads it,
    /// `x g / rms(x)` with `gain` `g` `[d]` -> `[N, d]`. libtorch on the CPU in f32 does it
    /// in one pass that never writes `x` out; elsewhere it is the two operations, and so
    /// always under autodiff, whose norm backward reads `x`. The step's query is `q key_gain`
    /// (a pseudo-query times its key norm's gain; `q` itself where `key_gain` has no
    /// entries), a product that the row kernels form themselves, the same floats, instead
    /// of a tensor operation of its own.
    fn depth_mix_normed(
        stacked: FloatTensor<Self>,
        partial: FloatTensor<Self>,
        q: FloatTensor<Self>,
        key_gain: FloatTensor<Self>,
        key_norm: bool,
        gain: FloatTensor<Self>,
        acc: stack::StackGrad,
    ) -> FloatTensor<Self>;

    /// A residual add and the PreNorm of the layer that reads its sum: `x`, `y` `[N, d]`,
    /// `gain` `[d]` -> (`s = x + y`, `s g / rms(s)`), the floats of the two operations; one
    /// pass on libtorch on the CPU in f32, the two operations elsewhere and under autodiff.
    fn add_rms_norm(
        x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        gain: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// A residual branch's output projection added onto the sum it joins, `c + x w`: `c`
    /// `[N, m]`, `x` `[N, k]`, `w` `[k, m]` -> `[N, m]`. libtorch adds `c` in the product's
    /// own pass (`addmm`), over `c`'s memory where nothing else holds it; elsewhere it is the
    /// product and the add.
    fn matmul_onto(
        c: FloatTensor<Self>,
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
    ) -> FloatTensor<Self>;

    /// [`Self::matmul_onto`] written into `into` `[N, m]` (memory from
    /// [`Self::stack_slot`]) where the backend can (libtorch, the same floats), and a
    /// tensor of its own elsewhere.
    fn matmul_onto_into(
        c: FloatTensor<Self>,
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        into: FloatTensor<Self>,
    ) -> FloatTensor<Self>;

    /// The product of a sublayer's input with a weight, `h w`, `h` `[B, T, k]`, `w`
    /// `[k, m]` -> `[B, T, m]`: where `flat`, `h` as `[B T, k]` times `w`, one 2-D product;
    /// else burn's `matmul` of `h` and `w` as `[1, k, m]` (one product per sequence on
    /// libtorch). The autodiff backend takes the 2-D form where it records the product for a
    /// backward, whatever `flat` asks, and the batched one elsewhere (`onto::linear`).
    fn tokens_matmul(h: FloatTensor<Self>, w: FloatTensor<Self>, flat: bool) -> FloatTensor<Self>;

    /// [`Self::tokens_matmul`] written into `into` `[B T, m]` (memory from
    /// [`Self::stack_slot`]) where the backend can (libtorch), and a tensor of its own
    /// elsewhere.
    fn tokens_matmul_into(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        into: FloatTensor<Self>,
        flat: bool,
    ) -> FloatTensor<Self>;

    /// The next slot `[N, d]` of the buffer that `stacked` `[K, N, d]` (from
    /// [`Self::stack_push`]) is a view of, where the backend keeps one with room for it
    /// (libtorch on the CPU in f32): memory that the source pushed next may be written into
    /// (`onto::Dest::into`), so that its push has nothing to copy. `None` elsewhere.
    fn stack_slot(stacked: FloatTensor<Self>) -> Option<FloatTensor<Self>>;

    /// A stack of completed sources grown by one: `stacked` `[K, N, d]` and the next source
    /// `v` `[N, d]` -> `[K + 1, N, d]`. Where the backend can (libtorch on the CPU) the result
    /// is a view of one buffer with room for `capacity` sources, `v` written into the slot
    /// after `stacked`'s, so that `stacked` must be the latest stack of its buffer: use it
    /// through [`stack::SourceStack`], which pushes onto each stack once. A `v` that is
    /// already that slot (written there through [`Self::stack_slot`]) is not copied.
    /// `acc` is the stack's gradient buffer, which an autodiff backend's backward hands `v`'s
    /// slot of (other backends ignore it).
    fn stack_push(
        stacked: FloatTensor<Self>,
        v: FloatTensor<Self>,
        capacity: usize,
        acc: stack::StackGrad,
    ) -> FloatTensor<Self>;

    /// Rotary position embedding, `x cos + rotate_half(x) sin` over the last dimension:
    /// `x` `[B, T, H, hd]`, the tables `cos`, `sin` `[T, hd]` -> `[B, T, H, hd]`.
    fn rotary(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self>;

    /// The gradient of [`Self::rotary`] with respect to `x` (the tables are constants).
    fn rotary_backward(
        grad: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self>;

    /// SwiGLU's gating `silu(a) b` elementwise -> (the product, what this backend's
    /// backward reads of the forward: the sigmoid of `a`).
    fn swiglu(a: FloatTensor<Self>, b: FloatTensor<Self>)
    -> (FloatTensor<Self>, FloatTensor<Self>);

    /// The gradients of [`Self::swiglu`] with respect to `a` and `b`, given the sigmoid its
    /// forward kept.
    fn swiglu_backward(
        grad: FloatTensor<Self>,
        a: FloatTensor<Self>,
        b: FloatTensor<Self>,
        sigmoid: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// mHC's Sinkhorn-Knopp: `exp(logits - max)` `[..., m, m]` (the max over each matrix)
    /// scaled by `iters` rounds of a row then a column normalisation -> (the result, what
    /// this backend's backward reads of the forward: `exp(logits - max)`).
    fn sinkhorn(logits: FloatTensor<Self>, iters: usize) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// The gradient of [`Self::sinkhorn`] with respect to the logits, given the
    /// `exp(logits - max)` its forward kept.
    fn sinkhorn_backward(
        grad: FloatTensor<Self>,
        exp: FloatTensor<Self>,
        iters: usize,
    ) -> FloatTensor<Self>;

    /// The multi-stream residual's read, `x = sum_i r_i h_i` per token: the streams `h`
    /// `[N, m, d]`, the read weights `r` `[N, m]` -> `[N, d]`.
    fn stream_read(h: FloatTensor<Self>, r: FloatTensor<Self>) -> FloatTensor<Self>;

    /// The gradients of [`Self::stream_read`] with respect to `h` and `r`.
    fn stream_read_backward(
        grad: FloatTensor<Self>,
        h: FloatTensor<Self>,
        r: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// The multi-stream residual's update, `h'_j = sum_i M_ji h_i + w_j y` per token: the
    /// streams `h` `[N, m, d]`, the mixing matrices `M` `[N, m, m]`, the write weights `w`
    /// `[N, m]`, the layer's output `y` `[N, d]` -> `[N, m, d]`.
    fn stream_update(
        h: FloatTensor<Self>,
        mix: FloatTensor<Self>,
        w: FloatTensor<Self>,
        y: FloatTensor<Self>,
    ) -> FloatTensor<Self>;

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
    );

    /// RMSNorm with a gain over the last dimension: `x` `[N, d]`, `g` `[d]` -> `[N, d]`.
    fn rms_norm(x: FloatTensor<Self>, g: FloatTensor<Self>) -> FloatTensor<Self>;

    /// The gradients of [`Self::rms_norm`] with respect to `x` and `g`.
    fn rms_norm_backward(
        grad: FloatTensor<Self>,
        x: FloatTensor<Self>,
        g: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

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
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>);
}
