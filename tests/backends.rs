//! tch (libtorch CPU) and flex compute the same logits from the same weights.
#![cfg(all(feature = "tch", feature = "flex"))]

mod common;

use attnres::backend::{BackendKind, device};
use attnres::model::Lm;
use attnres::model::residual::Trace;
use common::*;

#[test]
fn tch_and_flex_agree() {
    let tch = device(BackendKind::Tch, "cpu").unwrap();
    let flex = device(BackendKind::Flex, "cpu").unwrap();
    for config in all_models() {
        let input = random_tokens(31, 2, 12, config.vocab_size);
        let logits = |d| {
            let model = perturb(Lm::init(&config, 30, d).unwrap(), 32, 0.3);
            (
                to_vec(model.forward(tokens(&input, 2, d))),
                to_vec(model.forward_traced(tokens(&input, 2, d), &mut Trace::default())),
            )
        };
        let (a, a2) = logits(&tch);
        let (b, b2) = logits(&flex);
        let label = config.arm_label();
        assert!(
            max_abs_diff(&a, &b) < 1e-4,
            "{label}: {}",
            max_abs_diff(&a, &b)
        );
        assert!(
            max_abs_diff(&a2, &b2) < 1e-4,
            "{label} (naive path): {}",
            max_abs_diff(&a2, &b2)
        );
    }
}
