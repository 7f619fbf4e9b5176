//! The backward pass of one mixing step (`mix_rows`): per token, `g . v_k` for every source,
//! then each source's gradient row (added to the sum its slot holds, or written fresh) and
//! its share of `dq`, from the softmax weights the forward kept, in tasks of rows on
//! libtorch's OpenMP threads. The same floats in every form of lanes.

use super::super::omp::for_each_task;
use super::super::rows::ROWS_PER_TASK;
#[cfg(target_arch = "x86_64")]
use super::lanes::{Avx2, Avx512};
use super::lanes::{Form, Lanes, Portable, WIDTH};
use super::{SAVED, Sources, Task, Weights, dots};

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
            *term = Term::of([w.a[k], w.s[k], w.u[k]], gv[k] - gx, key_norm, d);
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
                let term = term_lanes::<S>(t, g, q, v);
                S::store(
                    out,
                    if k < written {
                        S::add(S::load(out), term)
                    } else {
                        term
                    },
                );
                acc = S::mul_add(S::splat(t.along_q), v, acc);
            }
            S::store(dq.as_mut_ptr().add(c), acc);
        }
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
///
/// # Safety
/// The CPU has `S`'s features.
#[inline(always)]
pub(super) unsafe fn term_lanes<S: Lanes>(t: &Term, g: S::V, q: S::V, v: S::V) -> S::V {
    // SAFETY: as the caller promised.
    unsafe {
        let x = S::mul_add(S::splat(t.along_q), q, S::mul(S::splat(t.a), g));
        S::neg_mul_add(S::splat(t.along_v), v, x)
    }
}

/// One entry of [`term_lanes`].
#[inline(always)]
pub(super) fn term_entry(t: &Term, g: f32, q: f32, v: f32) -> f32 {
    (-t.along_v).mul_add(v, t.along_q.mul_add(q, t.a * g))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{bits, first_task, inputs, row};
    use super::super::{ROWS_PER_TASK, forward_rows_in};
    use super::*;

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
