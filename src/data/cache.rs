//! The on-disk cache for corpora and tokenizers: `$ATTNRES_CACHE`, else `~/.cache/attnres`.

use std::path::PathBuf;

pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ATTNRES_CACHE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache").join("attnres")
}
