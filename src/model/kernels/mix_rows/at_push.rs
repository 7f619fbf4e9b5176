//! The backward pass of a stack's mixing steps with every completed source's part formed at
//! the source's push (`kernels::stack`, `GradMode::AtPush`), so that a step's backward reads
//! none of its completed sources (`backward.rs` reads all of them, and reads and writes each
//! one's gradient row).
//!
//! In `dz_k = a_k (g . v_k - g . x)` the step's backward takes `g . x` from its own output `x`
//! (`sum_k a_k g . v_k` in exact arithmetic, which `backward.rs` sums), and does only the
//! partial sum's part, whose rows it reads anyway ([`mix_backward_at_push`]). Each push then
//! reads its source once (`push.rs`, with the sources below it in a group where enough
//! steps read them): per token and per step that read the source,
//! `g . v`, the coefficients, the term `a g + along_q q - along_v v` added to the source's
//! gradient row in the order the steps' backward ran, and `along_q v` added to that step's
//! query gradient. What is read per source is the `g` rows of the steps that read it, where
//! `backward.rs` reads its row and reads and writes its gradient row at each of those steps
//! (git log -- docs/performance.md). The floats differ from `backward.rs`'s in the last
//! bits (`g . x` is rounded otherwise, and `dq` is summed in another order).

use super::super::omp::for_each_task;
use super::super::rows::ROWS_PER_TASK;
use super::backward::{Term, term_entry, term_lanes};
#[cfg(target_arch = "x86_64")]
use super::lanes::{Avx2, Avx512};
use super::lanes::{Form, Lanes, Portable, WIDTH};
use super::{SAVED, Sources, dots};

/// The saved `[a, s, u]` from entry `at`.
#[inline(always)]
pub(super) fn saved_at(saved: &[f32], at: usize) -> [f32; 3] {
    [saved[at], saved[at + 1], saved[at + 2]]
}

/// One task's share of [`mix_backward_at_push`]: its tokens' `g . x` and rows of the partial
/// sum's gradient, and its tokens' share of `dq` from the partial sum.
struct StepTask<'a> {
    gx: &'a mut [f32],
    dp: Option<&'a mut [f32]>,
    dq: Vec<f32>,
}

/// A step's backward in [`GradMode::AtPush`](super::super::stack::GradMode): writes each
/// token's `g . x` into `gx` `[N]` (`x` `[N, d]`: the step's output) and, if the step has a
/// partial sum, that source's gradient into `dp` `[N, d]`; returns the partial sum's share
/// of `dq` `[d]` (zeros without one).
#[allow(clippy::too_many_arguments)] // the step's tensors, as `mix_backward` takes them
pub fn mix_backward_at_push(
    g: &[f32],
    src: Sources,
    q: &[f32],
    saved: &[f32],
    x: &[f32],
    key_norm: bool,
    gx: &mut [f32],
    dp: Option<&mut [f32]>,
) -> Vec<f32> {
    let d = src.d;
    let form = Form::detect();
    let mut dp_rows = dp.map(|p| p.chunks_mut(d * ROWS_PER_TASK));
    let tasks: Vec<StepTask> = gx
        .chunks_mut(ROWS_PER_TASK)
        .map(|gx| StepTask {
            gx,
            dp: dp_rows.as_mut().and_then(|rows| rows.next()),
            dq: vec![0.0; d],
        })
        .collect();
    let tasks = for_each_task(tasks, &|task, out: &mut StepTask| {
        let step = Step {
            g,
            src,
            q,
            saved,
            x,
            key_norm,
        };
        // SAFETY: `form` is this CPU's.
        unsafe { step_rows_in(form, &step, task, out) }
    });
    tasks.into_iter().fold(vec![0.0f32; d], |mut dq, t| {
        dq.iter_mut().zip(t.dq).for_each(|(a, b)| *a += b);
        dq
    })
}

/// What every task of [`mix_backward_at_push`] reads.
struct Step<'a> {
    g: &'a [f32],
    src: Sources<'a>,
    q: &'a [f32],
    saved: &'a [f32],
    x: &'a [f32],
    key_norm: bool,
}

/// [`step_rows`] in `form`'s lanes, compiled with its CPU features.
///
/// # Safety
/// The CPU has `form` (`Form::detect`).
unsafe fn step_rows_in(form: Form, step: &Step, task: usize, out: &mut StepTask) {
    // SAFETY: as the caller promised.
    unsafe {
        match form {
            #[cfg(target_arch = "x86_64")]
            Form::Avx512 => step_rows_avx512(step, task, out),
            #[cfg(target_arch = "x86_64")]
            Form::Avx2 => step_rows_avx2(step, task, out),
            _ => step_rows::<Portable>(step, task, out),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn step_rows_avx2(step: &Step, task: usize, out: &mut StepTask) {
    // SAFETY: compiled for, and called on, a CPU with AVX2 and FMA.
    unsafe { step_rows::<Avx2>(step, task, out) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn step_rows_avx512(step: &Step, task: usize, out: &mut StepTask) {
    // SAFETY: compiled for, and called on, a CPU with AVX-512.
    unsafe { step_rows::<Avx512>(step, task, out) }
}

/// One task's rows of [`mix_backward_at_push`].
///
/// # Safety
/// The CPU has `S`'s features.
#[inline(always)]
unsafe fn step_rows<S: Lanes>(step: &Step, task: usize, out: &mut StepTask) {
    let (src, d) = (step.src, step.src.d);
    let sources = src.count();
    for (i, gx) in out.gx.iter_mut().enumerate() {
        let r = task * ROWS_PER_TASK + i;
        let rows = r * d..(r + 1) * d;
        let g = &step.g[rows.clone()];
        // SAFETY: `S`'s features as the caller promised.
        [*gx] = unsafe { dots::<S, 1>(&step.x[rows], [g]) };
        let (Some(p), Some(dp)) = (src.partial, out.dp.as_mut()) else {
            continue;
        };
        let p = &p[r * d..(r + 1) * d];
        // SAFETY: as above.
        let [gp] = unsafe { dots::<S, 1>(p, [g]) };
        let at = (r * sources + src.completed) * SAVED;
        let t = Term::of(saved_at(step.saved, at), gp - *gx, step.key_norm, d);
        let dp = &mut dp[i * d..(i + 1) * d];
        // SAFETY: as above.
        unsafe { partial_row::<S>(&t, g, step.q, p, dp, &mut out.dq) };
    }
}

/// The partial sum's gradient row `(a g + along_q q) - along_v p` and `dq += along_q p`.
///
/// # Safety
/// The CPU has `S`'s features.
#[inline(always)]
unsafe fn partial_row<S: Lanes>(
    t: &Term,
    g: &[f32],
    q: &[f32],
    p: &[f32],
    dp: &mut [f32],
    dq: &mut [f32],
) {
    let d = dq.len();
    assert!(g.len() == d && q.len() == d && p.len() == d && dp.len() == d);
    let body = d / WIDTH * WIDTH;
    for c in (0..body).step_by(WIDTH) {
        // SAFETY: `S`'s features as the caller promised; every row holds `d >= c + WIDTH`
        // entries (asserted above).
        unsafe {
            let (g, q, p) = (
                S::load(g.as_ptr().add(c)),
                S::load(q.as_ptr().add(c)),
                S::load(p.as_ptr().add(c)),
            );
            S::store(dp.as_mut_ptr().add(c), term_lanes::<S>(t, g, q, p));
            let acc = S::load(dq.as_ptr().add(c));
            S::store(
                dq.as_mut_ptr().add(c),
                S::mul_add(S::splat(t.along_q), p, acc),
            );
        }
    }
    for c in body..d {
        dp[c] = term_entry(t, g[c], q[c], p[c]);
        dq[c] = t.along_q.mul_add(p[c], dq[c]);
    }
}
