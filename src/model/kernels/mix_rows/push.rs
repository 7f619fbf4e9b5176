//! The pushes' half of `at_push.rs`: the gradients of a group of completed sources from the
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

use super::super::omp::for_each_task;
use super::super::rows::ROWS_PER_TASK;
use super::at_push::saved_at;
use super::backward::{Term, term_entry, term_lanes};
#[cfg(target_arch = "x86_64")]
use super::lanes::{Avx2, Avx512};
use super::lanes::{Form, Lanes, Portable, WIDTH};
use super::{SAVED, dots};

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
    let mut rows: Vec<_> = out
        .iter_mut()
        .map(|o| o.chunks_mut(d * ROWS_PER_TASK))
        .collect();
    let tasks: Vec<Task> = (0..n.div_ceil(d * ROWS_PER_TASK))
        .map(|_| {
            let out: Vec<&mut [f32]> = rows.iter_mut().filter_map(|r| r.next()).collect();
            let tokens = out[0].len() / d;
            Task {
                out,
                along_q: vec![0.0; G * tokens * padded],
                dq: vec![0.0; G * m * d],
            }
        })
        .collect();
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
            // SAFETY: `form` is this CPU's.
            unsafe { push_rows_in(form, &token, &mut terms, out) };
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
        // SAFETY: as above.
        unsafe { dq_shares_in(form, &v, &state.along_q, padded, d, &mut state.dq) };
    });
    for j in 0..G {
        for task in &tasks {
            let part = &task.dq[j * m * d..(j + 1) * m * d];
            for (dq, part) in dq.iter_mut().zip(part.chunks_exact(d)) {
                dq.iter_mut().zip(part).for_each(|(a, b)| *a += b);
            }
        }
    }
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

/// [`push_rows`] in `form`'s lanes, compiled with its CPU features.
///
/// # Safety
/// The CPU has `form` (`Form::detect`).
unsafe fn push_rows_in<const G: usize>(
    form: Form,
    token: &Token<G>,
    terms: &mut Vec<[Term; G]>,
    out: [&mut [f32]; G],
) {
    // SAFETY: as the caller promised.
    unsafe {
        match form {
            #[cfg(target_arch = "x86_64")]
            Form::Avx512 => push_rows_avx512(token, terms, out),
            #[cfg(target_arch = "x86_64")]
            Form::Avx2 => push_rows_avx2(token, terms, out),
            _ => push_rows::<Portable, G>(token, terms, out),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn push_rows_avx2<const G: usize>(
    token: &Token<G>,
    terms: &mut Vec<[Term; G]>,
    out: [&mut [f32]; G],
) {
    // SAFETY: compiled for, and called on, a CPU with AVX2 and FMA.
    unsafe { push_rows::<Avx2, G>(token, terms, out) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn push_rows_avx512<const G: usize>(
    token: &Token<G>,
    terms: &mut Vec<[Term; G]>,
    out: [&mut [f32]; G],
) {
    // SAFETY: compiled for, and called on, a CPU with AVX-512.
    unsafe { push_rows::<Avx512, G>(token, terms, out) }
}

/// One token's row of each source's gradient in [`source_gradients`], and each (step,
/// source) pair's [`Term`] into `terms` (one `[Term; G]` per step). First the terms, from
/// `g . v` (each step's `g` row multiplied into every source's at once) and the step's
/// saved weights; then a chunk of the rows is walked across all steps before the next, so
/// the sums and the sources' chunks stay in registers while each step's `g` and `q` chunk
/// is loaded once for the group.
///
/// # Safety
/// The CPU has `S`'s features.
#[inline(always)]
unsafe fn push_rows<S: Lanes, const G: usize>(
    token: &Token<G>,
    terms: &mut Vec<[Term; G]>,
    mut out: [&mut [f32]; G],
) {
    let (v, g, q) = (token.v, token.g, token.q);
    let d = out[0].len();
    assert!(v.iter().all(|row| row.len() == d) && out.iter().all(|row| row.len() == d));
    assert!(g.len() == token.steps.len() && q.len() == g.len());
    assert!(g.iter().chain(q).all(|row| row.len() == d));
    terms.clear();
    for (s, g) in token.steps.iter().zip(g) {
        // SAFETY: `S`'s features as the caller promised.
        let gv = unsafe { dots::<S, G>(g, v) };
        let gx = s.gx[token.r];
        terms.push(std::array::from_fn(|j| {
            let at = (token.r * s.sources + token.ks[j]) * SAVED;
            Term::of(saved_at(s.saved, at), gv[j] - gx, token.key_norm, d)
        }));
    }
    let fresh = !token.continued;
    let body = d / WIDTH * WIDTH;
    for c in (0..body).step_by(WIDTH) {
        // SAFETY: `S`'s features as the caller promised; every row read or written holds
        // `d >= c + WIDTH` entries (asserted above).
        unsafe {
            let v: [S::V; G] = std::array::from_fn(|j| S::load(v[j].as_ptr().add(c)));
            let mut sum: [S::V; G] = match fresh {
                true => [S::splat(0.0); G],
                false => std::array::from_fn(|j| S::load(out[j].as_ptr().add(c))),
            };
            for (i, ((g, q), t)) in g.iter().zip(q).zip(terms.iter()).enumerate() {
                let (g, q) = (S::load(g.as_ptr().add(c)), S::load(q.as_ptr().add(c)));
                for j in 0..G {
                    let term = term_lanes::<S>(&t[j], g, q, v[j]);
                    sum[j] = if i == 0 && fresh {
                        term
                    } else {
                        S::add(sum[j], term)
                    };
                }
            }
            for (out, sum) in out.iter_mut().zip(sum) {
                S::store(out.as_mut_ptr().add(c), sum);
            }
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

/// [`dq_shares`] in `form`'s lanes, compiled with its CPU features.
///
/// # Safety
/// The CPU has `form` (`Form::detect`).
unsafe fn dq_shares_in<const G: usize>(
    form: Form,
    v: &[&[f32]; G],
    along_q: &[f32],
    padded: usize,
    d: usize,
    dq: &mut [f32],
) {
    // SAFETY: as the caller promised.
    unsafe {
        match form {
            #[cfg(target_arch = "x86_64")]
            Form::Avx512 => dq_shares_avx512(v, along_q, padded, d, dq),
            #[cfg(target_arch = "x86_64")]
            Form::Avx2 => dq_shares_avx2(v, along_q, padded, d, dq),
            _ => dq_shares::<Portable, G>(v, along_q, padded, d, dq),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dq_shares_avx2<const G: usize>(
    v: &[&[f32]; G],
    along_q: &[f32],
    padded: usize,
    d: usize,
    dq: &mut [f32],
) {
    // SAFETY: compiled for, and called on, a CPU with AVX2 and FMA.
    unsafe { dq_shares::<Avx2, G>(v, along_q, padded, d, dq) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn dq_shares_avx512<const G: usize>(
    v: &[&[f32]; G],
    along_q: &[f32],
    padded: usize,
    d: usize,
    dq: &mut [f32],
) {
    // SAFETY: compiled for, and called on, a CPU with AVX-512.
    unsafe { dq_shares::<Avx512, G>(v, along_q, padded, d, dq) }
}

/// One task's share of each step's `dq` from each source, `dq` `[G, M, d]`: `sum_t
/// along_q(t) v_t` over the task's tokens `t` in order, one multiply-add each from zero
/// (`v`: each source's rows of the task, `[tokens, d]`; `along_q` `[G, tokens, padded]`).
/// [`DQ_STEPS`] steps' sums at a time stay in registers while the tokens' chunks stream by.
///
/// # Safety
/// The CPU has `S`'s features.
#[inline(always)]
unsafe fn dq_shares<S: Lanes, const G: usize>(
    v: &[&[f32]; G],
    along_q: &[f32],
    padded: usize,
    d: usize,
    dq: &mut [f32],
) {
    let n = v[0].len();
    let (m, tokens) = (dq.len() / G / d, n / d);
    assert!(v.iter().all(|v| v.len() == n) && along_q.len() == G * tokens * padded);
    assert!(dq.len() == G * m * d && m <= padded && padded.is_multiple_of(DQ_STEPS));
    let body = d / WIDTH * WIDTH;
    for (j, v) in v.iter().enumerate() {
        let along_q = &along_q[j * tokens * padded..(j + 1) * tokens * padded];
        let dq = &mut dq[j * m * d..(j + 1) * m * d];
        for s0 in (0..m).step_by(DQ_STEPS) {
            let width = DQ_STEPS.min(m - s0);
            for c in (0..body).step_by(WIDTH) {
                // SAFETY: `S`'s features as the caller promised; each token's row holds
                // `d >= c + WIDTH` entries, and `along_q` has `padded >= s0 + DQ_STEPS`
                // entries a token.
                unsafe {
                    let mut acc = [S::splat(0.0); DQ_STEPS];
                    for t in 0..tokens {
                        let x = S::load(v.as_ptr().add(t * d + c));
                        let a = along_q.as_ptr().add(t * padded + s0);
                        for (b, acc) in acc.iter_mut().enumerate() {
                            *acc = S::mul_add(S::splat(*a.add(b)), x, *acc);
                        }
                    }
                    for (b, acc) in acc.iter().enumerate().take(width) {
                        S::store(dq.as_mut_ptr().add((s0 + b) * d + c), *acc);
                    }
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
