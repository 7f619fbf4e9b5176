//! Sixteen floats at a time for the mixing kernels, as plain arrays that the compiler turns
//! into one AVX-512 register or two AVX2 registers where the kernel is compiled for them
//! (`cpu::Form`). Every operation works lane by lane with one rounding (a multiply-add is
//! fused: `a b + c` rounded once), and the one reduction adds the lanes in a fixed tree, so
//! every form computes the same floats bit for bit.

/// Floats a [`V`] holds.
pub const WIDTH: usize = 16;

/// Sixteen lanes.
pub type V = [f32; WIDTH];

/// The [`WIDTH`] floats of `row` from `at`.
#[inline(always)]
pub fn load(row: &[f32], at: usize) -> V {
    *<&V>::try_from(&row[at..at + WIDTH]).expect("WIDTH floats")
}

/// Writes `x` to the [`WIDTH`] floats of `row` from `at`.
#[inline(always)]
pub fn store(row: &mut [f32], at: usize, x: V) {
    row[at..at + WIDTH].copy_from_slice(&x);
}

/// `x` in every lane.
#[inline(always)]
pub fn splat(x: f32) -> V {
    [x; WIDTH]
}

/// `a + b`, lane by lane.
#[inline(always)]
pub fn add(a: V, b: V) -> V {
    std::array::from_fn(|i| a[i] + b[i])
}

/// `a b`, lane by lane.
#[inline(always)]
pub fn mul(a: V, b: V) -> V {
    std::array::from_fn(|i| a[i] * b[i])
}

/// `a b + c`, lane by lane, rounded once.
#[inline(always)]
pub fn mul_add(a: V, b: V, c: V) -> V {
    std::array::from_fn(|i| a[i].mul_add(b[i], c[i]))
}

/// `c - a b`, lane by lane, rounded once.
#[inline(always)]
pub fn neg_mul_add(a: V, b: V, c: V) -> V {
    std::array::from_fn(|i| (-a[i]).mul_add(b[i], c[i]))
}

/// The lanes' sum in a tree: lanes `i` and `i + 8` first, then `i` and `i + 4` of those,
/// `i` and `i + 2`, and the last two.
#[inline(always)]
pub fn sum(x: V) -> f32 {
    let mut s = x;
    for half in [8, 4, 2, 1] {
        for i in 0..half {
            s[i] += s[i + half];
        }
    }
    s[0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kernels::cpu::Form;

    /// Loads, every operation once and the tree sum, as bits, compiled for a form.
    struct Ops<'a>(&'a [f32; 48]);

    impl pulp::WithSimd for Ops<'_> {
        type Output = Vec<u32>;

        #[inline(always)]
        fn with_simd<S: pulp::Simd>(self, _: S) -> Vec<u32> {
            let x = self.0;
            let (a, b, c) = (load(x, 0), load(x, 16), load(x, 32));
            let r = [
                add(a, b),
                mul(a, b),
                mul_add(a, b, c),
                neg_mul_add(a, b, c),
                mul_add(splat(x[5]), a, c),
            ];
            let mut out: Vec<f32> = r.concat();
            out.push(sum(mul_add(a, b, c)));
            out.iter().map(|x| x.to_bits()).collect()
        }
    }

    /// Every form computes every operation, and the tree sum, to the same bits.
    #[test]
    fn forms_agree_bit_for_bit() {
        let x: [f32; 48] = std::array::from_fn(|i| ((i * 7919 % 101) as f32 / 37.0 - 1.3).powi(3));
        let want = Form::PORTABLE.run(Ops(&x));
        for form in Form::all_here() {
            assert_eq!(form.run(Ops(&x)), want, "{form:?}");
        }
    }

    /// A multiply-add is rounded once, and the sum goes by the tree: lanes 0 and 8 first.
    #[test]
    fn multiply_adds_fuse_and_sums_go_by_the_tree() {
        let (a, b, c) = (1.0f32 + f32::EPSILON, 1.0f32 - f32::EPSILON, -1.0f32);
        let fused = mul_add([a; WIDTH], [b; WIDTH], [c; WIDTH]);
        assert_eq!(fused[0], -f32::EPSILON * f32::EPSILON);
        assert_ne!(fused[0], a * b + c);
        // In order, 1e8 would swallow the ones before -1e8 cancels it (7); the tree cancels
        // lanes 0 and 8 first and keeps all fourteen.
        let x: [f32; WIDTH] = std::array::from_fn(|i| match i {
            0 => 1e8,
            8 => -1e8,
            _ => 1.0,
        });
        assert_eq!(sum(x), 14.0);
    }
}
