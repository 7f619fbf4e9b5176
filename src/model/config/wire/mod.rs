//! The YAML/JSON form of a residual family: a bare variant name (`full`) or a flat map
//! (`{variant: block, block_size: 4, key_norm: false}`), and its conversion to
//! [`ResidualConfig`] with errors that say what to do.

use serde::{Deserialize, Serialize};

use super::{AttnResConfig, HyperConfig, HyperKind, Mixing, Normalize, QueryKind, ResidualConfig};

mod error;
pub use error::ResidualError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    Baseline,
    Full,
    Block,
    Denseformer,
    Hc,
    Mhc,
    MhcLite,
    #[serde(rename = "mhc_attnres")]
    MhcAttnRes,
}

impl Variant {
    /// Every family, in the order the docs list them (`tests/architecture.rs` holds each to
    /// the checklist for adding a family).
    pub const ALL: [Variant; 8] = [
        Variant::Baseline,
        Variant::Full,
        Variant::Block,
        Variant::Denseformer,
        Variant::Hc,
        Variant::Mhc,
        Variant::MhcLite,
        Variant::MhcAttnRes,
    ];

    /// Its name in sweep files: `baseline`, `mhc_lite`, ...
    pub fn name(self) -> &'static str {
        variant_name(self)
    }
}

/// The flat YAML/JSON form of [`ResidualConfig`]; a sweep may leave `block_size` to its
/// top-level `block_size` list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResidualWire {
    pub variant: Variant,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<usize>,
    /// `block` only: blocks of these lengths from the bottom up, instead of `block_size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_sizes: Option<Vec<usize>>,
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
    /// Residual streams of `hc`, `mhc`, `mhc_lite` and `mhc_attnres` (default 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<usize>,
    /// `hc` only: the input-dependent terms (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<bool>,
    /// `mhc` only: Sinkhorn-Knopp iterations (default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sinkhorn_iters: Option<usize>,
    /// ResFormer's value residual, for any variant: a sweep entry's key that sets
    /// `ModelConfig::value_residual` (not part of the residual family itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_residual: Option<bool>,
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
                f.write_str(
                    "a variant name (baseline, full, denseformer, hc, mhc, mhc_lite, mhc_attnres) or a map \
                     with `variant`",
                )
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
            block_sizes: None,
            key_norm: None,
            normalize: None,
            query: None,
            mixing: None,
            window: None,
            heads: None,
            streams: None,
            dynamic: None,
            sinkhorn_iters: None,
            value_residual: None,
        }
    }
}

impl TryFrom<ResidualWire> for ResidualConfig {
    type Error = ResidualError;

    fn try_from(w: ResidualWire) -> Result<Self, ResidualError> {
        if w.value_residual.is_some() {
            return Err(ResidualError::ValueResidualHere);
        }
        if matches!(
            w.variant,
            Variant::Hc | Variant::Mhc | Variant::MhcLite | Variant::MhcAttnRes
        ) {
            return hyper_from(w).map(Self::Hyper);
        }
        refuse_misplaced_keys(&w)?;
        let has_ablation = w.key_norm.is_some()
            || w.normalize.is_some()
            || w.query.is_some()
            || w.mixing.is_some()
            || w.window.is_some()
            || w.heads.is_some();
        let block_size = match (w.variant, w.block_size) {
            (Variant::Baseline | Variant::Denseformer, Some(_)) => {
                return Err(ResidualError::BlockSizeOff(variant_name(w.variant)));
            }
            (Variant::Hc | Variant::Mhc | Variant::MhcLite | Variant::MhcAttnRes, _) => {
                unreachable!("multi-stream variants returned above")
            }
            (Variant::Baseline | Variant::Denseformer, None) => {
                if has_ablation {
                    return Err(ResidualError::AblationKeysOff(variant_name(w.variant)));
                }
                return Ok(match w.variant {
                    Variant::Baseline => Self::Baseline,
                    _ => Self::Denseformer,
                });
            }
            (Variant::Full, None | Some(1)) => 1,
            (Variant::Full, Some(s)) => return Err(ResidualError::FullWithBlockSize(s)),
            (Variant::Block, Some(s)) => s,
            (Variant::Block, None) if w.block_sizes.is_some() => {
                largest_block(w.block_sizes.as_deref().unwrap_or_default())?
            }
            (Variant::Block, None) => return Err(ResidualError::NoBlockSize),
        };
        let base = AttnResConfig::block(block_size);
        Ok(Self::AttnRes(AttnResConfig {
            block_size,
            block_sizes: w.block_sizes,
            key_norm: w.key_norm.unwrap_or(base.key_norm),
            normalize: w.normalize.unwrap_or(base.normalize),
            query: w.query.unwrap_or(base.query),
            mixing: w.mixing.unwrap_or(base.mixing),
            window: w.window,
            heads: w.heads.unwrap_or(base.heads),
        }))
    }
}

/// Refuses the multi-stream keys on a single-stream variant, and `block_sizes` anywhere
/// but on `block` or beside `block_size`.
fn refuse_misplaced_keys(w: &ResidualWire) -> Result<(), ResidualError> {
    for (key, given) in [
        ("streams", w.streams.is_some()),
        ("dynamic", w.dynamic.is_some()),
        ("sinkhorn_iters", w.sinkhorn_iters.is_some()),
    ] {
        if given {
            let variant = variant_name(w.variant);
            return Err(ResidualError::StreamKey { key, variant });
        }
    }
    if w.block_sizes.is_some() {
        if w.variant != Variant::Block {
            return Err(ResidualError::BlockSizesOff(variant_name(w.variant)));
        }
        if w.block_size.is_some() {
            return Err(ResidualError::BothBlockSizes);
        }
    }
    Ok(())
}

/// The longest block of a `block_sizes` list, which must list lengths of at least 1 and
/// not all 1s (that is Full AttnRes).
fn largest_block(sizes: &[usize]) -> Result<usize, ResidualError> {
    if sizes.is_empty() || sizes.contains(&0) {
        return Err(ResidualError::BadBlockSizes(sizes.to_vec()));
    }
    if sizes.iter().all(|&s| s == 1) {
        return Err(ResidualError::AllBlocksOne);
    }
    Ok(sizes.iter().copied().max().unwrap_or(1))
}

/// `hc`, `mhc`, `mhc_lite` or `mhc_attnres` from the wire: AttnRes keys refused, each family's own keys
/// only on it, stream counts checked against the family's range.
fn hyper_from(w: ResidualWire) -> Result<HyperConfig, ResidualError> {
    let name = variant_name(w.variant);
    let attnres_keys = w.block_size.is_some()
        || w.block_sizes.is_some()
        || w.key_norm.is_some()
        || w.normalize.is_some()
        || w.query.is_some()
        || w.mixing.is_some()
        || w.window.is_some()
        || w.heads.is_some();
    if attnres_keys {
        let also = match w.variant {
            Variant::Hc => " and `dynamic`",
            Variant::Mhc => " and `sinkhorn_iters`",
            _ => "",
        };
        return Err(ResidualError::AttnResKeysOnStreams {
            variant: name,
            also,
        });
    }
    if w.dynamic.is_some() && w.variant != Variant::Hc {
        return Err(ResidualError::DynamicOff(name));
    }
    if w.sinkhorn_iters.is_some() && w.variant != Variant::Mhc {
        return Err(ResidualError::SinkhornOff(name));
    }
    let streams = w.streams.unwrap_or(HyperConfig::DEFAULT_STREAMS);
    let config = HyperConfig {
        kind: match w.variant {
            Variant::Hc => HyperKind::Hc {
                dynamic: w.dynamic.unwrap_or(true),
            },
            Variant::Mhc => HyperKind::Mhc {
                sinkhorn_iters: w
                    .sinkhorn_iters
                    .unwrap_or(HyperConfig::DEFAULT_SINKHORN_ITERS),
            },
            Variant::MhcLite => HyperKind::MhcLite,
            _ => HyperKind::MhcAttnRes,
        },
        streams,
    };
    config.validate()?;
    Ok(config)
}

impl From<ResidualConfig> for ResidualWire {
    fn from(r: ResidualConfig) -> Self {
        match r {
            ResidualConfig::Baseline => ResidualWire::named(Variant::Baseline),
            ResidualConfig::Denseformer => ResidualWire::named(Variant::Denseformer),
            ResidualConfig::Hyper(h) => {
                let (variant, dynamic, sinkhorn_iters) = match h.kind {
                    HyperKind::Hc { dynamic } => (Variant::Hc, (!dynamic).then_some(false), None),
                    HyperKind::Mhc { sinkhorn_iters } => (
                        Variant::Mhc,
                        None,
                        (sinkhorn_iters != HyperConfig::DEFAULT_SINKHORN_ITERS)
                            .then_some(sinkhorn_iters),
                    ),
                    HyperKind::MhcLite => (Variant::MhcLite, None, None),
                    HyperKind::MhcAttnRes => (Variant::MhcAttnRes, None, None),
                };
                ResidualWire {
                    streams: Some(h.streams),
                    dynamic,
                    sinkhorn_iters,
                    ..ResidualWire::named(variant)
                }
            }
            ResidualConfig::AttnRes(c) => {
                let base = AttnResConfig::block(c.block_size);
                ResidualWire {
                    variant: if c.is_full() {
                        Variant::Full
                    } else {
                        Variant::Block
                    },
                    block_size: (!c.is_full() && c.block_sizes.is_none()).then_some(c.block_size),
                    block_sizes: c.block_sizes.clone(),
                    key_norm: (c.key_norm != base.key_norm).then_some(c.key_norm),
                    normalize: (c.normalize != base.normalize).then_some(c.normalize),
                    query: (c.query != base.query).then_some(c.query),
                    mixing: (c.mixing != base.mixing).then_some(c.mixing),
                    window: c.window,
                    heads: (c.heads != base.heads).then_some(c.heads),
                    ..ResidualWire::named(Variant::Block)
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
        Variant::Hc => "hc",
        Variant::Mhc => "mhc",
        Variant::MhcLite => "mhc_lite",
        Variant::MhcAttnRes => "mhc_attnres",
    }
}

#[cfg(test)]
mod tests;
