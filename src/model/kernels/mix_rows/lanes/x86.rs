//! [`Lanes`] in AVX2 (two registers of eight lanes) and AVX-512 (one of sixteen), each
//! operation with the same single rounding as the portable form's.

use super::{Lanes, WIDTH};
use std::arch::x86_64::*;

/// The last steps of [`Lanes::sum`] from its eight-lane stage: `i + 4`, `i + 2`, then
/// the last two.
#[inline]
#[target_feature(enable = "avx2")]
fn sum8(s8: __m256) -> f32 {
    let s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)))
}

/// Two AVX2 registers, lanes `0..8` and `8..16`, with fused multiply-add.
pub struct Avx2;

impl Lanes for Avx2 {
    type V = (__m256, __m256);

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load(p: *const f32) -> Self::V {
        // SAFETY: the caller promised `WIDTH` readable floats.
        unsafe { (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(WIDTH / 2))) }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store(p: *mut f32, x: Self::V) {
        // SAFETY: the caller promised `WIDTH` writable floats.
        unsafe {
            _mm256_storeu_ps(p, x.0);
            _mm256_storeu_ps(p.add(WIDTH / 2), x.1);
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn splat(x: f32) -> Self::V {
        let x = _mm256_set1_ps(x);
        (x, x)
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V {
        (_mm256_add_ps(a.0, b.0), _mm256_add_ps(a.1, b.1))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V {
        (_mm256_mul_ps(a.0, b.0), _mm256_mul_ps(a.1, b.1))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn mul_add(a: Self::V, b: Self::V, c: Self::V) -> Self::V {
        (
            _mm256_fmadd_ps(a.0, b.0, c.0),
            _mm256_fmadd_ps(a.1, b.1, c.1),
        )
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn neg_mul_add(a: Self::V, b: Self::V, c: Self::V) -> Self::V {
        (
            _mm256_fnmadd_ps(a.0, b.0, c.0),
            _mm256_fnmadd_ps(a.1, b.1, c.1),
        )
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn sum(x: Self::V) -> f32 {
        sum8(_mm256_add_ps(x.0, x.1))
    }
}

/// One AVX-512 register.
pub struct Avx512;

impl Lanes for Avx512 {
    type V = __m512;

    #[inline]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn load(p: *const f32) -> Self::V {
        // SAFETY: the caller promised `WIDTH` readable floats.
        unsafe { _mm512_loadu_ps(p) }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn store(p: *mut f32, x: Self::V) {
        // SAFETY: the caller promised `WIDTH` writable floats.
        unsafe { _mm512_storeu_ps(p, x) }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn splat(x: f32) -> Self::V {
        _mm512_set1_ps(x)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V {
        _mm512_add_ps(a, b)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V {
        _mm512_mul_ps(a, b)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn mul_add(a: Self::V, b: Self::V, c: Self::V) -> Self::V {
        _mm512_fmadd_ps(a, b, c)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn neg_mul_add(a: Self::V, b: Self::V, c: Self::V) -> Self::V {
        _mm512_fnmadd_ps(a, b, c)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn sum(x: Self::V) -> f32 {
        let low = _mm512_castps512_ps256(x);
        let high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
        sum8(_mm256_add_ps(low, high))
    }
}
