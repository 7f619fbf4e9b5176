//! The row kernels of one AttnRes mixing step (`kernels::mix`): per token, the logits of
//! every source, their softmax and the weighted sum, and the backward pass from the softmax
//! weights the forward kept, in tasks of rows on libtorch's OpenMP threads (`omp.rs`).
//!
//! The inner loops are written once, over sixteen lanes with fused multiply-adds
//! (`lanes.rs`), and run in AVX-512, AVX2 or plain Rust as the CPU allows: the same floats
//! in each, since every lane does the same operations in the same order. Narrow models'
//! forwards take sixteen tokens at a time (`tiled.rs`), with `e^x` in lanes (`exp.rs`):
//! the same floats again.

use super::omp::for_each_task;
use super::rows::ROWS_PER_TASK;

mod exp;
mod lanes;
mod tiled;
#[cfg(target_arch = "x86_64")]
use lanes::{Avx2, Avx512};
use lanes::{Form, Lanes, Portable, WIDTH};

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

/// `v . w_m` for each of `M` vectors in one pass over `v`: [`WIDTH`] partial sums each, one
/// multiply-add a chunk of the row, added up by [`Lanes::sum`]'s tree, then the tail of
/// fewer than [`WIDTH`] entries in order.
///
/// # Safety
/// The CPU has `S`'s features.
#[inline(always)]
unsafe fn dots<S: Lanes, const M: usize>(v: &[f32], w: [&[f32]; M]) -> [f32; M] {
    let d = v.len();
    assert!(w.iter().all(|w| w.len() == d));
    let body = d / WIDTH * WIDTH;
    // SAFETY: `S`'s features as the caller promised; every row holds `d >= c + WIDTH`
    // entries (asserted above).
    unsafe {
        let mut acc = [S::splat(0.0); M];
        for c in (0..body).step_by(WIDTH) {
            let x = S::load(v.as_ptr().add(c));
            for (acc, w) in acc.iter_mut().zip(&w) {
                *acc = S::mul_add(x, S::load(w.as_ptr().add(c)), *acc);
            }
        }
        let mut out = [0.0f32; M];
        for ((out, acc), w) in out.iter_mut().zip(acc).zip(&w) {
            let tail = (body..d).fold(0.0f32, |t, c| v[c].mul_add(w[c], t));
            *out = S::sum(acc) + tail;
        }
        out
    }
}

/// `x = a_0 v_0 + a_1 v_1 + ...` over a token's source rows `v`, entry by entry in source
/// order, each term after the first a multiply-add.
///
/// # Safety
/// The CPU has `S`'s features.
#[inline(always)]
unsafe fn weighted_sum<S: Lanes>(x: &mut [f32], v: &[&[f32]], a: &[f32]) {
    let d = x.len();
    assert!(v.len() == a.len() && !v.is_empty() && v.iter().all(|v| v.len() == d));
    let body = d / WIDTH * WIDTH;
    for c in (0..body).step_by(WIDTH) {
        // SAFETY: `S`'s features as the caller promised; every row holds `d >= c + WIDTH`
        // entries (asserted above).
        unsafe {
            let mut sum = S::mul(S::splat(a[0]), S::load(v[0].as_ptr().add(c)));
            for (v, &a) in v[1..].iter().zip(&a[1..]) {
                sum = S::mul_add(S::splat(a), S::load(v.as_ptr().add(c)), sum);
            }
            S::store(x.as_mut_ptr().add(c), sum);
        }
    }
    for c in body..d {
        let mut sum = a[0] * v[0][c];
        for (v, &a) in v[1..].iter().zip(&a[1..]) {
            sum = a.mul_add(v[c], sum);
        }
        x[c] = sum;
    }
}

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
    ///
    /// # Safety
    /// The CPU has `S`'s features.
    #[inline(always)]
    unsafe fn of_token<S: Lanes>(&mut self, v: &[&[f32]], q: &[f32], key_norm: bool) {
        let d = q.len();
        // The dot products first, then the RMS and logits of all sources in a loop of their
        // own, whose square roots and divisions the CPU overlaps (or vectorizes) across the
        // sources instead of waiting on each source's in turn.
        for (k, v) in v.iter().enumerate() {
            // SAFETY: `S`'s features as the caller promised.
            [self.s[k], self.u[k]] = unsafe { dots::<S, 2>(v, [q, v]) };
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
    let form = Form::detect();
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
        // SAFETY: `form` is this CPU's.
        unsafe { forward_rows_in(form, rows, x, saved) }
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

/// [`forward_rows`] in `form`'s lanes, compiled with its CPU features.
///
/// # Safety
/// The CPU has `form` (`Form::detect`).
unsafe fn forward_rows_in(form: Form, t: Task, x: &mut [f32], saved: &mut [f32]) {
    // SAFETY: as the caller promised.
    unsafe {
        match form {
            #[cfg(target_arch = "x86_64")]
            Form::Avx512 => forward_rows_avx512(t, x, saved),
            #[cfg(target_arch = "x86_64")]
            Form::Avx2 => forward_rows_avx2(t, x, saved),
            _ => forward_rows::<Portable>(t, x, saved),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn forward_rows_avx2(t: Task, x: &mut [f32], saved: &mut [f32]) {
    // SAFETY: compiled for, and called on, a CPU with AVX2 and FMA.
    unsafe { forward_rows::<Avx2>(t, x, saved) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn forward_rows_avx512(t: Task, x: &mut [f32], saved: &mut [f32]) {
    // SAFETY: compiled for, and called on, a CPU with AVX-512.
    unsafe { forward_rows::<Avx512>(t, x, saved) }
}

/// One task's rows of [`mix_forward`]: sixteen tokens at a time in narrow models
/// (`tiled.rs`), else one at a time; the same floats either way.
///
/// # Safety
/// The CPU has `S`'s features.
#[inline(always)]
unsafe fn forward_rows<S: Lanes>(t: Task, x: &mut [f32], saved: &mut [f32]) {
    // SAFETY: `S`'s features as the caller promised.
    unsafe {
        if t.src.d < tiled::TILED_BELOW_D {
            tiled::forward_rows_tiled::<S>(t, x, saved)
        } else {
            forward_rows_by_token::<S>(t, x, saved)
        }
    }
}

/// One task's rows of [`mix_forward`], a token at a time.
///
/// # Safety
/// The CPU has `S`'s features.
#[inline(always)]
unsafe fn forward_rows_by_token<S: Lanes>(t: Task, x: &mut [f32], saved: &mut [f32]) {
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
        // SAFETY: `S`'s features as the caller promised.
        unsafe {
            w.of_token::<S>(&v, t.q, t.key_norm);
            w.save(saved);
            weighted_sum::<S>(x, &v, &w.a);
        }
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
    let form = Form::detect();
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
        // SAFETY: `form` is this CPU's.
        unsafe { backward_rows_in(form, rows, g, saved, written, grads) }
    });
    tasks.into_iter().fold(vec![0.0f32; d], |mut dq, t| {
        dq.iter_mut().zip(t.dq).for_each(|(a, b)| *a += b);
        dq
    })
}

/// [`backward_rows`] in `form`'s lanes, compiled with its CPU features.
///
/// # Safety
/// The CPU has `form` (`Form::detect`).
unsafe fn backward_rows_in(
    form: Form,
    t: Task,
    g: &[f32],
    saved: &[f32],
    written: usize,
    grads: &mut GradTask,
) {
    // SAFETY: as the caller promised.
    unsafe {
        match form {
            #[cfg(target_arch = "x86_64")]
            Form::Avx512 => backward_rows_avx512(t, g, saved, written, grads),
            #[cfg(target_arch = "x86_64")]
            Form::Avx2 => backward_rows_avx2(t, g, saved, written, grads),
            _ => backward_rows::<Portable>(t, g, saved, written, grads),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn backward_rows_avx2(
    t: Task,
    g: &[f32],
    saved: &[f32],
    written: usize,
    grads: &mut GradTask,
) {
    // SAFETY: compiled for, and called on, a CPU with AVX2 and FMA.
    unsafe { backward_rows::<Avx2>(t, g, saved, written, grads) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn backward_rows_avx512(
    t: Task,
    g: &[f32],
    saved: &[f32],
    written: usize,
    grads: &mut GradTask,
) {
    // SAFETY: compiled for, and called on, a CPU with AVX-512.
    unsafe { backward_rows::<Avx512>(t, g, saved, written, grads) }
}

/// One task's rows of [`mix_backward`]: the gradients of its rows of every source (added to
/// the first `written` sources' sums) and its share of `dq`.
///
/// # Safety
/// The CPU has `S`'s features.
#[inline(always)]
unsafe fn backward_rows<S: Lanes>(
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
            // SAFETY: `S`'s features as the caller promised.
            [*gv] = unsafe { dots::<S, 1>(v, [g]) };
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
        // SAFETY: `S`'s features as the caller promised.
        unsafe {
            gradient_rows::<S>(rows, &terms, written, &mut grads.dv, i * d, &mut grads.dq);
        }
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

/// Writes each source's gradient row of one token into its rows of `dv` from entry `at`,
/// `(a g + along_q q) - along_v v` in multiply-adds, added to the row's sum so far for the
/// first `written` sources (as burn adds registered gradients: the same floats as a
/// gradient of its own summed afterwards), and adds `along_q v` to `dq`, each entry's in
/// source order. A chunk of the row is walked across all sources before the next, so `g`,
/// `q` and `dq`'s chunk stay in registers.
///
/// # Safety
/// The CPU has `S`'s features.
#[inline(always)]
unsafe fn gradient_rows<S: Lanes>(
    rows: Rows,
    terms: &[Term],
    written: usize,
    dv: &mut [&mut [f32]],
    at: usize,
    dq: &mut [f32],
) {
    let d = dq.len();
    assert!(rows.g.len() == d && rows.q.len() == d && rows.v.iter().all(|v| v.len() == d));
    assert!(dv.len() == rows.v.len() && terms.len() == dv.len());
    assert!(dv.iter().all(|dv| dv.len() >= at + d));
    let body = d / WIDTH * WIDTH;
    for c in (0..body).step_by(WIDTH) {
        // SAFETY: `S`'s features as the caller promised; every row read or written holds
        // `d >= c + WIDTH` entries from where it is read (asserted above).
        unsafe {
            let (g, q) = (
                S::load(rows.g.as_ptr().add(c)),
                S::load(rows.q.as_ptr().add(c)),
            );
            let mut acc = S::load(dq.as_ptr().add(c));
            for (k, ((dv, v), t)) in dv.iter_mut().zip(rows.v).zip(terms).enumerate() {
                let v = S::load(v.as_ptr().add(c));
                let out = dv.as_mut_ptr().add(at + c);
                let along_q = S::splat(t.along_q);
                let x = S::mul_add(along_q, q, S::mul(S::splat(t.a), g));
                let term = S::neg_mul_add(S::splat(t.along_v), v, x);
                S::store(
                    out,
                    if k < written {
                        S::add(S::load(out), term)
                    } else {
                        term
                    },
                );
                acc = S::mul_add(along_q, v, acc);
            }
            S::store(dq.as_mut_ptr().add(c), acc);
        }
    }
    for c in body..d {
        let (g, q) = (rows.g[c], rows.q[c]);
        for (k, ((dv, v), t)) in dv.iter_mut().zip(rows.v).zip(terms).enumerate() {
            let out = &mut dv[at + c];
            let term = (-t.along_v).mul_add(v[c], t.along_q.mul_add(q, t.a * g));
            *out = if k < written { *out + term } else { term };
            dq[c] = t.along_q.mul_add(v[c], dq[c]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::rows::inv_rms;
    use super::*;

    /// The forward of narrow models, sixteen tokens at a time in every form, writes the
    /// floats of the portable token-at-a-time path bit for bit: 1 to 20 sources (one and
    /// two sets of lanes), a last tile of 5 tokens, with and without the key norm and the
    /// partial sum, and logits spread far enough that exponentials underflow.
    #[test]
    fn the_tiled_forward_equals_the_forward_by_token() {
        let (n, d) = (37, 40);
        for sources in [1, 2, 3, 6, 15, 16, 17, 20] {
            for (key_norm, partial) in [(true, true), (false, true), (true, false)] {
                let (stacked, p, q) = inputs(n, d, sources - usize::from(partial), 3);
                let q: Vec<f32> = q.iter().map(|q| q * 40.0).collect();
                let mut task = first_task(&stacked, &p, &q, n, d);
                task.key_norm = key_norm;
                if !partial {
                    task.src.partial = None;
                }
                let fresh = || (vec![0.0f32; n * d], vec![0.0f32; n * sources * SAVED]);
                let (mut x, mut saved) = fresh();
                // SAFETY: the portable form runs anywhere.
                unsafe { forward_rows_by_token::<Portable>(task, &mut x, &mut saved) };
                let underflowed = saved.chunks_exact(SAVED).filter(|w| w[0] == 0.0).count();
                for form in Form::all_here() {
                    let (mut tiled_x, mut tiled_saved) = fresh();
                    // SAFETY: `form` is one this CPU has; below `TILED_BELOW_D`.
                    unsafe { forward_rows_in(form, task, &mut tiled_x, &mut tiled_saved) };
                    let case =
                        format!("{form:?}, {sources} sources, norm {key_norm}, partial {partial}");
                    assert_eq!(bits(&tiled_x), bits(&x), "{case}");
                    assert_eq!(bits(&tiled_saved), bits(&saved), "{case}");
                }
                assert!(
                    sources == 1 || underflowed > 0,
                    "no weight underflowed: {sources}"
                );
            }
        }
    }

    /// `inv_rms_of` agrees with `rows::inv_rms` on the same row.
    #[test]
    fn inverse_rms_from_the_sum_of_squares() {
        let v: Vec<f32> = (0..13).map(|i| i as f32 * 0.3 - 1.7).collect();
        // SAFETY: the portable form runs anywhere.
        let [vv] = unsafe { dots::<Portable, 1>(&v, [&v]) };
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

    fn bits(x: &[f32]) -> Vec<u32> {
        x.iter().map(|x| x.to_bits()).collect()
    }

    /// `v . w` as defined: sixteen running sums of multiply-adds, lane `i` over the entries
    /// `c = i mod 16` of the whole chunks, added in the tree (`i` and `i + 8`, then `+ 4`,
    /// `+ 2`, `+ 1`), then the tail in order.
    fn dot_by_definition(v: &[f32], w: &[f32]) -> f32 {
        let body = v.len() / 16 * 16;
        let mut lanes = [0.0f32; 16];
        for c in 0..body {
            lanes[c % 16] = v[c].mul_add(w[c], lanes[c % 16]);
        }
        for half in [8, 4, 2, 1] {
            for i in 0..half {
                lanes[i] += lanes[i + half];
            }
        }
        let tail = (body..v.len()).fold(0.0f32, |t, c| v[c].mul_add(w[c], t));
        lanes[0] + tail
    }

    /// `dots` in every form this CPU has, one vector and two (as the backward and the forward
    /// take them), equals the definition bit for bit, with and without a tail.
    #[test]
    fn dots_in_every_form_equal_the_definition() {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(v: &[f32], q: &[f32]) -> ([f32; 2], [f32; 1]) {
            // SAFETY: as the caller promised.
            unsafe { (dots::<Avx2, 2>(v, [q, v]), dots::<Avx2, 1>(v, [q])) }
        }
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn avx512(v: &[f32], q: &[f32]) -> ([f32; 2], [f32; 1]) {
            // SAFETY: as the caller promised.
            unsafe { (dots::<Avx512, 2>(v, [q, v]), dots::<Avx512, 1>(v, [q])) }
        }
        for n in [8, 13, 16, 64, 67, 72, 96, 256] {
            let (v, q) = (row(n, 1), row(n, 2));
            let want = [dot_by_definition(&v, &q), dot_by_definition(&v, &v)];
            for form in Form::all_here() {
                // SAFETY: `form` is one this CPU has.
                let (two, [one]) = unsafe {
                    match form {
                        #[cfg(target_arch = "x86_64")]
                        Form::Avx2 => avx2(&v, &q),
                        #[cfg(target_arch = "x86_64")]
                        Form::Avx512 => avx512(&v, &q),
                        _ => (
                            dots::<Portable, 2>(&v, [&q, &v]),
                            dots::<Portable, 1>(&v, [&q]),
                        ),
                    }
                };
                assert_eq!(bits(&two), bits(&want), "{form:?}, d {n}");
                assert_eq!(one.to_bits(), want[0].to_bits(), "{form:?}, d {n}");
            }
        }
    }

    /// The forward's sum in every form equals the weighted sum source by source over whole
    /// rows (`a_0 v_0`, then a multiply-add a source) bit for bit, and every form keeps the
    /// same weights; with and without tails of fewer than 16 entries.
    #[test]
    fn forward_rows_in_every_form_equal_the_source_by_source_sums() {
        // Narrow rows take the tiled path, 260 the token-at-a-time one.
        for d in [64, 72, 67, 260] {
            let (n, k) = (ROWS_PER_TASK, 5);
            let (stacked, partial, q) = inputs(n, d, k, 10);
            let task = first_task(&stacked, &partial, &q, n, d);
            let src = task.src;
            let mut want = vec![0.0f32; n * d];
            for (r, x) in want.chunks_exact_mut(d).enumerate() {
                let mut w = Weights::new(k + 1);
                let mut v = Vec::new();
                src.rows_of(r, &mut v);
                // SAFETY: the portable form runs anywhere.
                unsafe { w.of_token::<Portable>(&v, &q, true) };
                for (x, v) in x.iter_mut().zip(src.row(0, r)) {
                    *x = w.a[0] * v;
                }
                for (j, &a) in w.a.iter().enumerate().skip(1) {
                    for (x, v) in x.iter_mut().zip(src.row(j, r)) {
                        *x = a.mul_add(*v, *x);
                    }
                }
            }
            let mut kept = None;
            for form in Form::all_here() {
                let (mut x, mut saved) = (vec![0.0f32; n * d], vec![0.0f32; n * (k + 1) * SAVED]);
                // SAFETY: `form` is one this CPU has.
                unsafe { forward_rows_in(form, task, &mut x, &mut saved) };
                assert_eq!(bits(&x), bits(&want), "{form:?}, d {d}");
                let kept = kept.get_or_insert_with(|| bits(&saved));
                assert_eq!(&bits(&saved), kept, "{form:?}, d {d}");
            }
        }
    }

    /// The backward in every form gives the portable form's gradient rows (added to the
    /// written slots' sums and written fresh in the others) and `dq`, bit for bit, with and
    /// without tails of fewer than 16 entries; and changing one source's weight changes
    /// them (the comparison can fail).
    #[test]
    fn backward_rows_in_every_form_agree_bit_for_bit() {
        for d in [32, 72, 67] {
            let (n, k, written) = (ROWS_PER_TASK, 4, 2);
            let (stacked, partial, q) = inputs(n, d, k, 20);
            let g = row(n * d, 6);
            let task = first_task(&stacked, &partial, &q, n, d);
            let (mut x, mut saved) = (vec![0.0f32; n * d], vec![0.0f32; n * (k + 1) * SAVED]);
            // SAFETY: the portable form runs anywhere.
            unsafe { forward_rows_in(Form::Portable, task, &mut x, &mut saved) };
            let run = |form: Form, saved: &[f32]| {
                let mut dv: Vec<Vec<f32>> = (0..=k).map(|j| row(n * d, 60 + j as u32)).collect();
                let mut grads = GradTask {
                    dv: dv.iter_mut().map(|v| v.as_mut_slice()).collect(),
                    dq: vec![0.0f32; d],
                };
                // SAFETY: `form` is one this CPU has.
                unsafe { backward_rows_in(form, task, &g, saved, written, &mut grads) };
                let dq = bits(&grads.dq);
                (dv.iter().map(|v| bits(v)).collect::<Vec<_>>(), dq)
            };
            let want = run(Form::Portable, &saved);
            for form in Form::all_here() {
                assert_eq!(run(form, &saved), want, "{form:?}, d {d}");
            }
            let mut nudged = saved.clone();
            nudged[SAVED] *= 1.0 + f32::EPSILON * 4.0; // source 1's weight, first token
            assert_ne!(run(Form::detect(), &nudged), want, "d {d}");
        }
    }
}
