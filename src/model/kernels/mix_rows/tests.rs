//! Tests of the mixing step's row kernels, and the helpers `backward.rs`'s tests share.

use super::*;
use crate::model::kernels::rows::inv_rms;

/// One task's rows of a mixing step's forward, compiled for `form`.
pub(super) fn forward_rows_in(form: Form, t: Task, x: &mut [f32], saved: &mut [f32]) {
    form.run(ForwardRows { t, x, saved });
}

/// `inv_rms_of` agrees with `rows::inv_rms` on the same row.
#[test]
fn inverse_rms_from_the_sum_of_squares() {
    let v: Vec<f32> = (0..13).map(|i| i as f32 * 0.3 - 1.7).collect();
    let [vv] = dots::<1>(&v, [&v]);
    assert!((inv_rms_of(vv, v.len()) - inv_rms(&v, true)).abs() < 1e-6);
}

/// A row of `n` floats of mixed signs and magnitudes, different per `seed`.
pub(super) fn row(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| ((i * 7919 + seed * 104_729) % 1000) as f32 / 250.0 - 2.0)
        .map(|x| x * x * x)
        .collect()
}

/// `k` stacked sources and a partial sum, `n` rows of `d` each, and a query, different
/// per `seed`.
pub(super) fn inputs(n: usize, d: usize, k: usize, seed: u32) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let stacked = (0..k).flat_map(|j| row(n * d, seed + j as u32)).collect();
    (stacked, row(n * d, seed + 89), row(d, seed + 97))
}

/// The first task of a mixing step with the key norm over these.
pub(super) fn first_task<'a>(
    stacked: &'a [f32],
    partial: &'a [f32],
    q: &'a [f32],
    n: usize,
    d: usize,
) -> Task<'a> {
    let src = Sources {
        stacked,
        completed: stacked.len() / (n * d),
        slot: n * d,
        partial: Some(partial),
        n,
        d,
    };
    Task {
        src,
        q,
        key_norm: true,
        task: 0,
    }
}

pub(super) fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|x| x.to_bits()).collect()
}

/// `v . w` as defined: sixteen running sums of multiply-adds, lane `i` over the entries
/// `c = i mod 16` of the whole chunks, added in the tree (`i` and `i + 8`, then `+ 4`,
/// `+ 2`, `+ 1`), then the tail in order.
fn dot_by_definition(v: &[f32], w: &[f32]) -> f32 {
    let body = v.len() / 16 * 16;
    let mut lanes = [0.0f32; 16];
    for c in 0..body {
        lanes[c % 16] = v[c].mul_add(w[c], lanes[c % 16]);
    }
    for half in [8, 4, 2, 1] {
        for i in 0..half {
            lanes[i] += lanes[i + half];
        }
    }
    let tail = (body..v.len()).fold(0.0f32, |t, c| v[c].mul_add(w[c], t));
    lanes[0] + tail
}

/// `dots` in every form this CPU has, one vector and two (as the backward and the forward
/// take them), equals the definition bit for bit, with and without a tail.
#[test]
fn dots_in_every_form_equal_the_definition() {
    struct Dots<'a>(&'a [f32], &'a [f32]);
    impl WithSimd for Dots<'_> {
        type Output = ([f32; 2], [f32; 1]);
        #[inline(always)]
        fn with_simd<S: Simd>(self, _: S) -> Self::Output {
            let (v, q) = (self.0, self.1);
            (dots::<2>(v, [q, v]), dots::<1>(v, [q]))
        }
    }
    for n in [8, 13, 16, 64, 67, 72, 96, 256] {
        let (v, q) = (row(n, 1), row(n, 2));
        let want = [dot_by_definition(&v, &q), dot_by_definition(&v, &v)];
        for form in Form::all_here() {
            let (two, [one]) = form.run(Dots(&v, &q));
            assert_eq!(bits(&two), bits(&want), "{form:?}, d {n}");
            assert_eq!(one.to_bits(), want[0].to_bits(), "{form:?}, d {n}");
        }
    }
}

/// The forward's sum in every form equals the weighted sum source by source over whole
/// rows (`a_0 v_0`, then a multiply-add a source) bit for bit, and every form keeps the
/// same weights; with and without tails of fewer than 16 entries.
#[test]
fn forward_rows_in_every_form_equal_the_source_by_source_sums() {
    for d in [64, 72, 67, 260] {
        let (n, k) = (ROWS_PER_TASK, 5);
        let (stacked, partial, q) = inputs(n, d, k, 10);
        let task = first_task(&stacked, &partial, &q, n, d);
        let src = task.src;
        let mut want = vec![0.0f32; n * d];
        for (r, x) in want.chunks_exact_mut(d).enumerate() {
            let mut w = Weights::new(k + 1);
            let mut v = Vec::new();
            src.rows_of(r, &mut v);
            w.of_token(&v, &q, true);
            for (x, v) in x.iter_mut().zip(src.row(0, r)) {
                *x = w.a[0] * v;
            }
            for (j, &a) in w.a.iter().enumerate().skip(1) {
                for (x, v) in x.iter_mut().zip(src.row(j, r)) {
                    *x = a.mul_add(*v, *x);
                }
            }
        }
        let mut kept = None;
        for form in Form::all_here() {
            let (mut x, mut saved) = (vec![0.0f32; n * d], vec![0.0f32; n * (k + 1) * SAVED]);
            forward_rows_in(form, task, &mut x, &mut saved);
            assert_eq!(bits(&x), bits(&want), "{form:?}, d {d}");
            let kept = kept.get_or_insert_with(|| bits(&saved));
            assert_eq!(&bits(&saved), kept, "{form:?}, d {d}");
        }
    }
}
