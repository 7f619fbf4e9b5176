//! The identities of SPEC sections 3-5 that every variant must satisfy.

mod common;

use attnres::model::residual::{AttnResPath, Residual, Scorer, definition};
use attnres::model::{Lm, ResidualConfig, Trace};
use burn::tensor::{Tensor, TensorData};
use common::*;

/// Changing token t+1 must leave the logits at positions 0..=t unchanged.
#[test]
fn every_variant_is_causal() {
    let device = test_device();
    for config in all_models() {
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
                    config.arm_label()
                );
                assert!(
                    max_abs_diff(&after(&a), &after(&c)) > 1e-6,
                    "{}: position {pos} ignores its own token",
                    config.arm_label()
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

/// SPEC sections 3-4 written as a plain loop over one token's d-vectors: layer `l` reads the
/// embedding, the completed blocks and (after a block's first layer) the partial sum, with
/// weights `softmax_i((w_l * g_l) . v_i / rms(v_i))`; the output step reads every block.
/// A block starts at each layer of `starts`.
fn reference_attnres(e: &[f32], queries: &[Vec<f32>], starts: &[usize], toy: &Toy) -> Vec<f32> {
    let layers = toy.0.len();
    let mut blocks = vec![e.to_vec()];
    let mut partial: Option<Vec<f32>> = None;
    for (l, (query, gain)) in queries.iter().zip(&toy.0).enumerate() {
        if starts.contains(&l) {
            blocks.extend(partial.take());
        }
        let mut sources = blocks.clone();
        sources.extend(partial.clone());
        let x = softmax_mix(&sources, query);
        let y: Vec<f32> = x.iter().map(|v| (v * gain).tanh()).collect();
        partial = Some(match partial {
            Some(p) => p.iter().zip(&y).map(|(a, b)| a + b).collect(),
            None => y,
        });
    }
    blocks.extend(partial);
    softmax_mix(&blocks, &queries[layers])
}

/// Full (S = 1), Block AttnRes (S = 2, 3, L) and blocks of lengths 1, 2, 3 and 4, 1, 1,
/// with random queries and key-norm gains: the definition (`residual::definition`) equals
/// the plain loop, and the naive, two-phase and stacked paths equal the definition, to f32
/// rounding.
#[test]
fn attnres_matches_an_independent_loop() {
    use attnres::model::config::AttnResConfig;
    let device = test_device();
    let cases: Vec<(AttnResConfig, Vec<usize>)> = vec![
        (AttnResConfig::block(1), (0..6).collect()),
        (AttnResConfig::block(2), vec![0, 2, 4]),
        (AttnResConfig::block(3), vec![0, 3]),
        (AttnResConfig::block(6), vec![0]),
        (AttnResConfig::per_depth(vec![1, 2, 3]), vec![0, 1, 3]),
        (AttnResConfig::per_depth(vec![4, 1, 1]), vec![0, 4, 5]),
    ];
    for (c, starts) in cases {
        let s = ResidualConfig::AttnRes(c.clone()).label();
        assert_eq!(c.block_starts(6), starts, "{s}");
        let config = tiny(ResidualConfig::AttnRes(c));
        let model = perturb(Lm::init(&config, 21, &device).unwrap(), 22, 0.7);
        let Residual::AttnRes(attnres) = &model.residual else {
            panic!("{s} is AttnRes");
        };
        let (t, d) = (5, config.d_model);
        let e_data: Vec<f32> = (0..t * d)
            .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
            .collect();
        let e = Tensor::<3>::from_data(TensorData::new(e_data.clone(), [1, t, d]), &device);
        let toy = Toy((0..config.n_layers())
            .map(|l| 0.6 + 0.3 * l as f32)
            .collect());
        let defined = to_vec(definition::block_attnres(attnres, e.clone(), &toy));
        let paths = [
            (
                "naive",
                to_vec(attnres.forward_naive(e.clone(), &toy, None)),
            ),
            (
                "two-phase",
                to_vec(attnres.forward_two_phase(e.clone(), &toy)),
            ),
            ("stacked", to_vec(attnres.forward_stacked(e, &toy))),
        ];
        // Each step's query with the key norm's gain folded in: w . (r(v) g) = (w g) . r(v).
        let queries: Vec<Vec<f32>> = attnres
            .mixes
            .iter()
            .map(|m| match &m.scorer {
                Scorer::PseudoQuery(q) => {
                    let w = to_vec(q.query.val());
                    let g = to_vec(q.key_norm.as_ref().expect("key norm by default").gain.val());
                    w.iter().zip(&g).map(|(a, b)| a * b).collect()
                }
                _ => panic!("the method uses a pseudo-query"),
            })
            .collect();
        assert!(
            queries.iter().flatten().any(|&q| q.abs() > 0.1),
            "queries were not perturbed"
        );
        for pos in 0..t {
            let want = reference_attnres(&e_data[pos * d..(pos + 1) * d], &queries, &starts, &toy);
            let diff = max_abs_diff(&defined[pos * d..(pos + 1) * d], &want);
            assert!(diff < 1e-5, "definition, {s}, token {pos}: max diff {diff}");
        }
        for (path, got) in &paths {
            let diff = max_abs_diff(got, &defined);
            assert!(
                diff < 1e-5,
                "{path} against the definition, {s}: max diff {diff}"
            );
        }
    }
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

/// The stacked and two-phase paths (training and inference) equal the naive path on random
/// weights; the two-phase path also where the stacked one would be taken.
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
    let mut stacked = 0;
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
        assert!(r.supports_two_phase(), "{}", config.arm_label());
        let input = tokens(&random_tokens(23, 3, 12, 37), 3, &device);
        let naive = to_vec(model.forward_traced(input.clone(), &mut Trace::default()));
        // The two-phase path is taken by force where the stacked one would be chosen.
        for path in [AttnResPath::Stacked, AttnResPath::TwoPhase] {
            let Some(out) = model.forward_attnres_path(input.clone(), path) else {
                assert_eq!(path, AttnResPath::Stacked, "{}", config.arm_label());
                continue;
            };
            let diff = max_abs_diff(&naive, &to_vec(out));
            assert!(
                diff < 1e-5,
                "{} {path:?}: max abs diff {diff}",
                config.arm_label()
            );
            if path == AttnResPath::Stacked {
                stacked += 1;
            }
        }
    }
    assert!(
        stacked >= 4,
        "only {stacked} variants took the stacked path"
    );
}

/// The value residual with its weights at `(λ1, λ2) = (1, 0)` is the model without it: the
/// other weights are the same (init is seeded by parameter path), so the logits agree; at
/// its init `(0.5, 0.5)` it is another model. The first attention layer has no weights.
#[test]
fn value_residual_with_unit_own_weight_is_the_plain_model() {
    use attnres::model::ModelConfig;
    use burn::module::Param;
    let device = test_device();
    let input = tokens(&random_tokens(41, 2, 12, 37), 2, &device);
    for residual in [
        ResidualConfig::Baseline,
        ResidualConfig::full(),
        ResidualConfig::block(2),
    ] {
        let plain = tiny(residual);
        let with = ModelConfig {
            value_residual: true,
            ..plain.clone()
        };
        let label = with.arm_label();
        let reference = to_vec(Lm::init(&plain, 4, &device).unwrap().forward(input.clone()));
        let mut model = Lm::init(&with, 4, &device).unwrap();
        assert!(model.blocks[0].attn.value_mix.is_none(), "{label}");
        let at_init = to_vec(model.forward(input.clone()));
        for block in model.blocks.iter_mut().skip(1) {
            assert!(block.attn.value_mix.is_some(), "{label}");
            block.attn.value_mix = Some(Param::from_tensor(Tensor::from_data(
                TensorData::new(vec![1.0f32, 0.0], [2]),
                &device,
            )));
        }
        let unit = to_vec(model.forward(input.clone()));
        let same = max_abs_diff(&unit, &reference);
        assert!(
            same < 1e-6,
            "{label}: lambda (1, 0) is {same} from the plain model"
        );
        let apart = max_abs_diff(&at_init, &reference);
        assert!(
            apart > 1e-4,
            "{label}: the even mix changed the logits by only {apart}"
        );
    }
}

/// The inference forward gives the training forward's logits: bit for bit for the baseline
/// and the stacked path's families, where a layer's mix (or the baseline's residual add)
/// goes through the next PreNorm in one pass without autodiff and as separate operations
/// with it; within 1e-5 for the families on the naive path, whose composed operations round
/// differently under autodiff. Tiny models (narrow rows) and, for the baseline, Full and
/// Block, a width of the token-at-a-time kernels with a tail, over more tokens than one
/// task of the kernels.
#[test]
fn the_inference_forward_equals_the_training_forward() {
    use burn::module::Module;
    let train = test_device().autodiff();
    let wide = |residual| attnres::model::ModelConfig {
        d_model: 264,
        ..tiny(residual)
    };
    let wide_models = [
        ResidualConfig::Baseline,
        ResidualConfig::full(),
        ResidualConfig::block(2),
    ]
    .map(wide);
    let mut bit_for_bit = 0;
    for config in all_models().into_iter().chain(wide_models) {
        let model = perturb(Lm::init(&config, 4, &train).unwrap(), 5, 0.3);
        let fused = match &model.residual {
            Residual::Baseline(_) => true,
            Residual::AttnRes(r) => r.supports_stacked(),
            _ => false,
        };
        let (b, t) = (8, config.context);
        let input = random_tokens(6, b, t, config.vocab_size);
        let inference = model.valid();
        let inner = inference.head.val().device();
        let trained = to_vec(model.forward(tokens(&input, b, &train)));
        let inferred = to_vec(inference.forward(tokens(&input, b, &inner)));
        let diff = max_abs_diff(&trained, &inferred);
        let case = format!("{} (d {})", config.arm_label(), config.d_model);
        if fused {
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(
                bits(&trained) == bits(&inferred),
                "{case}: max abs diff {diff}"
            );
            bit_for_bit += 1;
        } else {
            assert!(diff < 1e-5, "{case}: max abs diff {diff}");
        }
    }
    assert!(
        bit_for_bit >= 10,
        "only {bit_for_bit} models on the fused paths"
    );
}
