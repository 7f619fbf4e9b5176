//! `e^x` for the mixing kernels' softmax, sixteen lanes at a time, giving the same floats as
//! the C library's `expf` that the kernels called one source at a time before
//! (git log -- docs/performance.md).
//!
//! The algorithm is glibc's (`sysdeps/ieee754/flt-32/e_expf.c`, read off 2.36), in the form
//! its x86-64 build with fused multiply-adds runs (`__expf_fma`, which glibc picks on every
//! CPU with FMA, and which this machine's libm was disassembled to confirm): in doubles,
//! `x = (k + r) ln 2 / 32` with `k` an integer and `|r| <= 1/2`, then
//! `e^x = 2^(k/32) 2^(r/32)`, the first factor from a table of 32 entries and the exponent
//! bits, the second a cubic in `r`, and one rounding to `f32` at the end. Each step below
//! is the same IEEE operation, with the same fused multiply-adds, as that build's
//! instructions, so the result is the same bits (the tests check it against the C
//! library's `expf` on a grid of every kind of argument). Arguments of magnitude 88 or
//! more, infinities and NaNs take glibc's special cases, one lane at a time.

/// `2^(i/32)` as bits, less `i` in the exponent's last five bits (`i << 47`), so that adding
/// `k << 47` gives `2^(k/32)` for any `k` with `k % 32 = i`.
const TABLE: [u64; 32] = [
    0x3ff0000000000000,
    0x3fefd9b0d3158574,
    0x3fefb5586cf9890f,
    0x3fef9301d0125b51,
    0x3fef72b83c7d517b,
    0x3fef54873168b9aa,
    0x3fef387a6e756238,
    0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715,
    0x3feef1a7373aa9cb,
    0x3feedea64c123422,
    0x3feece086061892d,
    0x3feebfdad5362a27,
    0x3feeb42b569d4f82,
    0x3feeab07dd485429,
    0x3feea47eb03a5585,
    0x3feea09e667f3bcd,
    0x3fee9f75e8ec5f74,
    0x3feea11473eb0187,
    0x3feea589994cce13,
    0x3feeace5422aa0db,
    0x3feeb737b0cdc5e5,
    0x3feec49182a3f090,
    0x3feed503b23e255d,
    0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47,
    0x3fef199bdd85529c,
    0x3fef3720dcef9069,
    0x3fef5818dcfba487,
    0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da,
    0x3fefd0765b6e4540,
];

/// `32 / ln 2`.
const INV_LN2_N: f64 = f64::from_bits(0x40471547652b82fe);
/// `1.5 * 2^52`: added and taken away again, it rounds to an integer, ties to even.
const SHIFT: f64 = f64::from_bits(0x4338000000000000);
/// The cubic's coefficients of `r^3`, `r^2` and `r` (its constant term is 1), for `r` in
/// units of `ln 2 / 32`.
const C3: f64 = f64::from_bits(0x3ebc6af84b912394);
const C2: f64 = f64::from_bits(0x3f2ebfce50fac4f3);
const C1: f64 = f64::from_bits(0x3f962e42ff0c52d6);

/// The exponent and the mantissa's top three bits, without the sign (`bits >> 20 & 0x7ff`),
/// above which (magnitude 88 or more, infinities, NaNs) the special cases apply.
const SPECIAL_ABOVE: u32 = 0x42a;

/// `e^x`, rounded to `f32` as glibc's `expf` rounds it.
pub fn expf(x: f32) -> f32 {
    if (x.to_bits() >> 20) & 0x7ff > SPECIAL_ABOVE {
        special(x)
    } else {
        near_one(x as f64)
    }
}

/// The main path, for `|x| < 88`.
#[inline(always)]
fn near_one(xd: f64) -> f32 {
    let kd = INV_LN2_N.mul_add(xd, SHIFT);
    let ki = kd.to_bits();
    let kd = kd - SHIFT;
    let r = INV_LN2_N.mul_add(xd, -kd);
    let s = f64::from_bits(TABLE[(ki % 32) as usize].wrapping_add(ki << 47));
    let z = r.mul_add(C3, C2);
    let r2 = r * r;
    let y = r.mul_add(C1, 1.0);
    (z.mul_add(r2, y) * s) as f32
}

/// glibc's cases for `|x| >= 88`, infinities and NaNs, in its order.
#[cold]
fn special(x: f32) -> f32 {
    if x == f32::NEG_INFINITY {
        0.0
    } else if (x.to_bits() >> 20) & 0x7ff > 0x7f7 {
        x + x
    } else if x > f32::from_bits(0x42b17217) {
        // Above `ln(2^128)`: overflows to infinity, as glibc's `__math_oflowf`.
        f32::from_bits(0x70000000) * f32::from_bits(0x70000000)
    } else if x < f32::from_bits(0xc2cff1b4) {
        // Below `ln(2^-150)`: underflows to zero, as `__math_uflowf`.
        f32::from_bits(0x10000000) * f32::from_bits(0x10000000)
    } else if x < f32::from_bits(0xc2ce8ecf) {
        // Below `ln(2^-149)`: `__math_may_uflowf`, the least subnormal.
        f32::from_bits(0x1a200000) * f32::from_bits(0x1a200000)
    } else {
        near_one(x as f64)
    }
}

/// [`expf`] over sixteen lanes in AVX-512 (eight doubles at a time).
///
/// # Safety
/// The CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx2,fma")]
pub unsafe fn exp_avx512(x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    let top = _mm512_and_si512(
        _mm512_srli_epi32::<20>(_mm512_castps_si512(x)),
        _mm512_set1_epi32(0x7ff),
    );
    let special = _mm512_cmpgt_epi32_mask(top, _mm512_set1_epi32(SPECIAL_ABOVE as i32));
    let low = near_one_avx512(_mm512_cvtps_pd(_mm512_castps512_ps256(x)));
    let high = near_one_avx512(_mm512_cvtps_pd(_mm256_castpd_ps(
        _mm512_extractf64x4_pd::<1>(_mm512_castps_pd(x)),
    )));
    let y = _mm512_castpd_ps(_mm512_insertf64x4::<1>(
        _mm512_castps_pd(_mm512_castps256_ps512(low)),
        _mm256_castps_pd(high),
    ));
    if special == 0 {
        return y;
    }
    let (mut out, mut arg) = ([0.0f32; 16], [0.0f32; 16]);
    // SAFETY: both arrays hold sixteen floats.
    unsafe {
        _mm512_storeu_ps(out.as_mut_ptr(), y);
        _mm512_storeu_ps(arg.as_mut_ptr(), x);
    }
    special_lanes(&mut out, &arg, special.into());
    // SAFETY: as above.
    unsafe { _mm512_loadu_ps(out.as_ptr()) }
}

/// [`near_one`] over eight doubles.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx2,fma")]
fn near_one_avx512(xd: std::arch::x86_64::__m512d) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    let table = |from: usize| {
        // SAFETY: `TABLE` holds eight doubles' bits from `from` (0, 8, 16 or 24).
        unsafe { _mm512_loadu_pd(TABLE.as_ptr().add(from) as *const f64) }
    };
    let inv_ln2 = _mm512_set1_pd(INV_LN2_N);
    let kd = _mm512_fmadd_pd(inv_ln2, xd, _mm512_set1_pd(SHIFT));
    let ki = _mm512_castpd_si512(kd);
    let kd = _mm512_sub_pd(kd, _mm512_set1_pd(SHIFT));
    let r = _mm512_fmsub_pd(inv_ln2, xd, kd);
    // `TABLE[ki % 32]`: the low four bits pick among sixteen entries, the fifth which sixteen.
    let first = _mm512_permutex2var_pd(table(0), ki, table(8));
    let second = _mm512_permutex2var_pd(table(16), ki, table(24));
    let upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
    let t = _mm512_castpd_si512(_mm512_mask_blend_pd(upper, first, second));
    let s = _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64::<47>(ki)));
    let z = _mm512_fmadd_pd(r, _mm512_set1_pd(C3), _mm512_set1_pd(C2));
    let r2 = _mm512_mul_pd(r, r);
    let y = _mm512_fmadd_pd(r, _mm512_set1_pd(C1), _mm512_set1_pd(1.0));
    _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_fmadd_pd(z, r2, y), s))
}

/// [`expf`] over sixteen lanes in AVX2 registers (four doubles at a time).
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
pub unsafe fn exp_avx2(
    x: (std::arch::x86_64::__m256, std::arch::x86_64::__m256),
) -> (std::arch::x86_64::__m256, std::arch::x86_64::__m256) {
    use std::arch::x86_64::*;
    let eight = |x: __m256| {
        let top = _mm256_and_si256(
            _mm256_srli_epi32::<20>(_mm256_castps_si256(x)),
            _mm256_set1_epi32(0x7ff),
        );
        let special = _mm256_cmpgt_epi32(top, _mm256_set1_epi32(SPECIAL_ABOVE as i32));
        let low = near_one_avx2(_mm256_cvtps_pd(_mm256_castps256_ps128(x)));
        let high = near_one_avx2(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x)));
        let y = _mm256_set_m128(high, low);
        let special = _mm256_movemask_ps(_mm256_castsi256_ps(special));
        if special == 0 {
            return y;
        }
        let (mut out, mut arg) = ([0.0f32; 8], [0.0f32; 8]);
        // SAFETY: both arrays hold eight floats.
        unsafe {
            _mm256_storeu_ps(out.as_mut_ptr(), y);
            _mm256_storeu_ps(arg.as_mut_ptr(), x);
        }
        special_lanes(&mut out, &arg, special as u32);
        // SAFETY: as above.
        unsafe { _mm256_loadu_ps(out.as_ptr()) }
    };
    (eight(x.0), eight(x.1))
}

/// [`near_one`] over four doubles.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
fn near_one_avx2(xd: std::arch::x86_64::__m256d) -> std::arch::x86_64::__m128 {
    use std::arch::x86_64::*;
    let inv_ln2 = _mm256_set1_pd(INV_LN2_N);
    let kd = _mm256_fmadd_pd(inv_ln2, xd, _mm256_set1_pd(SHIFT));
    let ki = _mm256_castpd_si256(kd);
    let kd = _mm256_sub_pd(kd, _mm256_set1_pd(SHIFT));
    let r = _mm256_fmsub_pd(inv_ln2, xd, kd);
    let index = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
    // SAFETY: every index is below 32, `TABLE`'s length.
    let t = unsafe { _mm256_i64gather_epi64::<8>(TABLE.as_ptr() as *const i64, index) };
    let s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64::<47>(ki)));
    let z = _mm256_fmadd_pd(r, _mm256_set1_pd(C3), _mm256_set1_pd(C2));
    let r2 = _mm256_mul_pd(r, r);
    let y = _mm256_fmadd_pd(r, _mm256_set1_pd(C1), _mm256_set1_pd(1.0));
    _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_fmadd_pd(z, r2, y), s))
}

/// Redoes the lanes whose bit is set in `special` (an argument of magnitude 88 or more, an
/// infinity or a NaN) with the whole of [`expf`], whose main path some of them take too
/// (between -103.3 and -88).
#[cfg(target_arch = "x86_64")]
#[cold]
fn special_lanes(out: &mut [f32], arg: &[f32], special: u32) {
    for (i, (out, &arg)) in out.iter_mut().zip(arg).enumerate() {
        if special & (1 << i) != 0 {
            *out = expf(arg);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The argument for bit pattern `i`, and whether the port gives the C library's float.
    fn agrees(i: u32) -> bool {
        let x = f32::from_bits(i);
        let (want, got) = (x.exp(), expf(x));
        want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan())
    }

    /// The port gives the bits of this machine's C library `expf` for every 13th bit
    /// pattern (all signs, exponents and the special cases' ranges) and every boundary.
    /// (The ignored test below checks all 2^32 patterns.)
    #[test]
    fn the_port_is_the_c_librarys_expf() {
        let boundaries = [
            0x42b17217u32,
            0x42b17218,
            0xc2cff1b4,
            0xc2cff1b5,
            0xc2ce8ecf,
            0xc2ce8ed0,
            0x42b00000,
            0xc2b00000,
            0x42affffe,
            0xc2afffff,
            0x7f800000,
            0xff800000,
            0x7fc00000,
            0xffc00001,
            0x00000001,
            0x80000001,
            0,
            0x80000000,
        ];
        let wrong: Vec<u32> = (0..=u32::MAX)
            .step_by(13)
            .chain(boundaries)
            .filter(|&i| !agrees(i))
            .take(5)
            .collect();
        assert!(
            wrong.is_empty(),
            "differs from libm at bit patterns {wrong:x?}"
        );
    }

    /// The bit patterns from `first`, `step` apart, sixteen at a time: each set's floats in
    /// the vector forms this CPU has, against the port one lane at a time. The first set
    /// differing, if any.
    fn forms_differ(first: u64, step: u64, sets: u64) -> Option<(&'static str, Vec<f32>)> {
        for set in 0..sets {
            let x: [f32; 16] = std::array::from_fn(|i| {
                f32::from_bits((first + (set * 16 + i as u64) * step) as u32)
            });
            let want: Vec<u32> = x.iter().map(|&x| expf(x).to_bits()).collect();
            for (form, got) in vector_forms(&x) {
                let same = got.iter().zip(&want).all(|(&g, &w)| {
                    g == w || (f32::from_bits(g).is_nan() && f32::from_bits(w).is_nan())
                });
                if !same {
                    return Some((form, x.to_vec()));
                }
            }
        }
        None
    }

    /// [`exp_avx512`] and [`exp_avx2`] of `x`, as bits, where this CPU has them.
    fn vector_forms(x: &[f32; 16]) -> Vec<(&'static str, Vec<u32>)> {
        #[allow(unused_mut)]
        let mut out = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::*;
            let mut y = [0.0f32; 16];
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                // SAFETY: the CPU has AVX2 and FMA; `x` and `y` hold sixteen floats.
                unsafe {
                    #[target_feature(enable = "avx2,fma")]
                    unsafe fn run(x: &[f32; 16], y: &mut [f32; 16]) {
                        // SAFETY: as the caller promised.
                        unsafe {
                            let v = (
                                _mm256_loadu_ps(x.as_ptr()),
                                _mm256_loadu_ps(x.as_ptr().add(8)),
                            );
                            let (a, b) = exp_avx2(v);
                            _mm256_storeu_ps(y.as_mut_ptr(), a);
                            _mm256_storeu_ps(y.as_mut_ptr().add(8), b);
                        }
                    }
                    run(x, &mut y);
                }
                out.push(("avx2", y.iter().map(|y| y.to_bits()).collect()));
            }
            if is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has AVX-512F; `x` and `y` hold sixteen floats.
                unsafe {
                    #[target_feature(enable = "avx512f,avx2,fma")]
                    unsafe fn run(x: &[f32; 16], y: &mut [f32; 16]) {
                        // SAFETY: as the caller promised.
                        unsafe {
                            _mm512_storeu_ps(
                                y.as_mut_ptr(),
                                exp_avx512(_mm512_loadu_ps(x.as_ptr())),
                            )
                        }
                    }
                    run(x, &mut y);
                }
                out.push(("avx512", y.iter().map(|y| y.to_bits()).collect()));
            }
        }
        out
    }

    /// The vector forms give the port's bits on every 61st bit pattern, which mixes
    /// ordinary and special lanes in the same vectors. (Off x86-64 there are none: the
    /// portable form is the port itself, which the test above checks.)
    #[test]
    fn the_vector_forms_are_the_port() {
        let sets = (1u64 << 32) / 61 / 16;
        assert_eq!(forms_differ(0, 61, sets), None);
    }

    /// Every one of the 2^32 bit patterns, in every form, against this machine's C library:
    /// a check to run by hand after a change to this file or to glibc (`cargo test --release
    /// --features tch --lib exp::tests::every_float -- --ignored`; about two and a half
    /// minutes on 2 cores). `make test` leaves it out; the test above samples every 13th.
    #[test]
    #[ignore = "exhaustive: run by hand, about two and a half minutes"]
    fn every_float_in_every_form_is_the_c_librarys() {
        let wrong = (0..=u32::MAX)
            .filter(|&i| !agrees(i))
            .take(5)
            .collect::<Vec<_>>();
        assert!(wrong.is_empty(), "the port differs from libm at {wrong:x?}");
        assert_eq!(forms_differ(0, 1, 1 << 28), None);
    }
}
