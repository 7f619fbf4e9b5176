//! The instructions the row kernels run in: the widest vectors this CPU has (AVX-512, or
//! AVX2 with FMA), or plain x86-64 (and other CPUs). A kernel is written once, in plain
//! Rust over fixed-size arrays, as a [`pulp::WithSimd`] whose `with_simd` is
//! `#[inline(always)]`; [`Form::run`] calls it through a function compiled for the CPU's
//! instructions, so the compiler vectorizes it there. pulp (already built for burn-flex's
//! matrix products) does the detection and holds the `unsafe` of calling such a function.
//!
//! The floats do not depend on the form: the compiler neither reorders float operations
//! nor fuses a multiply and an add that the code does not fuse (`f32::mul_add`).

use pulp::{Arch, WithSimd};

/// Which instructions a kernel runs in.
#[derive(Clone, Copy, Debug)]
pub struct Form(Arch);

impl Form {
    /// Plain code, for any CPU (tests compare the others with it).
    #[cfg(test)]
    pub const PORTABLE: Form = Form(Arch::Scalar);

    /// The widest form this CPU has.
    #[inline]
    pub fn detect() -> Form {
        Form(Arch::new())
    }

    /// `kernel` compiled for this form's instructions.
    #[inline(always)]
    pub fn run<K: WithSimd>(self, kernel: K) -> K::Output {
        self.0.dispatch(kernel)
    }

    /// Every form this CPU can run, the portable one first (for tests).
    #[cfg(test)]
    pub fn all_here() -> Vec<Form> {
        let mut forms = vec![Form::PORTABLE];
        #[cfg(target_arch = "x86_64")]
        {
            use pulp::x86::{V3, V4};
            forms.extend(V3::try_new().map(|s| Form(Arch::V3(s))));
            forms.extend(V4::try_new().map(|s| Form(Arch::V4(s))));
        }
        forms
    }
}
