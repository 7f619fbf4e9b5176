//! The rounds over sixteen matrices at a time, one in each lane of the loops, which the
//! compiler turns into vector instructions (AVX-512 or AVX2 where the CPU has them): the
//! divisions, which set the pace, then take one instruction for all sixteen. Every lane
//! does its matrix's operations in the scalar order, so the floats do not depend on it.

use pulp::{Simd, WithSimd};

use crate::model::kernels::cpu::Form;

/// Matrices a tile takes.
pub const LANES: usize = 16;

/// One entry of each of a tile's matrices.
type Lane = [f32; LANES];

/// Which sums a step divides by: each row's (over the last dimension) or each column's.
#[derive(Clone, Copy)]
enum Step {
    Rows,
    Columns,
}

impl Step {
    /// Step `s` of a Sinkhorn run: rows first, then columns, in turn.
    fn nth(s: usize) -> Self {
        if s.is_multiple_of(2) {
            Self::Rows
        } else {
            Self::Columns
        }
    }

    /// The index of entry `k` of line `i` (a row or a column) in a row-major matrix.
    #[inline(always)]
    fn at(self, m: usize, i: usize, k: usize) -> usize {
        match self {
            Self::Rows => i * m + k,
            Self::Columns => k * m + i,
        }
    }

    /// Each line's sum, left to right from its first entry, as libtorch sums a few
    /// entries.
    #[inline(always)]
    fn sums(self, m: usize, p: &[Lane], sums: &mut [Lane]) {
        for (i, sum) in sums.iter_mut().enumerate() {
            *sum = p[self.at(m, i, 0)];
            for k in 1..m {
                let x = &p[self.at(m, i, k)];
                for l in 0..LANES {
                    sum[l] += x[l];
                }
            }
        }
    }

    /// `p / sum` per line, into `out`.
    #[inline(always)]
    fn divide(self, m: usize, p: &[Lane], sums: &[Lane], out: &mut [Lane]) {
        for (i, sum) in sums.iter().enumerate() {
            for k in 0..m {
                let at = self.at(m, i, k);
                for l in 0..LANES {
                    out[at][l] = p[at][l] / sum[l];
                }
            }
        }
    }

    /// The gradient of the step's input `p` given its output's `g`, in place, as burn
    /// differentiates `p / sum(p)`: `g (1/sum)` for the dividend, plus, for the divisor,
    /// `g (-p / sum^2)` summed over the line (left to right).
    #[inline(always)]
    fn backward(self, m: usize, p: &[Lane], sums: &[Lane], g: &mut [Lane]) {
        for (i, sum) in sums.iter().enumerate() {
            let (mut recip, mut square) = ([0.0; LANES], [0.0; LANES]);
            for l in 0..LANES {
                recip[l] = 1.0 / sum[l];
                square[l] = sum[l] * sum[l];
            }
            let mut through_sum = [0.0; LANES];
            for k in 0..m {
                let at = self.at(m, i, k);
                for l in 0..LANES {
                    let term = g[at][l] * (-p[at][l] / square[l]);
                    through_sum[l] = if k == 0 { term } else { through_sum[l] + term };
                }
            }
            for k in 0..m {
                let at = self.at(m, i, k);
                for l in 0..LANES {
                    g[at][l] = g[at][l] * recip[l] + through_sum[l];
                }
            }
        }
    }
}

/// A tile's working memory: each step's input and sums, and a gradient.
pub struct Scratch {
    m: usize,
    iters: usize,
    /// `2 iters + 1` matrices of `m^2` entries: each step's input, then the result.
    states: Vec<Lane>,
    /// `2 iters` steps of `m` sums.
    sums: Vec<Lane>,
    grad: Vec<Lane>,
}

impl Scratch {
    pub fn new(m: usize, iters: usize) -> Self {
        Self {
            m,
            iters,
            states: vec![[0.0; LANES]; (2 * iters + 1) * m * m],
            sums: vec![[0.0; LANES]; 2 * iters * m],
            grad: vec![[0.0; LANES]; m * m],
        }
    }

    /// Up to [`LANES`] matrices of `from` (row-major, one after another) into the lanes
    /// of `to`, the missing ones as ones (computed, never read).
    #[inline(always)]
    fn gather(mm: usize, from: &[f32], to: &mut [Lane]) {
        for (k, to) in to.iter_mut().enumerate() {
            for (l, to) in to.iter_mut().enumerate() {
                *to = from.get(l * mm + k).copied().unwrap_or(1.0);
            }
        }
    }

    /// The first `to.len() / mm` lanes of `from` into those matrices of `to`.
    #[inline(always)]
    fn scatter(mm: usize, from: &[Lane], to: &mut [f32]) {
        for (l, to) in to.chunks_exact_mut(mm).enumerate() {
            for (k, to) in to.iter_mut().enumerate() {
                *to = from[k][l];
            }
        }
    }

    /// The `2 iters` steps from the tile's matrices `e`, each step's input and sums kept.
    #[inline(always)]
    fn run(&mut self, e: &[f32]) {
        let (m, mm) = (self.m, self.m * self.m);
        Self::gather(mm, e, &mut self.states[..mm]);
        for s in 0..2 * self.iters {
            let (done, next) = self.states.split_at_mut((s + 1) * mm);
            let sums = &mut self.sums[s * m..(s + 1) * m];
            Step::nth(s).sums(m, &done[s * mm..], sums);
            Step::nth(s).divide(m, &done[s * mm..], sums, &mut next[..mm]);
        }
    }

    /// The result of the tile's matrices `e` into `p`.
    #[inline(always)]
    fn forward(&mut self, e: &[f32], p: &mut [f32]) {
        let mm = self.m * self.m;
        self.run(e);
        Self::scatter(mm, &self.states[2 * self.iters * mm..], p);
    }

    /// The logits' gradient `dl` of the tile's matrices `e` given the result's `g`.
    #[inline(always)]
    fn backward(&mut self, g: &[f32], e: &[f32], dl: &mut [f32]) {
        let (m, mm) = (self.m, self.m * self.m);
        self.run(e);
        Self::gather(mm, g, &mut self.grad);
        for s in (0..2 * self.iters).rev() {
            let p = &self.states[s * mm..(s + 1) * mm];
            Step::nth(s).backward(m, p, &self.sums[s * m..(s + 1) * m], &mut self.grad);
        }
        // Through `exp`: `g e` (the max is a constant).
        for (g, e) in self.grad.iter_mut().zip(&self.states[..mm]) {
            for l in 0..LANES {
                g[l] *= e[l];
            }
        }
        Self::scatter(mm, &self.grad, dl);
    }
}

/// The matrices `e` (`m x m` each, `exp(logits - max)`) -> `p`, in the widest vectors
/// this CPU has.
pub fn forward(s: &mut Scratch, e: &[f32], p: &mut [f32]) {
    Form::detect().run(Forward { s, e, p });
}

/// The logits' gradient `dl` given the result's `g` and the matrices `e` the forward
/// started from, in the widest vectors this CPU has.
pub fn backward(s: &mut Scratch, g: &[f32], e: &[f32], dl: &mut [f32]) {
    Form::detect().run(Backward { s, g, e, dl });
}

/// [`forward`]'s tiles.
struct Forward<'a> {
    s: &'a mut Scratch,
    e: &'a [f32],
    p: &'a mut [f32],
}

impl WithSimd for Forward<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        let tile = LANES * self.s.m * self.s.m;
        for (e, p) in self.e.chunks(tile).zip(self.p.chunks_mut(tile)) {
            self.s.forward(e, p);
        }
    }
}

/// [`backward`]'s tiles: each tile's steps again, then back through them.
struct Backward<'a> {
    s: &'a mut Scratch,
    g: &'a [f32],
    e: &'a [f32],
    dl: &'a mut [f32],
}

impl WithSimd for Backward<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        let tile = LANES * self.s.m * self.s.m;
        let tiles = self.g.chunks(tile).zip(self.e.chunks(tile));
        for ((g, e), dl) in tiles.zip(self.dl.chunks_mut(tile)) {
            self.s.backward(g, e, dl);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows and columns of the result sum to 1, and the backward agrees with central
    /// differences of the forward, after one round and after six.
    #[test]
    fn rounds_normalise_and_differentiate() {
        let m = 3;
        let e: Vec<f32> = (0..m * m)
            .map(|i| 0.3 + ((i * 7) % 5) as f32 * 0.4)
            .collect();
        let l: Vec<f32> = e.iter().map(|e| e.ln()).collect();
        // The loss sum(w p) for fixed weights w, against the logits l (e = exp(l)).
        let w: Vec<f32> = (0..m * m).map(|i| (i as f32 * 0.37).sin()).collect();
        for iters in [1, 6] {
            let mut scratch = Scratch::new(m, iters);
            let mut project = |l: &[f32]| {
                let e: Vec<f32> = l.iter().map(|l| l.exp()).collect();
                let mut p = vec![0.0; m * m];
                forward(&mut scratch, &e, &mut p);
                p
            };
            let p = project(&l);
            for i in 0..m {
                let col: f32 = (0..m).map(|k| p[k * m + i]).sum();
                let row: f32 = p[i * m..(i + 1) * m].iter().sum();
                assert!((col - 1.0).abs() < 1e-6, "{iters}: {p:?}");
                assert!(iters == 1 || (row - 1.0).abs() < 1e-2, "{iters}: {p:?}");
            }
            let mut loss = |l: &[f32]| -> f64 {
                let p = project(l);
                p.iter().zip(&w).map(|(p, w)| (p * w) as f64).sum()
            };
            let numeric: Vec<f64> = (0..m * m)
                .map(|k| {
                    let h = 1e-2;
                    let (mut up, mut down) = (l.clone(), l.clone());
                    up[k] += h;
                    down[k] -= h;
                    (loss(&up) - loss(&down)) / (2.0 * h as f64)
                })
                .collect();
            let mut dl = vec![0.0; m * m];
            backward(&mut Scratch::new(m, iters), &w, &e, &mut dl);
            for (k, (&n, &a)) in numeric.iter().zip(&dl).enumerate() {
                assert!(
                    (n - a as f64).abs() < 2e-3,
                    "{iters} rounds, {k}: {n} vs {a}"
                );
            }
            // Far above that bound, so that a wrong gradient is seen.
            assert!(dl.iter().any(|g| g.abs() > 0.05), "{iters}: {dl:?}");
        }
    }

    /// The widest vectors and plain code give the same floats, over a tile and a part of
    /// one.
    #[test]
    fn vectors_change_no_float() {
        let (m, iters, matrices) = (4, 20, 21);
        let e: Vec<f32> = (0..matrices * m * m)
            .map(|i| (((i * 37) % 101) as f32 / 20.0 - 2.5).exp())
            .collect();
        let g: Vec<f32> = (0..e.len()).map(|i| (i as f32 * 0.61).cos()).collect();
        let s = &mut Scratch::new(m, iters);
        let (mut p, mut p_any) = (vec![0.0; e.len()], vec![0.0; e.len()]);
        forward(s, &e, &mut p);
        Form::PORTABLE.run(Forward {
            s,
            e: &e,
            p: &mut p_any,
        });
        assert_eq!(p, p_any);
        let (mut dl, mut dl_any) = (vec![0.0; e.len()], vec![0.0; e.len()]);
        backward(s, &g, &e, &mut dl);
        Form::PORTABLE.run(Backward {
            s,
            g: &g,
            e: &e,
            dl: &mut dl_any,
        });
        assert_eq!(dl, dl_any);
        assert!(p.iter().chain(&dl).all(|x| x.is_finite()) && dl.iter().any(|&x| x != 0.0));
    }
}
