//! The row kernels of one AttnRes mixing step (`kernels::mix`): per token, the logits of
//! every source, their softmax and the weighted sum, and the backward pass from the softmax
//! weights the forward kept, in tasks of rows on libtorch's OpenMP threads (`omp.rs`).

use super::omp::for_each_task;
use super::rows::{LANES, ROWS_PER_TASK, has_avx2};

/// The sources of one mixing step, token-major: the completed sources stacked `[K, N, d]`,
/// each source's `N d` floats `slot` floats after the previous one's, and, after a block's
/// first layer, the partial sum `[N, d]` as source `K`.
#[derive(Clone, Copy)]
pub struct Sources<'a> {
    pub stacked: &'a [f32],
    /// Completed sources `K`.
    pub completed: usize,
    /// Floats from one completed source to the next, at least `N d`.
    pub slot: usize,
    pub partial: Option<&'a [f32]>,
    /// Tokens `N`.
    pub n: usize,
    pub d: usize,
}

impl<'a> Sources<'a> {
    /// All sources, the partial sum included.
    pub fn count(&self) -> usize {
        self.completed + usize::from(self.partial.is_some())
    }

    /// Every source's row for token `r`, into `out` (cleared first).
    fn rows_of(&self, r: usize, out: &mut Vec<&'a [f32]>) {
        out.clear();
        out.extend((0..self.count()).map(|k| self.row(k, r)));
    }

    /// Source `k`'s row for token `r`.
    #[inline(always)]
    fn row(&self, k: usize, r: usize) -> &'a [f32] {
        let d = self.d;
        match self.partial {
            Some(p) if k == self.completed => &p[r * d..(r + 1) * d],
            _ => &self.stacked[k * self.slot + r * d..k * self.slot + (r + 1) * d],
        }
    }
}

/// `v . w_m` for each of `M` vectors in one pass over `v`, `LANES` partial sums each, in
/// AVX2's 8-lane registers written out when `AVX2` (the caller has checked the CPU), where the
/// compiler had paired two products' lanes in 128-bit registers, with a shuffle per chunk.
/// Each lane's products and sums are the same IEEE operations in the same order either way.
#[inline(always)]
fn dots<const AVX2: bool, const M: usize>(v: &[f32], w: [&[f32]; M]) -> [f32; M] {
    let mut acc = [[0.0f32; LANES]; M];
    let body = v.len() / LANES * LANES;
    #[cfg(target_arch = "x86_64")]
    if AVX2 {
        // SAFETY: the caller runs on a CPU with AVX2.
        unsafe { avx2::dots(&v[..body], w.map(|w| &w[..body]), &mut acc) };
    }
    if done_in_avx2::<AVX2>(body) == 0 {
        for (c, vc) in v[..body].chunks_exact(LANES).enumerate() {
            for (acc, w) in acc.iter_mut().zip(&w) {
                let wc = &w[c * LANES..(c + 1) * LANES];
                for i in 0..LANES {
                    acc[i] += vc[i] * wc[i];
                }
            }
        }
    }
    let mut out = [0.0f32; M];
    for ((out, acc), w) in out.iter_mut().zip(&acc).zip(&w) {
        let tail: f32 = (body..v.len()).map(|c| v[c] * w[c]).sum();
        *out = acc.iter().sum::<f32>() + tail;
    }
    out
}

/// Entries of a row the weighted sums and gradient rows below take at a time (two vector
/// registers of AVX2): all of a token's sources are walked for one such chunk before the next,
/// so the chunk's running sum stays in registers instead of being loaded and stored once per
/// source. Each entry's products and adds are the same, in source order.
const CHUNK: usize = 2 * LANES;

/// Where the portable loops over a row's first `body` entries start when the AVX2 form
/// (x86-64 only) has done them.
#[inline(always)]
fn done_in_avx2<const AVX2: bool>(body: usize) -> usize {
    if AVX2 && cfg!(target_arch = "x86_64") {
        body
    } else {
        0
    }
}

/// `x = sum_k a_k v_k` over a token's source rows `v`, each entry's sum in source order, in
/// AVX2 registers written out when `AVX2` (the caller has checked the CPU).
#[inline(always)]
fn weighted_sum<const AVX2: bool>(x: &mut [f32], v: &[&[f32]], a: &[f32]) {
    let d = x.len();
    let body = d / CHUNK * CHUNK;
    #[cfg(target_arch = "x86_64")]
    if AVX2 {
        // SAFETY: the caller runs on a CPU with AVX2.
        unsafe { avx2::weighted_sum(&mut x[..body], v, a) };
    }
    // The chunks the AVX2 form has not taken: all of them without it.
    for c in (done_in_avx2::<AVX2>(body)..body).step_by(CHUNK) {
        let mut acc = [0.0f32; CHUNK];
        let v0 = &v[0][c..c + CHUNK];
        for i in 0..CHUNK {
            acc[i] = a[0] * v0[i];
        }
        for (v, &a) in v[1..].iter().zip(&a[1..]) {
            let v = &v[c..c + CHUNK];
            for i in 0..CHUNK {
                acc[i] += a * v[i];
            }
        }
        x[c..c + CHUNK].copy_from_slice(&acc);
    }
    for c in body..d {
        let mut sum = a[0] * v[0][c];
        for (v, &a) in v[1..].iter().zip(&a[1..]) {
            sum += a * v[c];
        }
        x[c] = sum;
    }
}

/// The inner loops above and below in AVX2 intrinsics.
#[cfg(target_arch = "x86_64")]
mod avx2;

/// Floats a mixing step's forward keeps per (token, source) for its backward: the
/// softmax weight `a`, the logit's dot product `s = v.q` and `u = 1/rms(v)`, in that order.
pub const SAVED: usize = 3;

/// Per source of one token: `s = v.q`, `u = 1/rms(v)` (1 without the key norm) and the
/// softmax weight `a` of the logit `s u`.
struct Weights {
    s: Vec<f32>,
    u: Vec<f32>,
    a: Vec<f32>,
}

impl Weights {
    fn new(sources: usize) -> Self {
        Self {
            s: vec![0.0; sources],
            u: vec![0.0; sources],
            a: vec![0.0; sources],
        }
    }

    /// Computes the weights of one token from its source rows `v` and the query `q` (`d`).
    #[inline(always)]
    fn of_token<const AVX2: bool>(&mut self, v: &[&[f32]], q: &[f32], key_norm: bool) {
        let d = q.len();
        // The dot products first, then the RMS and logits of all sources in a loop of their
        // own, whose square roots and divisions the CPU overlaps (or vectorizes) across the
        // sources instead of waiting on each source's in turn.
        for (k, v) in v.iter().enumerate() {
            [self.s[k], self.u[k]] = dots::<AVX2, 2>(v, [q, v]);
        }
        for (u, (a, s)) in self.u.iter_mut().zip(self.a.iter_mut().zip(&self.s)) {
            *u = if key_norm { inv_rms_of(*u, d) } else { 1.0 };
            *a = s * *u;
        }
        let max = self.a.iter().fold(f32::NEG_INFINITY, |m, &a| m.max(a));
        let mut sum = 0.0f32;
        for a in self.a.iter_mut() {
            *a = (*a - max).exp();
            sum += *a;
        }
        for a in self.a.iter_mut() {
            *a /= sum;
        }
    }

    /// Writes the weights into one token's `[K', SAVED]` of the forward's saved state.
    #[inline(always)]
    fn save(&self, saved: &mut [f32]) {
        for (k, out) in saved.chunks_exact_mut(SAVED).enumerate() {
            out.copy_from_slice(&[self.a[k], self.s[k], self.u[k]]);
        }
    }

    /// Reads them back from one token's saved state.
    #[inline(always)]
    fn load(&mut self, saved: &[f32]) {
        for (k, v) in saved.chunks_exact(SAVED).enumerate() {
            (self.a[k], self.s[k], self.u[k]) = (v[0], v[1], v[2]);
        }
    }
}

/// `1 / rms` from a sum of squares over `d` entries (as `rows::inv_rms`).
#[inline(always)]
fn inv_rms_of(sum_sq: f32, d: usize) -> f32 {
    let mean = sum_sq / d as f32;
    1.0 / (mean + crate::model::norm::RMS_EPS as f32).sqrt()
}

/// One mixing step, `x = sum_k a_k v_k` with `a = softmax_k(v_k . q / rms(v_k))` (`v_k . q`
/// without the key norm), for every token: writes `x` `[N, d]` and, for the backward pass,
/// each token's weights into `saved` `[N, K', SAVED]`.
pub fn mix_forward(src: Sources, q: &[f32], key_norm: bool, x: &mut [f32], saved: &mut [f32]) {
    let (d, sources) = (src.d, src.count());
    let tasks: Vec<(&mut [f32], &mut [f32])> = x
        .chunks_mut(d * ROWS_PER_TASK)
        .zip(saved.chunks_mut(sources * SAVED * ROWS_PER_TASK))
        .collect();
    for_each_task(tasks, &|task, (x, saved)| {
        let rows = Task {
            src,
            q,
            key_norm,
            task,
        };
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: this CPU has AVX2.
            return unsafe { forward_rows_avx2(rows, x, saved) };
        }
        forward_rows::<false>(rows, x, saved)
    });
}

/// What every task of a mixing step's kernel reads, and which task it is.
#[derive(Clone, Copy)]
struct Task<'a> {
    src: Sources<'a>,
    q: &'a [f32],
    key_norm: bool,
    task: usize,
}

/// [`forward_rows`] compiled for AVX2: eight lanes a register where SSE2 has four, the same
/// floats (no fused multiply-add, the same lanes and order of summation).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn forward_rows_avx2(t: Task, x: &mut [f32], saved: &mut [f32]) {
    forward_rows::<true>(t, x, saved)
}

/// One task's rows of [`mix_forward`].
#[inline(always)]
fn forward_rows<const AVX2: bool>(t: Task, x: &mut [f32], saved: &mut [f32]) {
    let (src, d) = (t.src, t.src.d);
    let sources = src.count();
    let mut w = Weights::new(sources);
    let mut v: Vec<&[f32]> = Vec::with_capacity(sources);
    let rows = x
        .chunks_exact_mut(d)
        .zip(saved.chunks_exact_mut(sources * SAVED));
    for (i, (x, saved)) in rows.enumerate() {
        let r = t.task * ROWS_PER_TASK + i;
        src.rows_of(r, &mut v);
        w.of_token::<AVX2>(&v, t.q, t.key_norm);
        w.save(saved);
        weighted_sum::<AVX2>(x, &v, &w.a);
    }
}

/// Where [`mix_backward`] writes the sources' gradients: `[K, N, d]` for the stacked ones,
/// `slot` floats from one source's to the next (at least `N d`), whose first `written`
/// sources' rows already hold a sum that the gradient is added to, and `[N, d]` for the
/// partial sum (if any).
pub struct SourceGrads<'a> {
    pub stacked: &'a mut [f32],
    pub slot: usize,
    pub written: usize,
    pub partial: Option<&'a mut [f32]>,
}

/// One task's share of [`mix_backward`]: its rows of every source's gradient, and its
/// tokens' sum of `dq`.
struct GradTask<'a> {
    dv: Vec<&'a mut [f32]>,
    dq: Vec<f32>,
}

/// The gradients of [`mix_forward`] given `g = dL/dx` `[N, d]` and the forward's `saved`
/// weights (so that the backward computes only `g.v_k` per source); returns `dq` `[d]`. With
/// `z_k = s_k u_k`: `dz_k = a_k (g.v_k - g.x)`, `dv_k = a_k g + dz_k u_k q - dz_k s_k u_k^3
/// v_k / d` (the last term from the key norm), `dq = sum dz_k u_k v_k`, summed per task of
/// rows and the tasks' sums then in task order (the same whatever the threads).
pub fn mix_backward(
    g: &[f32],
    src: Sources,
    q: &[f32],
    saved: &[f32],
    key_norm: bool,
    out: SourceGrads,
) -> Vec<f32> {
    let (d, n) = (src.d, src.n);
    // The stacked sources' slots that add to a sum (never the partial sum's, after them).
    let written = out.written.min(src.completed);
    let rows = d * ROWS_PER_TASK;
    // Each source's gradient cut into the tasks' rows: `slabs[k][task]`.
    let mut slabs: Vec<std::slice::ChunksMut<f32>> = out
        .stacked
        .chunks_mut(out.slot)
        .take(src.completed)
        .map(|slab| slab[..n * d].chunks_mut(rows))
        .collect();
    slabs.extend(out.partial.map(|p| p.chunks_mut(rows)));
    let tasks: Vec<GradTask> = (0..n.div_ceil(ROWS_PER_TASK))
        .map(|_| GradTask {
            dv: slabs
                .iter_mut()
                .map(|s| s.next().expect("one chunk a task"))
                .collect(),
            dq: vec![0.0; d],
        })
        .collect();
    let tasks = for_each_task(tasks, &|task, grads: &mut GradTask| {
        let rows = Task {
            src,
            q,
            key_norm,
            task,
        };
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: this CPU has AVX2.
            return unsafe { backward_rows_avx2(rows, g, saved, written, grads) };
        }
        backward_rows::<false>(rows, g, saved, written, grads)
    });
    tasks.into_iter().fold(vec![0.0f32; d], |mut dq, t| {
        dq.iter_mut().zip(t.dq).for_each(|(a, b)| *a += b);
        dq
    })
}

/// [`backward_rows`] compiled for AVX2, as [`forward_rows_avx2`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn backward_rows_avx2(t: Task, g: &[f32], saved: &[f32], written: usize, grads: &mut GradTask) {
    backward_rows::<true>(t, g, saved, written, grads)
}

/// One task's rows of [`mix_backward`]: the gradients of its rows of every source (added to
/// the first `written` sources' sums) and its share of `dq`.
#[inline(always)]
fn backward_rows<const AVX2: bool>(
    t: Task,
    g: &[f32],
    saved: &[f32],
    written: usize,
    grads: &mut GradTask,
) {
    let (src, q, key_norm, task) = (t.src, t.q, t.key_norm, t.task);
    let d = src.d;
    let sources = src.count();
    let mut w = Weights::new(sources);
    let mut gv = vec![0.0f32; sources];
    let mut terms = vec![Term::default(); sources];
    let mut v: Vec<&[f32]> = Vec::with_capacity(sources);
    for i in 0..grads.dv[0].len() / d {
        let r = task * ROWS_PER_TASK + i;
        let g = &g[r * d..(r + 1) * d];
        w.load(&saved[r * sources * SAVED..(r + 1) * sources * SAVED]);
        src.rows_of(r, &mut v);
        for (gv, v) in gv.iter_mut().zip(&v) {
            [*gv] = dots::<AVX2, 1>(v, [g]);
        }
        let gx: f32 = w.a.iter().zip(&gv).map(|(a, gv)| a * gv).sum();
        for (k, term) in terms.iter_mut().enumerate() {
            let (a, u) = (w.a[k], w.u[k]);
            let dz = a * (gv[k] - gx);
            *term = Term {
                a,
                along_q: dz * u,
                along_v: if key_norm {
                    dz * w.s[k] * u * u * u / d as f32
                } else {
                    0.0
                },
            };
        }
        let rows = Rows { g, q, v: &v };
        gradient_rows::<AVX2>(rows, &terms, written, &mut grads.dv, i * d, &mut grads.dq);
    }
}

/// One source's coefficients in its gradient row `dv = a g + along_q q - along_v v` and in
/// `dq += along_q v`.
#[derive(Clone, Copy, Default)]
struct Term {
    a: f32,
    along_q: f32,
    along_v: f32,
}

/// The rows a token's gradient rows are made of: `g`, `q` and its source rows `v`.
struct Rows<'a> {
    g: &'a [f32],
    q: &'a [f32],
    v: &'a [&'a [f32]],
}

/// Writes each source's gradient row of one token into its rows of `dv` from entry `at`
/// (added to the first `written` rows' old sums, as burn adds registered gradients) and adds
/// their terms to `dq`, each entry's in source order: its chunks of `CHUNK` entries in AVX2
/// registers written out when `AVX2` (the caller has checked the CPU), the same products and
/// sums in the same order.
#[inline(always)]
fn gradient_rows<const AVX2: bool>(
    rows: Rows,
    terms: &[Term],
    written: usize,
    dv: &mut [&mut [f32]],
    at: usize,
    dq: &mut [f32],
) {
    let d = dq.len();
    let body = d / CHUNK * CHUNK;
    #[cfg(target_arch = "x86_64")]
    if AVX2 {
        // SAFETY: the caller runs on a CPU with AVX2.
        unsafe { avx2::gradient_rows(&rows, terms, written, dv, at, dq, body) };
    }
    for c in (done_in_avx2::<AVX2>(body)..body).step_by(CHUNK) {
        let mut acc = [0.0f32; CHUNK];
        acc.copy_from_slice(&dq[c..c + CHUNK]);
        let (g, q) = (&rows.g[c..c + CHUNK], &rows.q[c..c + CHUNK]);
        for (k, ((dv, v), t)) in dv.iter_mut().zip(rows.v).zip(terms).enumerate() {
            let (dv, v) = (&mut dv[at + c..at + c + CHUNK], &v[c..c + CHUNK]);
            if k < written {
                for i in 0..CHUNK {
                    dv[i] += t.a * g[i] + t.along_q * q[i] - t.along_v * v[i];
                    acc[i] += t.along_q * v[i];
                }
            } else {
                for i in 0..CHUNK {
                    dv[i] = t.a * g[i] + t.along_q * q[i] - t.along_v * v[i];
                    acc[i] += t.along_q * v[i];
                }
            }
        }
        dq[c..c + CHUNK].copy_from_slice(&acc);
    }
    for c in body..d {
        for (k, ((dv, v), t)) in dv.iter_mut().zip(rows.v).zip(terms).enumerate() {
            let term = t.a * rows.g[c] + t.along_q * rows.q[c] - t.along_v * v[c];
            let dv = &mut dv[at + c];
            *dv = if k < written { *dv + term } else { term };
            dq[c] += t.along_q * v[c];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::rows::inv_rms;
    use super::*;

    /// `inv_rms_of` agrees with `rows::inv_rms` on the same row.
    #[test]
    fn inverse_rms_from_the_sum_of_squares() {
        let v: Vec<f32> = (0..13).map(|i| i as f32 * 0.3 - 1.7).collect();
        let [vv] = dots::<false, 1>(&v, [&v]);
        assert!((inv_rms_of(vv, v.len()) - inv_rms(&v, true)).abs() < 1e-6);
    }

    /// A row of `n` floats of mixed signs and magnitudes, different per `seed`.
    fn row(n: usize, seed: u32) -> Vec<f32> {
        (0..n as u32)
            .map(|i| ((i * 7919 + seed * 104_729) % 1000) as f32 / 250.0 - 2.0)
            .map(|x| x * x * x)
            .collect()
    }

    /// `k` stacked sources and a partial sum, `n` rows of `d` each, and a query, different
    /// per `seed`.
    fn inputs(n: usize, d: usize, k: usize, seed: u32) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let stacked = (0..k).flat_map(|j| row(n * d, seed + j as u32)).collect();
        (stacked, row(n * d, seed + 89), row(d, seed + 97))
    }

    /// The first task of a mixing step with the key norm over these.
    fn first_task<'a>(
        stacked: &'a [f32],
        partial: &'a [f32],
        q: &'a [f32],
        n: usize,
        d: usize,
    ) -> Task<'a> {
        let src = Sources {
            stacked,
            completed: stacked.len() / (n * d),
            slot: n * d,
            partial: Some(partial),
            n,
            d,
        };
        Task {
            src,
            q,
            key_norm: true,
            task: 0,
        }
    }

    /// The AVX2 and portable forms of `dots` (one vector and two, as the backward and the
    /// forward take them) give the same floats exactly, with and without a tail of fewer than
    /// `LANES` entries.
    #[test]
    fn dots_forms_agree_bit_for_bit() {
        for n in [8, 13, 64, 67, 96, 256] {
            let (v, q) = (row(n, 1), row(n, 2));
            let want = dots::<false, 2>(&v, [&q, &v]).map(f32::to_bits);
            let [want_q] = dots::<false, 1>(&v, [&q]).map(f32::to_bits);
            assert_eq!(want[0], want_q, "d {n}");
            #[cfg(target_arch = "x86_64")]
            if has_avx2() {
                let avx2 = |w: &[f32]| dots::<true, 2>(&v, [w, &v]).map(f32::to_bits);
                assert_eq!(avx2(&q), want, "d {n}");
                assert_eq!(
                    dots::<true, 1>(&v, [&q]).map(f32::to_bits),
                    [want_q],
                    "d {n}"
                );
            }
        }
    }

    /// The forward's weights and sum equal those of the loops it replaced (the sum source by
    /// source over whole rows), bit for bit, on the AVX2 path where the CPU has it and on the
    /// portable one.
    #[test]
    fn forward_rows_equal_the_source_by_source_sums() {
        let (n, d, k) = (ROWS_PER_TASK, 72, 5);
        let (stacked, partial, q) = inputs(n, d, k, 10);
        let task = first_task(&stacked, &partial, &q, n, d);
        let src = task.src;
        let mut want = vec![0.0f32; n * d];
        for (r, x) in want.chunks_exact_mut(d).enumerate() {
            let mut w = Weights::new(k + 1);
            let mut v = Vec::new();
            src.rows_of(r, &mut v);
            w.of_token::<false>(&v, &q, true);
            for (x, v) in x.iter_mut().zip(src.row(0, r)) {
                *x = w.a[0] * v;
            }
            for (j, &a) in w.a.iter().enumerate().skip(1) {
                for (x, v) in x.iter_mut().zip(src.row(j, r)) {
                    *x += a * v;
                }
            }
        }
        let run = |avx2: bool| {
            let (mut x, mut saved) = (vec![0.0f32; n * d], vec![0.0f32; n * (k + 1) * SAVED]);
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: only called where the CPU has AVX2.
                unsafe { forward_rows_avx2(task, &mut x, &mut saved) };
                return (x, saved);
            }
            assert!(!avx2);
            forward_rows::<false>(task, &mut x, &mut saved);
            (x, saved)
        };
        let bits = |x: &[f32]| x.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let (x, saved) = run(false);
        assert_eq!(bits(&x), bits(&want));
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            let (x2, saved2) = run(true);
            assert_eq!(bits(&x2), bits(&want));
            assert_eq!(bits(&saved2), bits(&saved));
        }
    }

    /// The backward's AVX2 and portable forms give the same gradient rows (added to the
    /// written slots' sums and written fresh in the others) and the same `dq`, bit for bit,
    /// with and without tails of fewer than `CHUNK` and `LANES` entries.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn backward_rows_forms_agree_bit_for_bit() {
        if !has_avx2() {
            return;
        }
        for d in [32, 72, 67] {
            let (n, k, written) = (ROWS_PER_TASK, 4, 2);
            let (stacked, partial, q) = inputs(n, d, k, 20);
            let g = row(n * d, 6);
            let task = first_task(&stacked, &partial, &q, n, d);
            let (mut x, mut saved) = (vec![0.0f32; n * d], vec![0.0f32; n * (k + 1) * SAVED]);
            forward_rows::<false>(task, &mut x, &mut saved);
            let run = |avx2: bool| {
                let mut dv: Vec<Vec<f32>> = (0..=k).map(|j| row(n * d, 60 + j as u32)).collect();
                let mut grads = GradTask {
                    dv: dv.iter_mut().map(|v| v.as_mut_slice()).collect(),
                    dq: vec![0.0f32; d],
                };
                if avx2 {
                    // SAFETY: only called where the CPU has AVX2 (checked above).
                    unsafe { backward_rows_avx2(task, &g, &saved, written, &mut grads) };
                } else {
                    backward_rows::<false>(task, &g, &saved, written, &mut grads);
                }
                let dq = grads.dq;
                (dv, dq)
            };
            let bits = |x: &[f32]| x.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let ((dv, dq), (dv2, dq2)) = (run(false), run(true));
            assert_eq!(bits(&dq2), bits(&dq), "dq, d {d}");
            for (j, (a, b)) in dv.iter().zip(&dv2).enumerate() {
                assert_eq!(bits(b), bits(a), "source {j}, d {d}");
            }
        }
    }
}
