//! Corpora and tokenizers: text files split by file, parquet shards read with polars,
//! nanoGPT uint16 token files, and a BPE tokenizer trained and cached as tokenizer.json.

#[path = "common/run.rs"]
mod run;

use attnres::data::{self, CorpusConfig, DataConfig, TokenizerConfig};
use polars_core::prelude::*;
use polars_io::prelude::*;
use run::*;

fn config(corpus: CorpusConfig, tokenizer: TokenizerConfig) -> DataConfig {
    DataConfig { corpus, tokenizer }
}

fn glob(dir: &std::path::Path, pattern: &str) -> Vec<String> {
    vec![dir.join(pattern).display().to_string()]
}

#[test]
fn text_files_split_by_file_and_a_single_file_by_position() {
    let tmp = TempDir::new("text");
    for i in 0..9 {
        write(
            tmp.path(),
            &format!("doc{i}.txt"),
            &format!("document {i} ").repeat(40),
        );
    }
    let d = data::load(
        &config(
            CorpusConfig::Text {
                paths: glob(tmp.path(), "doc*.txt"),
            },
            TokenizerConfig::Byte,
        ),
        32,
        0,
    )
    .unwrap();
    let val = String::from_utf8(d.val.tokens.iter().map(|&t| t as u8).collect()).unwrap();
    assert!(
        val.starts_with("document 7 ") && !val.contains("document 6"),
        "every 8th file is validation"
    );
    assert_eq!(d.vocab_size, 256);
    assert_eq!(d.val_bytes, Some(val.len()));

    let one = write(tmp.path(), "one.txt", &"abcdefghij".repeat(100));
    let d = data::load(
        &config(
            CorpusConfig::Text {
                paths: vec![one.display().to_string()],
            },
            TokenizerConfig::Byte,
        ),
        16,
        0,
    )
    .unwrap();
    assert_eq!(
        (d.train.tokens.len(), d.val.tokens.len()),
        (900, 100),
        "the last 10% is validation"
    );
}

#[test]
fn parquet_shards_are_read_by_column() {
    let tmp = TempDir::new("parquet");
    for shard in 0..2 {
        let texts: Vec<String> = (0..8)
            .map(|i| format!("shard {shard} row {i} ").repeat(10))
            .collect();
        let mut df = df!("id" => (0..8).collect::<Vec<i32>>(), "text" => texts).unwrap();
        let file = std::fs::File::create(tmp.path().join(format!("part-{shard}.parquet"))).unwrap();
        ParquetWriter::new(file).finish(&mut df).unwrap();
    }
    let corpus = |column: &str| CorpusConfig::Parquet {
        paths: glob(tmp.path(), "part-*.parquet"),
        column: column.into(),
    };
    let d = data::load(&config(corpus("text"), TokenizerConfig::Byte), 32, 0).unwrap();
    let val = String::from_utf8(d.val.tokens.iter().map(|&t| t as u8).collect()).unwrap();
    assert!(
        val.contains("shard 0 row 7") && val.contains("shard 1 row 7"),
        "every 8th document is validation: {val}"
    );
    let err = data::load(&config(corpus("body"), TokenizerConfig::Byte), 32, 0)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("no text column `body`") && err.contains("data.corpus.parquet.column"),
        "{err}"
    );
}

#[test]
fn token_files_are_little_endian_u16_and_checked_against_the_vocabulary() {
    let tmp = TempDir::new("tokens");
    let bytes = |v: &[u16]| v.iter().flat_map(|t| t.to_le_bytes()).collect::<Vec<u8>>();
    let train: Vec<u16> = (0..500).map(|i| (i * 7 % 1000) as u16).collect();
    std::fs::write(tmp.path().join("train.bin"), bytes(&train)).unwrap();
    std::fs::write(tmp.path().join("val.bin"), bytes(&train[..100])).unwrap();
    let corpus = |vocab_size| CorpusConfig::Tokens {
        train: tmp.path().join("train.bin"),
        val: tmp.path().join("val.bin"),
        vocab_size,
    };
    let d = data::load(&config(corpus(1000), TokenizerConfig::Byte), 32, 0).unwrap();
    assert_eq!(d.train.tokens[..4], [0, 7, 14, 21]);
    assert_eq!(d.vocab_size, 1000);
    let err = data::load(&config(corpus(500), TokenizerConfig::Byte), 32, 0)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("outside data.corpus.tokens.vocab_size 500"),
        "{err}"
    );
}

#[test]
fn bpe_is_trained_on_the_training_split_and_cached() {
    let tmp = TempDir::new("bpe");
    let cache = tmp.path().join("cache");
    // SAFETY of the process environment: this test binary sets ATTNRES_CACHE only here.
    unsafe { std::env::set_var("ATTNRES_CACHE", &cache) };
    let text = "the quick brown fox jumps over the lazy dog. ".repeat(200);
    for i in 0..3 {
        write(tmp.path(), &format!("t{i}.txt"), &text);
    }
    let c = config(
        CorpusConfig::Text {
            paths: glob(tmp.path(), "t*.txt"),
        },
        TokenizerConfig::Bpe { vocab_size: 300 },
    );
    let d = data::load(&c, 16, 0).unwrap();
    assert!(
        d.vocab_size <= 300 && d.vocab_size > 256,
        "vocab {}",
        d.vocab_size
    );
    let file = d.tokenizer.file().unwrap().to_path_buf();
    assert!(file.starts_with(cache.join("tokenizers")) && file.is_file());
    assert!(
        d.train.tokens.len() < text.len() * 2 * 9 / 10,
        "merges shorten the text"
    );
    let again = data::load(&c, 16, 0).unwrap();
    assert_eq!(
        again.tokenizer.file().unwrap(),
        file,
        "the cached tokenizer is reused"
    );
    assert_eq!(again.train.tokens, d.train.tokens);
}
