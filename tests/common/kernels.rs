//! Shared helpers of the kernel tests (`kernels*.rs`): the backends compiled in, seeded
//! inputs, and the comparisons of a fused operation with its composition.
#![allow(dead_code)] // each kernel test uses a different subset

use attnres::backend::{BackendKind, device};
use burn::tensor::{Device, Tensor, TensorData};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::common::{max_abs_diff, to_vec};

pub fn backends() -> Vec<Device> {
    [BackendKind::Tch, BackendKind::Flex]
        .into_iter()
        .filter_map(|kind| device(kind, "cpu").ok())
        .collect()
}

/// Uniform values in [-2, 2) from `seed`, the same on every backend.
pub fn uniform<const D: usize>(seed: u64, shape: [usize; D], device: &Device) -> Tensor<D> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = shape.iter().product();
    let values: Vec<f32> = (0..n).map(|_| rng.random_range(-2.0..2.0)).collect();
    Tensor::from_data(TensorData::new(values, shape), device)
}

/// Same inputs on every backend compiled in: the same outputs, within `tol` times the
/// largest entry (or `tol` where every entry is below 1).
pub fn assert_backends_agree(per_backend: &[Vec<Vec<f32>>], tol: f32) {
    for other in per_backend.iter().skip(1) {
        for (a, b) in per_backend[0].iter().zip(other) {
            let diff = max_abs_diff(a, b);
            let scale = a.iter().fold(1.0f32, |m, x| m.max(x.abs()));
            assert!(
                diff < tol * scale,
                "backends differ by {diff} (largest entry {scale})"
            );
        }
    }
}

/// A fused operation's outputs (value, then gradients) equal its composition's within 1e-6
/// times each output's largest entry (or 1e-6 where every entry is below 1); `case` names
/// the case and `names` the outputs in the message.
pub fn assert_matches_composition(
    fused: &[Vec<f32>],
    composed: &[Vec<f32>],
    names: &[&str],
    case: &str,
) {
    assert_eq!(fused.len(), composed.len(), "{case}: number of outputs");
    for (i, (a, b)) in fused.iter().zip(composed).enumerate() {
        let diff = max_abs_diff(a, b);
        let scale = b.iter().fold(1.0f32, |m, x| m.max(x.abs()));
        let name = names.get(i).copied().unwrap_or("output");
        assert!(
            diff < 1e-6 * scale,
            "{case} {name} ({i}): max abs difference {diff} (largest entry {scale})"
        );
    }
}

/// libtorch's CPU device without autodiff: the one place where the normed mix and the
/// add-and-norm are kernels of their own. Everywhere else they are the mix (or add) then
/// `rms_norm` by definition, so a comparison there would hold by construction.
#[cfg(feature = "tch")]
pub fn fused_device() -> Device {
    device(BackendKind::Tch, "cpu").expect("the tch backend is compiled in")
}

/// Bit patterns, so that a comparison tells `-0.0` from `0.0` and any last-digit difference.
pub fn bits(t: Tensor<2>) -> Vec<u32> {
    to_vec(t).into_iter().map(f32::to_bits).collect()
}
