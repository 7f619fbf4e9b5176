//! One AttnRes mixing step (`kernels::mix`) in a handful of libtorch operations, for the
//! tensors the row kernels (`mix_rows`, f32 on the CPU) do not take: CUDA, and bf16.
//!
//! The composed form (`composed::depth_mix`) writes several `[K, N, d]` temporaries per step
//! each way, recomputes the weights in the backward, and puts the sources' gradient into the
//! stack's buffer with a slice-assign that copies the whole buffer while earlier slots are
//! still lent out. On an H200 that made a Full AttnRes step at 99M parameters 1.9x a
//! baseline step (docs/gpu.md). Here every pass over the sources is a batched matrix
//! product, a norm, or an in-place update of the gradient slots: forward reads the sources
//! three times (scores, norms, weighted sum) and writes nothing of their size; backward
//! reads them three times and updates their gradient slots in place, three times. Measured
//! on the CPU in bf16 (reference size, 2 threads), a Full AttnRes step took 9% less time than
//! with the composed form and a Block one 4% less; on a GPU it is not yet measured
//! (`scripts/gpu-check.sh` does).
//!
//! Same formulas as `mix_rows`: `z = (v.q) u`, `u = 1/rms(v)` (ones without the key norm),
//! `a = softmax_k(z)`, `x = sum_k a_k v_k`; backward `ga = v.g`, `dz = a (ga - sum a ga)`,
//! `dv = a g + dz u q - dz s u^3 v / d`, `dq = sum dz u v`.

use tch::Tensor;

use crate::model::norm::RMS_EPS;

/// `x` `[N, d]` and what the backward reads, `[3, K', N]`: the weights `a`, the scores
/// `s = v.q` and `u`, for the completed sources `stacked` `[K, N, d]` (any strides whose
/// rows are contiguous, as a stack's slots are), the partial sum `partial` `[N, d]` as
/// one more source (none if it has zero rows) and the effective query `q` `[d]`.
pub fn forward(stacked: &Tensor, partial: &Tensor, q: &Tensor, key_norm: bool) -> (Tensor, Tensor) {
    let k = stacked.size()[0];
    let partial = (partial.size()[0] > 0).then_some(partial);
    let (s, u) = scores(stacked, partial, q, key_norm);
    let a = (&s * &u).softmax(0, None); // [K', N]
    // Token by token, [1, K] x [K, d]: the sources' rows of token n are a slot apart.
    let by_token = stacked.permute([1, 0, 2]); // [K, N, d] -> [N, K, d], a view
    let mut x = a
        .narrow(0, 0, k)
        .transpose(0, 1)
        .unsqueeze(1)
        .bmm(&by_token)
        .squeeze_dim(1); // [N, 1, K] x [N, K, d] -> [N, d]
    if let Some(p) = partial {
        x += p * a.narrow(0, k, 1).transpose(0, 1); // [N, d] * [N, 1]
    }
    (x, Tensor::stack(&[a, s, u], 0))
}

/// The gradients of [`forward`]: the stacked sources' (added into the first `written` slots
/// of `into` `[C, N, d]` and written into the rest of its first `K`, in place, and `into`
/// returned; a fresh `[K, N, d]` where `into` has no slots), the partial sum's and the
/// query's, from the output's gradient `grad` `[N, d]` and what the forward kept.
#[allow(clippy::too_many_arguments)]
pub fn backward(
    grad: &Tensor,
    stacked: &Tensor,
    partial: &Tensor,
    q: &Tensor,
    saved: &Tensor,
    key_norm: bool,
    into: Tensor,
    written: usize,
) -> (Tensor, Tensor, Tensor) {
    let [k, n, d] = [0, 1, 2].map(|i| stacked.size()[i]);
    let has_partial = partial.size()[0] > 0;
    let (a, s, u) = (saved.get(0), saved.get(1), saved.get(2)); // [K', N] each
    // ga = v.g, token by token: [K, d] x [d, 1].
    let mut ga = stacked
        .permute([1, 0, 2])
        .bmm(&grad.unsqueeze(2))
        .squeeze_dim(2)
        .transpose(0, 1); // [N, K, d] x [N, d, 1] -> [K, N]
    if has_partial {
        let gp = (partial * grad).sum_dim_intlist(&[1i64][..], false, None); // [N]
        ga = Tensor::cat(&[ga, gp.unsqueeze(0)], 0); // [K', N]
    }
    let gx = (&a * &ga).sum_dim_intlist(&[0i64][..], true, None); // [1, N]
    let dz = &a * (ga - gx);
    let along_q = &dz * &u; // [K', N]
    let along_v = key_norm.then(|| -(&dz * &s * u.pow_tensor_scalar(3)) / d as f64);
    // dq = sum over sources and tokens of along_q v: per source [d, N] x [N, 1], summed.
    let mut dq = stacked
        .transpose(1, 2)
        .bmm(&along_q.narrow(0, 0, k).unsqueeze(2))
        .sum_dim_intlist(&[0i64][..], false, None)
        .view([d]); // [K, d, N] x [K, N, 1] -> [K, d, 1] -> [d]
    let column = |t: &Tensor, from: i64, len: i64| t.narrow(0, from, len).unsqueeze(2); // [len, N, 1]
    let dp = if has_partial {
        // The partial sum's entry of a `[K', N]` as a column `[N, 1]`.
        let of_partial = |t: &Tensor| t.narrow(0, k, 1).transpose(0, 1);
        let along_q_p = of_partial(&along_q);
        dq += (partial * &along_q_p).sum_dim_intlist(&[0i64][..], false, None);
        let mut dp = grad * of_partial(&a) + q.view([1, d]) * along_q_p;
        if let Some(c) = &along_v {
            dp += partial * of_partial(c);
        }
        dp
    } else {
        partial.zeros_like()
    };
    let (buffer, written) = match into.size()[0] {
        0 => (stacked.empty_like(), 0),
        _ => (into, written as i64),
    };
    let mut dv = buffer.narrow(0, 0, k); // [K, N, d], a view of the buffer
    let w = written.min(k);
    let g = grad.view([1, n, d]);
    if w < k {
        let _ = column(&a, w, k - w).mul_out(&dv.narrow(0, w, k - w), &g);
    }
    if w > 0 {
        let _ = dv.narrow(0, 0, w).addcmul_(&column(&a, 0, w), &g);
    }
    let _ = dv.addcmul_(&column(&along_q, 0, k), &q.view([1, 1, d]));
    if let Some(c) = &along_v {
        let _ = dv.addcmul_(&column(c, 0, k), stacked);
    }
    (buffer, dp, dq)
}

/// `s = v.q` and `u = 1/rms(v)` (ones without the key norm) of every source, `[K', N]` each.
fn scores(
    stacked: &Tensor,
    partial: Option<&Tensor>,
    q: &Tensor,
    key_norm: bool,
) -> (Tensor, Tensor) {
    let [k, _, d] = [0, 1, 2].map(|i| stacked.size()[i]);
    // Source by source, [N, d] x [d, 1], the query shared (stride 0).
    let mut s = stacked
        .bmm(&q.view([1, d, 1]).expand([k, d, 1], false))
        .squeeze_dim(2); // [K, N]
    if let Some(p) = partial {
        s = Tensor::cat(&[s, p.matmul(q).unsqueeze(0)], 0); // [K', N]
    }
    if !key_norm {
        let u = s.ones_like();
        return (s, u);
    }
    let norm = |t: &Tensor| t.norm_scalaropt_dim(2, [-1], false);
    let mut norms = norm(stacked); // [K, N]
    if let Some(p) = partial {
        norms = Tensor::cat(&[norms, norm(p).unsqueeze(0)], 0);
    }
    let u = (norms.square() / d as f64 + RMS_EPS).rsqrt();
    (s, u)
}

#[cfg(test)]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
mod tests {
    use burn::backend::LibTorch;
    use burn::backend::libtorch::TchTensor;
    use tch::{Device, Kind, Tensor};

    use crate::model::kernels::composed;

    fn close(a: &Tensor, b: &Tensor, what: &str) {
        assert_eq!(a.size(), b.size(), "{what}: shapes");
        if a.numel() == 0 {
            return;
        }
        let err = (a - b).abs().max().double_value(&[]);
        assert!(err < 2e-5, "{what}: max difference {err}");
    }

    /// `[K, N, d]` sources in a buffer with a spare row after each slot, as a stack's.
    fn slotted(k: i64, n: i64, d: i64) -> Tensor {
        let buffer = Tensor::randn([k + 2, n + 1, d], (Kind::Float, Device::Cpu));
        buffer.narrow(0, 0, k).narrow(1, 0, n)
    }

    /// Against the composed form, with and without a partial sum and the key norm, into a
    /// gradient buffer some of whose slots earlier steps wrote.
    #[test]
    fn the_mixing_step_matches_the_composed_form_both_ways() {
        tch::manual_seed(7);
        let (k, n, d) = (4, 6, 8);
        for (with_partial, key_norm) in [(true, true), (false, true), (true, false), (false, false)]
        {
            let stacked = slotted(k, n, d);
            let rows = if with_partial { n } else { 0 };
            let partial = Tensor::randn([rows, d], (Kind::Float, Device::Cpu));
            let q = Tensor::randn([d], (Kind::Float, Device::Cpu));
            let grad = Tensor::randn([n, d], (Kind::Float, Device::Cpu));
            let case = format!("partial {with_partial}, key norm {key_norm}");

            let (x, saved) = super::forward(&stacked, &partial, &q, key_norm);
            // Copies: burn-tch updates a tensor it believes it owns in place.
            let t = |x: &Tensor| TchTensor::new(x.copy());
            let (want_x, _) =
                composed::depth_mix::<LibTorch>(t(&stacked), t(&partial), t(&q), key_norm);
            close(&x, &want_x.tensor, &format!("x, {case}"));

            let written = 2;
            let into = slotted(k + 1, n, d);
            let before = into.copy();
            let (dv, dp, dq) = super::backward(
                &grad, &stacked, &partial, &q, &saved, key_norm, into, written,
            );
            let (want_dv, want_dp, want_dq) = composed::depth_mix_backward::<LibTorch>(
                t(&grad),
                t(&stacked),
                t(&partial),
                t(&q),
                key_norm,
            );
            let want_dv = want_dv.tensor;
            let w = written as i64;
            let added = before.narrow(0, 0, w) + want_dv.narrow(0, 0, w);
            close(
                &dv.narrow(0, 0, w),
                &added,
                &format!("dv, written slots, {case}"),
            );
            close(
                &dv.narrow(0, w, k - w),
                &want_dv.narrow(0, w, k - w),
                &format!("dv, fresh slots, {case}"),
            );
            close(
                &dv.narrow(0, k, 1),
                &before.narrow(0, k, 1),
                "a slot past K is left alone",
            );
            close(&dp, &want_dp.tensor, &format!("dp, {case}"));
            close(&dq, &want_dq.tensor, &format!("dq, {case}"));
        }
    }
}
