//! The row kernels of one AttnRes mixing step (`kernels::mix`): per token, the logits of
//! every source, their softmax and the weighted sum, and (`backward.rs`) the backward pass
//! from the softmax weights the forward kept, in tasks of rows on libtorch's OpenMP threads
//! (`omp.rs`).
//!
//! The inner loops are written once, over sixteen lanes with fused multiply-adds
//! (`lanes.rs`), and compiled for AVX-512, AVX2 or plain x86-64 as the CPU allows
//! (`cpu::Form`): the same floats in each, since every lane does the same operations in the
//! same order.

use pulp::{Simd, WithSimd};

use super::cpu::Form;
use super::omp::for_each_task;
use super::rows::ROWS_PER_TASK;

mod at_push;
mod backward;
mod lanes;
mod push;
use lanes::WIDTH;

pub use at_push::mix_backward_at_push;
pub use backward::{SourceGrads, mix_backward};
pub use push::{MAX_GROUP, StepRows, source_gradients};

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
/// multiply-add a chunk of the row, added up by [`lanes::sum`]'s tree, then the tail of
/// fewer than [`WIDTH`] entries in order.
#[inline(always)]
fn dots<const M: usize>(v: &[f32], w: [&[f32]; M]) -> [f32; M] {
    let d = v.len();
    assert!(w.iter().all(|w| w.len() == d));
    let body = d / WIDTH * WIDTH;
    let mut acc = [lanes::splat(0.0); M];
    for c in (0..body).step_by(WIDTH) {
        let x = lanes::load(v, c);
        for (acc, w) in acc.iter_mut().zip(&w) {
            *acc = lanes::mul_add(x, lanes::load(w, c), *acc);
        }
    }
    let mut out = [0.0f32; M];
    for ((out, acc), w) in out.iter_mut().zip(acc).zip(&w) {
        let tail = (body..d).fold(0.0f32, |t, c| v[c].mul_add(w[c], t));
        *out = lanes::sum(acc) + tail;
    }
    out
}

/// `x = a_0 v_0 + a_1 v_1 + ...` over a token's source rows `v`, entry by entry in source
/// order, each term after the first a multiply-add.
#[inline(always)]
fn weighted_sum(x: &mut [f32], v: &[&[f32]], a: &[f32]) {
    let d = x.len();
    assert!(v.len() == a.len() && !v.is_empty() && v.iter().all(|v| v.len() == d));
    let body = d / WIDTH * WIDTH;
    for c in (0..body).step_by(WIDTH) {
        let mut sum = lanes::mul(lanes::splat(a[0]), lanes::load(v[0], c));
        for (v, &a) in v[1..].iter().zip(&a[1..]) {
            sum = lanes::mul_add(lanes::splat(a), lanes::load(v, c), sum);
        }
        lanes::store(x, c, sum);
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
    #[inline(always)]
    fn of_token(&mut self, v: &[&[f32]], q: &[f32], key_norm: bool) {
        let d = q.len();
        // The dot products first, then the RMS and logits of all sources in a loop of their
        // own, whose square roots and divisions the CPU overlaps (or vectorizes) across the
        // sources instead of waiting on each source's in turn.
        for (k, v) in v.iter().enumerate() {
            [self.s[k], self.u[k]] = dots::<2>(v, [q, v]);
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
        form.run(ForwardRows { t: rows, x, saved });
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

/// One task's rows of [`mix_forward`], a token at a time.
struct ForwardRows<'a, 'b> {
    t: Task<'a>,
    x: &'b mut [f32],
    saved: &'b mut [f32],
}

impl WithSimd for ForwardRows<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        let (t, src, d) = (self.t, self.t.src, self.t.src.d);
        let sources = src.count();
        let mut w = Weights::new(sources);
        let mut v: Vec<&[f32]> = Vec::with_capacity(sources);
        let rows = self
            .x
            .chunks_exact_mut(d)
            .zip(self.saved.chunks_exact_mut(sources * SAVED));
        for (i, (x, saved)) in rows.enumerate() {
            let r = t.task * ROWS_PER_TASK + i;
            src.rows_of(r, &mut v);
            w.of_token(&v, t.q, t.key_norm);
            w.save(saved);
            weighted_sum(x, &v, &w.a);
        }
    }
}

#[cfg(test)]
mod tests;
