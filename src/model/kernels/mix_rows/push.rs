//! The pushes' half of `at_push/`: the gradients of a group of completed sources from the
//! records of the mixing steps that read them, with each step's share of its query's
//! gradient (`kernels::at_push`, `GradMode::AtPush`).
//!
//! Per token and per (source, step) pair: `g . v`, the coefficients of [`Term`], the term
//! `a g + along_q q - along_v v` added to the source's gradient row in the order the
//! steps' backward ran, and `along_q v` added to the step's query gradient. A group of up
//! to [`MAX_GROUP`] sources read by the same steps takes one pass: each step's `g` row (the
//! bytes that dominate, one per pair) is read once for all of them, and so is its query's
//! chunk. The sums are the same floats as one source at a time: a source's gradient starts
//! from its first step's term (or from the sum so far, `continued`) and adds the next in
//! order; each step's share of `dq` is summed per task of rows over its tokens in order,
//! and the tasks' sums are added to the step's `dq` source by source, in the order given
//! (git log -- docs/performance.md).

use pulp::{Simd, WithSimd};

use super::at_push::saved_at;
use super::backward::{Term, term_entry, term_lanes};
use super::lanes::{self, V, WIDTH};
use super::{SAVED, dots};
use crate::model::kernels::cpu::Form;
use crate::model::kernels::omp::for_each_task;
use crate::model::kernels::rows::ROWS_PER_TASK;

/// The most sources one pass takes.
pub const MAX_GROUP: usize = 4;

/// Steps whose query-gradient shares one pass of the `dq` sums holds in registers.
const DQ_STEPS: usize = 8;

/// What one mixing step kept for the pushes of the sources it read: its `g` `[N, d]`, its
/// query `[d]`, its forward's saved weights `[N, sources, SAVED]` and its `g . x` `[N]`.
#[derive(Clone, Copy)]
pub struct StepRows<'a> {
    pub g: &'a [f32],
    pub q: &'a [f32],
    pub saved: &'a [f32],
    pub gx: &'a [f32],
    pub sources: usize,
}

/// The gradients `[N, d]` of sources `ks` (1 to [`MAX_GROUP`] of them; `v`: their rows)
/// into `out`, from every step that read them, in the order their backward ran (at least
/// one step, and each reads every source of `ks`): per entry the first step's term, then
/// each next one's added, or every term added to what `out` holds where `continued`. Adds
/// each step's share of its query's gradient into `dq` (one `[d]` per step), source by
/// source in the order of `ks`.
pub fn source_gradients(
    v: &[&[f32]],
    ks: &[usize],
    steps: &[StepRows],
    key_norm: bool,
    continued: bool,
    out: &mut [&mut [f32]],
    dq: &mut [&mut [f32]],
) {
    match ks.len() {
        1 => group::<1>(v, ks, steps, key_norm, continued, out, dq),
        2 => group::<2>(v, ks, steps, key_norm, continued, out, dq),
        3 => group::<3>(v, ks, steps, key_norm, continued, out, dq),
        4 => group::<4>(v, ks, steps, key_norm, continued, out, dq),
        g => panic!("a group of {g} sources (1 to {MAX_GROUP})"),
    }
}

/// One task's rows of each source's gradient, each pair's `along_q` (`[G, rows, M']`,
/// `M'`: the steps rounded up to [`DQ_STEPS`], zeros past them) and its share of each
/// step's `dq` (`[G, M, d]`).
struct Task<'a> {
    out: Vec<&'a mut [f32]>,
    along_q: Vec<f32>,
    dq: Vec<f32>,
}

impl<'a> Task<'a> {
    /// A task per [`ROWS_PER_TASK`] tokens of the group's gradients `out` (`[N d]` each),
    /// for `m` steps of `d` floats.
    fn split<const G: usize>(out: &'a mut [&mut [f32]], d: usize, m: usize) -> Vec<Self> {
        let (n, padded) = (out[0].len(), m.div_ceil(DQ_STEPS) * DQ_STEPS);
        let mut rows: Vec<_> = out
            .iter_mut()
            .map(|o| o.chunks_mut(d * ROWS_PER_TASK))
            .collect();
        (0..n.div_ceil(d * ROWS_PER_TASK))
            .map(|_| {
                let out: Vec<&mut [f32]> = rows.iter_mut().filter_map(|r| r.next()).collect();
                let tokens = out[0].len() / d;
                Task {
                    out,
                    along_q: vec![0.0; G * tokens * padded],
                    dq: vec![0.0; G * m * d],
                }
            })
            .collect()
    }

    /// Adds every task's shares of each step's query gradient into `dq` (`[M][d]`), source
    /// by source and task by task.
    fn add_dq_shares<const G: usize>(tasks: &[Self], dq: &mut [&mut [f32]]) {
        let (m, d) = (dq.len(), dq[0].len());
        for j in 0..G {
            for task in tasks {
                let part = &task.dq[j * m * d..(j + 1) * m * d];
                for (dq, part) in dq.iter_mut().zip(part.chunks_exact(d)) {
                    dq.iter_mut().zip(part).for_each(|(a, b)| *a += b);
                }
            }
        }
    }
}

/// [`source_gradients`] for a group of `G`.
fn group<const G: usize>(
    v: &[&[f32]],
    ks: &[usize],
    steps: &[StepRows],
    key_norm: bool,
    continued: bool,
    out: &mut [&mut [f32]],
    dq: &mut [&mut [f32]],
) {
    let d = steps[0].q.len();
    let (m, n) = (steps.len(), out[0].len());
    let padded = m.div_ceil(DQ_STEPS) * DQ_STEPS;
    assert!(v.len() == G && ks.len() == G && out.len() == G && dq.len() == m);
    assert!(v.iter().all(|r| r.len() == n) && out.iter().all(|r| r.len() == n));
    assert!(n.is_multiple_of(d) && dq.iter().all(|dq| dq.len() == d));
    assert!(
        steps
            .iter()
            .all(|s| s.g.len() == n && s.q.len() == d && ks.iter().all(|&k| k < s.sources))
    );
    let form = Form::detect();
    let ks: [usize; G] = std::array::from_fn(|j| ks[j]);
    let q: Vec<&[f32]> = steps.iter().map(|s| s.q).collect();
    let tasks = Task::split::<G>(out, d, m);
    let tasks = for_each_task(tasks, &|task, state: &mut Task| {
        let tokens = state.out[0].len() / d;
        let first = task * ROWS_PER_TASK;
        let mut terms: Vec<[Term; G]> = Vec::with_capacity(m);
        let mut g: Vec<&[f32]> = Vec::with_capacity(m);
        for i in 0..tokens {
            let r = first + i;
            let row = r * d..(r + 1) * d;
            g.clear();
            g.extend(steps.iter().map(|s| &s.g[row.clone()]));
            let mut outs = state.out.iter_mut();
            let token = Token {
                v: std::array::from_fn(|j| &v[j][row.clone()]),
                g: &g,
                q: &q,
                steps,
                r,
                ks,
                key_norm,
                continued,
            };
            let out: [&mut [f32]; G] = std::array::from_fn(|_| {
                let rows = outs.next().expect("G outputs");
                &mut rows[i * d..(i + 1) * d]
            });
            form.run(PushRows {
                token: &token,
                terms: &mut terms,
                out,
            });
            for (j, along_q) in state.along_q.chunks_exact_mut(tokens * padded).enumerate() {
                let along_q = &mut along_q[i * padded..i * padded + m];
                along_q
                    .iter_mut()
                    .zip(&terms)
                    .for_each(|(a, t)| *a = t[j].along_q);
            }
        }
        let rows = first * d..(first + tokens) * d;
        let v: [&[f32]; G] = std::array::from_fn(|j| &v[j][rows.clone()]);
        form.run(DqShares {
            v: &v,
            along_q: &state.along_q,
            padded,
            d,
            dq: &mut state.dq,
        });
    });
    Task::add_dq_shares::<G>(&tasks, dq);
}

/// One token's rows in [`source_gradients`]: the group's source rows (token `r`; sources
/// `ks`), and each step's `g` row, query and what else it kept.
struct Token<'a, const G: usize> {
    v: [&'a [f32]; G],
    g: &'a [&'a [f32]],
    q: &'a [&'a [f32]],
    steps: &'a [StepRows<'a>],
    r: usize,
    ks: [usize; G],
    key_norm: bool,
    continued: bool,
}

/// One token's row of each source's gradient in [`source_gradients`], and each (step,
/// source) pair's [`Term`] into `terms` (one `[Term; G]` per step). First the terms, from
/// `g . v` (each step's `g` row multiplied into every source's at once) and the step's
/// saved weights; then a chunk of the rows is walked across all steps before the next, so
/// the sums and the sources' chunks stay in registers while each step's `g` and `q` chunk
/// is loaded once for the group.
struct PushRows<'a, 'b, const G: usize> {
    token: &'b Token<'a, G>,
    terms: &'b mut Vec<[Term; G]>,
    out: [&'b mut [f32]; G],
}

impl<const G: usize> WithSimd for PushRows<'_, '_, G> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        let (token, terms, mut out) = (self.token, self.terms, self.out);
        let (v, g, q) = (token.v, token.g, token.q);
        let d = out[0].len();
        assert!(v.iter().all(|row| row.len() == d) && out.iter().all(|row| row.len() == d));
        assert!(g.len() == token.steps.len() && q.len() == g.len());
        assert!(g.iter().chain(q).all(|row| row.len() == d));
        terms.clear();
        for (s, g) in token.steps.iter().zip(g) {
            let gv = dots::<G>(g, v);
            let gx = s.gx[token.r];
            terms.push(std::array::from_fn(|j| {
                let at = (token.r * s.sources + token.ks[j]) * SAVED;
                Term::of(saved_at(s.saved, at), gv[j] - gx, token.key_norm, d)
            }));
        }
        let fresh = !token.continued;
        let body = d / WIDTH * WIDTH;
        for c in (0..body).step_by(WIDTH) {
            let v: [V; G] = std::array::from_fn(|j| lanes::load(v[j], c));
            let mut sum: [V; G] = match fresh {
                true => [lanes::splat(0.0); G],
                false => std::array::from_fn(|j| lanes::load(out[j], c)),
            };
            for (i, ((g, q), t)) in g.iter().zip(q).zip(terms.iter()).enumerate() {
                let (g, q) = (lanes::load(g, c), lanes::load(q, c));
                for j in 0..G {
                    let term = term_lanes(&t[j], g, q, v[j]);
                    sum[j] = match i == 0 && fresh {
                        true => term,
                        false => lanes::add(sum[j], term),
                    };
                }
            }
            for (out, sum) in out.iter_mut().zip(sum) {
                lanes::store(out, c, sum);
            }
        }
        for c in body..d {
            for j in 0..G {
                let mut sum = if fresh { 0.0 } else { out[j][c] };
                for (i, ((g, q), t)) in g.iter().zip(q).zip(terms.iter()).enumerate() {
                    let term = term_entry(&t[j], g[c], q[c], v[j][c]);
                    sum = if i == 0 && fresh { term } else { sum + term };
                }
                out[j][c] = sum;
            }
        }
    }
}

/// One task's share of each step's `dq` from each source, `dq` `[G, M, d]`: `sum_t
/// along_q(t) v_t` over the task's tokens `t` in order, one multiply-add each from zero
/// (`v`: each source's rows of the task, `[tokens, d]`; `along_q` `[G, tokens, padded]`).
/// [`DQ_STEPS`] steps' sums at a time stay in registers while the tokens' chunks stream by.
struct DqShares<'a, const G: usize> {
    v: &'a [&'a [f32]; G],
    along_q: &'a [f32],
    padded: usize,
    d: usize,
    dq: &'a mut [f32],
}

impl<const G: usize> WithSimd for DqShares<'_, G> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        let (v, padded, d) = (self.v, self.padded, self.d);
        let n = v[0].len();
        let (m, tokens) = (self.dq.len() / G / d, n / d);
        assert!(v.iter().all(|v| v.len() == n) && self.along_q.len() == G * tokens * padded);
        assert!(self.dq.len() == G * m * d && m <= padded && padded.is_multiple_of(DQ_STEPS));
        let body = d / WIDTH * WIDTH;
        for (j, v) in v.iter().enumerate() {
            let along_q = &self.along_q[j * tokens * padded..(j + 1) * tokens * padded];
            let dq = &mut self.dq[j * m * d..(j + 1) * m * d];
            for s0 in (0..m).step_by(DQ_STEPS) {
                let width = DQ_STEPS.min(m - s0);
                for c in (0..body).step_by(WIDTH) {
                    let mut acc = [lanes::splat(0.0); DQ_STEPS];
                    for t in 0..tokens {
                        let x = lanes::load(v, t * d + c);
                        let a = &along_q[t * padded + s0..t * padded + s0 + DQ_STEPS];
                        for (a, acc) in a.iter().zip(acc.iter_mut()) {
                            *acc = lanes::mul_add(lanes::splat(*a), x, *acc);
                        }
                    }
                    for (b, acc) in acc.iter().enumerate().take(width) {
                        lanes::store(dq, (s0 + b) * d + c, *acc);
                    }
                }
            }
            for c in body..d {
                for s in 0..m {
                    let sum = (0..tokens).fold(0.0f32, |acc, t| {
                        along_q[t * padded + s].mul_add(v[t * d + c], acc)
                    });
                    dq[s * d + c] = sum;
                }
            }
        }
    }
}
