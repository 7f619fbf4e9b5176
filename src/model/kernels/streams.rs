//! The multi-stream residual's read and update (hyper-connections, mHC, mHC-lite; SPEC
//! section 6) as two operations. Per token, with `m` streams `h_i` of `d` floats: the read
//! `x = sum_i r_i h_i`, and the update `h'_j = sum_i M_ji h_i + w_j y` with the mixing
//! matrix `M` `[m, m]`, the write weights `w` `[m]` and the layer's output `y` `[d]`.
//!
//! Composed in burn, the update is a batched product of every token's `m x m` matrix with
//! its `m x d` streams (one tiny GEMM per token in libtorch, three with the backward), a
//! product and a sum, and the read a product and a sum, each writing `[B, T, m, d]`: at
//! `micro` with 4 streams, hyper-connections trained at 2.4x the baseline's step. Fused,
//! each is one pass over the streams each way, on the CPU in f32; elsewhere (flex, CUDA,
//! bf16) the composition.
//!
//! The floats are not the composition's: its products sum in MKL's order. Each token's sums
//! run over the streams in order (the update's from `w_j y`), and its dot products over `d`
//! in sixteen partial sums.

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Backend, Dispatch, tensor::FloatTensor};
use burn::tensor::Tensor;

use super::KernelOps;

/// The read `x = sum_i r_i h_i`: the streams `h` `[N, m, d]`, the read weights `r` `[N, m]`
/// -> `[N, d]`.
pub fn stream_read(h: Tensor<3>, r: Tensor<2>) -> Tensor<2> {
    Tensor::from_dispatch(<Dispatch as KernelOps>::stream_read(
        h.into_dispatch(),
        r.into_dispatch(),
    ))
}

/// The update `h'_j = sum_i M_ji h_i + w_j y`: the streams `h` `[N, m, d]`, the mixing
/// matrices `M` `[N, m, m]`, the write weights `w` `[N, m]` and the layer's output `y`
/// `[N, d]` -> `[N, m, d]`.
pub fn stream_update(h: Tensor<3>, mix: Tensor<3>, w: Tensor<2>, y: Tensor<2>) -> Tensor<3> {
    Tensor::from_dispatch(<Dispatch as KernelOps>::stream_update(
        h.into_dispatch(),
        mix.into_dispatch(),
        w.into_dispatch(),
        y.into_dispatch(),
    ))
}

/// [`stream_read`] composed of tensor operations, as the model ran it before.
pub fn stream_read_composed(h: Tensor<3>, r: Tensor<2>) -> Tensor<2> {
    let [n, _, d] = h.dims();
    (h * r.unsqueeze_dim::<3>(2)).sum_dim(1).reshape([n, d])
}

/// [`stream_update`] composed of tensor operations, as the model ran it before.
pub fn stream_update_composed(
    h: Tensor<3>,
    mix: Tensor<3>,
    w: Tensor<2>,
    y: Tensor<2>,
) -> Tensor<3> {
    mix.matmul(h) + w.unsqueeze_dim::<3>(2) * y.unsqueeze_dim::<3>(1)
}

/// One token at a time, its `m` streams one after another (`m d` floats); the loops run
/// along `d`, and the dot products keep sixteen partial sums, added in order. At `micro` each
/// pass moves `[N, m, d]` tensors of 2 MB, more than a core's second-level cache: by its
/// bytes it waits on memory more than on arithmetic.
#[cfg(feature = "tch")]
pub(super) mod rows {
    /// Partial sums of a dot product.
    const LANES: usize = 16;

    /// `out = a_0 x_0 + a_1 x_1 + ...`, term by term in order; at least one term.
    #[inline(always)]
    fn combine<'a>(out: &mut [f32], mut terms: impl Iterator<Item = (f32, &'a [f32])>) {
        let (a, x) = terms.next().expect("at least one term");
        for (out, &x) in out.iter_mut().zip(x) {
            *out = a * x;
        }
        for (a, x) in terms {
            for (out, &x) in out.iter_mut().zip(x) {
                *out += a * x;
            }
        }
    }

    /// `a . b` in [`LANES`] partial sums (entry `c` into sum `c mod LANES`), then the sums
    /// in order.
    #[inline(always)]
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        let mut acc = [0.0f32; LANES];
        let (ac, bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
        for (k, (&a, &b)) in ac.remainder().iter().zip(bc.remainder()).enumerate() {
            acc[k] = a * b;
        }
        for (a, b) in ac.zip(bc) {
            for l in 0..LANES {
                acc[l] += a[l] * b[l];
            }
        }
        acc.iter().fold(0.0, |s, &x| s + x)
    }

    /// `x = sum_i r_i h_i`.
    #[inline(always)]
    pub fn read(h: &[f32], r: &[f32], x: &mut [f32]) {
        combine(x, r.iter().copied().zip(h.chunks_exact(x.len())));
    }

    /// The read's gradients given `x`'s `g`: `dh_i = r_i g`, `dr_i = g . h_i`.
    #[inline(always)]
    pub fn read_backward(g: &[f32], h: &[f32], r: &[f32], dh: &mut [f32], dr: &mut [f32]) {
        let d = g.len();
        let streams = h.chunks_exact(d).zip(dh.chunks_exact_mut(d));
        for (((h, dh), &r), dr) in streams.zip(r).zip(dr) {
            combine(dh, [(r, g)].into_iter());
            *dr = dot(g, h);
        }
    }

    /// `h'_j = w_j y + sum_i M_ji h_i`, `M` row-major `[m, m]`.
    #[inline(always)]
    pub fn update(h: &[f32], mix: &[f32], w: &[f32], y: &[f32], out: &mut [f32]) {
        let (d, m) = (y.len(), w.len());
        for ((out, row), &w) in out.chunks_exact_mut(d).zip(mix.chunks_exact(m)).zip(w) {
            combine(
                out,
                [(w, y)]
                    .into_iter()
                    .chain(row.iter().copied().zip(h.chunks_exact(d))),
            );
        }
    }

    /// The update's gradients given `h'`'s `g` `[m, d]`: `dh_i = sum_j M_ji g_j`,
    /// `dM_ji = g_j . h_i`, `dw_j = g_j . y`, `dy = sum_j w_j g_j`.
    #[allow(clippy::too_many_arguments)] // the four inputs' gradients
    #[inline(always)]
    pub fn update_backward(
        g: &[f32],
        h: &[f32],
        mix: &[f32],
        w: &[f32],
        y: &[f32],
        dh: &mut [f32],
        dmix: &mut [f32],
        dw: &mut [f32],
        dy: &mut [f32],
    ) {
        let (d, m) = (y.len(), w.len());
        for (i, dh) in dh.chunks_exact_mut(d).enumerate() {
            combine(dh, (0..m).map(|j| mix[j * m + i]).zip(g.chunks_exact(d)));
        }
        combine(dy, w.iter().copied().zip(g.chunks_exact(d)));
        for ((g, dmix), dw) in g.chunks_exact(d).zip(dmix.chunks_exact_mut(m)).zip(dw) {
            for (dmix, h) in dmix.iter_mut().zip(h.chunks_exact(d)) {
                *dmix = dot(g, h);
            }
            *dw = dot(g, y);
        }
    }
}

#[cfg(feature = "tch")]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
pub(super) mod tch_kernel {
    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use burn::backend::tensor::FloatTensor;

    use super::rows;
    use crate::model::kernels::composed;
    use crate::model::kernels::omp::for_each_task;
    use crate::model::kernels::tch_memory::{empty, floats, slice_mut};

    type T = FloatTensor<LibTorch>;

    /// Tokens per task (any split gives the same results).
    const TOKENS: usize = 64;

    /// The contiguous forms of `ts`, and `[N, m, d]` from the first (the streams), where
    /// the row kernels take them all.
    fn contiguous<const K: usize>(ts: [&T; K]) -> ([tch::Tensor; K], Option<[usize; 3]>) {
        let cs = ts.map(|t| t.tensor.contiguous());
        let size = cs[0].size();
        let dims = match size[..] {
            [n, m, d] if n > 0 && m > 0 && d > 0 => Some([n as usize, m as usize, d as usize]),
            _ => None,
        };
        let ok = dims.is_some() && cs.iter().all(|t| floats(t).is_some());
        (cs, dims.filter(|_| ok))
    }

    /// A tensor's floats, for one already checked by [`contiguous`].
    fn f(t: &tch::Tensor) -> &[f32] {
        floats(t).expect("checked by `contiguous`")
    }

    /// Token `t`'s `len` floats of `v`.
    fn token(v: &[f32], t: usize, len: usize) -> &[f32] {
        &v[t * len..(t + 1) * len]
    }

    pub fn read(h: T, r: T) -> T {
        let ([hc, rc], dims) = contiguous([&h, &r]);
        let Some([n, m, d]) = dims else {
            return composed::stream_read::<LibTorch>(h, r);
        };
        let (hv, rv) = (f(&hc), f(&rc));
        let mut x = empty(&[n as i64, d as i64]);
        let tasks: Vec<&mut [f32]> = slice_mut(&mut x).chunks_mut(TOKENS * d).collect();
        for_each_task(tasks, &|task, x| {
            for (k, x) in x.chunks_exact_mut(d).enumerate() {
                let t = task * TOKENS + k;
                rows::read(token(hv, t, m * d), token(rv, t, m), x);
            }
        });
        TchTensor::new(x)
    }

    pub fn read_backward(grad: T, h: T, r: T) -> (T, T) {
        let ([hc, gc, rc], dims) = contiguous([&h, &grad, &r]);
        let Some([_, m, d]) = dims else {
            return composed::stream_read_backward::<LibTorch>(grad, h, r);
        };
        let (gv, hv, rv) = (f(&gc), f(&hc), f(&rc));
        let (mut dh, mut dr) = (empty(&hc.size()), empty(&rc.size()));
        let tasks: Vec<(&mut [f32], &mut [f32])> = slice_mut(&mut dh)
            .chunks_mut(TOKENS * m * d)
            .zip(slice_mut(&mut dr).chunks_mut(TOKENS * m))
            .collect();
        for_each_task(tasks, &|task, (dh, dr)| {
            let per_token = dh.chunks_exact_mut(m * d).zip(dr.chunks_exact_mut(m));
            for (k, (dh, dr)) in per_token.enumerate() {
                let t = task * TOKENS + k;
                let (g, h, r) = (token(gv, t, d), token(hv, t, m * d), token(rv, t, m));
                rows::read_backward(g, h, r, dh, dr);
            }
        });
        (TchTensor::new(dh), TchTensor::new(dr))
    }

    pub fn update(h: T, mix: T, w: T, y: T) -> T {
        let ([hc, mc, wc, yc], dims) = contiguous([&h, &mix, &w, &y]);
        let Some([_, m, d]) = dims else {
            return composed::stream_update::<LibTorch>(h, mix, w, y);
        };
        let (hv, mv, wv, yv) = (f(&hc), f(&mc), f(&wc), f(&yc));
        let mut out = empty(&hc.size());
        let tasks: Vec<&mut [f32]> = slice_mut(&mut out).chunks_mut(TOKENS * m * d).collect();
        for_each_task(tasks, &|task, out| {
            for (k, out) in out.chunks_exact_mut(m * d).enumerate() {
                let t = task * TOKENS + k;
                let (h, mix) = (token(hv, t, m * d), token(mv, t, m * m));
                rows::update(h, mix, token(wv, t, m), token(yv, t, d), out);
            }
        });
        TchTensor::new(out)
    }

    #[allow(clippy::type_complexity)] // four gradients
    pub fn update_backward(grad: T, h: T, mix: T, w: T, y: T) -> (T, T, T, T) {
        let ([hc, gc, mc, wc, yc], dims) = contiguous([&h, &grad, &mix, &w, &y]);
        let Some([_, m, d]) = dims else {
            return composed::stream_update_backward::<LibTorch>(grad, h, mix, w, y);
        };
        let (gv, hv, mv, wv, yv) = (f(&gc), f(&hc), f(&mc), f(&wc), f(&yc));
        let mut outs = [hc.size(), mc.size(), wc.size(), yc.size()].map(|s| empty(&s));
        let [dh, dmix, dw, dy] = &mut outs;
        let tasks: Vec<_> = slice_mut(dh)
            .chunks_mut(TOKENS * m * d)
            .zip(slice_mut(dmix).chunks_mut(TOKENS * m * m))
            .zip(slice_mut(dw).chunks_mut(TOKENS * m))
            .zip(slice_mut(dy).chunks_mut(TOKENS * d))
            .collect();
        for_each_task(tasks, &|task, (((dh, dmix), dw), dy)| {
            let per_token = dh
                .chunks_exact_mut(m * d)
                .zip(dmix.chunks_exact_mut(m * m))
                .zip(dw.chunks_exact_mut(m))
                .zip(dy.chunks_exact_mut(d));
            for (k, (((dh, dmix), dw), dy)) in per_token.enumerate() {
                let t = task * TOKENS + k;
                let (g, h) = (token(gv, t, m * d), token(hv, t, m * d));
                let (mix, w, y) = (token(mv, t, m * m), token(wv, t, m), token(yv, t, d));
                rows::update_backward(g, h, mix, w, y, dh, dmix, dw, dy);
            }
        });
        let [dh, dmix, dw, dy] = outs.map(TchTensor::new);
        (dh, dmix, dw, dy)
    }
}

#[derive(Debug)]
struct Read;

impl<B: Backend + KernelOps> Backward<B, 2> for Read {
    /// The streams and the read weights.
    type State = [FloatTensor<B>; 2];

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [h, r] = ops.state;
        let grad = grads.consume::<B>(&ops.node);
        let (dh, dr) = B::stream_read_backward(grad, h, r);
        for (parent, grad) in ops.parents.into_iter().zip([dh, dr]) {
            if let Some(node) = parent {
                grads.register::<B>(node.id, grad);
            }
        }
    }
}

#[derive(Debug)]
struct Update;

impl<B: Backend + KernelOps> Backward<B, 4> for Update {
    /// The streams, the mixing matrices, the write weights and the layer's output.
    type State = [FloatTensor<B>; 4];

    fn backward(self, ops: Ops<Self::State, 4>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [h, mix, w, y] = ops.state;
        let grad = grads.consume::<B>(&ops.node);
        let (dh, dmix, dw, dy) = B::stream_update_backward(grad, h, mix, w, y);
        for (parent, grad) in ops.parents.into_iter().zip([dh, dmix, dw, dy]) {
            if let Some(node) = parent {
                grads.register::<B>(node.id, grad);
            }
        }
    }
}

/// The autodiff forward of the read, with [`Read`] as its backward.
pub(super) fn autodiff_read<B: Backend + KernelOps, C: CheckpointStrategy>(
    h: FloatTensor<Autodiff<B, C>>,
    r: FloatTensor<Autodiff<B, C>>,
) -> FloatTensor<Autodiff<B, C>> {
    let parents = [h.node(), r.node()];
    let [h, r] = [h, r].map(|t| t.into_primitive());
    let x = B::stream_read(h.clone(), r.clone());
    match Read.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish([h, r], x),
        OpsKind::UnTracked(prep) => prep.finish(x),
    }
}

/// The autodiff forward of the update, with [`Update`] as its backward.
pub(super) fn autodiff_update<B: Backend + KernelOps, C: CheckpointStrategy>(
    h: FloatTensor<Autodiff<B, C>>,
    mix: FloatTensor<Autodiff<B, C>>,
    w: FloatTensor<Autodiff<B, C>>,
    y: FloatTensor<Autodiff<B, C>>,
) -> FloatTensor<Autodiff<B, C>> {
    let parents = [h.node(), mix.node(), w.node(), y.node()];
    let [h, mix, w, y] = [h, mix, w, y].map(|t| t.into_primitive());
    let out = B::stream_update(h.clone(), mix.clone(), w.clone(), y.clone());
    match Update.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish([h, mix, w, y], out),
        OpsKind::UnTracked(prep) => prep.finish(out),
    }
}
