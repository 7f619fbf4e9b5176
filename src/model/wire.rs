//! The YAML/JSON form of a residual family: a bare variant name (`full`) or a flat map
//! (`{variant: block, block_size: 4, key_norm: false}`), and its conversion to
//! [`ResidualConfig`] with errors that say what to do.

use serde::{Deserialize, Serialize};

use super::config::{AttnResConfig, Mixing, Normalize, QueryKind, ResidualConfig};

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

#[cfg(test)]
mod tests {
    use super::super::config::ResidualConfig;

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
