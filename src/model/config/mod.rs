//! Model configuration: the shape of the LM and the residual family it uses (SPEC sections 6-7).

use serde::{Deserialize, Serialize};

pub use hyper::{HyperConfig, HyperKind};
pub use validate::ConfigError;
pub use wire::{ResidualEntry, ResidualWire, Variant};

mod hyper;
mod validate;
mod wire;

/// Everything needed to build a model; parameter and FLOP counts come from this alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub vocab_size: usize,
    pub d_model: usize,
    pub n_blocks: usize,
    pub n_heads: usize,
    /// SwiGLU hidden size is `ff_mult * d_model`, rounded up to a multiple of 8.
    #[serde(default = "default_ff_mult")]
    pub ff_mult: f64,
    /// Context length `T` used for training and for the attention FLOP count.
    pub context: usize,
    #[serde(default)]
    pub residual: ResidualConfig,
    /// ResFormer's value residual (arXiv 2410.17897): every attention layer after the first
    /// uses `λ1·V_n + λ2·V_1`, its own values mixed with the first layer's, with learned λ.
    /// Independent of the residual family; left out of the canonical form when off, so
    /// run ids of models without it stay what they were.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub value_residual: bool,
}

fn default_ff_mult() -> f64 {
    8.0 / 3.0
}

/// The residual family, selected by the sweep (SPEC section 6).
///
/// On the wire it is `{variant: baseline|full|block|denseformer, block_size, ...ablations}`;
/// in memory Full is Block AttnRes with `S = 1`, so both share one implementation.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(into = "ResidualWire")]
pub enum ResidualConfig {
    /// PreNorm residual: `x_{l+1} = x_l + y_l`.
    #[default]
    Baseline,
    /// Attention over depth. Full AttnRes is `block_size: 1`.
    AttnRes(AttnResConfig),
    /// Static weighted average of block outputs after each Transformer block (arXiv 2402.02622).
    Denseformer,
    /// `m` residual streams: hyper-connections, mHC or mHC-lite.
    Hyper(HyperConfig),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Normalize {
    Softmax,
    Sigmoid,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueryKind {
    /// A learned pseudo-query `w_l`, independent of the input.
    Static,
    /// `w_l = W_l . RMSNorm(last source)`, `W_l` zero-initialised.
    InputDependent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mixing {
    /// Logits `w . KeyNorm(v)`, per token.
    Dynamic,
    /// One learned scalar logit per (layer, source), the same for every token.
    Static,
}

/// Block AttnRes and its ablations. [`AttnResConfig::block`] is the report's method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttnResConfig {
    /// `S`: layers per block. 1 is Full AttnRes. With `block_sizes`, the longest block.
    pub block_size: usize,
    /// Blocks of these lengths from the bottom up instead of `S` each; they sum to `L`.
    pub block_sizes: Option<Vec<usize>>,
    pub key_norm: bool,
    pub normalize: Normalize,
    pub query: QueryKind,
    pub mixing: Mixing,
    /// Keep the embedding plus only the last `W` other sources.
    pub window: Option<usize>,
    /// Split `d` into this many groups, each with its own slice of `w` and its own softmax.
    pub heads: usize,
}

impl AttnResConfig {
    /// Full AttnRes: every layer is its own block (`S = 1`, no listed block lengths). The one
    /// place this is decided; `full` and `block S=1` are the same model.
    pub fn is_full(&self) -> bool {
        self.block_size == 1 && self.block_sizes.is_none()
    }

    /// The report's method with block size `S` (`S = 1` is Full AttnRes).
    pub fn block(block_size: usize) -> Self {
        Self {
            block_size,
            block_sizes: None,
            key_norm: true,
            normalize: Normalize::Softmax,
            query: QueryKind::Static,
            mixing: Mixing::Dynamic,
            window: None,
            heads: 1,
        }
    }
}

impl AttnResConfig {
    /// Blocks of the given lengths from the bottom up (at least one, each at least 1): the
    /// report's method with its blocks not all of one size.
    pub fn per_depth(sizes: Vec<usize>) -> Self {
        Self {
            block_size: sizes.iter().copied().max().unwrap_or(1),
            block_sizes: Some(sizes),
            ..Self::block(1)
        }
    }

    /// The lengths of the blocks from the bottom up over `n_layers` sublayers: `S` each (the
    /// last one shorter where `S` does not divide `L`), or the listed `block_sizes`.
    pub fn block_lengths(&self, n_layers: usize) -> Vec<usize> {
        match &self.block_sizes {
            Some(sizes) => sizes.clone(),
            None => {
                let s = self.block_size.max(1);
                (0..n_layers)
                    .step_by(s)
                    .map(|start| s.min(n_layers - start))
                    .collect()
            }
        }
    }

    /// The first sublayer of each block.
    pub fn block_starts(&self, n_layers: usize) -> Vec<usize> {
        self.block_lengths(n_layers)
            .iter()
            .scan(0, |start, &len| {
                let first = *start;
                *start += len;
                Some(first)
            })
            .collect()
    }

    /// Whether training and inference take the two-phase path (SPEC section 5): only static
    /// pseudo-queries without a window can be scored before their layer runs.
    pub fn two_phase(&self) -> bool {
        self.mixing == Mixing::Dynamic && self.query == QueryKind::Static && self.window.is_none()
    }

    /// Whether they take the stacked path (`model::residual::stacked`), the two-phase
    /// path's scorers with one head and softmax weights: the report's method, Full AttnRes
    /// and the key-norm ablation.
    pub fn stacked(&self) -> bool {
        self.two_phase() && self.heads == 1 && self.normalize == Normalize::Softmax
    }
}

impl ResidualConfig {
    pub fn full() -> Self {
        Self::AttnRes(AttnResConfig::block(1))
    }

    pub fn block(block_size: usize) -> Self {
        Self::AttnRes(AttnResConfig::block(block_size))
    }

    /// The family: `baseline`, `full`, `block`, `denseformer`, `hc`, `mhc`, `mhc_lite`,
    /// `mhc_attnres`
    /// (ablations keep their family's name).
    pub fn variant(&self) -> &'static str {
        match self {
            Self::Baseline => "baseline",
            Self::Denseformer => "denseformer",
            Self::Hyper(h) => h.variant(),
            Self::AttnRes(c) if c.is_full() => "full",
            Self::AttnRes(_) => "block",
        }
    }

    /// Hyper-connections, mHC, mHC-lite or mhc_attnres: `m` residual streams.
    pub fn is_multi_stream(&self) -> bool {
        matches!(self, Self::Hyper(_))
    }

    /// Whether the probes' depth weights are each layer's read weights over its streams (HC,
    /// mHC, mHC-lite); else they are each mixing step's weights over depth sources (AttnRes,
    /// and mhc_attnres's, averaged over its streams) or there are none.
    pub fn weights_over_streams(&self) -> bool {
        matches!(self, Self::Hyper(h) if h.kind != HyperKind::MhcAttnRes)
    }

    /// The method as published, not an ablation: every AttnRes option at its default but
    /// the block size; hyper-connections dynamic, mHC with its 20 iterations.
    pub fn is_plain(&self) -> bool {
        match self {
            Self::AttnRes(c) => *c == AttnResConfig::block(c.block_size),
            Self::Hyper(h) => match h.kind {
                HyperKind::Hc { dynamic } => dynamic,
                HyperKind::Mhc { sinkhorn_iters } => {
                    sinkhorn_iters == HyperConfig::DEFAULT_SINKHORN_ITERS
                }
                HyperKind::MhcLite | HyperKind::MhcAttnRes => true,
            },
            _ => true,
        }
    }

    /// A short human name: `baseline`, `full`, `block S=4`, `denseformer`, `hc m=4`,
    /// `mhc m=4`, `mhc_lite m=4`, plus ablations.
    /// The one place a label is made; nothing parses it back (use [`Self::variant`] and
    /// [`Self::is_plain`]).
    pub fn label(&self) -> String {
        match self {
            Self::Baseline => "baseline".into(),
            Self::Denseformer => "denseformer".into(),
            Self::Hyper(h) => {
                let mut s = format!("{} m={}", h.variant(), h.streams);
                match h.kind {
                    HyperKind::Hc { dynamic: false } => s.push_str(" static"),
                    HyperKind::Mhc { sinkhorn_iters }
                        if sinkhorn_iters != HyperConfig::DEFAULT_SINKHORN_ITERS =>
                    {
                        s.push_str(&format!(" sinkhorn_iters={sinkhorn_iters}"))
                    }
                    _ => {}
                }
                s
            }
            Self::AttnRes(c) => {
                let mut s = match &c.block_sizes {
                    _ if c.is_full() => "full".to_string(),
                    Some(sizes) => {
                        let sizes: Vec<String> = sizes.iter().map(usize::to_string).collect();
                        format!("block S={}", sizes.join(","))
                    }
                    None => format!("block S={}", c.block_size),
                };
                if !c.key_norm {
                    s.push_str(" key_norm=none");
                }
                if c.normalize == Normalize::Sigmoid {
                    s.push_str(" normalize=sigmoid");
                }
                if c.query == QueryKind::InputDependent {
                    s.push_str(" query=input_dependent");
                }
                if c.mixing == Mixing::Static {
                    s.push_str(" mixing=static");
                }
                if let Some(w) = c.window {
                    s.push_str(&format!(" window={w}"));
                }
                if c.heads != 1 {
                    s.push_str(&format!(" heads={}", c.heads));
                }
                s
            }
        }
    }
}

impl ModelConfig {
    /// The arm's name: the residual family's label, with ` value_residual` when it is on.
    pub fn arm_label(&self) -> String {
        let label = self.residual.label();
        if self.value_residual {
            format!("{label} value_residual")
        } else {
            label
        }
    }

    /// The published method of its family with nothing added (see [`ResidualConfig::is_plain`]).
    pub fn is_plain(&self) -> bool {
        self.residual.is_plain() && !self.value_residual
    }

    /// Number of sublayers `L = 2 * n_blocks`.
    pub fn n_layers(&self) -> usize {
        2 * self.n_blocks
    }

    pub fn head_dim(&self) -> usize {
        self.d_model / self.n_heads
    }

    /// SwiGLU hidden size: `ff_mult * d`, rounded up to a multiple of 8.
    pub fn ff_hidden(&self) -> usize {
        let raw = (self.ff_mult * self.d_model as f64).ceil() as usize;
        raw.div_ceil(8) * 8
    }
}
