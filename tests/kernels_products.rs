//! The products written onto a residual sum or into a stack's slot, and the fused AdamW
//! step, equal the operations they fuse, on each backend compiled in (as `kernels.rs`
//! checks the mixing kernels).

mod common;
#[path = "common/kernels.rs"]
mod kernel_checks;

use attnres::backend::{BackendKind, device};
use attnres::model::kernels::onto::{Dest, linear, matmul_onto, project};
use attnres::model::kernels::stack::{GradMode, SourceStack};
use common::*;
use kernel_checks::*;

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
