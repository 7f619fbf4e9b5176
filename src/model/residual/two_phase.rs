//! The two-phase path of Block AttnRes (SPEC section 5), which training and inference take
//! for multi-head and sigmoid-weighted pseudo-queries when no probe trace is asked for
//! (single-head softmax takes `stacked.rs`; tests force this path for those too).
//!
//! Pseudo-queries do not depend on the input, so every logit a source will ever get is known
//! the moment the source exists: one matmul scores it against the queries of every later
//! mixing step, and it is never read for scoring again. Phase 1 of each block then forms,
//! for all of the block's queries at once, the softmax over the completed sources and its
//! weighted sum (one batched matmul over the block's stacked sources); phase 2 walks the
//! block's layers and merges in the single partial-sum source with the online-softmax
//! update ([`block_merge`] for the softmax form). Only the static
//! pseudo-query scorer without a window can be batched this way; other ablations, and traced
//! forwards (which report every step's weights), take the naive path of `attnres.rs`, which
//! the tests hold this path to.

use burn::tensor::Tensor;
use burn::tensor::activation::sigmoid;

use super::Sublayers;
use super::attnres::{AttnRes, DepthMix, Scorer};
use crate::model::norm::RMS_EPS;

/// A completed source as the batched path keeps it.
struct Source {
    /// `[H, BT, 1, d/H]`: the value, head-major so that stacking is one `cat`.
    value: Tensor<4>,
    /// `[H, BT, M]`: its logits for mixing steps `first..=L`.
    logits: Tensor<3>,
    first: usize,
}

/// Phase-1 results for the `Q` queries of one block, per head.
struct PhaseOne {
    /// `[H, BT, Q, d/H]`: the softmax-weighted (or sigmoid-weighted) sum of the completed
    /// sources, already normalised.
    o1: Tensor<4>,
    /// `[H, BT, 1, Q]`: log-sum-exp of the completed sources' logits (softmax only).
    lse: Option<Tensor<4>>,
}

impl AttnRes {
    pub fn supports_two_phase(&self) -> bool {
        self.window.is_none()
            && self
                .mixes
                .iter()
                .all(|m| matches!(m.scorer, Scorer::PseudoQuery(_)))
    }

    /// Equals [`AttnRes::forward_naive`] up to float rounding; needs
    /// [`Self::supports_two_phase`]. Differentiable.
    pub fn forward_two_phase(&self, e: Tensor<3>, layers: &dyn Sublayers) -> Tensor<3> {
        let [b, t, d] = e.dims();
        let n_layers = self.n_layers();
        let mixing = Mixing::new(self, b * t, d);
        let mut completed = vec![mixing.source(e, 0)];
        for (k, &start) in self.block_starts.iter().enumerate() {
            let end = self.block_starts.get(k + 1).copied().unwrap_or(n_layers);
            let phase = mixing.phase_one(&completed, start, end - start);
            let mut partial: Option<Tensor<3>> = None;
            for (j, l) in (start..end).enumerate() {
                let o1 = phase.o1.clone().narrow(2, j, 1); // [H, BT, 1, d/H]
                let x = match (&partial, &phase.lse) {
                    (None, _) => mixing.to_stream(o1, b, t),
                    // The partial's share of the softmax over all sources, in one operation.
                    (Some(p), Some(lse)) => block_merge(
                        p.clone().reshape([b * t, d]),
                        o1,
                        mixing.query(l),
                        lse.clone().narrow(3, j, 1),
                        mixing.key_norm,
                    )
                    .reshape([b, t, d]),
                    (Some(p), None) => {
                        let (value, logit) = mixing.score_partial(p.clone(), l); // [H, BT, 1, *]
                        mixing.to_stream(o1 + value * sigmoid(logit), b, t)
                    }
                };
                let y = layers.apply(l, x);
                partial = Some(match partial {
                    Some(p) => p + y,
                    None => y,
                });
            }
            if let Some(p) = partial {
                completed.push(mixing.source(p, end));
            }
        }
        let out = mixing.phase_one(&completed, n_layers, 1).o1;
        mixing.to_stream(out, b, t)
    }
}

/// What one forward shares across its blocks: the queries of every step, stacked.
struct Mixing<'a> {
    attnres: &'a AttnRes,
    /// `[H, d/H, L + 1]`: the effective query of every mixing step.
    queries: Tensor<3>,
    heads: usize,
    bt: usize,
    d: usize,
    key_norm: bool,
    sigmoid: bool,
}

impl<'a> Mixing<'a> {
    fn new(attnres: &'a AttnRes, bt: usize, d: usize) -> Self {
        let first = &attnres.mixes[0];
        let heads = first.heads;
        let steps = attnres.mixes.len();
        let queries: Vec<Tensor<1>> = attnres.mixes.iter().map(effective_query).collect();
        let queries = Tensor::stack::<2>(queries, 1) // [d, L + 1]
            .reshape([heads, d / heads, steps]);
        Self {
            attnres,
            queries,
            heads,
            bt,
            d,
            key_norm: first.uses_key_norm(),
            sigmoid: first.sigmoid,
        }
    }

    /// The effective query of mixing step `l`, `[d]`.
    fn query(&self, l: usize) -> Tensor<1> {
        self.queries.clone().narrow(2, l, 1).reshape([self.d]) // [H, d/H, 1] -> [d]
    }

    /// `[B, T, d]` to head-major `[H, BT, d/H]`.
    fn heads_first(&self, x: Tensor<3>) -> Tensor<3> {
        let dh = self.d / self.heads;
        x.reshape([self.bt, self.heads, dh]).swap_dims(0, 1) // [H, BT, d/H]
    }

    /// Head-major `[H, BT, 1, d/H]` back to the stream's `[B, T, d]`.
    fn to_stream(&self, x: Tensor<4>, b: usize, t: usize) -> Tensor<3> {
        let dh = self.d / self.heads;
        x.reshape([self.heads, self.bt, dh])
            .swap_dims(0, 1) // [BT, H, d/H]
            .reshape([b, t, self.d])
    }

    /// Logits `[H, BT, M]` of `v` `[B, T, d]` for the queries of steps `first..first + M`.
    /// With the key norm they are `(v . q) / rms(v)`, which never forms the normalised key.
    fn logits(&self, v: Tensor<3>, first: usize, m: usize) -> Tensor<3> {
        let queries = self.queries.clone().narrow(2, first, m); // [H, d/H, M]
        let dots = self.heads_first(v.clone()).matmul(queries); // [H, BT, M]
        if self.key_norm {
            let inv_rms = (v.square().mean_dim(2) + RMS_EPS).sqrt().recip(); // [B, T, 1]
            dots * inv_rms.reshape([1, self.bt, 1])
        } else {
            dots
        }
    }

    /// Makes source `v` `[B, T, d]`, first read by mixing step `first`, scoring it against
    /// the queries of steps `first..=L` in one matmul.
    fn source(&self, v: Tensor<3>, first: usize) -> Source {
        let steps = self.attnres.mixes.len();
        let logits = self.logits(v.clone(), first, steps - first);
        Source {
            value: self.heads_first(v).unsqueeze_dim(2),
            logits,
            first,
        }
    }

    /// The partial sum `p` `[B, T, d]` as a value `[H, BT, 1, d/H]` and its logit for step
    /// `l` `[H, BT, 1, 1]`.
    fn score_partial(&self, p: Tensor<3>, l: usize) -> (Tensor<4>, Tensor<4>) {
        let logit = self.logits(p.clone(), l, 1); // [H, BT, 1]
        (self.heads_first(p).unsqueeze_dim(2), logit.unsqueeze_dim(2))
    }

    /// Phase 1 for the `q` steps `start..start + q` over the completed sources.
    fn phase_one(&self, completed: &[Source], start: usize, q: usize) -> PhaseOne {
        let logits: Vec<Tensor<4>> = completed
            .iter()
            .map(|s| {
                s.logits
                    .clone()
                    .narrow(2, start - s.first, q)
                    .unsqueeze_dim(2)
            }) // [H, BT, 1, Q]
            .collect();
        let logits = Tensor::cat(logits, 2); // [H, BT, K, Q]
        let values: Vec<Tensor<4>> = completed.iter().map(|s| s.value.clone()).collect();
        let values = Tensor::cat(values, 2); // [H, BT, K, d/H]
        let (weights, lse) = if self.sigmoid {
            (sigmoid(logits), None)
        } else {
            let max = logits.clone().max_dim(2).detach(); // [H, BT, 1, Q]
            let exp = (logits - max.clone()).exp(); // [H, BT, K, Q]
            let sum = exp.clone().sum_dim(2); // [H, BT, 1, Q]
            let lse = sum.clone().log() + max;
            (exp / sum, Some(lse))
        };
        let o1 = weights.swap_dims(2, 3).matmul(values); // [H, BT, Q, d/H]
        PhaseOne { o1, lse }
    }
}

/// `w ⊙ g`: the pseudo-query `w` with its key norm's gain `g` (where it has a key norm)
/// folded in, so that all queries can share one normalised key per source.
pub(super) fn effective_query(mix: &DepthMix) -> Tensor<1> {
    let Scorer::PseudoQuery(s) = &mix.scorer else {
        // supports_two_phase() admits only pseudo-queries.
        unreachable!("two-phase path called on a scorer it does not support")
    };
    match &s.key_norm {
        Some(norm) => s.query.val() * norm.gain.val(),
        None => s.query.val(),
    }
}

/// `x = o1 + sigmoid(z - lse) (p - o1)` with `z = p.q / rms(p)` (`p.q` without the key
/// norm), per head: the partial sum `p` `[N, d]`, the phase-1 result `o1` `[H, N, 1, dh]`
/// and its log-sum-exp `lse` `[H, N, 1, 1]`, the step's effective query `q` `[d]` ->
/// `x` `[N, d]`, token-major.
fn block_merge(
    p: Tensor<2>,
    o1: Tensor<4>,
    q: Tensor<1>,
    lse: Tensor<4>,
    key_norm: bool,
) -> Tensor<2> {
    let [n, d] = p.dims();
    let [h, _, _, dh] = o1.dims();
    let p3 = p.clone().reshape([n, h, dh]);
    let o1 = o1.reshape([h, n, dh]).swap_dims(0, 1); // [N, H, dh]
    let s = (p3.clone() * q.reshape([1, h, dh])).sum_dim(2); // [N, H, 1]
    let z = if key_norm {
        let u = (p.square().mean_dim(1) + RMS_EPS).sqrt().recip(); // [N, 1]
        s * u.reshape([n, 1, 1])
    } else {
        s
    };
    let lse = lse.reshape([h, n, 1]).swap_dims(0, 1); // [N, H, 1]
    let beta = sigmoid(z - lse);
    (o1.clone() + (p3 - o1) * beta).reshape([n, d])
}
