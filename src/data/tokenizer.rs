//! Tokenizers: byte-level (the default), byte-level BPE trained with HF `tokenizers` on the
//! training split and cached as `tokenizer.json`, or an existing `tokenizer.json`.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::processors::PostProcessorWrapper;
use tokenizers::{AddedToken, Tokenizer as HfTokenizer, TokenizerBuilder, TokenizerImpl};

use super::DataError;
use super::config::TokenizerConfig;

pub enum Tokenizer {
    Byte,
    Hf {
        tokenizer: Box<HfTokenizer>,
        path: PathBuf,
    },
}

/// Byte-level BPE starts from the 256 bytes, so it needs room for at least one merge.
pub fn check_bpe_vocab(vocab_size: usize) -> Result<(), DataError> {
    if vocab_size < 257 {
        return Err(DataError::Config(format!(
            "bpe.vocab_size is {vocab_size}; byte-level BPE needs at least 257 (256 bytes + merges)"
        )));
    }
    Ok(())
}

impl Tokenizer {
    /// Builds the tokenizer of `config`; BPE trains on `train_text` unless already cached.
    pub fn build(
        config: &TokenizerConfig,
        train_text: &str,
        cache: &Path,
    ) -> Result<Self, DataError> {
        match config {
            TokenizerConfig::Byte => Ok(Self::Byte),
            TokenizerConfig::File { path } => Self::load(path),
            TokenizerConfig::Bpe { vocab_size } => {
                check_bpe_vocab(*vocab_size)?;
                let key = format!("{:x}", Sha256::digest(train_text.as_bytes()));
                let path = cache
                    .join("tokenizers")
                    .join(format!("bpe{vocab_size}-{}.json", &key[..16]));
                if !path.exists() {
                    train_bpe(train_text, *vocab_size, &path)?;
                }
                Self::load(&path)
            }
        }
    }

    pub fn load(path: &Path) -> Result<Self, DataError> {
        let tokenizer = HfTokenizer::from_file(path).map_err(|e| {
            DataError::Config(format!("cannot load tokenizer {}: {e}", path.display()))
        })?;
        Ok(Self::Hf {
            tokenizer: Box::new(tokenizer),
            path: path.to_path_buf(),
        })
    }

    pub fn vocab_size(&self) -> usize {
        match self {
            Self::Byte => 256,
            Self::Hf { tokenizer, .. } => tokenizer.get_vocab_size(true),
        }
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>, DataError> {
        match self {
            Self::Byte => Ok(text.bytes().map(u32::from).collect()),
            Self::Hf { tokenizer, path } => tokenizer
                .encode_fast(text, false)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| {
                    DataError::Config(format!("tokenizer {} failed: {e}", path.display()))
                }),
        }
    }

    /// The `tokenizer.json` a run folder should keep a copy of, if any.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Self::Byte => None,
            Self::Hf { path, .. } => Some(path),
        }
    }
}

fn train_bpe(text: &str, vocab_size: usize, path: &Path) -> Result<(), DataError> {
    let fail = |e: &dyn std::fmt::Display| DataError::Config(format!("BPE training failed: {e}"));
    let mut trainer = BpeTrainerBuilder::new()
        .vocab_size(vocab_size)
        .min_frequency(2)
        .show_progress(false)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .special_tokens(Vec::<AddedToken>::new())
        .build();
    let mut tokenizer: TokenizerImpl<
        BPE,
        NormalizerWrapper,
        ByteLevel,
        PostProcessorWrapper,
        ByteLevel,
    > = TokenizerBuilder::new()
        .with_model(BPE::default())
        .with_pre_tokenizer(Some(ByteLevel::default()))
        .with_decoder(Some(ByteLevel::default()))
        .build()
        .map_err(|e| fail(&e))?;
    // Train on paragraphs so that no single training "sequence" is the whole corpus.
    let paragraphs = text.split("\n\n").map(str::to_string);
    tokenizer
        .train(&mut trainer, paragraphs)
        .map_err(|e| fail(&e))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| DataError::io(dir, e))?;
    let tmp = path.with_extension("json.tmp");
    tokenizer.save(&tmp, false).map_err(|e| fail(&e))?;
    std::fs::rename(&tmp, path).map_err(|e| DataError::io(path, e))?;
    Ok(())
}
