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

pub use batch::{Batch, eval_batches, train_batch, whole_split_batches};
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
    /// The OS error is part of the message, not a source: chained, it printed twice.
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

impl DataError {
    pub fn io(path: &Path, error: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            error,
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

/// Checks what the configuration alone can tell, before any file is read: synthetic task
/// parameters and example lengths against `context`, BPE vocabulary size, and that corpora
/// which define their own tokens use the byte tokenizer. The error comes with the key it is
/// about (`data.corpus` or `data.tokenizer`).
pub fn validate_config(
    config: &DataConfig,
    context: usize,
) -> Result<(), (&'static str, DataError)> {
    let own_tokens = match &config.corpus {
        CorpusConfig::Synthetic(task) => {
            synthetic::validate(task, context).map_err(|e| ("data.corpus", e))?;
            Some("synthetic")
        }
        CorpusConfig::Tokens { vocab_size, .. } => {
            if *vocab_size == 0 || *vocab_size > 1 << 16 {
                return Err((
                    "data.corpus",
                    DataError::Config(format!(
                        "tokens.vocab_size is {vocab_size}; uint16 token files hold 1 to 65536 ids"
                    )),
                ));
            }
            Some("tokens")
        }
        _ => None,
    };
    match (&config.tokenizer, own_tokens) {
        (TokenizerConfig::Byte, _) => Ok(()),
        (_, Some(what)) => Err((
            "data.tokenizer",
            DataError::Config(format!(
                "must be `byte` for a {what} corpus, which defines its own tokens; remove data.tokenizer"
            )),
        )),
        (TokenizerConfig::Bpe { vocab_size }, None) => {
            tokenizer::check_bpe_vocab(*vocab_size).map_err(|e| ("data.tokenizer", e))
        }
        (TokenizerConfig::File { .. }, None) => Ok(()),
    }
}

/// Checks the corpus and tokenizer files of `config` for sequences of `context` tokens
/// without tokenizing anything: they are there, parquet shards are parquet with the named
/// text column, text files are not all empty, token files are whole uint16 tokens inside
/// the vocabulary with at least one sequence per split, and a tokenizer file loads. A sweep
/// and `train` call this before writing anything. Returns the size of the vocabulary the
/// data comes in, which the model's must hold.
pub fn check_available(
    config: &DataConfig,
    context: usize,
) -> Result<usize, (&'static str, DataError)> {
    let corpus = |e| ("data.corpus", e);
    match &config.corpus {
        CorpusConfig::Shakespeare => shakespeare::load(&cache::cache_dir())
            .map(|_| ())
            .map_err(corpus)?,
        CorpusConfig::Text { paths } => corpus::expand(paths, "data.corpus.text.paths")
            .and_then(|files| {
                let bytes_are_tokens = config.tokenizer == TokenizerConfig::Byte;
                corpus::check_text(&files, context, bytes_are_tokens)
            })
            .map_err(corpus)?,
        CorpusConfig::Parquet { paths, column } => {
            corpus::expand(paths, "data.corpus.parquet.paths")
                .and_then(|files| corpus::check_parquet(&files, column))
                .map_err(corpus)?
        }
        CorpusConfig::Tokens {
            train,
            val,
            vocab_size,
        } => {
            for (key, path) in [("train", train), ("val", val)] {
                if !path.is_file() {
                    return Err(corpus(DataError::Missing(format!(
                        "data.corpus.tokens.{key}: {} is not a readable file",
                        path.display()
                    ))));
                }
                let tokens = corpus::scan_u16_tokens(path, *vocab_size).map_err(corpus)?;
                if tokens < context + 1 {
                    return Err(corpus(DataError::Config(format!(
                        "data.corpus.tokens.{key}: {} holds {tokens} tokens, fewer than one \
                         sequence of {} (model.context + 1); use more data or a shorter context",
                        path.display(),
                        context + 1
                    ))));
                }
            }
        }
        CorpusConfig::Synthetic(_) => {}
    }
    if let TokenizerConfig::File { path } = &config.tokenizer {
        if !path.is_file() {
            return Err((
                "data.tokenizer",
                DataError::Missing(format!(
                    "file.path: {} does not exist; give the path of a Hugging Face tokenizer.json",
                    path.display()
                )),
            ));
        }
        let tokenizer = Tokenizer::load(path).map_err(|e| ("data.tokenizer", e))?;
        return Ok(tokenizer.vocab_size());
    }
    Ok(match (&config.corpus, &config.tokenizer) {
        (CorpusConfig::Tokens { vocab_size, .. }, _) => *vocab_size,
        (_, TokenizerConfig::Bpe { vocab_size }) => *vocab_size,
        _ => Tokenizer::Byte.vocab_size(),
    })
}

/// Loads and tokenizes the corpus of `config` for sequences of `context` tokens.
pub fn load(config: &DataConfig, context: usize, seed: u64) -> Result<Dataset, DataError> {
    let cache = cache::cache_dir();
    validate_config(config, context)
        .map_err(|(key, e)| DataError::Config(format!("{key}: {e}")))?;
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
