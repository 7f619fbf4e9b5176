//! The identities of SPEC sections 3-5 that every variant must satisfy.

mod common;

use attnres::model::config::AttnResConfig;
use attnres::model::{Lm, ResidualConfig, Trace};
use common::*;

/// Changing token t+1 must leave the logits at positions 0..=t unchanged.
#[test]
fn every_variant_is_causal() {
    let device = test_device();
    for residual in all_variants() {
        let config = tiny(residual);
        let model = perturb(Lm::init(&config, 1, &device).unwrap(), 2, 0.3);
        let (b, t) = (2, config.context);
        let base = random_tokens(3, b, t, config.vocab_size);
        for pos in [1, t / 2, t - 1] {
            let mut changed = base.clone();
            for row in 0..b {
                changed[row * t + pos] = (changed[row * t + pos] + 1) % config.vocab_size as i64;
            }
            let a = to_vec(model.forward(tokens(&base, b, &device)));
            let c = to_vec(model.forward(tokens(&changed, b, &device)));
            let v = config.vocab_size;
            for row in 0..b {
                let before = |x: &Vec<f32>| x[row * t * v..(row * t + pos) * v].to_vec();
                let after = |x: &Vec<f32>| x[(row * t + pos) * v..(row * t + pos + 1) * v].to_vec();
                assert!(
                    max_abs_diff(&before(&a), &before(&c)) < 1e-6,
                    "{}: positions before {pos} changed",
                    config.residual.label()
                );
                assert!(
                    max_abs_diff(&after(&a), &after(&c)) > 1e-6,
                    "{}: position {pos} ignores its own token",
                    config.residual.label()
                );
            }
        }
    }
}

/// At step 0 every query is zero, so each mixing step takes the plain mean of its sources.
#[test]
fn zero_queries_give_uniform_depth_weights() {
    let device = test_device();
    for residual in all_variants() {
        let ResidualConfig::AttnRes(ref c) = residual else {
            continue;
        };
        if c.normalize != attnres::model::config::Normalize::Softmax {
            continue; // sigmoid(0) = 1/2 per source, not a mean: checked below
        }
        let config = tiny(residual.clone());
        let model = Lm::init(&config, 5, &device).unwrap();
        let mut trace = Trace::default();
        model.forward_traced(tokens(&random_tokens(6, 2, 12, 37), 2, &device), &mut trace);
        let probes = trace.read().unwrap();
        assert_eq!(probes.depth_attn.len(), config.n_layers() + 1);
        for (l, weights) in probes.depth_attn.iter().enumerate() {
            let uniform = 1.0 / weights.len() as f32;
            for w in weights {
                assert!(
                    (w - uniform).abs() < 1e-6,
                    "{} step {l}: {weights:?}",
                    residual.label()
                );
            }
        }
    }
    let sigmoid = all_variants()
        .into_iter()
        .find(|r| r.label().contains("sigmoid"))
        .unwrap();
    let model = Lm::init(&tiny(sigmoid), 5, &device).unwrap();
    let mut trace = Trace::default();
    model.forward_traced(tokens(&random_tokens(6, 2, 12, 37), 2, &device), &mut trace);
    for weights in trace.read().unwrap().depth_attn {
        assert!(
            weights.iter().all(|w| (w - 0.5).abs() < 1e-6),
            "{weights:?}"
        );
    }
}

/// Full AttnRes is Block AttnRes with S = 1: same weights, same logits, bit for bit.
#[test]
fn full_equals_block_of_size_one() {
    let device = test_device();
    let full = tiny(ResidualConfig::full());
    let mut block1 = AttnResConfig::block(2);
    block1.block_size = 1;
    let block1 = tiny(ResidualConfig::AttnRes(block1));
    let a = perturb(Lm::init(&full, 9, &device).unwrap(), 10, 0.5);
    let b = perturb(Lm::init(&block1, 9, &device).unwrap(), 10, 0.5);
    let input = tokens(&random_tokens(11, 2, 12, 37), 2, &device);
    assert_eq!(to_vec(a.forward(input.clone())), to_vec(b.forward(input)));
}

/// With S >= L the first layer sees [e], every later layer [e, p], the output [e, b_1].
#[test]
fn block_at_least_depth_has_two_sources() {
    let device = test_device();
    for s in [6, 7, 100] {
        let config = tiny(ResidualConfig::block(s));
        let model = Lm::init(&config, 1, &device).unwrap();
        let mut trace = Trace::default();
        model.forward_traced(tokens(&random_tokens(2, 1, 12, 37), 1, &device), &mut trace);
        let counts: Vec<usize> = trace
            .read()
            .unwrap()
            .depth_attn
            .iter()
            .map(Vec::len)
            .collect();
        assert_eq!(counts, vec![1, 2, 2, 2, 2, 2, 2], "S = {s}");
    }
    // And Full sees l + 1 sources at layer l, then all L + 1 at the output.
    let model = Lm::init(&tiny(ResidualConfig::full()), 1, &device).unwrap();
    let mut trace = Trace::default();
    model.forward_traced(tokens(&random_tokens(2, 1, 12, 37), 1, &device), &mut trace);
    let counts: Vec<usize> = trace
        .read()
        .unwrap()
        .depth_attn
        .iter()
        .map(Vec::len)
        .collect();
    assert_eq!(counts, vec![1, 2, 3, 4, 5, 6, 7]);
}

/// The two-phase inference path equals the naive path on random weights.
#[test]
fn two_phase_matches_naive() {
    let device = test_device();
    let n_layers = tiny(ResidualConfig::Baseline).n_layers();
    let mut residuals: Vec<ResidualConfig> = [1, 2, 4, n_layers]
        .into_iter()
        .map(ResidualConfig::block)
        .collect();
    // The batched path also covers grouped heads, no key norm and sigmoid weights.
    for r in all_variants() {
        if let ResidualConfig::AttnRes(c) = &r
            && c.window.is_none()
            && c.mixing == attnres::model::config::Mixing::Dynamic
            && c.query == attnres::model::config::QueryKind::Static
        {
            residuals.push(r);
        }
    }
    for residual in residuals {
        let config = tiny(residual);
        // Sharp, far-from-uniform depth weights on an otherwise ordinarily scaled model.
        let depth_std = |path: &str| {
            if path.starts_with("residual") {
                2.0
            } else {
                0.02
            }
        };
        let model = perturb_by_path(Lm::init(&config, 21, &device).unwrap(), 22, depth_std);
        let attnres::model::residual::Residual::AttnRes(r) = &model.residual else {
            unreachable!()
        };
        assert!(r.supports_two_phase(), "{}", config.residual.label());
        let input = tokens(&random_tokens(23, 3, 12, 37), 3, &device);
        let naive = to_vec(model.forward(input.clone()));
        let two_phase = to_vec(model.forward_inference(input));
        let diff = max_abs_diff(&naive, &two_phase);
        assert!(
            diff < 1e-5,
            "{}: max abs diff {diff}",
            config.residual.label()
        );
    }
}
