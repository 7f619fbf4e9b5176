//! Block AttnRes as docs/method.md defines it, in plain tensor code: the statement that the
//! naive, two-phase and stacked paths (`attnres.rs`, `two_phase.rs`, `stacked.rs`) are held
//! to by tests/model_identities.rs. It covers the method, Full AttnRes included (every layer
//! its own block): one head, softmax weights, a pseudo-query per mixing step, keys
//! RMS-normalised with a learned gain or not normalised, no window. Training and inference
//! run `stacked.rs` for exactly these models; nothing outside the tests runs this file.

use burn::tensor::Tensor;
use burn::tensor::activation::softmax;

use super::Sublayers;
use super::attnres::{AttnRes, Scorer};
use crate::model::norm::rms_normalize;

/// The model's residual stream: layer `l` reads `h_l = sum_i alpha_{l,i} v_i` over its
/// sources `v`, which are the embedding, the sum of each completed block's outputs and,
/// after a block's first layer, the block's partial sum; its output joins the partial sum.
/// The output step reads the embedding and every block. `e` `[B, T, d]` -> `[B, T, d]`.
pub fn block_attnres(r: &AttnRes, e: Tensor<3>, layers: &dyn Sublayers) -> Tensor<3> {
    let mut blocks = vec![e]; // b_0 = e, b_1, b_2, ...: [B, T, d] each
    let mut partial: Option<Tensor<3>> = None; // the current block's outputs so far
    for l in 0..r.n_layers() {
        if r.block_starts.contains(&l) {
            blocks.extend(partial.take());
        }
        let mut sources = blocks.clone();
        sources.extend(partial.clone());
        let y = layers.apply(l, depth_attention(r, l, &sources));
        partial = Some(match partial {
            Some(p) => p + y,
            None => y,
        });
    }
    blocks.extend(partial);
    depth_attention(r, r.n_layers(), &blocks)
}

/// Mixing step `l` over `K` sources `[B, T, d]`: `alpha = softmax_i(w_l . k_i)` with keys
/// `k_i = g_l v_i / rms(v_i)` (the key norm; `k_i = v_i` without it), and `sum_i alpha_i v_i`.
fn depth_attention(r: &AttnRes, l: usize, sources: &[Tensor<3>]) -> Tensor<3> {
    let mix = &r.mixes[l];
    let Scorer::PseudoQuery(s) = &mix.scorer else {
        panic!("the method scores sources with a pseudo-query");
    };
    assert!(
        mix.heads == 1 && !mix.sigmoid && r.window.is_none(),
        "not the method"
    );
    let [b, t, d] = sources[0].dims();
    let v = Tensor::stack::<4>(sources.to_vec(), 2); // [B, T, K, d]
    let keys = match &s.key_norm {
        Some(norm) => rms_normalize(v.clone()) * norm.gain.val().reshape([1, 1, 1, d]),
        None => v.clone(),
    };
    let logits = (keys * s.query.val().reshape([1, 1, 1, d])).sum_dim(3); // [B, T, K, 1]
    let alpha = softmax(logits, 2); // [B, T, K, 1]
    (alpha * v).sum_dim(2).reshape([b, t, d])
}
