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

use pulp::{Simd, WithSimd};

use super::backward::{Term, term_entry, term_lanes};
use super::lanes::{self, WIDTH};
use super::{SAVED, Sources, dots};
use crate::model::kernels::cpu::Form;
use crate::model::kernels::omp::for_each_task;
use crate::model::kernels::rows::ROWS_PER_TASK;

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

/// A step's backward in [`GradMode::AtPush`](crate::model::kernels::stack::GradMode): writes each
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
        form.run(PartialRows {
            step: &step,
            task,
            out,
        })
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

/// One task's rows of [`mix_backward_at_push`].
struct PartialRows<'a, 'b> {
    step: &'b Step<'a>,
    task: usize,
    out: &'b mut StepTask<'a>,
}

impl WithSimd for PartialRows<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        let (step, out) = (self.step, self.out);
        let (src, d) = (step.src, step.src.d);
        let sources = src.count();
        for (i, gx) in out.gx.iter_mut().enumerate() {
            let r = self.task * ROWS_PER_TASK + i;
            let rows = r * d..(r + 1) * d;
            let g = &step.g[rows.clone()];
            [*gx] = dots::<1>(&step.x[rows], [g]);
            let (Some(p), Some(dp)) = (src.partial, out.dp.as_mut()) else {
                continue;
            };
            let p = &p[r * d..(r + 1) * d];
            let [gp] = dots::<1>(p, [g]);
            let at = (r * sources + src.completed) * SAVED;
            let t = Term::of(saved_at(step.saved, at), gp - *gx, step.key_norm, d);
            let dp = &mut dp[i * d..(i + 1) * d];
            partial_row(&t, [g, step.q, p], dp, &mut out.dq);
        }
    }
}

/// The partial sum's gradient row `(a g + along_q q) - along_v p` and `dq += along_q p`.
#[inline(always)]
fn partial_row(t: &Term, [g, q, p]: [&[f32]; 3], dp: &mut [f32], dq: &mut [f32]) {
    let d = dq.len();
    assert!(g.len() == d && q.len() == d && p.len() == d && dp.len() == d);
    let body = d / WIDTH * WIDTH;
    for c in (0..body).step_by(WIDTH) {
        let (g, q, p) = (lanes::load(g, c), lanes::load(q, c), lanes::load(p, c));
        lanes::store(dp, c, term_lanes(t, g, q, p));
        let acc = lanes::mul_add(lanes::splat(t.along_q), p, lanes::load(dq, c));
        lanes::store(dq, c, acc);
    }
    for c in body..d {
        dp[c] = term_entry(t, g[c], q[c], p[c]);
        dq[c] = t.along_q.mul_add(p[c], dq[c]);
    }
}
