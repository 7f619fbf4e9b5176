//! The AVX2 forms of the kernels' inner loops, in intrinsics where the compiler's own
//! vectorization kept running sums in memory or split registers in halves: no fused
//! multiply-add, and each lane the same IEEE operations in the same order as the portable loops.

use super::{CHUNK, LANES, Rows, Term};
use std::arch::x86_64::{
    __m256, _mm256_add_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_set1_ps, _mm256_setzero_ps,
    _mm256_storeu_ps, _mm256_sub_ps,
};

/// The 8 floats from `p`.
///
/// # Safety
/// `p` points at 8 readable floats; the CPU has AVX.
#[inline(always)]
unsafe fn load(p: *const f32) -> __m256 {
    // SAFETY: as the caller promised.
    unsafe { _mm256_loadu_ps(p) }
}

/// Writes `x` to the 8 floats from `p`.
///
/// # Safety
/// `p` points at 8 writable floats; the CPU has AVX.
#[inline(always)]
unsafe fn store(p: *mut f32, x: __m256) {
    // SAFETY: as the caller promised.
    unsafe { _mm256_storeu_ps(p, x) }
}

/// Lane `i` of `out[m]`: the sum of `v_c w_m,c` over the entries `c = i mod LANES`, in
/// order, as `dots`' accumulators; every row `LANES` long a chunk, all of one length.
#[target_feature(enable = "avx2")]
#[inline]
pub fn dots<const M: usize>(v: &[f32], w: [&[f32]; M], out: &mut [[f32; LANES]; M]) {
    assert!(v.len().is_multiple_of(LANES) && w.iter().all(|w| w.len() == v.len()));
    let mut acc = [_mm256_setzero_ps(); M];
    for c in (0..v.len()).step_by(LANES) {
        // SAFETY: `c + LANES <= len` for every row (asserted above).
        let x = unsafe { load(v.as_ptr().add(c)) };
        for (acc, w) in acc.iter_mut().zip(&w) {
            // SAFETY: as above.
            let y = unsafe { load(w.as_ptr().add(c)) };
            *acc = _mm256_add_ps(*acc, _mm256_mul_ps(x, y));
        }
    }
    for (out, acc) in out.iter_mut().zip(acc) {
        // SAFETY: `out` holds `LANES` floats.
        unsafe { store(out.as_mut_ptr(), acc) };
    }
}

/// `weighted_sum`'s chunks: `x = a_0 v_0 + a_1 v_1 + ...` entry by entry, in source order
/// (`x` is `CHUNK` long a chunk; every row of `v` at least as long).
#[target_feature(enable = "avx2")]
#[inline]
pub fn weighted_sum(x: &mut [f32], v: &[&[f32]], a: &[f32]) {
    let n = x.len();
    assert!(n.is_multiple_of(CHUNK) && v.len() == a.len() && !v.is_empty());
    assert!(v.iter().all(|v| v.len() >= n));
    for c in (0..n).step_by(CHUNK) {
        // SAFETY: every row is at least `n` long (asserted) and `c + CHUNK <= n`.
        unsafe {
            let a0 = _mm256_set1_ps(a[0]);
            let p = v[0].as_ptr().add(c);
            let mut lo = _mm256_mul_ps(a0, load(p));
            let mut hi = _mm256_mul_ps(a0, load(p.add(LANES)));
            for (v, &a) in v[1..].iter().zip(&a[1..]) {
                let (a, p) = (_mm256_set1_ps(a), v.as_ptr().add(c));
                lo = _mm256_add_ps(lo, _mm256_mul_ps(a, load(p)));
                hi = _mm256_add_ps(hi, _mm256_mul_ps(a, load(p.add(LANES))));
            }
            store(x.as_mut_ptr().add(c), lo);
            store(x.as_mut_ptr().add(c + LANES), hi);
        }
    }
}

/// `gradient_rows`'s chunks, entries `..body` (`CHUNK` long a chunk): each source's
/// `a g + along_q q - along_v v`, added to its old sum for the first `written` sources,
/// into `dv` from `at`, and `along_q v` added to `dq`, in source order.
#[target_feature(enable = "avx2")]
#[inline]
pub fn gradient_rows(
    rows: &Rows,
    terms: &[Term],
    written: usize,
    dv: &mut [&mut [f32]],
    at: usize,
    dq: &mut [f32],
    body: usize,
) {
    assert!(body.is_multiple_of(CHUNK) && rows.g.len() >= body && rows.q.len() >= body);
    assert!(dq.len() >= body && dv.len() == rows.v.len() && terms.len() == rows.v.len());
    assert!(rows.v.iter().all(|v| v.len() >= body));
    assert!(dv.iter().all(|dv| dv.len() >= at + body));
    for c in (0..body).step_by(CHUNK) {
        // SAFETY: every row read or written holds `body` entries from where it is read
        // (asserted above), and `c + CHUNK <= body`.
        unsafe {
            let (g, q) = (rows.g.as_ptr().add(c), rows.q.as_ptr().add(c));
            let (g, q) = ([load(g), load(g.add(LANES))], [load(q), load(q.add(LANES))]);
            let d = dq.as_mut_ptr().add(c);
            let mut acc = [load(d), load(d.add(LANES))];
            for (k, ((dv, v), t)) in dv.iter_mut().zip(rows.v).zip(terms).enumerate() {
                let (a, along_q, along_v) = (
                    _mm256_set1_ps(t.a),
                    _mm256_set1_ps(t.along_q),
                    _mm256_set1_ps(t.along_v),
                );
                let (v, out) = (v.as_ptr().add(c), dv.as_mut_ptr().add(at + c));
                for h in 0..2 {
                    let v = load(v.add(h * LANES));
                    let sum = _mm256_add_ps(_mm256_mul_ps(a, g[h]), _mm256_mul_ps(along_q, q[h]));
                    let term = _mm256_sub_ps(sum, _mm256_mul_ps(along_v, v));
                    let out = out.add(h * LANES);
                    store(
                        out,
                        if k < written {
                            _mm256_add_ps(load(out), term)
                        } else {
                            term
                        },
                    );
                    acc[h] = _mm256_add_ps(acc[h], _mm256_mul_ps(along_q, v));
                }
            }
            store(d, acc[0]);
            store(d.add(LANES), acc[1]);
        }
    }
}
