//! CPU kernels over rows of f32 (one row a token), in plain Rust on slices: one pass where
//! the composed form takes one libtorch kernel per elementwise step. Most run on the calling
//! thread: split across rayon's pool they lost to libgomp's threads, which spin on the other
//! cores after each libtorch operation (docs/performance.md). The
//! norm's forwards run in tasks of rows on those libgomp threads (`omp.rs`); backwards
//! that sum over rows stay on one thread, in the order the reference runs were trained with.

use super::omp::for_each_task;
use crate::model::norm::RMS_EPS;

/// Rows per chunk of [`merge_backward`]. Its `dq` is summed per chunk and the chunks' sums then added in
/// order: the order of summation the committed quick reference runs were trained with, which
/// the reproduce test checks bit for bit.
pub(super) const ROWS_PER_TASK: usize = 64;

/// A read-only `[rows, d]` matrix whose rows may sit `stride` apart (a view into a wider
/// tensor).
#[derive(Clone, Copy)]
pub struct Rows<'a> {
    pub data: &'a [f32],
    pub stride: usize,
}

impl<'a> Rows<'a> {
    pub fn row(&self, r: usize, d: usize) -> &'a [f32] {
        &self.data[r * self.stride..r * self.stride + d]
    }
}

/// `1 / rms(p)`, or 1 without the key norm.
pub(super) fn inv_rms(p: &[f32], key_norm: bool) -> f32 {
    if !key_norm {
        return 1.0;
    }
    let mean = dot(p, p) / p.len() as f32;
    1.0 / (mean + RMS_EPS as f32).sqrt()
}

/// Lanes of the partial sums below: eight independent accumulators, which the compiler
/// keeps in one vector register (a single running sum would be a chain of dependent adds).
const LANES: usize = 8;

/// `sum_c f(a_c, b_c, e_c)` in `LANES` partial sums.
#[inline]
fn sum3(a: &[f32], b: &[f32], e: &[f32], f: impl Fn(f32, f32, f32) -> f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (ac, bc, ec) = (
        a.chunks_exact(LANES),
        b.chunks_exact(LANES),
        e.chunks_exact(LANES),
    );
    let tail: f32 = (ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .zip(ec.remainder()))
    .map(|((a, b), e)| f(*a, *b, *e))
    .sum();
    for ((a, b), e) in ac.zip(bc).zip(ec) {
        for i in 0..LANES {
            acc[i] += f(a[i], b[i], e[i]);
        }
    }
    acc.iter().sum::<f32>() + tail
}

pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    sum3(a, b, b, |a, b, _| a * b)
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Phase 2 of Block AttnRes for one layer (SPEC section 5, docs/performance.md): the
/// partial sum `p` `[N, d]` scored against query `q` `[d]` (`z = p.q / rms(p)`), merged
/// into the phase-1 result `o1` `[N, d]` whose sources' log-sum-exp is `lse` `[N]`:
/// `x = o1 + sigmoid(z - lse) (p - o1)`. Writes `x` `[N, d]`.
pub fn merge_forward(p: &[f32], o1: Rows, q: &[f32], lse: Rows, key_norm: bool, x: &mut [f32]) {
    let d = q.len();
    for (r, (x, p)) in x.chunks_exact_mut(d).zip(p.chunks_exact(d)).enumerate() {
        let o1 = o1.row(r, d);
        let z = dot(p, q) * inv_rms(p, key_norm);
        let beta = sigmoid(z - lse.row(r, 1)[0]);
        for ((x, p), o) in x.iter_mut().zip(p).zip(o1) {
            *x = o + beta * (p - o);
        }
    }
}

/// The gradients of [`merge_forward`] given `g = dL/dx` `[N, d]`: writes `dp` and `do1`
/// `[N, d]` and `dlse` `[N]`, and returns `dq` `[d]`. With `s = p.q`, `u = 1/rms(p)`,
/// `beta = sigmoid(s u - lse)` and `dz = beta (1 - beta) g.(p - o1)`:
/// `do1 = (1 - beta) g`, `dlse = -dz`, `dq = sum_rows dz u p`,
/// `dp = beta g + dz u q - dz s u^3 p / d` (the last term from the key norm).
#[allow(clippy::too_many_arguments)]
pub fn merge_backward(
    g: &[f32],
    p: &[f32],
    o1: Rows,
    q: &[f32],
    lse: Rows,
    key_norm: bool,
    dp: &mut [f32],
    do1: &mut [f32],
    dlse: &mut [f32],
) -> Vec<f32> {
    let d = q.len();
    let chunk = d * ROWS_PER_TASK;
    dp.chunks_mut(chunk)
        .zip(do1.chunks_mut(chunk))
        .zip(dlse.chunks_mut(ROWS_PER_TASK))
        .enumerate()
        .map(|(task, ((dp, do1), dlse))| {
            let mut dq = vec![0.0f32; d];
            for (i, ((dp, do1), dlse)) in dp
                .chunks_mut(d)
                .zip(do1.chunks_mut(d))
                .zip(dlse.iter_mut())
                .enumerate()
            {
                let r = task * ROWS_PER_TASK + i;
                let (p, g, o1) = (&p[r * d..(r + 1) * d], &g[r * d..(r + 1) * d], o1.row(r, d));
                let u = inv_rms(p, key_norm);
                let s = dot(p, q);
                let beta = sigmoid(s * u - lse.row(r, 1)[0]);
                let along = sum3(g, p, o1, |g, p, o| g * (p - o));
                let dz = beta * (1.0 - beta) * along;
                *dlse = -dz;
                let norm = if key_norm {
                    dz * s * u * u * u / d as f32
                } else {
                    0.0
                };
                for c in 0..d {
                    do1[c] = (1.0 - beta) * g[c];
                    dp[c] = beta * g[c] + dz * u * q[c] - norm * p[c];
                    dq[c] += dz * u * p[c];
                }
            }
            dq
        })
        .fold(vec![0.0f32; d], |mut a, b| {
            a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
            a
        })
}

/// RMSNorm with a gain: `y = x g / rms(x)` row by row, `x` `[N, d]`, `g` `[d]`, in tasks
/// of rows on libgomp's threads (`omp.rs`).
pub fn rms_norm_forward(x: &[f32], g: &[f32], y: &mut [f32]) {
    let chunk = g.len() * ROWS_PER_TASK;
    let tasks: Vec<(&[f32], &mut [f32])> = x.chunks(chunk).zip(y.chunks_mut(chunk)).collect();
    for_each_task(tasks, &|_, (x, y)| {
        for (x, y) in x.chunks_exact(g.len()).zip(y.chunks_exact_mut(g.len())) {
            normalise_row(x, g, y);
        }
    });
}

/// One row of [`rms_norm_forward`].
#[inline(always)]
fn normalise_row(x: &[f32], g: &[f32], y: &mut [f32]) {
    let u = inv_rms(x, true);
    for ((y, x), g) in y.iter_mut().zip(x).zip(g) {
        *y = x * u * g;
    }
}

/// [`rms_norm_forward`] in place, on the calling thread: `x` `[N, d]` becomes
/// `x g / rms(x)`.
pub fn rms_norm_in_place(x: &mut [f32], g: &[f32]) {
    let d = g.len();
    for x in x.chunks_exact_mut(d) {
        let u = inv_rms(x, true);
        for (x, g) in x.iter_mut().zip(g) {
            *x = *x * u * g;
        }
    }
}

/// A residual add and the next layer's PreNorm in one pass: `s = x + y` and `s g / rms(s)`
/// row by row (`[N, d]`, `g` `[d]`), the floats of the add and of [`rms_norm_forward`], in
/// tasks of rows on libgomp's threads.
pub fn add_rms_norm_forward(x: &[f32], y: &[f32], g: &[f32], sum: &mut [f32], normed: &mut [f32]) {
    let chunk = g.len() * ROWS_PER_TASK;
    let inputs = x.chunks(chunk).zip(y.chunks(chunk));
    let outputs = sum.chunks_mut(chunk).zip(normed.chunks_mut(chunk));
    let tasks: Vec<_> = inputs.zip(outputs).collect();
    let d = g.len();
    for_each_task(tasks, &|_, ((x, y), (s, h))| {
        let rows = x.chunks_exact(d).zip(y.chunks_exact(d));
        for ((x, y), (s, h)) in rows.zip(s.chunks_exact_mut(d).zip(h.chunks_exact_mut(d))) {
            for ((s, x), y) in s.iter_mut().zip(x).zip(y) {
                *s = x + y;
            }
            normalise_row(s, g, h);
        }
    });
}

/// The gradients of [`rms_norm_forward`] given `dy`: writes `dx` and returns `dg`. With
/// `u = 1/rms(x)` and `h = dy g`: `dx = u h - u^3 x (h.x) / d`, `dg = sum_rows dy x u`.
pub fn rms_norm_backward(dy: &[f32], x: &[f32], g: &[f32], dx: &mut [f32]) -> Vec<f32> {
    let d = g.len();
    let mut dg = vec![0.0f32; d];
    for ((dy, x), dx) in dy
        .chunks_exact(d)
        .zip(x.chunks_exact(d))
        .zip(dx.chunks_exact_mut(d))
    {
        let u = inv_rms(x, true);
        let hx = sum3(dy, g, x, |dy, g, x| dy * g * x);
        let c = u * u * u * hx / d as f32;
        for c_ in 0..d {
            dx[c_] = u * dy[c_] * g[c_] - c * x[c_];
            dg[c_] += dy[c_] * x[c_] * u;
        }
    }
    dg
}
