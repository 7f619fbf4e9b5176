//! Block AttnRes (SPEC sections 3, 4 and 6): each layer reads a learned softmax over depth
//! sources. Full AttnRes is the same code with `S = 1`. This file holds the naive path, which
//! covers every ablation and traced forwards (`definition.rs` states the method alone);
//! training and inference take `stacked.rs` (single-head softmax) or `two_phase.rs`
//! (multi-head, sigmoid) where they apply, and this path otherwise.

use burn::module::{Module, Param};
use burn::tensor::Tensor;
use burn::tensor::activation::{sigmoid, softmax};

use super::{Sublayers, Trace};
use crate::model::config::{AttnResConfig, Mixing, ModelConfig, Normalize, QueryKind};
use crate::model::init::Init;
use crate::model::kernels::linear::linear;
use crate::model::norm::{RmsNorm, rms_normalize};
use crate::model::sources::attnres_source_counts;

/// How one mixing step scores its sources.
#[derive(Module, Debug)]
pub enum Scorer {
    /// `logit_i = w . KeyNorm(v_i)` with a learned pseudo-query `w` (the method).
    PseudoQuery(PseudoQuery),
    /// `w = W . RMSNorm(last source) / d`, per token.
    InputQuery(InputQuery),
    /// One learned scalar logit per source.
    StaticLogits(StaticLogits),
}

#[derive(Module, Debug)]
pub struct PseudoQuery {
    /// `[d]`, zero at init so that step 0 takes the plain mean.
    pub query: Param<Tensor<1>>,
    pub key_norm: Option<RmsNorm>,
}

/// The query is divided by `d` (the fan-in of `W`, as muP does for hidden matrices) so that
/// one Adam step moves it about as far as it moves a pseudo-query: Adam changes each of the
/// `d^2` entries of `W` by about the learning rate, which without the `1/d` moves each query
/// entry, and so the logits, `d` times faster than the `d` entries of `w`. Unscaled, the
/// first steps saturated the softmax onto single sources and training stalled (docs/method.md).
#[derive(Module, Debug)]
pub struct InputQuery {
    /// `[d, d]`, zero at init.
    pub proj: Param<Tensor<2>>,
    pub query_norm: RmsNorm,
    pub key_norm: Option<RmsNorm>,
}

#[derive(Module, Debug)]
pub struct StaticLogits {
    /// `[K]`: one logit per source this step sees, zero at init.
    pub logits: Param<Tensor<1>>,
}

/// One depth-mixing step: scores `K` sources and returns their weighted sum.
#[derive(Module, Debug)]
pub struct DepthMix {
    pub scorer: Scorer,
    pub heads: usize,
    pub sigmoid: bool,
}

impl DepthMix {
    fn init(c: &AttnResConfig, d: usize, n_sources: usize, init: &Init) -> Self {
        let key_norm = || c.key_norm.then(|| RmsNorm::init(d, init));
        let scorer = match (c.mixing, c.query) {
            (Mixing::Static, _) => Scorer::StaticLogits(StaticLogits {
                logits: init.constant([n_sources], 0.0),
            }),
            (Mixing::Dynamic, QueryKind::Static) => Scorer::PseudoQuery(PseudoQuery {
                query: init.constant([d], 0.0),
                key_norm: key_norm(),
            }),
            (Mixing::Dynamic, QueryKind::InputDependent) => Scorer::InputQuery(InputQuery {
                proj: init.constant([d, d], 0.0),
                query_norm: RmsNorm::init(d, init),
                key_norm: key_norm(),
            }),
        };
        Self {
            scorer,
            heads: c.heads,
            sigmoid: c.normalize == Normalize::Sigmoid,
        }
    }

    /// Whether keys are RMS-normalised sources (else the raw sources).
    pub fn uses_key_norm(&self) -> bool {
        match &self.scorer {
            Scorer::PseudoQuery(s) => s.key_norm.is_some(),
            Scorer::InputQuery(s) => s.key_norm.is_some(),
            Scorer::StaticLogits(_) => false,
        }
    }

    /// `values`: `K` sources `[B, T, d]`; `keys`: the same sources normalised without gain
    /// (or raw without key norm). Returns `x` `[B, T, d]` and the weights `alpha`
    /// `[B, T, H, K]`.
    ///
    /// Sources are scored one at a time rather than stacked: the key norm's gain is folded
    /// into the query, `w . (r(v) * g) = (w * g) . r(v)`, so each source is normalised once
    /// per forward instead of once per layer that reads it.
    pub fn forward(&self, values: &[Tensor<3>], keys: &[Tensor<3>]) -> (Tensor<3>, Tensor<4>) {
        let k = values.len();
        let [b, t, d] = values[0].dims();
        let (h, dh) = (self.heads, d / self.heads);
        let logits = self.logits(keys, &values[k - 1]); // [B, T, H, K]
        let alpha = if self.sigmoid {
            sigmoid(logits)
        } else {
            softmax(logits, 3)
        };
        let x = values
            .iter()
            .enumerate()
            .map(|(i, v)| v.clone().reshape([b, t, h, dh]) * alpha.clone().narrow(3, i, 1)) // [B, T, H, d/H]
            .reduce(|acc, term| acc + term)
            .expect("a mixing step has at least one source (the embedding)")
            .reshape([b, t, d]);
        (x, alpha)
    }

    /// Logits `[B, T, H, K]`.
    fn logits(&self, keys: &[Tensor<3>], last: &Tensor<3>) -> Tensor<4> {
        let k = keys.len();
        let [b, t, d] = keys[0].dims();
        let (h, dh) = (self.heads, d / self.heads);
        let score = |query: Tensor<4>| {
            let per_source: Vec<Tensor<4>> = keys
                .iter()
                .map(|key| (key.clone().reshape([b, t, h, dh]) * query.clone()).sum_dim(3)) // [B, T, H, 1]
                .collect();
            Tensor::cat(per_source, 3) // [B, T, H, K]
        };
        let gain = |norm: &Option<RmsNorm>| norm.as_ref().map(|n| n.gain.val());
        match &self.scorer {
            Scorer::PseudoQuery(s) => {
                let query = match gain(&s.key_norm) {
                    Some(g) => s.query.val() * g,
                    None => s.query.val(),
                };
                score(query.reshape([1, 1, h, dh]))
            }
            Scorer::InputQuery(s) => {
                let query = linear(s.query_norm.forward(last.clone()), s.proj.val()); // [B, T, d]
                let scale = 1.0 / d as f64; // 1 / fan-in of W
                let query = match gain(&s.key_norm) {
                    Some(g) => query * (g * scale).unsqueeze::<3>(),
                    None => query * scale,
                };
                score(query.reshape([b, t, h, dh]))
            }
            Scorer::StaticLogits(s) => s.logits.val().reshape([1, 1, 1, k]).expand([b, t, h, k]),
        }
    }
}

/// Block AttnRes over `L` sublayers: `L + 1` mixing steps (one per layer, one for the output).
#[derive(Module, Debug)]
pub struct AttnRes {
    pub mixes: Vec<DepthMix>,
    /// The first sublayer of each block, from 0.
    pub block_starts: Vec<usize>,
    pub window: Option<usize>,
}

impl AttnRes {
    pub fn init(config: &ModelConfig, c: &AttnResConfig, init: &Init) -> Self {
        let counts = attnres_source_counts(&c.block_lengths(config.n_layers()), c.window);
        Self {
            mixes: counts
                .iter()
                .map(|&n| DepthMix::init(c, config.d_model, n, init))
                .collect(),
            block_starts: c.block_starts(config.n_layers()),
            window: c.window,
        }
    }

    pub fn n_layers(&self) -> usize {
        self.mixes.len() - 1
    }

    /// The naive path: every layer scores all of its sources, one at a time. Traced forwards
    /// and the scorers the two-phase path cannot batch take it.
    pub fn forward_naive(
        &self,
        e: Tensor<3>,
        layers: &dyn Sublayers,
        mut trace: Option<&mut Trace>,
    ) -> Tensor<3> {
        let key_norm = self.mixes[0].uses_key_norm();
        let key = |v: &Tensor<3>| {
            if key_norm {
                rms_normalize(v.clone())
            } else {
                v.clone()
            }
        };
        // [b_0 = e, b_1, ...] and their keys, each normalised once.
        let mut completed = vec![(e.clone(), key(&e))];
        let mut partial: Option<Tensor<3>> = None;
        for l in 0..self.n_layers() {
            if self.block_starts.contains(&l)
                && let Some(p) = partial.take()
            {
                let k = key(&p);
                completed.push((p, k));
            }
            let current = partial.as_ref().map(|p| (p.clone(), key(p)));
            let (x, alpha) = self.mix(l, &completed, current);
            let y = layers.apply(l, x.clone());
            if let Some(t) = trace.as_deref_mut() {
                t.layer(&x, &y);
                t.depth(mean_weights(alpha));
            }
            partial = Some(match partial {
                Some(p) => p + y,
                None => y,
            });
        }
        if let Some(p) = partial {
            let k = key(&p);
            completed.push((p, k));
        }
        let (out, alpha) = self.mix(self.n_layers(), &completed, None);
        if let Some(t) = trace {
            t.depth(mean_weights(alpha));
        }
        out
    }

    /// Mixing step `l` over the completed blocks and the partial sum (each with its key),
    /// windowed if asked.
    fn mix(
        &self,
        l: usize,
        completed: &[(Tensor<3>, Tensor<3>)],
        partial: Option<(Tensor<3>, Tensor<3>)>,
    ) -> (Tensor<3>, Tensor<4>) {
        let mut sources: Vec<(Tensor<3>, Tensor<3>)> = completed.to_vec();
        sources.extend(partial);
        if let Some(w) = self.window {
            let others = sources.len() - 1;
            if others > w {
                sources.drain(1..1 + others - w);
            }
        }
        let (values, keys): (Vec<_>, Vec<_>) = sources.into_iter().unzip();
        self.mixes[l].forward(&values, &keys)
    }
}

/// `alpha` `[B, T, H, K]` averaged over tokens and heads: `[K]`.
pub(super) fn mean_weights(alpha: Tensor<4>) -> Tensor<1> {
    let k = alpha.dims()[3];
    alpha.mean_dims(&[0, 1, 2]).reshape([k])
}
