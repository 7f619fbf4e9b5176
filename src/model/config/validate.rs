//! What makes a model configuration impossible to build, found before anything is built.

use thiserror::Error;

use super::{ModelConfig, ResidualConfig};

/// Why a model configuration cannot be built.
#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("`{key}` must be at least 1, got {value}")]
    NotPositive { key: &'static str, value: usize },
    #[error("d_model {d_model} is not divisible by {key} {value}; pick {key} that divides d_model")]
    NotDivisible {
        d_model: usize,
        key: &'static str,
        value: usize,
    },
    #[error("head_dim {0} must be even for rotary embeddings; change d_model or n_heads")]
    OddHeadDim(usize),
    #[error("ff_mult must be a positive finite number of at most 64, got {0}")]
    BadFfMult(f64),
    #[error(
        "`{key}` is {value}, beyond any model attnres builds (at most {max}); did you mean a smaller value?"
    )]
    TooLarge {
        key: &'static str,
        value: usize,
        max: usize,
    },
    #[error(
        "block_sizes {sizes:?} must be block lengths of at least 1 that sum to the model's {layers} sublayers (2 per block), not {sum}"
    )]
    BlockSizes {
        sizes: Vec<usize>,
        sum: usize,
        layers: usize,
    },
    #[error(
        "value_residual mixes the first attention layer's values into later ones and needs at least 2 blocks, got {0}"
    )]
    ValueResidualNeedsDepth(usize),
    #[error("`{variant}` takes {min} to {max} streams, got {streams}")]
    BadStreams {
        variant: &'static str,
        streams: usize,
        min: usize,
        max: usize,
    },
}

impl ConfigError {
    /// The key of `model` the error is about, where it is one key.
    pub fn key(&self) -> Option<&'static str> {
        match self {
            Self::NotPositive { key, .. } | Self::TooLarge { key, .. } => Some(key),
            Self::NotDivisible { key, .. } => Some(key),
            Self::BadFfMult(_) => Some("ff_mult"),
            Self::BlockSizes { .. } | Self::BadStreams { .. } => Some("residual"),
            Self::OddHeadDim(_) => Some("n_heads"),
            Self::ValueResidualNeedsDepth(_) => Some("value_residual"),
        }
    }
}

/// Upper bounds far above any published model, so that counts stay exact in 64-bit
/// integers and nothing is allocated per layer for a typo.
const LIMITS: [(&str, usize); 4] = [
    ("vocab_size", 1 << 22),
    ("d_model", 1 << 16),
    ("n_blocks", 1 << 12),
    ("context", 1 << 20),
];

impl ModelConfig {
    /// Checks everything that would make the model impossible to build.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            ("vocab_size", self.vocab_size),
            ("d_model", self.d_model),
            ("n_blocks", self.n_blocks),
            ("n_heads", self.n_heads),
            ("context", self.context),
        ] {
            if value == 0 {
                return Err(ConfigError::NotPositive { key, value });
            }
        }
        for ((key, max), value) in
            LIMITS
                .into_iter()
                .zip([self.vocab_size, self.d_model, self.n_blocks, self.context])
        {
            if value > max {
                return Err(ConfigError::TooLarge { key, value, max });
            }
        }
        if !self.d_model.is_multiple_of(self.n_heads) {
            return Err(ConfigError::NotDivisible {
                d_model: self.d_model,
                key: "n_heads",
                value: self.n_heads,
            });
        }
        if !self.head_dim().is_multiple_of(2) {
            return Err(ConfigError::OddHeadDim(self.head_dim()));
        }
        if !(self.ff_mult.is_finite() && self.ff_mult > 0.0 && self.ff_mult <= 64.0) {
            return Err(ConfigError::BadFfMult(self.ff_mult));
        }
        if let ResidualConfig::AttnRes(c) = &self.residual {
            if c.block_size == 0 {
                return Err(ConfigError::NotPositive {
                    key: "block_size",
                    value: 0,
                });
            }
            if let Some(sizes) = &c.block_sizes {
                let sum: usize = sizes.iter().sum();
                if sizes.is_empty() || sizes.contains(&0) || sum != self.n_layers() {
                    return Err(ConfigError::BlockSizes {
                        sizes: sizes.clone(),
                        sum,
                        layers: self.n_layers(),
                    });
                }
            }
            if c.heads == 0 {
                return Err(ConfigError::NotPositive {
                    key: "heads",
                    value: 0,
                });
            }
            if !self.d_model.is_multiple_of(c.heads) {
                return Err(ConfigError::NotDivisible {
                    d_model: self.d_model,
                    key: "heads",
                    value: c.heads,
                });
            }
            if c.window == Some(0) {
                return Err(ConfigError::NotPositive {
                    key: "window",
                    value: 0,
                });
            }
        }
        if let ResidualConfig::Hyper(h) = &self.residual {
            h.validate()?;
        }
        if self.value_residual && self.n_blocks < 2 {
            return Err(ConfigError::ValueResidualNeedsDepth(self.n_blocks));
        }
        Ok(())
    }
}
