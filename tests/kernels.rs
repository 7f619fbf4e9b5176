//! The fused operations of `model::kernels` equal their compositions, in value and in every
//! input's gradient, on each backend compiled in (libtorch's kernels on tch, the composed
//! primitives on flex), and the two backends agree.

mod common;

use attnres::backend::{BackendKind, device};
use attnres::model::kernels::attention::{causal_attention, causal_attention_composed};
use attnres::model::kernels::merge::{block_merge, block_merge_composed};
use attnres::model::kernels::mix::{depth_mix, depth_mix_composed, depth_mix_normed};
use attnres::model::kernels::norm::{add_rms_norm, rms_norm};
use attnres::model::kernels::onto::{Dest, linear, matmul_onto, project};
use attnres::model::kernels::rotary::{rotary, rotary_composed};
use attnres::model::kernels::sinkhorn::{sinkhorn, sinkhorn_composed};
use attnres::model::kernels::stack::{GradMode, SourceStack};
use attnres::model::kernels::streams::{
    stream_read, stream_read_composed, stream_update, stream_update_composed,
};
use attnres::model::kernels::swiglu::{swiglu, swiglu_composed};
use attnres::model::norm::rms_normalize;
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

/// Same inputs on every backend compiled in: the same outputs, within `tol` times the
/// largest entry (or `tol` where every entry is below 1).
fn assert_backends_agree(per_backend: &[Vec<Vec<f32>>], tol: f32) {
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
fn assert_matches_composition(
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

type Merge = fn(Tensor<2>, Tensor<4>, Tensor<1>, Tensor<4>, bool) -> Tensor<2>;

/// The merge of one layer as the two-phase path calls it: `o1` and `lse` are views of a
/// block's phase-1 tensors (step 1 of 3), not tensors of their own. Returns the value and
/// the gradients of `p`, the whole phase-1 result, `q` and the whole log-sum-exp.
fn merge_and_grads(f: Merge, dev: &Device, heads: usize, key_norm: bool) -> Vec<Vec<f32>> {
    let (n, d, q_steps) = (67, 24, 3);
    let dh = d / heads;
    let p = uniform(10, [n, d], dev).require_grad();
    let o1_all = uniform(11, [heads, n, q_steps, dh], dev).require_grad();
    let q = (uniform(12, [d], dev) * 0.5).require_grad();
    let lse_all = uniform(13, [heads, n, 1, q_steps], dev).require_grad();
    let w = uniform(14, [n, d], dev);
    let o1 = o1_all.clone().narrow(2, 1, 1); // [H, N, 1, dh]
    let lse = lse_all.clone().narrow(3, 1, 1); // [H, N, 1, 1]
    let x = f(p.clone(), o1, q.clone(), lse, key_norm);
    let grads = (x.clone() * w).sum().backward();
    let mut out = vec![to_vec(x)];
    out.push(to_vec(p.grad(&grads).unwrap()));
    out.push(to_vec(o1_all.grad(&grads).unwrap()));
    out.push(to_vec(q.grad(&grads).unwrap()));
    out.push(to_vec(lse_all.grad(&grads).unwrap()));
    out
}

#[test]
fn block_merge_equals_its_composition_with_gradients() {
    let mut per_backend = Vec::new();
    for dev in backends() {
        let train = dev.clone().autodiff();
        let mut all = Vec::new();
        // One head takes the row kernel on tch; two heads the composed backward.
        for (heads, key_norm) in [(1, true), (1, false), (2, true)] {
            let fused = merge_and_grads(block_merge, &train, heads, key_norm);
            let composed = merge_and_grads(block_merge_composed, &train, heads, key_norm);
            let case = format!("{dev:?} heads {heads} key norm {key_norm}");
            assert_matches_composition(&fused, &composed, &["x", "dp", "do1", "dq", "dlse"], &case);
            // Only step 1 of the phase-1 tensors was read, so only it has a gradient.
            let do1 = &fused[2];
            let (n, d) = (67, 24);
            let dh = d / heads;
            for (i, g) in do1.iter().enumerate() {
                if (i / dh) % 3 != 1 {
                    assert_eq!(*g, 0.0, "{dev:?}: gradient on an unread phase-1 step");
                }
            }
            assert_eq!(do1.len(), heads * n * 3 * dh);
            all.extend(fused);
        }
        per_backend.push(all);
    }
    assert_backends_agree(&per_backend, 1e-5);
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

/// libtorch's CPU device without autodiff: the one place where the normed mix and the
/// add-and-norm are kernels of their own. Everywhere else they are the mix (or add) then
/// `rms_norm` by definition, so a comparison there would hold by construction.
#[cfg(feature = "tch")]
fn fused_device() -> Device {
    device(BackendKind::Tch, "cpu").expect("the tch backend is compiled in")
}

/// A mixing step through the PreNorm of the layer that reads it, in one operation, writes
/// the floats of the mix followed by the norm, bit for bit: narrow rows (16 tokens at a
/// time) and wide, a width of no whole set of lanes, and tokens over several of the
/// kernels' tasks.
#[cfg(feature = "tch")]
#[test]
fn the_normed_mix_equals_the_mix_then_the_norm_bit_for_bit() {
    let device = fused_device();
    for (n, d) in [(150, 24), (70, 256), (131, 300)] {
        let stacked = uniform(70, [3, n, d], &device) * uniform(71, [3, n, 1], &device);
        let partial = uniform(72, [n, d], &device) * 1.5;
        let (q, gain) = (uniform(73, [d], &device), uniform(74, [d], &device));
        for (with_partial, key_norm) in [(true, true), (false, true), (true, false)] {
            let p = || with_partial.then(|| partial.clone());
            let fused = depth_mix_normed(
                stacked.clone(),
                p(),
                q.clone(),
                None,
                key_norm,
                gain.clone(),
            );
            let x = depth_mix(stacked.clone(), p(), q.clone(), key_norm);
            let apart = rms_norm(x, gain.clone());
            let case = format!("{device:?} {n} x {d}, partial {with_partial}, key norm {key_norm}");
            assert_eq!(bits(fused), bits(apart), "{case}");
            // The query as a pseudo-query and a key gain whose product is `q`'s
            // floats: the kernel's own product must round as libtorch's does.
            let (w, key_gain) = (q.clone() * 0.75, uniform(75, [d], &device) + 3.0);
            let q_folded = w.clone() * key_gain.clone();
            let folded_here = depth_mix_normed(
                stacked.clone(),
                p(),
                w,
                Some(key_gain),
                key_norm,
                gain.clone(),
            );
            let given =
                depth_mix_normed(stacked.clone(), p(), q_folded, None, key_norm, gain.clone());
            assert_eq!(bits(folded_here), bits(given), "{case}, key gain");
        }
    }
}

/// A residual add and the next PreNorm in one operation write the floats of the add and of
/// the norm after it, bit for bit.
#[cfg(feature = "tch")]
#[test]
fn the_add_and_norm_equal_the_add_then_the_norm_bit_for_bit() {
    let device = fused_device();
    for (n, d) in [(150, 24), (131, 300)] {
        let x = uniform(80, [n, d], &device) * uniform(81, [n, 1], &device);
        let (y, gain) = (uniform(82, [n, d], &device), uniform(83, [d], &device));
        let (sum, normed) = add_rms_norm(x.clone(), y.clone(), gain.clone());
        let apart = x + y;
        let case = format!("{device:?} {n} x {d}");
        assert_eq!(bits(normed), bits(rms_norm(apart.clone(), gain)), "{case}");
        assert_eq!(bits(sum), bits(apart), "{case}");
    }
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

/// `c + x w` in one operation equals the product then the add, value and the gradients of
/// all three inputs, on every backend, and the backends agree. Without autodiff it writes over
/// `c` only where nothing else holds `c`: a `c` still held elsewhere keeps its values, and the
/// sum is the same either way.
#[test]
fn matmul_onto_equals_the_product_then_the_add_with_gradients() {
    let (n, k, m) = (37, 53, 24);
    let mut per_backend = Vec::new();
    for dev in backends() {
        let train = dev.clone().autodiff();
        let run = |fused: bool| {
            let c = uniform(90, [n, m], &train).require_grad();
            let x = uniform(91, [n, k], &train).require_grad();
            let w = (uniform(92, [k, m], &train) * 0.2).require_grad();
            let y = if fused {
                matmul_onto(c.clone(), x.clone(), w.clone())
            } else {
                c.clone() + x.clone().matmul(w.clone())
            };
            let grads = (y.clone() * uniform(93, [n, m], &train)).sum().backward();
            [
                to_vec(y),
                to_vec(c.grad(&grads).expect("c has a gradient")),
                to_vec(x.grad(&grads).expect("x has a gradient")),
                to_vec(w.grad(&grads).expect("w has a gradient")),
            ]
        };
        let (fused, composed) = (run(true), run(false));
        let names = ["y", "dc", "dx", "dw"];
        assert_matches_composition(&fused, &composed, &names, &format!("{dev:?}"));
        per_backend.push(fused.to_vec());

        let (x, w) = (uniform(91, [n, k], &dev), uniform(92, [k, m], &dev) * 0.2);
        let held = uniform(90, [n, m], &dev);
        let before = bits(held.clone());
        let beside = matmul_onto(held.clone(), x.clone(), w.clone());
        assert_eq!(bits(held), before, "{dev:?}: a held c was written over");
        let alone = matmul_onto(uniform(90, [n, m], &dev), x, w);
        assert_eq!(
            bits(alone),
            bits(beside),
            "{dev:?}: in place and beside differ"
        );
    }
    assert_backends_agree(&per_backend, 1e-5);
}

/// The product of a sublayer's input with a weight (`onto::linear`) equals burn's `matmul`
/// of `h` `[B, T, k]` by the weight as `[1, k, m]`: in training (the 2-D form and its own
/// backward) within float rounding, value and both gradients, on every backend, and the
/// backends agree; without autodiff it is that batched product bit for bit.
#[test]
fn linear_equals_the_batched_matmul_with_gradients() {
    let (b, t, k, m) = (3, 19, 40, 24);
    let mut per_backend = Vec::new();
    for dev in backends() {
        let train = dev.clone().autodiff();
        let run = |ours: bool| {
            let h = uniform(80, [b, t, k], &train).require_grad();
            let w = (uniform(81, [k, m], &train) * 0.2).require_grad();
            let y = if ours {
                linear(h.clone(), w.clone())
            } else {
                h.clone().matmul(w.clone().unsqueeze())
            };
            let grads = (y.clone() * uniform(82, [b, t, m], &train))
                .sum()
                .backward();
            [
                to_vec(y),
                to_vec(h.grad(&grads).expect("h has a gradient")),
                to_vec(w.grad(&grads).expect("w has a gradient")),
            ]
        };
        let (ours, burns) = (run(true), run(false));
        assert_matches_composition(&ours, &burns, &["y", "dh", "dw"], &format!("{dev:?}"));
        per_backend.push(ours.to_vec());

        let (h, w) = (
            uniform(80, [b, t, k], &dev),
            uniform(81, [k, m], &dev) * 0.2,
        );
        let batched = h.clone().matmul(w.clone().unsqueeze()).reshape([b * t, m]);
        let inference = linear(h, w).reshape([b * t, m]);
        assert_eq!(bits(inference), bits(batched), "{dev:?}: inference's form");
    }
    assert_backends_agree(&per_backend, 1e-5);
}

/// A sublayer's output projection written into the source stack's next slot (offered on
/// libtorch on the CPU) keeps the bits of burn's `matmul`, and of the add onto a partial sum,
/// in value and in the gradients of its inputs, and the stack it is pushed onto (which then
/// copies nothing) mixes as the stack given the same source in memory of its own.
#[test]
fn a_projection_into_the_stacks_slot_keeps_its_bits_with_gradients() {
    let (b, t, k, d) = (3, 11, 40, 16);
    // flex offers no slot, so writing "into" it is the plain product there: nothing to
    // compare, only that no slot is offered.
    if let Ok(flex) = device(BackendKind::Flex, "cpu") {
        let sources = SourceStack::new(
            uniform(73, [b * t, d], &flex.autodiff()),
            2,
            GradMode::Buffer,
        );
        assert!(sources.next_slot().is_none(), "flex offered a slot");
    }
    let kind = BackendKind::Tch;
    let Ok(dev) = device(kind, "cpu") else {
        return;
    };
    let train = dev.autodiff();
    let run = |into: bool, onto: bool, mode: GradMode| {
        let h = uniform(70, [b, t, k], &train).require_grad();
        let w = (uniform(71, [k, d], &train) * 0.2).require_grad();
        let c = uniform(72, [b, t, d], &train).require_grad();
        let mut sources = SourceStack::new(uniform(73, [b * t, d], &train), 2, mode);
        let slot = sources.next_slot();
        assert!(slot.is_some(), "{kind:?}: no slot offered");
        let to = Dest {
            onto: onto.then(|| c.clone()),
            into: slot.filter(|_| into),
        };
        let y = project(h.clone(), w.clone(), to);
        sources.push(y.clone().reshape([b * t, d])); // [B, T, d] -> [BT, d]
        let mixed = sources.mix(None, uniform(74, [d], &train), true);
        let loss = (y.clone() * uniform(75, [b, t, d], &train)).sum()
            + (mixed.clone() * uniform(76, [b * t, d], &train)).sum();
        let grads = loss.backward();
        let mut out = vec![to_vec(y), to_vec(mixed)];
        out.push(to_vec(h.grad(&grads).expect("h has a gradient")));
        out.push(to_vec(w.grad(&grads).expect("w has a gradient")));
        if onto {
            out.push(to_vec(c.grad(&grads).expect("c has a gradient")));
        }
        out.into_iter()
            .map(|v| v.into_iter().map(f32::to_bits).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    };
    for onto in [false, true] {
        for mode in [GradMode::Buffer, GradMode::AtPush] {
            let case = format!("{kind:?} onto {onto} {mode:?}");
            assert_eq!(run(true, onto, mode), run(false, onto, mode), "{case}");
        }
    }
}

/// Bit patterns, so that a comparison tells `-0.0` from `0.0` and any last-digit difference.
fn bits(t: Tensor<2>) -> Vec<u32> {
    to_vec(t).into_iter().map(f32::to_bits).collect()
}

/// Entries where `a` and `b` differ, and whether each differs by at most `EPSILON (|b| +
/// 10 lr)`: a last-place difference in an update of at most `10 lr`, rounded to the
/// parameter's grid.
fn last_place_differences(a: &[f32], b: &[f32], lr: f64) -> (usize, bool) {
    let differ: Vec<(f32, f32)> = a
        .iter()
        .zip(b)
        .filter(|(x, y)| x.to_bits() != y.to_bits())
        .map(|(x, y)| (*x, *y))
        .collect();
    let slack = |y: f32| f32::EPSILON * (y.abs() + 10.0 * lr as f32);
    (
        differ.len(),
        differ.iter().all(|&(x, y)| (x - y).abs() <= slack(y)),
    )
}

/// The fused AdamW step computes burn's `AdamW` operation for operation in f32: the moments
/// equal burn's bit for bit on every backend, and so does the parameter on flex. On tch it may
/// differ in the last place in a few entries: libtorch's `sqrt` (MKL's) is not correctly
/// rounded for every input, the fused step's (the CPU's) is.
#[test]
fn fused_adamw_equals_burns_adamw() {
    use attnres::train::adamw::FusedAdamW;
    use burn::optim::{AdamWConfig, Optimizer};
    for dev in backends() {
        let on_tch = format!("{dev:?}").contains("LibTorch");
        for weight_decay in [0.0f32, 0.1] {
            let fused = FusedAdamW {
                beta_1: 0.9,
                beta_2: 0.95,
                epsilon: 1e-8,
                weight_decay,
            };
            let burns = AdamWConfig::new()
                .with_beta_1(0.9)
                .with_beta_2(0.95)
                .with_epsilon(1e-8)
                .with_weight_decay(weight_decay)
                .build();
            // More entries than one task of the kernel, and not a multiple of it; some zero
            // and negative-zero gradients.
            let shape = [129, 300];
            let start = uniform(10, shape, &dev);
            let (mut p_fused, mut p_burn) = (start.clone(), start.clone());
            let (mut s_fused, mut s_burn) = (None, None);
            let mut last_place = 0;
            for (step, lr) in [3e-3, 1e-3, 2.5e-4, 7e-3].into_iter().enumerate() {
                let g = uniform(20 + step as u64, shape, &dev).mul_scalar(0.1);
                let g = g.clone().mask_fill(g.abs().lower_elem(0.001), -0.0);
                // Both from the same parameter, so that differences do not carry over.
                (p_fused, s_fused) = fused.step(lr, p_burn.clone(), g.clone(), s_fused);
                (p_burn, s_burn) = burns.step(lr, p_burn, g, s_burn);
                let (a, b) = (s_fused.clone().unwrap(), s_burn.clone().unwrap());
                let case = format!("{dev:?}, weight decay {weight_decay}, step {}", step + 1);
                assert_eq!(a.momentum.time, b.momentum.time, "{case}: time");
                for (name, x, y) in [
                    ("first moment", a.momentum.moment_1, b.momentum.moment_1),
                    ("second moment", a.momentum.moment_2, b.momentum.moment_2),
                ] {
                    assert!(bits(x) == bits(y), "{case}: {name}");
                }
                let (differ, close) =
                    last_place_differences(&to_vec(p_fused.clone()), &to_vec(p_burn.clone()), lr);
                assert!(
                    close && (on_tch || differ == 0),
                    "{case}: parameter, {differ} entries"
                );
                last_place += differ;
            }
            assert!(
                last_place < 4 * 129 * 300 / 1000,
                "{dev:?}: {last_place} entries off"
            );
            // The update moved the parameter: the comparison is not of two untouched copies.
            let moved = max_abs_diff(&to_vec(p_fused), &to_vec(start));
            assert!(moved > 1e-3, "{dev:?}: moved {moved}");
        }
    }
}
