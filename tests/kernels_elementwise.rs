//! Rotary embedding, SwiGLU's gate, Sinkhorn-Knopp, the multi-stream read and update and
//! RMSNorm equal their compositions, in value and gradient, on each backend compiled in
//! (as `kernels.rs` checks the mixing kernels).

mod common;
#[path = "common/kernels.rs"]
mod kernel_checks;

use attnres::model::kernels::norm::rms_norm;
use attnres::model::kernels::rotary::{rotary, rotary_composed};
use attnres::model::kernels::sinkhorn::{sinkhorn, sinkhorn_composed};
use attnres::model::kernels::streams::{
    stream_read, stream_read_composed, stream_update, stream_update_composed,
};
use attnres::model::kernels::swiglu::{swiglu, swiglu_composed};
use attnres::model::norm::rms_normalize;
use burn::tensor::{Device, Tensor};
use common::*;
use kernel_checks::*;

/// Rotary embedding of `[B = 2, T = 5, H = 3, hd]` queries by tables of 5 positions: the
/// output and the gradient of `sum(y * w)`, with `rotate` the fused or the composed form.
fn rotary_and_grad(
    rotate: fn(Tensor<4>, Tensor<2>, Tensor<2>) -> Tensor<4>,
    device: &Device,
    hd: usize,
) -> Vec<Vec<f32>> {
    let shape = [2, 5, 3, hd];
    let x = uniform(70, shape, device).require_grad();
    let (cos, sin) = (uniform(71, [5, hd], device), uniform(72, [5, hd], device));
    let y = rotate(x.clone(), cos, sin);
    let grads = (y.clone() * uniform(73, shape, device)).sum().backward();
    vec![to_vec(y), to_vec(x.grad(&grads).expect("x has a gradient"))]
}

/// The fused rotary embedding computes the composition's products and sums in its order, so
/// it equals it bit for bit, forward and backward (what keeps the committed reference runs
/// reproducible), on every backend; the backends agree.
#[test]
fn rotary_equals_its_composition_bit_for_bit() {
    let mut per_backend = Vec::new();
    for dev in backends() {
        let train = dev.clone().autodiff();
        let mut all = Vec::new();
        for hd in [2, 8, 32] {
            let fused = rotary_and_grad(rotary, &train, hd);
            let composed = rotary_and_grad(rotary_composed, &train, hd);
            assert_eq!(
                fused, composed,
                "{dev:?} hd {hd}: fused and composed differ"
            );
            all.extend(fused);
        }
        per_backend.push(all);
    }
    assert_backends_agree(&per_backend, 1e-6);
}

/// `silu(a) b` of `[2, 7, 40]` gates and values (`gate` the fused or the composed form): the
/// output and the gradients of `sum(y * w)` for both inputs.
fn swiglu_and_grads(gate: fn(Tensor<3>, Tensor<3>) -> Tensor<3>, device: &Device) -> Vec<Vec<f32>> {
    let shape = [2, 7, 40];
    let a = (uniform(80, shape, device) * 3.0).require_grad();
    let b = uniform(81, shape, device).require_grad();
    let y = gate(a.clone(), b.clone());
    let grads = (y.clone() * uniform(82, shape, device)).sum().backward();
    vec![
        to_vec(y),
        to_vec(a.grad(&grads).expect("a has a gradient")),
        to_vec(b.grad(&grads).expect("b has a gradient")),
    ]
}

/// The fused SwiGLU gating computes the composition's products and sums in its order (with
/// the same sigmoid), so it equals it bit for bit, forward and backward, on every backend;
/// the backends agree.
#[test]
fn swiglu_equals_its_composition_bit_for_bit() {
    let mut per_backend = Vec::new();
    for dev in backends() {
        let train = dev.clone().autodiff();
        let fused = swiglu_and_grads(swiglu, &train);
        let composed = swiglu_and_grads(swiglu_composed, &train);
        assert_eq!(fused, composed, "{dev:?}: fused and composed differ");
        per_backend.push(fused);
    }
    assert_backends_agree(&per_backend, 1e-5);
}

/// Sinkhorn-Knopp (`project` the fused or the composed form) of `[2, 5, m, m]` logits over
/// `iters` rounds: the result and the logits' gradient of `sum(p * w)`.
fn sinkhorn_and_grad(
    project: fn(Tensor<4>, usize) -> Tensor<4>,
    m: usize,
    iters: usize,
    device: &Device,
) -> Vec<Vec<f32>> {
    let shape = [2, 5, m, m];
    let logits = (uniform(90, shape, device) * 2.0).require_grad();
    let p = project(logits.clone(), iters);
    let grads = (p.clone() * uniform(91, shape, device)).sum().backward();
    vec![
        to_vec(p),
        to_vec(logits.grad(&grads).expect("the logits have a gradient")),
    ]
}

/// The fused Sinkhorn-Knopp sums, divides and differentiates as burn composes and
/// differentiates the rounds, so it equals the composition bit for bit, forward and
/// backward, on every backend, for mHC's 4 streams and an odd 3, one round and twenty; the
/// backends agree.
#[test]
fn sinkhorn_equals_its_composition_bit_for_bit() {
    for (m, iters) in [(4, 20), (4, 1), (3, 7)] {
        let mut per_backend = Vec::new();
        for dev in backends() {
            let train = dev.clone().autodiff();
            let fused = sinkhorn_and_grad(sinkhorn, m, iters, &train);
            let composed = sinkhorn_and_grad(sinkhorn_composed, m, iters, &train);
            assert_eq!(
                fused, composed,
                "{dev:?}, m {m}, {iters} rounds: fused and composed differ"
            );
            // Not the identity's gradient: the rounds' backward did something.
            assert!(
                fused[1].iter().any(|g| g.abs() > 1e-4),
                "{dev:?}: {:?}",
                fused[1]
            );
            per_backend.push(fused);
        }
        assert_backends_agree(&per_backend, 1e-5);
    }
}

/// The multi-stream read and update (`fused` or composed) over `n` tokens of `m` streams
/// of `d`: the read, the update and the gradients of `sum(x * a) + sum(h' * b)` with
/// respect to the streams, the read weights, the mixing matrices, the write weights and
/// the layer's output.
fn streams_and_grads(fused: bool, [n, m, d]: [usize; 3], device: &Device) -> Vec<Vec<f32>> {
    let h = uniform(100, [n, m, d], device).require_grad();
    let r = uniform(101, [n, m], device).require_grad();
    let mix = uniform(102, [n, m, m], device).require_grad();
    let w = uniform(103, [n, m], device).require_grad();
    let y = uniform(104, [n, d], device).require_grad();
    let (x, next) = if fused {
        let x = stream_read(h.clone(), r.clone());
        (
            x,
            stream_update(h.clone(), mix.clone(), w.clone(), y.clone()),
        )
    } else {
        let x = stream_read_composed(h.clone(), r.clone());
        (
            x,
            stream_update_composed(h.clone(), mix.clone(), w.clone(), y.clone()),
        )
    };
    let loss = (x.clone() * uniform(105, [n, d], device)).sum()
        + (next.clone() * uniform(106, [n, m, d], device)).sum();
    let grads = loss.backward();
    let grad = |t: &dyn Fn(&burn::tensor::Gradients) -> Option<Vec<f32>>| {
        t(&grads).expect("every input gets a gradient")
    };
    vec![
        to_vec(x),
        to_vec(next),
        grad(&|g| h.grad(g).map(to_vec)),
        grad(&|g| r.grad(g).map(to_vec)),
        grad(&|g| mix.grad(g).map(to_vec)),
        grad(&|g| w.grad(g).map(to_vec)),
        grad(&|g| y.grad(g).map(to_vec)),
    ]
}

/// The fused read and update equal their compositions within 1e-6 of each output's largest
/// entry (their products sum in another order), with every input's gradient, on every
/// backend, over tokens that fill more than one task and widths that are and are not a
/// multiple of sixteen; the backends agree.
#[test]
fn streams_equal_their_composition_with_gradients() {
    for dims in [[70, 4, 40], [9, 3, 64], [1, 1, 5]] {
        let mut per_backend = Vec::new();
        for dev in backends() {
            let train = dev.clone().autodiff();
            let fused = streams_and_grads(true, dims, &train);
            let composed = streams_and_grads(false, dims, &train);
            let names = ["x", "h'", "dh", "dr", "dmix", "dw", "dy"];
            assert_matches_composition(&fused, &composed, &names, &format!("{dev:?} {dims:?}"));
            per_backend.push(fused);
        }
        assert_backends_agree(&per_backend, 1e-5);
    }
}

#[test]
fn rms_norm_equals_its_composition_with_gradients() {
    let mut per_backend = Vec::new();
    for dev in backends() {
        let train = dev.clone().autodiff();
        let run = |fused: bool| {
            let x = (uniform(20, [53, 40], &train) * 3.0).require_grad();
            let g = uniform(21, [40], &train).require_grad();
            let y = if fused {
                rms_norm(x.clone(), g.clone())
            } else {
                rms_normalize(x.clone()) * g.clone().unsqueeze()
            };
            let grads = (y.clone() * uniform(22, [53, 40], &train)).sum().backward();
            [
                to_vec(y),
                to_vec(x.grad(&grads).unwrap()),
                to_vec(g.grad(&grads).unwrap()),
            ]
        };
        let (fused, composed) = (run(true), run(false));
        assert_matches_composition(&fused, &composed, &["y", "dx", "dg"], &format!("{dev:?}"));
        per_backend.push(fused.to_vec());
    }
    assert_backends_agree(&per_backend, 1e-5);
}
