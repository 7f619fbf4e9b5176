//! Model configuration: the shape of the LM and the residual family it uses (SPEC sections 6-7).

use serde::{Deserialize, Serialize};
use thiserror::Error;

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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    Baseline,
    Full,
    Block,
    Denseformer,
}

/// The flat YAML/JSON form of [`ResidualConfig`]; a sweep may leave `block_size` to its
/// top-level `block_size` list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResidualWire {
    pub variant: Variant,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_norm: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalize: Option<Normalize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<QueryKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixing: Option<Mixing>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heads: Option<usize>,
}

/// A residual as written by a user: a bare variant name or the map form.
#[derive(Debug, Clone, PartialEq)]
pub struct ResidualEntry(pub ResidualWire);

/// Accepts a bare variant name (`residual: full`) or the map form
/// (`residual: {variant: block, block_size: 4}`).
impl<'de> Deserialize<'de> for ResidualConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let ResidualEntry(wire) = ResidualEntry::deserialize(deserializer)?;
        ResidualConfig::try_from(wire).map_err(serde::de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for ResidualEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{self, IntoDeserializer, MapAccess, Visitor};
        struct WireVisitor;
        impl<'de> Visitor<'de> for WireVisitor {
            type Value = ResidualWire;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a variant name (baseline, full, denseformer) or a map with `variant`")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<ResidualWire, E> {
                Ok(ResidualWire::named(Variant::deserialize(
                    name.into_deserializer(),
                )?))
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<ResidualWire, M::Error> {
                ResidualWire::deserialize(de::value::MapAccessDeserializer::new(map))
            }
        }
        deserializer.deserialize_any(WireVisitor).map(ResidualEntry)
    }
}

impl ResidualWire {
    pub fn named(variant: Variant) -> Self {
        Self {
            variant,
            block_size: None,
            key_norm: None,
            normalize: None,
            query: None,
            mixing: None,
            window: None,
            heads: None,
        }
    }
}

impl TryFrom<ResidualWire> for ResidualConfig {
    type Error = String;

    fn try_from(w: ResidualWire) -> Result<Self, String> {
        let has_ablation = w.key_norm.is_some()
            || w.normalize.is_some()
            || w.query.is_some()
            || w.mixing.is_some()
            || w.window.is_some()
            || w.heads.is_some();
        let block_size = match (w.variant, w.block_size) {
            (Variant::Baseline | Variant::Denseformer, Some(_)) => {
                return Err(format!(
                    "`block_size` applies only to the `full` and `block` variants, not `{}`",
                    variant_name(w.variant)
                ));
            }
            (Variant::Baseline | Variant::Denseformer, None) => {
                if has_ablation {
                    return Err(format!(
                        "AttnRes ablation keys (key_norm, normalize, query, mixing, window, heads) \
                         apply only to `full` and `block`, not `{}`",
                        variant_name(w.variant)
                    ));
                }
                return Ok(match w.variant {
                    Variant::Baseline => Self::Baseline,
                    _ => Self::Denseformer,
                });
            }
            (Variant::Full, None | Some(1)) => 1,
            (Variant::Full, Some(s)) => {
                return Err(format!(
                    "`full` means block_size 1, got block_size {s}; use `variant: block` instead"
                ));
            }
            (Variant::Block, Some(s)) => s,
            (Variant::Block, None) => {
                return Err(
                    "`variant: block` needs `block_size` (layers per block, e.g. 4)".into(),
                );
            }
        };
        let base = AttnResConfig::block(block_size);
        Ok(Self::AttnRes(AttnResConfig {
            block_size,
            key_norm: w.key_norm.unwrap_or(base.key_norm),
            normalize: w.normalize.unwrap_or(base.normalize),
            query: w.query.unwrap_or(base.query),
            mixing: w.mixing.unwrap_or(base.mixing),
            window: w.window,
            heads: w.heads.unwrap_or(base.heads),
        }))
    }
}

impl From<ResidualConfig> for ResidualWire {
    fn from(r: ResidualConfig) -> Self {
        match r {
            ResidualConfig::Baseline => ResidualWire::named(Variant::Baseline),
            ResidualConfig::Denseformer => ResidualWire::named(Variant::Denseformer),
            ResidualConfig::AttnRes(c) => {
                let base = AttnResConfig::block(c.block_size);
                ResidualWire {
                    variant: if c.block_size == 1 {
                        Variant::Full
                    } else {
                        Variant::Block
                    },
                    block_size: (c.block_size != 1).then_some(c.block_size),
                    key_norm: (c.key_norm != base.key_norm).then_some(c.key_norm),
                    normalize: (c.normalize != base.normalize).then_some(c.normalize),
                    query: (c.query != base.query).then_some(c.query),
                    mixing: (c.mixing != base.mixing).then_some(c.mixing),
                    window: c.window,
                    heads: (c.heads != base.heads).then_some(c.heads),
                }
            }
        }
    }
}

fn variant_name(v: Variant) -> &'static str {
    match v {
        Variant::Baseline => "baseline",
        Variant::Full => "full",
        Variant::Block => "block",
        Variant::Denseformer => "denseformer",
    }
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
    /// `S`: layers per block. 1 is Full AttnRes.
    pub block_size: usize,
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
    /// The report's method with block size `S` (`S = 1` is Full AttnRes).
    pub fn block(block_size: usize) -> Self {
        Self {
            block_size,
            key_norm: true,
            normalize: Normalize::Softmax,
            query: QueryKind::Static,
            mixing: Mixing::Dynamic,
            window: None,
            heads: 1,
        }
    }
}

impl ResidualConfig {
    pub fn full() -> Self {
        Self::AttnRes(AttnResConfig::block(1))
    }

    pub fn block(block_size: usize) -> Self {
        Self::AttnRes(AttnResConfig::block(block_size))
    }

    /// A short human name: `baseline`, `full`, `block S=4`, `denseformer`, plus ablations.
    pub fn label(&self) -> String {
        match self {
            Self::Baseline => "baseline".into(),
            Self::Denseformer => "denseformer".into(),
            Self::AttnRes(c) => {
                let mut s = if c.block_size == 1 {
                    "full".to_string()
                } else {
                    format!("block S={}", c.block_size)
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
    #[error("ff_mult must be a positive finite number, got {0}")]
    BadFfMult(f64),
}

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
        if !(self.ff_mult.is_finite() && self.ff_mult > 0.0) {
            return Err(ConfigError::BadFfMult(self.ff_mult));
        }
        if let ResidualConfig::AttnRes(c) = &self.residual {
            if c.block_size == 0 {
                return Err(ConfigError::NotPositive {
                    key: "block_size",
                    value: 0,
                });
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
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<ResidualConfig, String> {
        serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn residual_accepts_names_and_maps_and_round_trips() {
        assert_eq!(parse("baseline").unwrap(), ResidualConfig::Baseline);
        assert_eq!(parse("full").unwrap(), ResidualConfig::full());
        assert_eq!(
            parse("{variant: block, block_size: 4}").unwrap(),
            ResidualConfig::block(4)
        );
        let ablation = parse("{variant: full, key_norm: false, heads: 2}").unwrap();
        let json = serde_json::to_string(&ablation).unwrap();
        assert_eq!(json, r#"{"variant":"full","key_norm":false,"heads":2}"#);
        assert_eq!(
            serde_json::from_str::<ResidualConfig>(&json).unwrap(),
            ablation
        );
    }

    #[test]
    fn residual_errors_say_what_to_do() {
        assert!(parse("block").unwrap_err().contains("needs `block_size`"));
        assert!(
            parse("{variant: full, block_size: 4}")
                .unwrap_err()
                .contains("use `variant: block`")
        );
        assert!(
            parse("{variant: baseline, heads: 2}")
                .unwrap_err()
                .contains("apply only to `full` and `block`")
        );
        assert!(
            parse("{variant: block, block_sz: 4}")
                .unwrap_err()
                .contains("block_sz")
        );
        assert!(parse("blok").unwrap_err().contains("blok"));
    }
}
