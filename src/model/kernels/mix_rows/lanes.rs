//! Sixteen floats at a time for the mixing kernels: one AVX-512 register, two AVX2
//! registers, or a plain array where the CPU has neither. Every operation works lane by lane
//! with one rounding (a multiply-add is fused: `a b + c` rounded once), and the one reduction
//! adds the lanes in a fixed tree, so the three forms compute the same floats bit for bit;
//! only how many lanes an instruction takes differs.

/// Floats a [`Lanes`] value holds.
pub const WIDTH: usize = 16;

/// One form of the sixteen-lane operations the mixing kernels are written in.
///
/// # Safety
/// Every method may use instructions of its form's CPU features: call them only where the
/// CPU has them ([`Form::detect`]), and pointers must reach [`WIDTH`] floats.
pub trait Lanes {
    type V: Copy;
    /// The [`WIDTH`] floats from `p`.
    unsafe fn load(p: *const f32) -> Self::V;
    /// Writes `x` to the [`WIDTH`] floats from `p`.
    unsafe fn store(p: *mut f32, x: Self::V);
    /// `x` in every lane.
    unsafe fn splat(x: f32) -> Self::V;
    /// `a + b`, lane by lane.
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    /// `a b`, lane by lane.
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
    /// `a b + c`, lane by lane, rounded once.
    unsafe fn mul_add(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// `c - a b`, lane by lane, rounded once.
    unsafe fn neg_mul_add(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// The lanes' sum in a tree: lanes `i` and `i + 8` first, then `i` and `i + 4` of those,
    /// `i` and `i + 2`, and the last two.
    unsafe fn sum(x: Self::V) -> f32;
}

/// Which form this CPU runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    Portable,
    /// AVX2 with fused multiply-add.
    Avx2,
    Avx512,
}

impl Form {
    /// The widest form this CPU has (checked once; the answer is cached by the standard
    /// library).
    #[inline(always)]
    pub fn detect() -> Form {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return Form::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Form::Avx2;
            }
        }
        Form::Portable
    }

    /// Every form this CPU can run, the portable one first (for tests).
    #[cfg(test)]
    pub fn all_here() -> Vec<Form> {
        let widest = Form::detect();
        [Form::Portable, Form::Avx2, Form::Avx512]
            .into_iter()
            .filter(|f| {
                matches!(
                    (f, widest),
                    (Form::Portable, _)
                        | (Form::Avx2, Form::Avx2 | Form::Avx512)
                        | (Form::Avx512, Form::Avx512)
                )
            })
            .collect()
    }
}

/// Plain arrays: for CPUs without AVX2 and FMA, and the definition the others match.
pub struct Portable;

impl Lanes for Portable {
    type V = [f32; WIDTH];

    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self::V {
        // SAFETY: the caller promised `WIDTH` readable floats.
        unsafe { std::ptr::read_unaligned(p as *const [f32; WIDTH]) }
    }

    #[inline(always)]
    unsafe fn store(p: *mut f32, x: Self::V) {
        // SAFETY: the caller promised `WIDTH` writable floats.
        unsafe { std::ptr::write_unaligned(p as *mut [f32; WIDTH], x) }
    }

    #[inline(always)]
    unsafe fn splat(x: f32) -> Self::V {
        [x; WIDTH]
    }

    #[inline(always)]
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V {
        std::array::from_fn(|i| a[i] + b[i])
    }

    #[inline(always)]
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V {
        std::array::from_fn(|i| a[i] * b[i])
    }

    #[inline(always)]
    unsafe fn mul_add(a: Self::V, b: Self::V, c: Self::V) -> Self::V {
        std::array::from_fn(|i| a[i].mul_add(b[i], c[i]))
    }

    #[inline(always)]
    unsafe fn neg_mul_add(a: Self::V, b: Self::V, c: Self::V) -> Self::V {
        std::array::from_fn(|i| (-a[i]).mul_add(b[i], c[i]))
    }

    #[inline(always)]
    unsafe fn sum(x: Self::V) -> f32 {
        let mut s = x;
        for half in [8, 4, 2, 1] {
            for i in 0..half {
                s[i] += s[i + half];
            }
        }
        s[0]
    }
}

#[cfg(target_arch = "x86_64")]
pub use x86::{Avx2, Avx512};

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests {
    use super::*;

    /// Loads, every operation once and the tree sum, as bits.
    ///
    /// # Safety
    /// The CPU has `S`'s features.
    #[inline(always)]
    unsafe fn ops<S: Lanes>(x: &[f32; 48]) -> Vec<u32> {
        // SAFETY: as the caller promised; every pointer reaches 16 floats of `x` or `out`.
        unsafe {
            let at = |i: usize| S::load(x.as_ptr().add(16 * i));
            let (a, b, c) = (at(0), at(1), at(2));
            let r = [
                S::add(a, b),
                S::mul(a, b),
                S::mul_add(a, b, c),
                S::neg_mul_add(a, b, c),
                S::mul_add(S::splat(x[5]), a, c),
            ];
            let mut out = vec![0.0f32; 16 * r.len()];
            for (i, r) in r.iter().enumerate() {
                S::store(out.as_mut_ptr().add(16 * i), *r);
            }
            out.push(S::sum(S::mul_add(a, b, c)));
            out.iter().map(|x| x.to_bits()).collect()
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2_ops(x: &[f32; 48]) -> Vec<u32> {
        // SAFETY: as the caller promised.
        unsafe { ops::<Avx2>(x) }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn avx512_ops(x: &[f32; 48]) -> Vec<u32> {
        // SAFETY: as the caller promised.
        unsafe { ops::<Avx512>(x) }
    }

    fn with_form(form: Form, x: &[f32; 48]) -> Vec<u32> {
        // SAFETY: `form` is one this CPU has (`Form::all_here`).
        unsafe {
            match form {
                Form::Portable => ops::<Portable>(x),
                #[cfg(target_arch = "x86_64")]
                Form::Avx2 => avx2_ops(x),
                #[cfg(target_arch = "x86_64")]
                Form::Avx512 => avx512_ops(x),
                #[cfg(not(target_arch = "x86_64"))]
                _ => unreachable!("no such form here"),
            }
        }
    }

    /// Every form computes every operation, and the tree sum, to the same bits.
    #[test]
    fn forms_agree_bit_for_bit() {
        let x: [f32; 48] = std::array::from_fn(|i| ((i * 7919 % 101) as f32 / 37.0 - 1.3).powi(3));
        let want = with_form(Form::Portable, &x);
        for form in Form::all_here() {
            assert_eq!(with_form(form, &x), want, "{form:?}");
        }
    }

    /// A multiply-add is rounded once, and the sum goes by the tree: lanes 0 and 8 first.
    #[test]
    fn multiply_adds_fuse_and_sums_go_by_the_tree() {
        let (a, b, c) = (1.0f32 + f32::EPSILON, 1.0f32 - f32::EPSILON, -1.0f32);
        // SAFETY: the portable form runs anywhere.
        let fused = unsafe { Portable::mul_add([a; WIDTH], [b; WIDTH], [c; WIDTH]) };
        assert_eq!(fused[0], -f32::EPSILON * f32::EPSILON);
        assert_ne!(fused[0], a * b + c);
        // In order, 1e8 would swallow the ones before -1e8 cancels it (7); the tree cancels
        // lanes 0 and 8 first and keeps all fourteen.
        let x: [f32; WIDTH] = std::array::from_fn(|i| match i {
            0 => 1e8,
            8 => -1e8,
            _ => 1.0,
        });
        // SAFETY: as above.
        assert_eq!(unsafe { Portable::sum(x) }, 14.0);
    }
}
