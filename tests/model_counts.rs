//! Parameter and FLOP counts (SPEC section 9) against a hand computation and the real module.

mod common;

use attnres::model::flops::{flops_per_token, param_counts};
use attnres::model::sources::depth_source_counts;
use attnres::model::{Lm, ResidualConfig};
use burn::module::Module;
use common::*;

// The tiny config: d = 16, n_blocks = 3 (L = 6), ff hidden = 2 * 16 = 32, vocab 37, T = 12.
//   block matrices: attention 4 * 16^2 = 1024, SwiGLU 3 * 16 * 32 = 1536 -> 2560, x3 = 7680
//   norms: (2 * 3 + 1) * 16 = 112;  embedding = head = 37 * 16 = 592
//   AttnRes adds (L + 1) = 7 steps x (query 16 + key-norm gain 16) = 224
//   DenseFormer adds 2 + 3 + 4 = 9 weights
#[test]
fn parameter_counts_match_hand_computation() {
    let baseline = param_counts(&tiny(ResidualConfig::Baseline));
    assert_eq!(baseline.non_embedding, 7680 + 112);
    assert_eq!(baseline.total, 7792 + 2 * 592);
    assert_eq!(
        param_counts(&tiny(ResidualConfig::full())).non_embedding,
        7792 + 224
    );
    assert_eq!(
        param_counts(&tiny(ResidualConfig::block(4))).non_embedding,
        7792 + 224
    );
    assert_eq!(
        param_counts(&tiny(ResidualConfig::Denseformer)).non_embedding,
        7792 + 9
    );
}

// Forward FLOPs per token:
//   matrices 2 * 7680 = 15360; attention 4 * T * d per attention layer = 4 * 12 * 16 * 3 = 2304
//   head 2 * 16 * 37 = 1184
//   Full: sources 1..=7 -> 28 pairs x 4d = 1792
//   Block S=4: layers see 1,2,2,2 | 2,3, output 3 -> 15 pairs x 64 = 960
//   DenseFormer: 2 + 3 + 4 = 9 pairs x 2d = 288
#[test]
fn flops_match_hand_computation() {
    let base = flops_per_token(&tiny(ResidualConfig::Baseline));
    assert_eq!(
        (base.matrices, base.attention, base.depth, base.head),
        (15360, 2304, 0, 1184)
    );
    assert_eq!(base.forward(), 18848);
    assert_eq!(base.training(), 3 * 18848);
    assert_eq!(flops_per_token(&tiny(ResidualConfig::full())).depth, 1792);
    let block = tiny(ResidualConfig::block(4));
    assert_eq!(depth_source_counts(&block), vec![1, 2, 2, 2, 2, 3, 3]);
    assert_eq!(flops_per_token(&block).depth, 960);
    assert_eq!(
        flops_per_token(&tiny(ResidualConfig::Denseformer)).depth,
        288
    );
}

/// The count from the config equals the parameters the module really holds, for every variant.
#[test]
fn config_count_equals_module_count() {
    let device = test_device();
    for config in all_models() {
        let model = Lm::init(&config, 0, &device).unwrap();
        assert_eq!(
            model.num_params() as u64,
            param_counts(&config).total,
            "{}",
            config.arm_label()
        );
    }
}
