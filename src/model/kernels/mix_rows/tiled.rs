//! The mixing forward of narrow models sixteen tokens at a time: each token's dot products
//! as `forward_rows_by_token` forms them, then the softmax of sixteen tokens at once, a
//! token in each lane (`1/rms`, the logits, their max, `e^x` in `exp.rs`'s form of the C
//! library's, the sum in source order and the division), then each token's weighted sum.
//!
//! Every lane does its token's operations in `forward_rows_by_token`'s order, so the floats
//! are the same bit for bit (the tests hold the two paths to each other). What changes is the
//! waiting: one token at a time, each source's square root, divisions and exponential wait
//! on the one before through the max and the sum, and at `d` 64 to 128 that chain, more
//! than the arithmetic, set the pace (git log -- docs/performance.md). At `d` 256 the
//! sixteen tokens' source rows no longer stay in the first-level cache from the dots to
//! the weighted sums, and the two paths measured alike; wider models keep one token at a
//! time.

use super::lanes::{Lanes, WIDTH};
use super::{ROWS_PER_TASK, SAVED, Task, dots, weighted_sum};

/// Model widths below which the forward takes this path.
pub(super) const TILED_BELOW_D: usize = 256;

/// One tile's weights per source and token, `[K, WIDTH]`: `s = v.q`, `u = 1/rms(v)` (1
/// without the key norm) and the softmax weight `a`.
struct Tile {
    s: Vec<f32>,
    u: Vec<f32>,
    a: Vec<f32>,
}

impl Tile {
    fn new(sources: usize) -> Self {
        Self {
            s: vec![0.0; sources * WIDTH],
            u: vec![0.0; sources * WIDTH],
            a: vec![0.0; sources * WIDTH],
        }
    }

    /// The first lane of each source's `WIDTH`, in source order.
    fn sources(&self) -> impl Iterator<Item = usize> + use<> {
        (0..self.s.len()).step_by(WIDTH)
    }

    /// `1/rms`, the logits and their softmax over the sources, for every lane at once.
    ///
    /// # Safety
    /// The CPU has `S`'s features.
    #[inline(always)]
    unsafe fn softmax<S: Lanes>(&mut self, d: usize, key_norm: bool) {
        let (s, u, a) = (self.s.as_ptr(), self.u.as_mut_ptr(), self.a.as_mut_ptr());
        // SAFETY: `S`'s features as the caller promised; each of the three holds `WIDTH`
        // floats per source.
        unsafe {
            let (one, entries) = (S::splat(1.0), S::splat(d as f32));
            let eps = S::splat(crate::model::norm::RMS_EPS as f32);
            let mut max = S::splat(f32::NEG_INFINITY);
            for k in self.sources() {
                let inv_rms = if key_norm {
                    let mean = S::div(S::load(u.add(k)), entries);
                    S::div(one, S::sqrt(S::add(mean, eps)))
                } else {
                    one
                };
                S::store(u.add(k), inv_rms);
                let logit = S::mul(S::load(s.add(k)), inv_rms);
                S::store(a.add(k), logit);
                max = S::max(max, logit);
            }
            let mut sum = S::splat(0.0);
            for k in self.sources() {
                let e = S::exp(S::sub(S::load(a.add(k)), max));
                S::store(a.add(k), e);
                sum = S::add(sum, e);
            }
            for k in self.sources() {
                S::store(a.add(k), S::div(S::load(a.add(k)), sum));
            }
        }
    }
}

/// One task's rows of `mix_forward`, sixteen tokens at a time (the last tile may have
/// fewer; its empty lanes compute the weights of zero rows and are never read).
///
/// # Safety
/// The CPU has `S`'s features.
#[inline(always)]
pub(super) unsafe fn forward_rows_tiled<S: Lanes>(t: Task, x: &mut [f32], saved: &mut [f32]) {
    let (src, d) = (t.src, t.src.d);
    let sources = src.count();
    let mut tile = Tile::new(sources);
    let mut v: Vec<&[f32]> = Vec::with_capacity(sources);
    let mut a = vec![0.0f32; sources];
    let tiles = x
        .chunks_mut(d * WIDTH)
        .zip(saved.chunks_mut(sources * SAVED * WIDTH));
    for (j, (x, saved)) in tiles.enumerate() {
        let first = t.task * ROWS_PER_TASK + j * WIDTH;
        let tokens = x.len() / d;
        for lane in 0..WIDTH {
            if lane < tokens {
                src.rows_of(first + lane, &mut v);
            } else {
                v.clear();
            }
            for k in 0..sources {
                let at = k * WIDTH + lane;
                [tile.s[at], tile.u[at]] = match v.get(k) {
                    // SAFETY: `S`'s features as the caller promised.
                    Some(v) => unsafe { dots::<S, 2>(v, [t.q, v]) },
                    None => [0.0, 0.0],
                };
            }
        }
        // SAFETY: as above.
        unsafe { tile.softmax::<S>(d, t.key_norm) };
        let rows = x
            .chunks_exact_mut(d)
            .zip(saved.chunks_exact_mut(sources * SAVED));
        for (lane, (x, saved)) in rows.enumerate() {
            src.rows_of(first + lane, &mut v);
            for (k, (a, saved)) in a.iter_mut().zip(saved.chunks_exact_mut(SAVED)).enumerate() {
                let at = k * WIDTH + lane;
                *a = tile.a[at];
                saved.copy_from_slice(&[tile.a[at], tile.s[at], tile.u[at]]);
            }
            // SAFETY: as above.
            unsafe { weighted_sum::<S>(x, &v, &a) };
        }
    }
}
