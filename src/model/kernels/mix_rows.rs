//! The row kernels of one AttnRes mixing step (`kernels::mix`): per token, the logits of
//! every source, their softmax and the weighted sum in one pass over the sources, and the
//! backward pass in one more from the softmax weights the forward kept, in tasks of rows on
//! libtorch's OpenMP threads (`omp.rs`).

use super::omp::for_each_task;
use super::rows::{LANES, ROWS_PER_TASK, has_avx2};

/// The sources of one mixing step, token-major: the completed sources stacked `[K, N, d]`
/// and, after a block's first layer, the partial sum `[N, d]` as source `K`.
#[derive(Clone, Copy)]
pub struct Sources<'a> {
    pub stacked: &'a [f32],
    pub partial: Option<&'a [f32]>,
    /// Tokens `N`.
    pub n: usize,
    pub d: usize,
}

impl<'a> Sources<'a> {
    /// Completed sources `K`.
    fn completed(&self) -> usize {
        self.stacked.len() / (self.n * self.d)
    }

    /// All sources, the partial sum included.
    pub fn count(&self) -> usize {
        self.completed() + usize::from(self.partial.is_some())
    }

    /// Source `k`'s row for token `r`.
    #[inline(always)]
    fn row(&self, k: usize, r: usize) -> &'a [f32] {
        let d = self.d;
        match self.partial {
            Some(p) if k == self.completed() => &p[r * d..(r + 1) * d],
            _ => &self.stacked[(k * self.n + r) * d..(k * self.n + r + 1) * d],
        }
    }
}

/// `v . w_m` for each of `M` vectors in one pass over `v`, `LANES` partial sums each.
#[inline(always)]
fn dots<const M: usize>(v: &[f32], w: [&[f32]; M]) -> [f32; M] {
    let mut acc = [[0.0f32; LANES]; M];
    let body = v.len() / LANES * LANES;
    for (c, vc) in v[..body].chunks_exact(LANES).enumerate() {
        for (acc, w) in acc.iter_mut().zip(&w) {
            let wc = &w[c * LANES..(c + 1) * LANES];
            for i in 0..LANES {
                acc[i] += vc[i] * wc[i];
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

    /// Computes the weights of token `r` in one pass over its sources.
    #[inline(always)]
    fn of_token(&mut self, src: &Sources, r: usize, q: &[f32], key_norm: bool) {
        let mut max = f32::NEG_INFINITY;
        for k in 0..self.a.len() {
            let v = src.row(k, r);
            let [vq, vv] = dots(v, [q, v]);
            self.s[k] = vq;
            self.u[k] = if key_norm {
                inv_rms_of(vv, v.len())
            } else {
                1.0
            };
            self.a[k] = vq * self.u[k];
            max = max.max(self.a[k]);
        }
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
        forward_rows(rows, x, saved)
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
    forward_rows(t, x, saved)
}

/// One task's rows of [`mix_forward`].
#[inline(always)]
fn forward_rows(t: Task, x: &mut [f32], saved: &mut [f32]) {
    let (src, d) = (t.src, t.src.d);
    let sources = src.count();
    let mut w = Weights::new(sources);
    let rows = x
        .chunks_exact_mut(d)
        .zip(saved.chunks_exact_mut(sources * SAVED));
    for (i, (x, saved)) in rows.enumerate() {
        let r = t.task * ROWS_PER_TASK + i;
        w.of_token(&src, r, t.q, t.key_norm);
        w.save(saved);
        for (x, v) in x.iter_mut().zip(src.row(0, r)) {
            *x = w.a[0] * v;
        }
        for (k, &a) in w.a.iter().enumerate().skip(1) {
            for (x, v) in x.iter_mut().zip(src.row(k, r)) {
                *x += a * v;
            }
        }
    }
}

/// Where [`mix_backward`] writes the sources' gradients: `[K, N, d]` for the stacked ones,
/// whose first `written` sources' rows already hold a sum that the gradient is added to, and
/// `[N, d]` for the partial sum (if any).
pub struct SourceGrads<'a> {
    pub stacked: &'a mut [f32],
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
    let written = out.written.min(src.completed());
    let rows = d * ROWS_PER_TASK;
    // Each source's gradient cut into the tasks' rows: `slabs[k][task]`.
    let mut slabs: Vec<std::slice::ChunksMut<f32>> = out
        .stacked
        .chunks_mut(n * d)
        .map(|slab| slab.chunks_mut(rows))
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
        backward_rows(rows, g, saved, written, grads)
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
    backward_rows(t, g, saved, written, grads)
}

/// One task's rows of [`mix_backward`]: the gradients of its rows of every source (added to
/// the first `written` sources' sums) and its share of `dq`.
#[inline(always)]
fn backward_rows(t: Task, g: &[f32], saved: &[f32], written: usize, grads: &mut GradTask) {
    let (src, q, key_norm, task) = (t.src, t.q, t.key_norm, t.task);
    let d = src.d;
    let sources = src.count();
    let mut w = Weights::new(sources);
    let mut gv = vec![0.0f32; sources];
    for i in 0..grads.dv[0].len() / d {
        let r = task * ROWS_PER_TASK + i;
        let g = &g[r * d..(r + 1) * d];
        w.load(&saved[r * sources * SAVED..(r + 1) * sources * SAVED]);
        for (k, gv) in gv.iter_mut().enumerate() {
            [*gv] = dots(src.row(k, r), [g]);
        }
        let gx: f32 = w.a.iter().zip(&gv).map(|(a, gv)| a * gv).sum();
        for (k, dv) in grads.dv.iter_mut().enumerate() {
            let (v, a, u) = (src.row(k, r), w.a[k], w.u[k]);
            let dz = a * (gv[k] - gx);
            let along_q = dz * u;
            let along_v = if key_norm {
                dz * w.s[k] * u * u * u / d as f32
            } else {
                0.0
            };
            let dv = &mut dv[i * d..(i + 1) * d];
            if k < written {
                // The old sum plus this step's term, as burn adds registered gradients.
                for c in 0..d {
                    dv[c] += a * g[c] + along_q * q[c] - along_v * v[c];
                    grads.dq[c] += along_q * v[c];
                }
            } else {
                for c in 0..d {
                    dv[c] = a * g[c] + along_q * q[c] - along_v * v[c];
                    grads.dq[c] += along_q * v[c];
                }
            }
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
        let [vv] = dots(&v, [&v]);
        assert!((inv_rms_of(vv, v.len()) - inv_rms(&v, true)).abs() < 1e-6);
    }
}
