//! The row kernels of one AttnRes mixing step (`kernels::mix`): per token, the logits of
//! every source, their softmax and the weighted sum, and (`backward.rs`) the backward pass
//! from the softmax weights the forward kept, in tasks of rows on libtorch's OpenMP threads
//! (`omp.rs`).
//!
//! The inner loops are written once, over sixteen lanes with fused multiply-adds
//! (`lanes.rs`), and run in AVX-512, AVX2 or plain Rust as the CPU allows: the same floats
//! in each, since every lane does the same operations in the same order. Narrow models'
//! forwards take sixteen tokens at a time (`tiled.rs`), with `e^x` in lanes (`exp.rs`):
//! the same floats again.

use super::omp::for_each_task;
use super::rows::{ROWS_PER_TASK, rms_norm_in_place};

mod backward;
mod exp;
mod lanes;
mod tiled;
#[cfg(target_arch = "x86_64")]
use lanes::{Avx2, Avx512};
use lanes::{Form, Lanes, Portable, WIDTH};

pub use backward::{SourceGrads, mix_backward};

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
///
/// With `norm_gain` `g` `[d]` it writes `x g / rms(x)` instead, the PreNorm of the layer
/// that reads the mix, the floats of `rows::rms_norm_forward`: each task normalises its
/// rows in place while they are still in the core's cache, so that `x` itself never goes
/// out to memory and back (inference, where nothing else reads `x`).
pub fn mix_forward(
    src: Sources,
    q: &[f32],
    key_norm: bool,
    norm_gain: Option<&[f32]>,
    x: &mut [f32],
    saved: &mut [f32],
) {
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
        unsafe { forward_rows_in(form, rows, x, saved) };
        if let Some(g) = norm_gain {
            rms_norm_in_place(x, g);
        }
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
    pub(super) fn row(n: usize, seed: u32) -> Vec<f32> {
        (0..n as u32)
            .map(|i| ((i * 7919 + seed * 104_729) % 1000) as f32 / 250.0 - 2.0)
            .map(|x| x * x * x)
            .collect()
    }

    /// `k` stacked sources and a partial sum, `n` rows of `d` each, and a query, different
    /// per `seed`.
    pub(super) fn inputs(
        n: usize,
        d: usize,
        k: usize,
        seed: u32,
    ) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let stacked = (0..k).flat_map(|j| row(n * d, seed + j as u32)).collect();
        (stacked, row(n * d, seed + 89), row(d, seed + 97))
    }

    /// The first task of a mixing step with the key norm over these.
    pub(super) fn first_task<'a>(
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

    pub(super) fn bits(x: &[f32]) -> Vec<u32> {
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
}
