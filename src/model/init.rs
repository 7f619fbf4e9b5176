//! Seeded parameter initialisation, done in Rust so that every backend gets the same weights.
//!
//! Each parameter draws from its own stream, keyed by the model seed and the parameter's
//! path, so adding a parameter elsewhere never shifts the others.

use burn::module::Param;
use burn::tensor::{Device, Tensor, TensorData};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Builds parameters on one device from one seed.
#[derive(Clone)]
pub struct Init<'a> {
    seed: u64,
    device: &'a Device,
}

impl<'a> Init<'a> {
    pub fn new(seed: u64, device: &'a Device) -> Self {
        Self { seed, device }
    }

    pub fn device(&self) -> &'a Device {
        self.device
    }

    /// N(0, std) entries, drawn from the stream named `path`.
    pub fn normal<const D: usize>(
        &self,
        path: &str,
        shape: [usize; D],
        std: f64,
    ) -> Param<Tensor<D>> {
        let n: usize = shape.iter().product();
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ fnv1a(path));
        let values: Vec<f32> = (0..n)
            .map(|_| (standard_normal(&mut rng) * std) as f32)
            .collect();
        self.from_values(values, shape)
    }

    /// Every entry equal to `value` (norm gains 1, pseudo-queries 0).
    pub fn constant<const D: usize>(&self, shape: [usize; D], value: f32) -> Param<Tensor<D>> {
        let n: usize = shape.iter().product();
        self.from_values(vec![value; n], shape)
    }

    pub fn from_values<const D: usize>(
        &self,
        values: Vec<f32>,
        shape: [usize; D],
    ) -> Param<Tensor<D>> {
        Param::from_tensor(Tensor::from_data(
            TensorData::new(values, shape),
            self.device,
        ))
    }
}

/// Box-Muller: portable and stable across crate versions, unlike distribution crates.
fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    // u1 in (0, 1] so that ln(u1) is finite.
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// 64-bit FNV-1a of a parameter path: a fixed, dependency-free hash.
pub fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}
