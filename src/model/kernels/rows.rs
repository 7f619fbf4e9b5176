//! CPU kernels over rows of f32 (one row a token), in plain Rust on slices: one pass where
//! the composed form takes one libtorch kernel per elementwise step. Most run on the calling
//! thread: split across rayon's pool they lost to libgomp's threads, which spin on the other
//! cores after each libtorch operation (docs/performance.md). The
//! norm's forwards run in tasks of rows on those libgomp threads (`omp.rs`); backwards
//! that sum over rows stay on one thread, in the order the reference runs were trained with.

use super::omp::for_each_task;
use crate::model::norm::RMS_EPS;

/// Rows per task of the norm's forwards and of the mixing rows' tasks; a task's results
/// do not depend on how many threads run the tasks.
pub(super) const ROWS_PER_TASK: usize = 64;

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
