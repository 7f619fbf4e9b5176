//! The fused operations of `model::kernels` equal their compositions, in value and in every
//! input's gradient, on each backend compiled in (libtorch's kernels on tch, the composed
//! primitives on flex), and the two backends agree: attention, the mixing step and the
//! stack of sources.
//! `kernels_elementwise.rs` and `kernels_products.rs` hold the others.

mod common;
#[path = "common/kernels.rs"]
mod kernel_checks;

use attnres::model::kernels::attention::{causal_attention, causal_attention_composed};
use attnres::model::kernels::mix::{depth_mix, depth_mix_composed};
use attnres::model::kernels::stack::{GradMode, SourceStack};
use burn::tensor::{Device, Tensor};
use common::*;
use kernel_checks::*;

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
    assert_backends_agree(&per_backend, 1e-4);
}

type Mix = fn(Tensor<3>, Option<Tensor<2>>, Tensor<1>, bool) -> Tensor<2>;

/// A mixing step over 3 stacked sources (and a partial sum if `with_partial`) of 41 tokens:
/// its output and the gradients of `sum(x * w)` for the stacked sources, the partial sum
/// and the query.
fn mix_and_grads(f: Mix, device: &Device, with_partial: bool, key_norm: bool) -> Vec<Vec<f32>> {
    let (k, n, d) = (3, 41, 24);
    // Sources of unequal scale, so that the key norm matters.
    let stacked = (uniform(30, [k, n, d], device) * uniform(31, [k, n, 1], device)).require_grad();
    let partial = (uniform(32, [n, d], device) * 1.5).require_grad();
    let q = uniform(33, [d], device).require_grad();
    let x = f(
        stacked.clone(),
        with_partial.then(|| partial.clone()),
        q.clone(),
        key_norm,
    );
    let grads = (x.clone() * uniform(34, [n, d], device)).sum().backward();
    let mut out = vec![to_vec(x), to_vec(stacked.grad(&grads).unwrap())];
    if with_partial {
        out.push(to_vec(partial.grad(&grads).unwrap()));
    } else {
        assert!(
            partial.grad(&grads).is_none(),
            "an unused partial sum got a gradient"
        );
    }
    out.push(to_vec(q.grad(&grads).unwrap()));
    out
}

#[test]
fn depth_mix_equals_its_composition_with_gradients() {
    let mut per_backend = Vec::new();
    for dev in backends() {
        let train = dev.clone().autodiff();
        let mut all = Vec::new();
        for (with_partial, key_norm) in [(true, true), (false, true), (true, false)] {
            let fused = mix_and_grads(depth_mix, &train, with_partial, key_norm);
            let composed = mix_and_grads(depth_mix_composed, &train, with_partial, key_norm);
            let case = format!("{dev:?} partial {with_partial} key norm {key_norm}");
            assert_matches_composition(&fused, &composed, &[], &case);
            all.extend(fused);
        }
        per_backend.push(all);
    }
    assert_backends_agree(&per_backend, 1e-5);
}

const SOURCES: usize = 5;

/// Five sources `[N, d]` mixed after each push, by a stack grown in place (`in_place`, its
/// gradients in `mode`) or by concatenating copies: the mixes' outputs and every source's
/// gradient of their weighted sum.
fn stack_mixes_and_grads(
    device: &Device,
    train: bool,
    in_place: Option<GradMode>,
    (capacity, d): (usize, usize),
) -> Vec<Vec<f32>> {
    let n = 37;
    let v: Vec<Tensor<2>> = (0..SOURCES as u64)
        .map(|i| uniform(40 + i, [n, d], device) * (1.0 + i as f32 * 0.5))
        .map(|vi| if train { vi.require_grad() } else { vi })
        .collect();
    let q = |i: u64| uniform(50 + i, [d], device);
    let mut mixes = Vec::new();
    if let Some(mode) = in_place {
        let mut stack = SourceStack::new(v[0].clone(), capacity, mode);
        for (i, vi) in v.iter().enumerate().skip(1) {
            mixes.push(stack.mix(Some(vi.clone() * 0.5), q(i as u64), true));
            stack.push(vi.clone());
        }
        mixes.push(stack.mix(None, q(0), true));
    } else {
        for i in 1..v.len() {
            let stacked = Tensor::stack(v[..i].to_vec(), 0); // [i, N, d]
            mixes.push(depth_mix(
                stacked,
                Some(v[i].clone() * 0.5),
                q(i as u64),
                true,
            ));
        }
        mixes.push(depth_mix(Tensor::stack(v.clone(), 0), None, q(0), true));
    }
    let loss = mixes
        .iter()
        .enumerate()
        .map(|(i, x)| (x.clone() * uniform(60 + i as u64, [n, d], device)).sum())
        .reduce(|a, b| a + b)
        .unwrap();
    let mut out: Vec<Vec<f32>> = mixes.into_iter().map(to_vec).collect();
    if train {
        let grads = loss.backward();
        out.extend(
            v.iter()
                .map(|vi| to_vec(vi.grad(&grads).expect("every source has a gradient"))),
        );
    }
    out
}

/// Growing the stack in place (one buffer, room for all sources or for fewer, so that it
/// moves once) changes nothing: each mix sees exactly the sources it saw when stacks were
/// copies, and every source gets exactly the same gradient where the steps add into the
/// stack's gradient buffer. Where each source's gradient is formed at its push
/// (`GradMode::AtPush`, which rounds `g . x` otherwise) the mixes are the same bits and the
/// gradients the same within float rounding.
#[test]
fn source_stack_grown_in_place_equals_copied_stacks() {
    for dev in backends() {
        for (device, train) in [(dev.clone(), false), (dev.clone().autodiff(), true)] {
            // d 16: whole sets of lanes; d 21: a tail of fewer.
            for d in [16, 21] {
                let copied = stack_mixes_and_grads(&device, train, None, (0, d));
                for capacity in [5, 3] {
                    for mode in [GradMode::Buffer, GradMode::AtPush] {
                        let grown =
                            stack_mixes_and_grads(&device, train, Some(mode), (capacity, d));
                        assert_eq!(grown.len(), copied.len());
                        let case = format!("{device:?} d {d} capacity {capacity} {mode:?}");
                        for (i, (a, b)) in grown.iter().zip(&copied).enumerate() {
                            let mix = i < SOURCES;
                            if mix || mode == GradMode::Buffer {
                                assert_eq!(a, b, "{case}: output {i} differs");
                                continue;
                            }
                            let scale = b.iter().fold(0.0f32, |m, x| m.max(x.abs()));
                            let diff = max_abs_diff(a, b);
                            // About 1e-7 of the largest entry measured; a lost term is order one.
                            assert!(diff <= 1e-5 * scale, "{case}: gradient {i} off by {diff}");
                        }
                    }
                }
            }
        }
    }
}
