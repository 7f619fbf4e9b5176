//! Data: corpora (built-in Shakespeare, text files, parquet, token files, synthetic tasks),
//! tokenizers and deterministic batches. Knows nothing of burn.

pub mod batch;
pub mod cache;
pub mod config;
pub mod corpus;
pub mod shakespeare;
pub mod synthetic;
pub mod tokenizer;

use std::path::{Path, PathBuf};

use thiserror::Error;

pub use batch::{Batch, eval_batches, train_batch};
pub use config::{CorpusConfig, DataConfig, SyntheticConfig, TokenizerConfig};
pub use tokenizer::Tokenizer;

#[derive(Debug, Error)]
pub enum DataError {
    #[error("{0}")]
    Missing(String),
    #[error("{0}")]
    Config(String),
    #[error("cannot fetch corpus: {0}")]
    Fetch(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl DataError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// One split's tokens; synthetic splits are whole rows of `row_len` with an answer mask.
#[derive(Debug, Clone)]
pub struct Split {
    pub tokens: Vec<u32>,
    pub row_len: Option<usize>,
    pub mask: Option<Vec<bool>>,
}

impl Split {
    pub fn stream(tokens: Vec<u32>) -> Self {
        Self {
            tokens,
            row_len: None,
            mask: None,
        }
    }

    pub fn examples(tokens: Vec<u32>, mask: Vec<bool>, row_len: usize) -> Self {
        Self {
            tokens,
            row_len: Some(row_len),
            mask: Some(mask),
        }
    }
}

/// A loaded corpus, tokenized.
pub struct Dataset {
    pub train: Split,
    pub val: Split,
    pub vocab_size: usize,
    /// UTF-8 bytes of the validation text, for bits per byte (None for token corpora).
    pub val_bytes: Option<usize>,
    pub tokenizer: Tokenizer,
}

/// Checks that the corpus of `config` is there, without reading it: a sweep calls this
/// before training anything.
pub fn check_available(config: &DataConfig) -> Result<(), DataError> {
    match &config.corpus {
        CorpusConfig::Shakespeare => shakespeare::load(&cache::cache_dir()).map(|_| ()),
        CorpusConfig::Text { paths } => corpus::expand(paths, "data.corpus.text.paths").map(|_| ()),
        CorpusConfig::Parquet { paths, .. } => {
            corpus::expand(paths, "data.corpus.parquet.paths").map(|_| ())
        }
        CorpusConfig::Tokens { train, val, .. } => {
            for (key, path) in [("train", train), ("val", val)] {
                if !path.is_file() {
                    return Err(DataError::Missing(format!(
                        "data.corpus.tokens.{key}: {} is not a readable file",
                        path.display()
                    )));
                }
            }
            Ok(())
        }
        CorpusConfig::Synthetic(_) => Ok(()),
    }
}

/// Loads and tokenizes the corpus of `config` for sequences of `context` tokens.
pub fn load(config: &DataConfig, context: usize, seed: u64) -> Result<Dataset, DataError> {
    let cache = cache::cache_dir();
    let byte_only = |what: &str| -> Result<(), DataError> {
        if config.tokenizer != TokenizerConfig::Byte {
            return Err(DataError::Config(format!(
                "data.tokenizer must be `byte` for a {what} corpus (it defines its own tokens)"
            )));
        }
        Ok(())
    };
    let docs = match &config.corpus {
        CorpusConfig::Shakespeare => shakespeare::load(&cache)?,
        CorpusConfig::Text { paths } => {
            corpus::read_text_files(&corpus::expand(paths, "data.corpus.text.paths")?)?
        }
        CorpusConfig::Parquet { paths, column } => corpus::read_parquet_documents(
            &corpus::expand(paths, "data.corpus.parquet.paths")?,
            column,
        )?,
        CorpusConfig::Tokens {
            train,
            val,
            vocab_size,
        } => {
            byte_only("tokens")?;
            let train = Split::stream(corpus::read_u16_tokens(train, *vocab_size)?);
            let val = Split::stream(corpus::read_u16_tokens(val, *vocab_size)?);
            return checked(
                Dataset {
                    train,
                    val,
                    vocab_size: *vocab_size,
                    val_bytes: None,
                    tokenizer: Tokenizer::Byte,
                },
                context,
            );
        }
        CorpusConfig::Synthetic(task) => {
            byte_only("synthetic")?;
            let (train, val) = synthetic::generate(task, context, seed)?;
            return checked(
                Dataset {
                    train,
                    val,
                    vocab_size: 256,
                    val_bytes: None,
                    tokenizer: Tokenizer::Byte,
                },
                context,
            );
        }
    };
    let (train_text, val_text) = corpus::split_documents(&docs);
    let tokenizer = Tokenizer::build(&config.tokenizer, &train_text, &cache)?;
    let dataset = Dataset {
        train: Split::stream(tokenizer.encode(&train_text)?),
        val: Split::stream(tokenizer.encode(&val_text)?),
        vocab_size: tokenizer.vocab_size(),
        val_bytes: Some(val_text.len()),
        tokenizer,
    };
    checked(dataset, context)
}

fn checked(d: Dataset, context: usize) -> Result<Dataset, DataError> {
    for (name, split) in [("train", &d.train), ("validation", &d.val)] {
        let need = split.row_len.unwrap_or(context + 1);
        if split.tokens.len() < need {
            return Err(DataError::Config(format!(
                "the {name} split has {} tokens, fewer than one sequence of {need}; use more data \
                 or a shorter model.context",
                split.tokens.len()
            )));
        }
    }
    Ok(d)
}
