//! The fused operations of `model::kernels` equal their compositions, in value and in every
//! input's gradient, on each backend compiled in (libtorch's kernels on tch, the composed
//! primitives on flex), and the two backends agree.

mod common;

use attnres::backend::{BackendKind, device};
use attnres::model::kernels::attention::{causal_attention, causal_attention_composed};
use burn::tensor::{Device, Tensor, TensorData};
use common::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn backends() -> Vec<Device> {
    [BackendKind::Tch, BackendKind::Flex]
        .into_iter()
        .filter_map(|kind| device(kind, "cpu").ok())
        .collect()
}

/// Uniform values in [-2, 2) from `seed`, the same on every backend.
fn uniform<const D: usize>(seed: u64, shape: [usize; D], device: &Device) -> Tensor<D> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = shape.iter().product();
    let values: Vec<f32> = (0..n).map(|_| rng.random_range(-2.0..2.0)).collect();
    Tensor::from_data(TensorData::new(values, shape), device)
}

/// `f(q, k, v)` and the gradients of `sum(f * w)` for a fixed random `w`.
fn value_and_grads(
    f: fn(Tensor<4>, Tensor<4>, Tensor<4>) -> Tensor<4>,
    inputs: &[Tensor<4>; 3],
    w: &Tensor<4>,
) -> Vec<Vec<f32>> {
    let tracked: Vec<Tensor<4>> = inputs.iter().map(|x| x.clone().require_grad()).collect();
    let out = f(tracked[0].clone(), tracked[1].clone(), tracked[2].clone());
    let grads = (out.clone() * w.clone()).sum().backward();
    let mut all = vec![to_vec(out)];
    for x in &tracked {
        all.push(to_vec(x.grad(&grads).expect("every input gets a gradient")));
    }
    all
}

#[test]
fn causal_attention_equals_its_composition_with_gradients() {
    let mut per_backend = Vec::new();
    for dev in backends() {
        let train = dev.clone().autodiff();
        // [B, H, T, hd], T not a multiple of the kernel's tile sizes.
        let shape = [2, 3, 37, 16];
        let inputs = [0, 1, 2].map(|seed| uniform(seed, shape, &train));
        let w = uniform(3, shape, &train);
        let fused = value_and_grads(causal_attention, &inputs, &w);
        let composed = value_and_grads(causal_attention_composed, &inputs, &w);
        for (i, name) in ["context", "dq", "dk", "dv"].iter().enumerate() {
            let diff = max_abs_diff(&fused[i], &composed[i]);
            assert!(diff < 1e-4, "{dev:?} {name}: max abs difference {diff}");
        }
        // Causal: the first query sees only the first key, so its context is the first value.
        let [q, k, v] = [0, 1, 2].map(|seed| uniform(seed, shape, &dev));
        let first = to_vec(causal_attention(q, k, v.clone()).narrow(2, 0, 1));
        assert!(
            max_abs_diff(&first, &to_vec(v.narrow(2, 0, 1))) < 1e-5,
            "{dev:?}: first query"
        );
        per_backend.push(fused);
    }
    for other in per_backend.iter().skip(1) {
        for (a, b) in per_backend[0].iter().zip(other) {
            assert!(
                max_abs_diff(a, b) < 1e-4,
                "backends differ: {}",
                max_abs_diff(a, b)
            );
        }
    }
}
