//! Reading text corpora (files, parquet shards, token files) and splitting them by document.

use std::fs;
use std::path::{Path, PathBuf};

use polars_core::prelude::*;
use polars_io::prelude::*;

use super::DataError;

/// Every `VAL_EVERY`-th document (by sorted name or order) goes to validation.
pub const VAL_EVERY: usize = 8;

/// Train and validation text, split by whole documents so that nothing leaks between them.
/// A single document is split by position instead: its last 10% is validation.
pub fn split_documents(docs: &[(String, String)]) -> (String, String) {
    if docs.len() == 1 {
        let text = &docs[0].1;
        let mut cut = text.len() * 9 / 10;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        return (text[..cut].to_string(), text[cut..].to_string());
    }
    let is_val = |i: usize| {
        i % VAL_EVERY == VAL_EVERY - 1 || (docs.len() < VAL_EVERY && i == docs.len() - 1)
    };
    let join = |want_val: bool| {
        docs.iter()
            .enumerate()
            .filter(|(i, _)| is_val(*i) == want_val)
            .map(|(_, (_, t))| t.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    (join(false), join(true))
}

/// Expands paths and globs into a sorted, de-duplicated file list; an empty match is an error.
pub fn expand(patterns: &[String], key: &str) -> Result<Vec<PathBuf>, DataError> {
    let mut files = Vec::new();
    for pattern in patterns {
        let matches = glob::glob(pattern)
            .map_err(|e| DataError::Config(format!("{key}: bad glob `{pattern}`: {e}")))?
            .filter_map(Result::ok)
            .filter(|p| p.is_file())
            .collect::<Vec<_>>();
        if matches.is_empty() {
            return Err(DataError::Missing(format!(
                "{key}: `{pattern}` matches no readable file; check the path (relative paths start \
                 from the current directory)"
            )));
        }
        files.extend(matches);
    }
    files.sort();
    files.dedup();
    Ok(files)
}

pub fn read_text_files(files: &[PathBuf]) -> Result<Vec<(String, String)>, DataError> {
    files
        .iter()
        .map(|f| {
            let text = fs::read_to_string(f).map_err(|e| DataError::io(f, e))?;
            Ok((f.display().to_string(), text))
        })
        .collect()
}

/// The `column` of every row of every shard, in order, as documents.
pub fn read_parquet_documents(
    files: &[PathBuf],
    column: &str,
) -> Result<Vec<(String, String)>, DataError> {
    let mut docs = Vec::new();
    for file in files {
        let bad = |e: PolarsError| {
            DataError::Config(format!("{}: cannot read parquet: {e}", file.display()))
        };
        let reader = fs::File::open(file).map_err(|e| DataError::io(file, e))?;
        let df = ParquetReader::new(reader)
            .with_columns(Some(vec![column.to_string()]))
            .finish()
            .map_err(|e| {
                DataError::Config(format!(
                    "{}: no text column `{column}` ({e}); set data.corpus.parquet.column",
                    file.display()
                ))
            })?;
        let series = df.column(column).map_err(bad)?;
        let texts = series.str().map_err(|e| {
            DataError::Config(format!(
                "{}: column `{column}` is not text: {e}",
                file.display()
            ))
        })?;
        for (i, text) in texts.iter().enumerate() {
            if let Some(text) = text {
                docs.push((format!("{}#{i}", file.display()), text.to_string()));
            }
        }
    }
    Ok(docs)
}

/// A nanoGPT token file: little-endian uint16.
pub fn read_u16_tokens(path: &Path, vocab_size: usize) -> Result<Vec<u32>, DataError> {
    let bytes = fs::read(path).map_err(|e| DataError::io(path, e))?;
    if bytes.len() % 2 != 0 {
        return Err(DataError::Config(format!(
            "{}: {} bytes is not a whole number of uint16 tokens",
            path.display(),
            bytes.len()
        )));
    }
    let tokens: Vec<u32> = bytes
        .chunks_exact(2)
        .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])))
        .collect();
    if let Some(&max) = tokens.iter().max()
        && max as usize >= vocab_size
    {
        return Err(DataError::Config(format!(
            "{}: token id {max} is outside data.corpus.tokens.vocab_size {vocab_size}",
            path.display()
        )));
    }
    Ok(tokens)
}
