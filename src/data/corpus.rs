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
    let join = |want_val: bool| {
        docs.iter()
            .enumerate()
            .filter(|(i, _)| is_val(*i, docs.len()) == want_val)
            .map(|(_, (_, t))| t.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    (join(false), join(true))
}

/// Whether document `i` of `n` (more than one) goes to validation.
fn is_val(i: usize, n: usize) -> bool {
    i % VAL_EVERY == VAL_EVERY - 1 || (n < VAL_EVERY && i == n - 1)
}

/// The bytes [`split_documents`] puts in train and in validation, from the documents'
/// lengths alone (the byte tokenizer's token counts).
pub fn split_lengths(lengths: &[u64]) -> (u64, u64) {
    if let [one] = lengths {
        return (one * 9 / 10, one - one * 9 / 10);
    }
    let (mut train, mut val) = ((0, 0), (0, 0)); // (bytes, documents)
    for (i, &len) in lengths.iter().enumerate() {
        let side = if is_val(i, lengths.len()) {
            &mut val
        } else {
            &mut train
        };
        *side = (side.0 + len, side.1 + 1);
    }
    // Documents are joined by a blank line.
    let joined = |(bytes, docs): (u64, u64)| bytes + 2 * docs.saturating_sub(1);
    (joined(train), joined(val))
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
    check_u16_length(path, bytes.len() as u64)?;
    let tokens: Vec<u32> = bytes
        .chunks_exact(2)
        .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])))
        .collect();
    check_u16_ids(path, tokens.iter().max().copied(), vocab_size)?;
    Ok(tokens)
}

/// What [`read_u16_tokens`] checks, reading in chunks and keeping nothing: the tokens the
/// file holds.
pub fn scan_u16_tokens(path: &Path, vocab_size: usize) -> Result<usize, DataError> {
    use std::io::Read;
    let io = |e| DataError::io(path, e);
    let mut file = fs::File::open(path).map_err(io)?;
    check_u16_length(path, file.metadata().map_err(io)?.len())?;
    let (mut buffer, mut max, mut count) = (Vec::with_capacity(1 << 20), None::<u32>, 0);
    loop {
        // Whole chunks of 1 MiB (an even number of bytes) until the last, of a file of even
        // length: whole tokens each time.
        buffer.clear();
        (&mut file)
            .take(1 << 20)
            .read_to_end(&mut buffer)
            .map_err(io)?;
        if buffer.is_empty() {
            break;
        }
        for c in buffer.chunks_exact(2) {
            let id = u32::from(u16::from_le_bytes([c[0], c[1]]));
            max = Some(max.map_or(id, |m: u32| m.max(id)));
        }
        count += buffer.len() / 2;
    }
    check_u16_ids(path, max, vocab_size)?;
    Ok(count)
}

fn check_u16_length(path: &Path, bytes: u64) -> Result<(), DataError> {
    if !bytes.is_multiple_of(2) {
        return Err(DataError::Config(format!(
            "{}: {bytes} bytes is not a whole number of uint16 tokens; the file is cut short \
             or not a uint16 token file",
            path.display(),
        )));
    }
    Ok(())
}

fn check_u16_ids(path: &Path, max: Option<u32>, vocab_size: usize) -> Result<(), DataError> {
    match max {
        Some(max) if max as usize >= vocab_size => Err(DataError::Config(format!(
            "{}: token id {max} is outside data.corpus.tokens.vocab_size {vocab_size}; set \
             vocab_size above the largest id",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// Each shard is parquet (its footer reads) and has `column` as text, reading the footer
/// only.
pub fn check_parquet(files: &[PathBuf], column: &str) -> Result<(), DataError> {
    for file in files {
        let reader = fs::File::open(file).map_err(|e| DataError::io(file, e))?;
        let schema = ParquetReader::new(reader).schema().map_err(|e| {
            DataError::Config(format!(
                "{}: not a parquet file, or a damaged one ({e}); data.corpus.parquet.paths must \
                 name parquet shards",
                file.display()
            ))
        })?;
        let Some(field) = schema.get(column) else {
            let names: Vec<&str> = schema.iter_names().map(|n| n.as_str()).collect();
            return Err(DataError::Config(format!(
                "{}: no column `{column}` (it has {}); set data.corpus.parquet.column",
                file.display(),
                names.join(", ")
            )));
        };
        use polars_core::datatypes::ArrowDataType as A;
        if !matches!(field.dtype, A::Utf8 | A::LargeUtf8 | A::Utf8View) {
            return Err(DataError::Config(format!(
                "{}: column `{column}` holds {:?}, not text; set data.corpus.parquet.column to a \
                 text column",
                file.display(),
                field.dtype
            )));
        }
    }
    Ok(())
}

/// Text files that hold text, and, where a byte is a token (`bytes_are_tokens`), at least
/// one sequence of `context` tokens in each split.
pub fn check_text(
    files: &[PathBuf],
    context: usize,
    bytes_are_tokens: bool,
) -> Result<(), DataError> {
    let lengths = files
        .iter()
        .map(|f| Ok(fs::metadata(f).map_err(|e| DataError::io(f, e))?.len()))
        .collect::<Result<Vec<u64>, DataError>>()?;
    if lengths.iter().all(|&l| l == 0) {
        return Err(DataError::Config(format!(
            "data.corpus.text.paths: the {} file(s) matched are all empty; give files with text",
            files.len()
        )));
    }
    let (train, val) = split_lengths(&lengths);
    let need = context as u64 + 1;
    for (name, bytes) in [("train", train), ("validation", val)] {
        if bytes_are_tokens && bytes < need {
            return Err(DataError::Config(format!(
                "data.corpus.text.paths: the {name} split gets {bytes} bytes (every {VAL_EVERY}th \
                 file, or the last 10% of a single file, is validation), fewer than one sequence \
                 of {need} tokens; use more text or a shorter model.context"
            )));
        }
    }
    Ok(())
}
