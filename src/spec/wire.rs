//! The sweep file as written (serde_yaml_ng; unknown keys refused).

use serde::{Deserialize, Serialize};

use crate::data::{CorpusConfig, TokenizerConfig};
use crate::model::config::{ResidualEntry, Variant};
use crate::train::config::{Budget, TrainConfig};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepFile {
    /// The results folder name: `results/NAME/`.
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// What the sweep costs on the reference machine, in words (shown by `plan`).
    #[serde(default)]
    pub cost: Option<String>,
    pub data: DataSection,
    /// Several corpora or tasks, each in place of `data.corpus`: the outermost axis of the
    /// grid (e.g. k-hop at 1 to 4 hops for the reasoning probes).
    #[serde(default, with = "serde_yaml_ng::with::singleton_map_recursive")]
    pub tasks: Vec<CorpusConfig>,
    pub model: ModelDefaults,
    /// Model sizes: preset names or `{d_model, n_blocks[, n_heads, name]}`.
    #[serde(default)]
    pub sizes: Vec<SizeEntry>,
    /// A family of shapes instead of `sizes` (the report's Fig. 7).
    #[serde(default)]
    pub depth_width: Option<DepthWidth>,
    /// The variants: `baseline`, `full`, `{variant: block, block_size: 4}`, ablations...
    pub residual: Vec<ResidualEntry>,
    /// Block sizes for every `block` entry that gives none.
    #[serde(default)]
    pub block_size: Vec<usize>,
    #[serde(default = "default_seeds")]
    pub seeds: Vec<u64>,
    /// The arm every other is compared with in reports and fits, by its label (`block S=8`);
    /// `baseline` when not given.
    #[serde(default)]
    pub reference_arm: Option<String>,
    /// Defaults for every run; `lr` and `budget` may be overridden below.
    pub train: TrainConfig,
    /// Several budgets: an axis of the grid (otherwise `train.budget`).
    #[serde(default, with = "serde_yaml_ng::with::singleton_map_recursive")]
    pub budgets: Vec<Budget>,
    /// Learning rate per size: a list, or a power law in non-embedding parameters.
    #[serde(default, with = "serde_yaml_ng::with::singleton_map_recursive")]
    pub lr: Option<LrSpec>,
    #[serde(default)]
    pub grid: Grid,
}

/// The `data` section: a corpus (unless `tasks` gives several) and a tokenizer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSection {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "serde_yaml_ng::with::singleton_map_recursive"
    )]
    pub corpus: Option<CorpusConfig>,
    #[serde(default, with = "serde_yaml_ng::with::singleton_map_recursive")]
    pub tokenizer: TokenizerConfig,
}

fn default_seeds() -> Vec<u64> {
    vec![0]
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelDefaults {
    #[serde(default = "default_vocab")]
    pub vocab_size: usize,
    pub context: usize,
    #[serde(default = "default_ff_mult")]
    pub ff_mult: f64,
    /// n_heads = d_model / head_dim unless a size says otherwise.
    #[serde(default = "default_head_dim")]
    pub head_dim: usize,
}

fn default_vocab() -> usize {
    256
}
fn default_ff_mult() -> f64 {
    8.0 / 3.0
}
fn default_head_dim() -> usize {
    32
}

/// A size: a preset name, or explicit dimensions.
#[derive(Debug, Clone, PartialEq)]
pub enum SizeEntry {
    Preset(String),
    Explicit(ExplicitSize),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExplicitSize {
    #[serde(default)]
    pub name: Option<String>,
    pub d_model: usize,
    pub n_blocks: usize,
    #[serde(default)]
    pub n_heads: Option<usize>,
}

impl<'de> Deserialize<'de> for SizeEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{self, MapAccess, Visitor};
        struct SizeVisitor;
        impl<'de> Visitor<'de> for SizeVisitor {
            type Value = SizeEntry;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a preset name (micro, tiny, ...) or {d_model, n_blocks}")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<SizeEntry, E> {
                Ok(SizeEntry::Preset(name.to_string()))
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<SizeEntry, M::Error> {
                ExplicitSize::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(SizeEntry::Explicit)
            }
        }
        deserializer.deserialize_any(SizeVisitor)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DepthWidth {
    /// `d_model / n_blocks` of each shape.
    pub ratios: Vec<f64>,
    /// Hold non-embedding parameters fixed at this count (or each of these counts)...
    #[serde(default, deserialize_with = "one_or_many")]
    pub non_embedding_params: Vec<f64>,
    /// ...or training FLOPs per token.
    #[serde(default, deserialize_with = "one_or_many")]
    pub flops_per_token: Vec<f64>,
}

/// A number or a list of numbers.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(f64),
        Many(Vec<f64>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(x) => vec![x],
        OneOrMany::Many(v) => v,
    })
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum LrSpec {
    /// One learning rate per size, in the order of `sizes`.
    PerSize(Vec<f64>),
    /// `lr = base * (N_nonemb / ref_params) ^ exponent`.
    Rule {
        base: f64,
        ref_params: f64,
        exponent: f64,
    },
}

/// The grid is the cartesian product of its axes, except where zipped or excluded.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grid {
    /// Axes that advance together, e.g. `[[size, budget]]`.
    #[serde(default)]
    pub zip: Vec<Vec<Axis>>,
    /// Drop the runs matching every key of an entry.
    #[serde(default)]
    pub exclude: Vec<Exclude>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    Size,
    Residual,
    Budget,
    Seed,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exclude {
    #[serde(default)]
    pub size: Option<OneOrMany<String>>,
    #[serde(default)]
    pub variant: Option<OneOrMany<Variant>>,
    #[serde(default)]
    pub block_size: Option<OneOrMany<usize>>,
    #[serde(default)]
    pub seed: Option<OneOrMany<u64>>,
}

/// An `exclude` key's value: one value (`seed: 1`) or a list of them (`seed: [3, 4, 5]`),
/// matching any.
#[derive(Debug, Clone)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

/// By hand, not `untagged`: a bad value then names what was expected ("unknown variant
/// `fulll`, expected one of ...") instead of "did not match any variant".
impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = serde_yaml_ng::Value::deserialize(d)?;
        let one = |v: serde_yaml_ng::Value| T::deserialize(v).map_err(D::Error::custom);
        match value {
            serde_yaml_ng::Value::Sequence(items) => items
                .into_iter()
                .map(one)
                .collect::<Result<_, _>>()
                .map(Self::Many),
            other => one(other).map(Self::One),
        }
    }
}

impl<T: PartialEq> OneOrMany<T> {
    pub fn contains(&self, value: &T) -> bool {
        match self {
            Self::One(v) => v == value,
            Self::Many(vs) => vs.contains(value),
        }
    }
}
