//! The backward pass of one mixing step (`mix_rows`): per token, `g . v_k` for every source,
//! then each source's gradient row (added to the sum its slot holds, or written fresh) and
//! its share of `dq`, from the softmax weights the forward kept, in tasks of rows on
//! libtorch's OpenMP threads. The same floats in every form of lanes.

use pulp::{Simd, WithSimd};

use super::lanes::{self, V, WIDTH};
use super::{SAVED, Sources, Task, Weights, dots};
use crate::model::kernels::cpu::Form;
use crate::model::kernels::omp::for_each_task;
use crate::model::kernels::rows::ROWS_PER_TASK;

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
        form.run(BackwardRows {
            t: rows,
            g,
            saved,
            written,
            grads,
        })
    });
    tasks.into_iter().fold(vec![0.0f32; d], |mut dq, t| {
        dq.iter_mut().zip(t.dq).for_each(|(a, b)| *a += b);
        dq
    })
}

/// One task's rows of [`mix_backward`]: the gradients of its rows of every source (added to
/// the first `written` sources' sums) and its share of `dq`.
struct BackwardRows<'a, 'b> {
    t: Task<'a>,
    g: &'a [f32],
    saved: &'a [f32],
    written: usize,
    grads: &'b mut GradTask<'a>,
}

impl WithSimd for BackwardRows<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        let (src, q, key_norm, task) = (self.t.src, self.t.q, self.t.key_norm, self.t.task);
        let d = src.d;
        let sources = src.count();
        let mut w = Weights::new(sources);
        let mut gv = vec![0.0f32; sources];
        let mut terms = vec![Term::default(); sources];
        let mut v: Vec<&[f32]> = Vec::with_capacity(sources);
        let grads = self.grads;
        for i in 0..grads.dv[0].len() / d {
            let r = task * ROWS_PER_TASK + i;
            let g = &self.g[r * d..(r + 1) * d];
            w.load(&self.saved[r * sources * SAVED..(r + 1) * sources * SAVED]);
            src.rows_of(r, &mut v);
            for (gv, v) in gv.iter_mut().zip(&v) {
                [*gv] = dots::<1>(v, [g]);
            }
            let gx: f32 = w.a.iter().zip(&gv).map(|(a, gv)| a * gv).sum();
            for (k, term) in terms.iter_mut().enumerate() {
                *term = Term::of([w.a[k], w.s[k], w.u[k]], gv[k] - gx, key_norm, d);
            }
            let rows = Rows { g, q, v: &v };
            gradient_rows(
                rows,
                &terms,
                self.written,
                &mut grads.dv,
                i * d,
                &mut grads.dq,
            );
        }
    }
}

/// One source's coefficients in its gradient row `dv = a g + along_q q - along_v v` and in
/// `dq += along_q v`.
#[derive(Clone, Copy, Default)]
pub(super) struct Term {
    pub(super) a: f32,
    pub(super) along_q: f32,
    pub(super) along_v: f32,
}

impl Term {
    /// From one (token, source)'s saved `[a, s, u]` and `g . v - g . x`: `dz = a (g . v -
    /// g . x)`, `along_q = dz u`, `along_v = dz s u^3 / d` (0 without the key norm).
    #[inline(always)]
    pub(super) fn of([a, s, u]: [f32; 3], gv_less_gx: f32, key_norm: bool, d: usize) -> Term {
        let dz = a * gv_less_gx;
        Term {
            a,
            along_q: dz * u,
            along_v: if key_norm {
                dz * s * u * u * u / d as f32
            } else {
                0.0
            },
        }
    }
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
#[inline(always)]
fn gradient_rows(
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
        let (g, q) = (lanes::load(rows.g, c), lanes::load(rows.q, c));
        let mut acc = lanes::load(dq, c);
        for (k, ((dv, v), t)) in dv.iter_mut().zip(rows.v).zip(terms).enumerate() {
            let v = lanes::load(v, c);
            let term = term_lanes(t, g, q, v);
            let out = match k < written {
                true => lanes::add(lanes::load(dv, at + c), term),
                false => term,
            };
            lanes::store(dv, at + c, out);
            acc = lanes::mul_add(lanes::splat(t.along_q), v, acc);
        }
        lanes::store(dq, c, acc);
    }
    for c in body..d {
        let (g, q) = (rows.g[c], rows.q[c]);
        for (k, ((dv, v), t)) in dv.iter_mut().zip(rows.v).zip(terms).enumerate() {
            let out = &mut dv[at + c];
            let term = term_entry(t, g, q, v[c]);
            *out = if k < written { *out + term } else { term };
            dq[c] = t.along_q.mul_add(v[c], dq[c]);
        }
    }
}

/// `(a g + along_q q) - along_v v` of [`WIDTH`] entries, in multiply-adds.
#[inline(always)]
pub(super) fn term_lanes(t: &Term, g: V, q: V, v: V) -> V {
    let x = lanes::mul_add(lanes::splat(t.along_q), q, lanes::mul(lanes::splat(t.a), g));
    lanes::neg_mul_add(lanes::splat(t.along_v), v, x)
}

/// One entry of [`term_lanes`].
#[inline(always)]
pub(super) fn term_entry(t: &Term, g: f32, q: f32, v: f32) -> f32 {
    (-t.along_v).mul_add(v, t.along_q.mul_add(q, t.a * g))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kernels::mix_rows::ROWS_PER_TASK;
    use crate::model::kernels::mix_rows::tests::{bits, first_task, forward_rows_in, inputs, row};

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
            forward_rows_in(Form::PORTABLE, task, &mut x, &mut saved);
            let run = |form: Form, saved: &[f32]| {
                let mut dv: Vec<Vec<f32>> = (0..=k).map(|j| row(n * d, 60 + j as u32)).collect();
                let mut grads = GradTask {
                    dv: dv.iter_mut().map(|v| v.as_mut_slice()).collect(),
                    dq: vec![0.0f32; d],
                };
                form.run(BackwardRows {
                    t: task,
                    g: &g,
                    saved,
                    written,
                    grads: &mut grads,
                });
                let dq = bits(&grads.dq);
                (dv.iter().map(|v| bits(v)).collect::<Vec<_>>(), dq)
            };
            let want = run(Form::PORTABLE, &saved);
            for form in Form::all_here() {
                assert_eq!(run(form, &saved), want, "{form:?}, d {d}");
            }
            let mut nudged = saved.clone();
            nudged[SAVED] *= 1.0 + f32::EPSILON * 4.0; // source 1's weight, first token
            assert_ne!(run(Form::detect(), &nudged), want, "d {d}");
        }
    }
}
