//! Block AttnRes (SPEC sections 3, 4 and 6): each layer reads a learned softmax over depth
//! sources. Full AttnRes is the same code with `S = 1`.

use burn::module::{Module, Param};
use burn::tensor::Tensor;
use burn::tensor::activation::{sigmoid, softmax};

use super::{Sublayers, Trace};
use crate::model::config::{AttnResConfig, Mixing, ModelConfig, Normalize, QueryKind};
use crate::model::init::Init;
use crate::model::norm::RmsNorm;
use crate::model::sources::attnres_source_counts;

/// How one mixing step scores its sources.
#[derive(Module, Debug)]
pub enum Scorer {
    /// `logit_i = w . KeyNorm(v_i)` with a learned pseudo-query `w` (the method).
    PseudoQuery(PseudoQuery),
    /// `w = W . RMSNorm(last source)`, per token.
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

    /// `sources`: `K` tensors `[B, T, d]`. Returns `x` `[B, T, d]` and the weights
    /// `alpha` `[K, B, T, H]`.
    pub fn forward(&self, sources: &[Tensor<3>]) -> (Tensor<3>, Tensor<4>) {
        let k = sources.len();
        let [b, t, d] = sources[0].dims();
        let h = self.heads;
        let values = Tensor::stack::<4>(sources.to_vec(), 0); // [K, B, T, d]
        let logits = self.logits(values.clone(), &sources[k - 1]); // [K, B, T, H]
        let alpha = if self.sigmoid {
            sigmoid(logits)
        } else {
            softmax(logits, 0)
        };
        let grouped = values.reshape([k, b, t, h, d / h]); // [K, B, T, H, d/H]
        let x = (grouped * alpha.clone().unsqueeze_dim::<5>(4))
            .sum_dim(0) // [1, B, T, H, d/H]
            .reshape([b, t, d]);
        (x, alpha)
    }

    /// Logits `[K, B, T, H]` for stacked `values` `[K, B, T, d]`.
    fn logits(&self, values: Tensor<4>, last: &Tensor<3>) -> Tensor<4> {
        let [k, b, t, d] = values.dims();
        let h = self.heads;
        let keys = |norm: &Option<RmsNorm>| match norm {
            Some(n) => n.forward(values.clone()),
            None => values.clone(),
        };
        let per_head = |keys: Tensor<4>, query: Tensor<5>| {
            (keys.reshape([k, b, t, h, d / h]) * query) // [K, B, T, H, d/H]
                .sum_dim(4)
                .reshape([k, b, t, h])
        };
        match &self.scorer {
            Scorer::PseudoQuery(s) => {
                let query = s.query.val().reshape([1, 1, 1, h, d / h]);
                per_head(keys(&s.key_norm), query)
            }
            Scorer::InputQuery(s) => {
                let query = s
                    .query_norm
                    .forward(last.clone())
                    .matmul(s.proj.val().unsqueeze()) // [B, T, d]
                    .reshape([1, b, t, h, d / h]);
                per_head(keys(&s.key_norm), query)
            }
            Scorer::StaticLogits(s) => s.logits.val().reshape([k, 1, 1, 1]).expand([k, b, t, h]),
        }
    }
}

/// Block AttnRes over `L` sublayers: `L + 1` mixing steps (one per layer, one for the output).
#[derive(Module, Debug)]
pub struct AttnRes {
    pub mixes: Vec<DepthMix>,
    pub block_size: usize,
    pub window: Option<usize>,
}

impl AttnRes {
    pub fn init(config: &ModelConfig, c: &AttnResConfig, init: &Init) -> Self {
        let counts = attnres_source_counts(config.n_layers(), c.block_size, c.window);
        Self {
            mixes: counts
                .iter()
                .map(|&n| DepthMix::init(c, config.d_model, n, init))
                .collect(),
            block_size: c.block_size,
            window: c.window,
        }
    }

    pub fn n_layers(&self) -> usize {
        self.mixes.len() - 1
    }

    /// The naive path: every layer scores all of its sources.
    pub fn forward(
        &self,
        e: Tensor<3>,
        layers: &dyn Sublayers,
        mut trace: Option<&mut Trace>,
    ) -> Tensor<3> {
        let mut completed = vec![e]; // [b_0 = e, b_1, ...]
        let mut partial: Option<Tensor<3>> = None;
        for l in 0..self.n_layers() {
            if l % self.block_size == 0
                && let Some(p) = partial.take()
            {
                completed.push(p);
            }
            let (x, alpha) = self.mix(l, &completed, partial.as_ref());
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
        completed.extend(partial);
        let (out, alpha) = self.mix(self.n_layers(), &completed, None);
        if let Some(t) = trace {
            t.depth(mean_weights(alpha));
        }
        out
    }

    /// Mixing step `l` over the completed blocks and the partial sum, windowed if asked.
    fn mix(
        &self,
        l: usize,
        completed: &[Tensor<3>],
        partial: Option<&Tensor<3>>,
    ) -> (Tensor<3>, Tensor<4>) {
        let mut sources: Vec<Tensor<3>> = completed.to_vec();
        sources.extend(partial.cloned());
        if let Some(w) = self.window {
            let others = sources.len() - 1;
            if others > w {
                sources.drain(1..1 + others - w);
            }
        }
        self.mixes[l].forward(&sources)
    }
}

/// `alpha` `[K, B, T, H]` averaged over tokens and heads: `[K]`.
fn mean_weights(alpha: Tensor<4>) -> Tensor<1> {
    let k = alpha.dims()[0];
    alpha.mean_dims(&[1, 2, 3]).reshape([k])
}
