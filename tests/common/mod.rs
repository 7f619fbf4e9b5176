//! Shared helpers for the integration tests: devices, tiny configs, every variant.
#![allow(dead_code)] // each test binary uses a different subset

use attnres::backend::{BackendKind, device};
use attnres::model::config::{AttnResConfig, HyperConfig, HyperKind, Mixing, Normalize, QueryKind};
use attnres::model::{Lm, ModelConfig, ResidualConfig};
use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::{Device, Int, Tensor, TensorData};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The preferred backend's CPU device (tch when compiled in).
pub fn test_device() -> Device {
    device(BackendKind::preferred(), "cpu").expect("preferred backend is compiled in")
}

pub fn tiny(residual: ResidualConfig) -> ModelConfig {
    ModelConfig {
        vocab_size: 37,
        d_model: 16,
        n_blocks: 3,
        n_heads: 2,
        ff_mult: 2.0,
        context: 12,
        residual,
        value_residual: false,
    }
}

fn ablation(f: impl FnOnce(&mut AttnResConfig)) -> ResidualConfig {
    let mut c = AttnResConfig::block(1);
    f(&mut c);
    ResidualConfig::AttnRes(c)
}

/// The tiny model of every family and ablation, and the value residual on three families
/// (it composes with any): what the causality, count, backend and training tests run over.
pub fn all_models() -> Vec<ModelConfig> {
    let mut models: Vec<ModelConfig> = all_variants().into_iter().map(tiny).collect();
    for residual in [
        ResidualConfig::Baseline,
        ResidualConfig::full(),
        ResidualConfig::Hyper(HyperConfig::mhc(2)),
    ] {
        models.push(ModelConfig {
            value_residual: true,
            ..tiny(residual)
        });
    }
    models
}

/// Every family and every ablation switch of SPEC section 6.
pub fn all_variants() -> Vec<ResidualConfig> {
    vec![
        ResidualConfig::Baseline,
        ResidualConfig::full(),
        ResidualConfig::block(2),
        ResidualConfig::block(4),
        ResidualConfig::Denseformer,
        ablation(|c| c.key_norm = false),
        ablation(|c| c.normalize = Normalize::Sigmoid),
        ablation(|c| c.query = QueryKind::InputDependent),
        ablation(|c| c.mixing = Mixing::Static),
        ablation(|c| c.window = Some(2)),
        ablation(|c| c.heads = 2),
        ablation(|c| {
            c.block_size = 2;
            c.heads = 4;
            c.key_norm = false;
        }),
        ResidualConfig::AttnRes(AttnResConfig::per_depth(vec![1, 2, 3])),
        ResidualConfig::Hyper(HyperConfig::hc(4)),
        ResidualConfig::Hyper(HyperConfig {
            kind: HyperKind::Hc { dynamic: false },
            streams: 2,
        }),
        ResidualConfig::Hyper(HyperConfig::mhc(4)),
        ResidualConfig::Hyper(HyperConfig::mhc_lite(3)),
        ResidualConfig::Hyper(HyperConfig::mhc_attnres(3)),
    ]
}

pub fn tokens(values: &[i64], batch: usize, device: &Device) -> Tensor<2, Int> {
    let t = values.len() / batch;
    Tensor::from_data(TensorData::new(values.to_vec(), [batch, t]), device)
}

pub fn random_tokens(seed: u64, batch: usize, t: usize, vocab: usize) -> Vec<i64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..batch * t)
        .map(|_| rng.random_range(0..vocab as i64))
        .collect()
}

pub fn to_vec<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.try_to_vec_as::<f32>().expect("read back")
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Adds uniform noise of half-width `std` to every float parameter, so that zero-initialised
/// queries become informative and identities are tested away from uniform depth weights.
pub fn perturb(model: Lm, seed: u64, std: f32) -> Lm {
    perturb_by_path(model, seed, |_| std)
}

/// Like [`perturb`], with the noise width chosen per parameter path (`residual.mixes.3...`).
pub fn perturb_by_path(model: Lm, seed: u64, std_for: impl Fn(&str) -> f32) -> Lm {
    struct Noise<F> {
        rng: ChaCha8Rng,
        std_for: F,
        path: Vec<String>,
    }
    impl<F: Fn(&str) -> f32> ModuleMapper for Noise<F> {
        fn enter_module(&mut self, name: &str, _container_type: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _name: &str, _container_type: &str) {
            self.path.pop();
        }
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            let std = (self.std_for)(&self.path.join("."));
            let rng = &mut self.rng;
            param.map(|t| {
                let shape = t.shape();
                let n = shape.num_elements();
                let noise: Vec<f32> = (0..n)
                    .map(|_| (rng.random::<f32>() - 0.5) * 2.0 * std)
                    .collect();
                let noise = Tensor::<D>::from_data(TensorData::new(noise, shape), &t.device());
                // A leaf again, not the output of an addition, so that autodiff models can
                // run more than one backward.
                let tracked = t.is_require_grad();
                let t = (t + noise).detach();
                if tracked { t.require_grad() } else { t }
            })
        }
    }
    model.map(&mut Noise {
        rng: ChaCha8Rng::seed_from_u64(seed),
        std_for,
        path: Vec::new(),
    })
}

/// One token's RMS over its `d` values, with the model's eps.
pub fn rms(v: &[f32]) -> f32 {
    (v.iter().map(|x| x * x).sum::<f32>() / v.len() as f32 + 1e-6).sqrt()
}

/// One AttnRes mixing step written out for one token: the sources `v_i` weighted by
/// `softmax_i(q . v_i / rms(v_i))`, `q` the query with the key norm's gain folded in.
pub fn softmax_mix(sources: &[Vec<f32>], q: &[f32]) -> Vec<f32> {
    let logits: Vec<f32> = sources
        .iter()
        .map(|v| v.iter().zip(q).map(|(a, b)| a * b).sum::<f32>() / rms(v))
        .collect();
    let top = logits.iter().cloned().fold(f32::MIN, f32::max);
    let exp: Vec<f32> = logits.iter().map(|z| (z - top).exp()).collect();
    let total: f32 = exp.iter().sum();
    (0..q.len())
        .map(|j| {
            sources
                .iter()
                .zip(&exp)
                .map(|(v, a)| v[j] * a / total)
                .sum()
        })
        .collect()
}

/// Stand-in sublayers `f_l(x) = tanh(s_l x)`, simple enough to write twice.
pub struct Toy(pub Vec<f32>);

impl attnres::model::residual::Sublayers for Toy {
    fn apply(&self, layer: usize, x: Tensor<3>) -> Tensor<3> {
        (x * self.0[layer]).tanh()
    }
}
