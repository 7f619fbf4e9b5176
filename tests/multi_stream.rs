//! The multi-stream families' identities: hyper-connections, mHC and mHC-lite start as the
//! baseline and mix by doubly stochastic matrices; mhc_attnres (mHC with Full AttnRes inside
//! each stream in place of its mixing) equals a plain loop and starts as Full AttnRes.

mod common;

use attnres::model::config::HyperConfig;
use attnres::model::residual::{MhcAttnRes, Residual};
use attnres::model::{Lm, ResidualConfig, Trace};
use burn::tensor::{Tensor, TensorData};
use common::*;

const STREAMS: usize = 3;

fn config() -> attnres::model::ModelConfig {
    tiny(ResidualConfig::Hyper(HyperConfig::mhc_attnres(STREAMS)))
}

fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + (-z).exp())
}

/// docs/method.md's equations for one token, as a plain loop: stream `j` mixes its own
/// sources with its own query; the gates come from the RMS-normalised flattened state.
fn reference(e: &[f32], r: &MhcAttnRes, toy: &Toy) -> Vec<f32> {
    let (m, d) = (STREAMS, e.len());
    // Each step's query per stream, with the key norm's gain folded in.
    let queries: Vec<Vec<Vec<f32>>> = r
        .mixes
        .iter()
        .map(|mix| {
            let (w, g) = (to_vec(mix.query.val()), to_vec(mix.key_gain.val()));
            (0..m)
                .map(|j| (0..d).map(|k| w[j * d + k] * g[j * d + k]).collect())
                .collect()
        })
        .collect();
    let mut sources: Vec<Vec<Vec<f32>>> = vec![vec![e.to_vec()]; m];
    let states = |sources: &[Vec<Vec<f32>>], step: usize| -> Vec<Vec<f32>> {
        (0..m)
            .map(|j| softmax_mix(&sources[j], &queries[step][j]))
            .collect()
    };
    for (l, gates) in r.gates.iter().enumerate() {
        let h = states(&sources, l);
        let flat: Vec<f32> = h.concat();
        let (gain, proj) = (to_vec(gates.norm.gain.val()), to_vec(gates.proj.val()));
        let (bias, scale) = (to_vec(gates.bias.val()), to_vec(gates.scale.val()));
        let z: Vec<f32> = flat
            .iter()
            .zip(&gain)
            .map(|(v, g)| v / rms(&flat) * g)
            .collect();
        let logit = |c: usize| (0..m * d).map(|i| z[i] * proj[i * 2 * m + c]).sum::<f32>();
        let read: Vec<f32> = (0..m)
            .map(|j| sigmoid(scale[0] * logit(j) + bias[j]))
            .collect();
        let write: Vec<f32> = (0..m)
            .map(|j| 2.0 * sigmoid(scale[1] * logit(m + j) + bias[m + j]))
            .collect();
        let x: Vec<f32> = (0..d)
            .map(|k| (0..m).map(|j| read[j] * h[j][k]).sum())
            .collect();
        let y: Vec<f32> = x.iter().map(|v| (v * toy.0[l]).tanh()).collect();
        for j in 0..m {
            sources[j].push(y.iter().map(|v| write[j] * v).collect());
        }
    }
    let out = states(&sources, r.gates.len());
    (0..d).map(|k| out.iter().map(|h| h[k]).sum()).collect()
}

fn toy() -> Toy {
    Toy((0..6).map(|l| 0.6 + 0.3 * l as f32).collect())
}

/// Every query, key-norm gain, gate projection, bias and scale perturbed: the model's
/// forward equals the plain loop token by token, to f32 rounding.
#[test]
fn mhc_attnres_matches_an_independent_loop() {
    let device = test_device();
    let model = perturb(Lm::init(&config(), 31, &device).unwrap(), 32, 0.5);
    let Residual::MhcAttnRes(r) = &model.residual else {
        panic!("mhc_attnres builds its own residual");
    };
    assert!(
        to_vec(r.gates[2].proj.val()).iter().any(|p| p.abs() > 0.1),
        "the gate projection was not perturbed"
    );
    let (t, d) = (5, config().d_model);
    let e_data: Vec<f32> = (0..t * d)
        .map(|i| ((i * 29 % 89) as f32 / 45.0) - 1.0)
        .collect();
    let e = Tensor::<3>::from_data(TensorData::new(e_data.clone(), [1, t, d]), &device);
    let got = to_vec(model.residual.forward(e, &toy(), None));
    for pos in 0..t {
        let want = reference(&e_data[pos * d..(pos + 1) * d], r, &toy());
        let diff = max_abs_diff(&got[pos * d..(pos + 1) * d], &want);
        assert!(diff < 1e-5, "token {pos}: max diff {diff}");
    }
}

/// At init every query is zero and the read weights sum to 1, so each stream is Full
/// AttnRes's plain mean and the output is `m` times Full's; its depth weights are uniform
/// over `1, 2, ..., L + 1` sources. Perturbed, it is no longer Full's.
#[test]
fn mhc_attnres_starts_as_full_attnres() {
    let device = test_device();
    let e_data: Vec<f32> = (0..2 * 5 * 16)
        .map(|i| ((i * 31 % 97) as f32 / 40.0) - 1.2)
        .collect();
    let e = || Tensor::<3>::from_data(TensorData::new(e_data.clone(), [2, 5, 16]), &device);
    let full = Lm::init(&tiny(ResidualConfig::full()), 3, &device).unwrap();
    let full = to_vec(full.residual.forward(e(), &toy(), None));
    let scaled: Vec<f32> = full.iter().map(|x| x * STREAMS as f32).collect();
    let model = Lm::init(&config(), 3, &device).unwrap();
    let got = to_vec(model.residual.forward(e(), &toy(), None));
    let diff = max_abs_diff(&got, &scaled);
    // The read weights 0.7 + 2 x 0.15 sum to 1 only to f32 rounding.
    assert!(diff < 5e-5, "{diff} from {STREAMS} x Full AttnRes");

    let mut trace = Trace::default();
    model.forward_traced(tokens(&random_tokens(6, 2, 12, 37), 2, &device), &mut trace);
    let probes = trace.read().unwrap();
    let n_layers = config().n_layers();
    assert_eq!(probes.depth_attn.len(), n_layers + 1);
    for (l, weights) in probes.depth_attn.iter().enumerate() {
        assert_eq!(
            weights.len(),
            l + 1,
            "step {l} sees the embedding and {l} writes"
        );
        let uniform = 1.0 / weights.len() as f32;
        assert!(
            weights.iter().all(|w| (w - uniform).abs() < 1e-6),
            "step {l}: {weights:?}"
        );
    }
    assert_eq!(probes.stream_spread.len(), n_layers);

    let moved = perturb(Lm::init(&config(), 3, &device).unwrap(), 4, 0.5);
    let moved = to_vec(moved.residual.forward(e(), &toy(), None));
    assert!(
        max_abs_diff(&moved, &scaled) > 1e-3,
        "perturbing changed nothing"
    );
}

/// Hyper-connections with one stream at their init are the baseline, bit for bit; with `m`
/// streams HC, mHC and mHC-lite at init keep every stream equal to the baseline's, so their
/// output (the sum of the streams) is `m` times the baseline's; perturbed, they differ.
#[test]
fn multi_stream_families_start_as_the_baseline() {
    use attnres::model::config::HyperConfig;
    let device = test_device();
    let toy = Toy((0..6).map(|l| 0.5 + 0.2 * l as f32).collect());
    let e_data: Vec<f32> = (0..2 * 5 * 16)
        .map(|i| ((i * 31 % 97) as f32 / 40.0) - 1.2)
        .collect();
    let e = || Tensor::<3>::from_data(TensorData::new(e_data.clone(), [2, 5, 16]), &device);
    let residual_of = |r: ResidualConfig| Lm::init(&tiny(r), 3, &device).unwrap().residual;
    let baseline = to_vec(residual_of(ResidualConfig::Baseline).forward(e(), &toy, None));
    let one =
        to_vec(residual_of(ResidualConfig::Hyper(HyperConfig::hc(1))).forward(e(), &toy, None));
    assert_eq!(one, baseline, "hc with one stream at init");
    for (h, m) in [
        (HyperConfig::hc(4), 4.0),
        (HyperConfig::mhc(4), 4.0),
        (HyperConfig::mhc_lite(3), 3.0),
    ] {
        let label = ResidualConfig::Hyper(h).label();
        let got = to_vec(residual_of(ResidualConfig::Hyper(h)).forward(e(), &toy, None));
        let scaled: Vec<f32> = baseline.iter().map(|x| x * m).collect();
        let diff = max_abs_diff(&got, &scaled);
        // H_res's rows sum to 1 only to f32 rounding (a softmax or Sinkhorn with one large
        // weight per row).
        assert!(diff < 5e-5, "{label}: {diff} from {m} x the baseline");
        let model = perturb(
            Lm::init(&tiny(ResidualConfig::Hyper(h)), 3, &device).unwrap(),
            4,
            0.5,
        );
        let moved = to_vec(model.residual.forward(e(), &toy, None));
        assert!(
            max_abs_diff(&moved, &scaled) > 1e-3,
            "{label}: perturbing changed nothing"
        );
    }
}

/// mHC's Sinkhorn-Knopp and mHC-lite's convex combination of permutations both give doubly
/// stochastic mixing matrices: non-negative, every row and column summing to 1.
#[test]
fn stream_mixing_is_doubly_stochastic() {
    use attnres::model::init::Init;
    use attnres::model::residual::{Permutations, sinkhorn};
    let device = test_device();
    let m = 4;
    let logits: Vec<f32> = (0..3 * m * m)
        .map(|i| ((i * 17 % 23) as f32 - 11.0) / 2.0)
        .collect();
    let p = to_vec(sinkhorn(
        Tensor::<4>::from_data(TensorData::new(logits, [1, 3, m, m]), &device),
        30,
    ));
    let perms = Permutations::new(m, &Init::new(0, &device));
    assert_eq!(perms.count(), 24);
    let z: Vec<f32> = (0..3 * 24)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 1.5)
        .collect();
    let lite = to_vec(perms.combine(Tensor::<3>::from_data(
        TensorData::new(z, [1, 3, 24]),
        &device,
    )));
    for (name, mats) in [("sinkhorn", p), ("permutations", lite)] {
        for mat in mats.chunks(m * m) {
            assert!(mat.iter().all(|&x| x >= 0.0), "{name}: {mat:?}");
            for i in 0..m {
                let row: f32 = mat[i * m..(i + 1) * m].iter().sum();
                let col: f32 = (0..m).map(|j| mat[j * m + i]).sum();
                assert!(
                    (row - 1.0).abs() < 1e-4 && (col - 1.0).abs() < 1e-4,
                    "{name}: {mat:?}"
                );
            }
        }
    }
}
