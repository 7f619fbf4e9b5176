//! The products of a sublayer's inputs with its weights, and the fused AdamW step, equal
//! the operations they stand for, on each backend compiled in (as `kernels.rs` checks the
//! mixing kernels).

mod common;
#[path = "common/kernels.rs"]
mod kernel_checks;

use attnres::model::kernels::linear::linear;
use common::*;
use kernel_checks::*;

/// The product of a sublayer's input with a weight (`kernels::linear`) equals burn's `matmul`
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
