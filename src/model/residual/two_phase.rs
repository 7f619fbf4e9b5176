//! The two-phase inference path of Block AttnRes (SPEC section 5).
//!
//! Pseudo-queries do not depend on the input, so phase 1 scores all queries of a block
//! against the completed sources in one batched matmul and keeps, per query and token, the
//! unnormalised sum `o1`, the max logit `m1` and the sum of exponentials `s1`. Phase 2 walks
//! the block's layers and merges in the single partial-sum source with an online softmax.
//! Only the static pseudo-query scorer without a window can be batched this way; other
//! ablations take the naive path.

use burn::tensor::Tensor;
use burn::tensor::activation::sigmoid;

use super::Sublayers;
use super::attnres::{AttnRes, DepthMix, Scorer};
use crate::model::norm::rms_normalize;

/// Phase-1 statistics for the `Q` queries of one block, per head.
struct PhaseOne {
    /// `[BT, H, Q, d/H]`: `sum_i e^{logit_i - m1} v_i` (softmax) or `sum_i sigmoid(logit_i) v_i`.
    o1: Tensor<4>,
    /// `[BT, H, 1, Q]`: the max logit over the completed sources.
    m1: Tensor<4>,
    /// `[BT, H, 1, Q]`: `sum_i e^{logit_i - m1}`.
    s1: Tensor<4>,
}

impl AttnRes {
    pub fn supports_two_phase(&self) -> bool {
        self.window.is_none()
            && self
                .mixes
                .iter()
                .all(|m| matches!(m.scorer, Scorer::PseudoQuery(_)))
    }

    /// Equals [`AttnRes::forward`] (up to float rounding); needs [`Self::supports_two_phase`].
    pub fn forward_two_phase(&self, e: Tensor<3>, layers: &dyn Sublayers) -> Tensor<3> {
        let [b, t, d] = e.dims();
        let n_layers = self.n_layers();
        let mut completed = vec![e];
        for start in (0..n_layers).step_by(self.block_size) {
            let block: Vec<usize> = (start..(start + self.block_size).min(n_layers)).collect();
            let phase = self.phase_one(&completed, &block);
            let mut partial: Option<Tensor<3>> = None;
            for (j, &l) in block.iter().enumerate() {
                let mix = &self.mixes[l];
                let (h, bt) = (mix.heads, b * t);
                let o1 = phase.o1.clone().narrow(2, j, 1).reshape([bt, h, d / h]);
                let m1 = phase.m1.clone().narrow(3, j, 1).reshape([bt, h, 1]);
                let s1 = phase.s1.clone().narrow(3, j, 1).reshape([bt, h, 1]);
                let x = match &partial {
                    None if mix.sigmoid => o1,
                    None => o1 / s1,
                    Some(p) => {
                        let m2 = score_one(mix, p.clone()); // [BT, H, 1]
                        let p = p.clone().reshape([bt, h, d / h]);
                        if mix.sigmoid {
                            o1 + p * sigmoid(m2)
                        } else {
                            let m = m1.clone().max_pair(m2.clone());
                            let (a1, a2) = ((m1 - m.clone()).exp(), (m2 - m).exp());
                            (o1 * a1.clone() + p * a2.clone()) / (s1 * a1 + a2)
                        }
                    }
                }
                .reshape([b, t, d]);
                let y = layers.apply(l, x);
                partial = Some(match partial {
                    Some(p) => p + y,
                    None => y,
                });
            }
            completed.extend(partial);
        }
        let keys: Vec<Tensor<3>> = completed
            .iter()
            .map(|v| {
                if self.mixes[n_layers].uses_key_norm() {
                    rms_normalize(v.clone())
                } else {
                    v.clone()
                }
            })
            .collect();
        self.mixes[n_layers].forward(&completed, &keys).0
    }

    /// Scores the queries of `block` against `completed` in one batched matmul.
    fn phase_one(&self, completed: &[Tensor<3>], block: &[usize]) -> PhaseOne {
        let k = completed.len();
        let [b, t, d] = completed[0].dims();
        let first = &self.mixes[block[0]];
        let (h, q, bt) = (first.heads, block.len(), b * t);
        let values = Tensor::stack::<4>(completed.to_vec(), 0); // [K, B, T, d]
        let keys = if has_key_norm(first) {
            rms_normalize(values.clone())
        } else {
            values.clone()
        };
        let keys = keys.reshape([k, bt, h, d / h]).permute([1, 2, 0, 3]); // [BT, H, K, d/H]
        let queries: Vec<Tensor<1>> = block
            .iter()
            .map(|&l| effective_query(&self.mixes[l]))
            .collect();
        let queries = Tensor::stack::<2>(queries, 0) // [Q, d]
            .reshape([q, h, d / h])
            .permute([1, 2, 0]) // [H, d/H, Q]
            .unsqueeze::<4>()
            .expand([bt, h, d / h, q]);
        let logits = keys.matmul(queries); // [BT, H, K, Q]
        let values = values.reshape([k, bt, h, d / h]).permute([1, 2, 0, 3]); // [BT, H, K, d/H]
        let (weights, m1, s1) = if first.sigmoid {
            let ones = Tensor::ones([bt, h, 1, q], &logits.device());
            (sigmoid(logits), ones.clone(), ones)
        } else {
            let m1 = logits.clone().max_dim(2); // [BT, H, 1, Q]
            let weights = (logits - m1.clone()).exp(); // [BT, H, K, Q]
            let s1 = weights.clone().sum_dim(2); // [BT, H, 1, Q]
            (weights, m1, s1)
        };
        let o1 = weights.swap_dims(2, 3).matmul(values); // [BT, H, Q, d/H]
        PhaseOne { o1, m1, s1 }
    }
}

fn has_key_norm(mix: &DepthMix) -> bool {
    matches!(&mix.scorer, Scorer::PseudoQuery(s) if s.key_norm.is_some())
}

/// `w ⊙ g`: the key norm's gain folded into the query, so that all queries of a block can
/// share one normalised key tensor.
fn effective_query(mix: &DepthMix) -> Tensor<1> {
    match &mix.scorer {
        Scorer::PseudoQuery(s) => match &s.key_norm {
            Some(norm) => s.query.val() * norm.gain.val(),
            None => s.query.val(),
        },
        // supports_two_phase() admits only pseudo-queries.
        _ => unreachable!("two-phase path called on a scorer it does not support"),
    }
}

/// The logit of one source `p` `[B, T, d]` for `mix`'s query: `[BT, H, 1]`.
fn score_one(mix: &DepthMix, p: Tensor<3>) -> Tensor<3> {
    let [b, t, d] = p.dims();
    let h = mix.heads;
    let key = if has_key_norm(mix) {
        rms_normalize(p)
    } else {
        p
    };
    let query = effective_query(mix).reshape([1, h, d / h]);
    (key.reshape([b * t, h, d / h]) * query).sum_dim(2) // [BT, H, 1]
}
