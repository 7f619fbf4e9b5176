//! The results folder, checked before a sweep writes anything: a folder this process may
//! write into (or create), with room in a path for the deepest file a run writes.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// The deepest path a run writes below its sweep's folder: a run id, the checkpoint being
/// written and a temporary file named with a pid and a call counter.
const DEEPEST: &str =
    "0123456789/checkpoint.new/depth_attn.parquet.4294967295.18446744073709551615.tmp";
/// Linux's limits on a path and on one name in it, in bytes.
const PATH_MAX: usize = 4096;
const NAME_MAX: usize = 255;

/// Why a sweep cannot write its runs under a `--results` folder (`flag`: `--results PATH`).
#[derive(Debug, Error)]
pub enum ResultsFolderError {
    #[error("{flag}: `{name}` is {bytes} bytes, longer than a folder name may be ({NAME_MAX})")]
    LongName {
        flag: String,
        name: String,
        bytes: usize,
    },
    #[error("{flag}: cannot read {}: {error}", .path.display())]
    Unreadable {
        flag: String,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{flag}: {} is not a folder; give a folder (a missing one is created)", .path.display())]
    NotAFolder { flag: String, path: PathBuf },
    #[error(
        "{flag}: cannot write into {} ({error}); give a folder you can write to",
        .path.display()
    )]
    NotWritable {
        flag: String,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "{flag}: a run's files would have paths of {bytes} bytes, over the system's limit of \
         {PATH_MAX}; give a shorter results path"
    )]
    PathTooLong { flag: String, bytes: usize },
}

/// Whether a sweep called `sweep` can write its runs under `results`.
pub fn check(results: &Path, sweep: &str) -> Result<(), ResultsFolderError> {
    let flag = format!("--results {}", results.display());
    if let Some(long) = results
        .components()
        .find(|c| c.as_os_str().len() > NAME_MAX)
    {
        return Err(ResultsFolderError::LongName {
            flag,
            name: long.as_os_str().to_string_lossy().into_owned(),
            bytes: long.as_os_str().len(),
        });
    }
    // The folder itself, or the nearest parent that exists: creating the rest is ours.
    let path = nearest_existing(results);
    let meta = match std::fs::metadata(&path) {
        Ok(meta) => meta,
        Err(error) => return Err(ResultsFolderError::Unreadable { flag, path, error }),
    };
    if !meta.is_dir() {
        return Err(ResultsFolderError::NotAFolder { flag, path });
    }
    if let Err(error) = writable(&path) {
        return Err(ResultsFolderError::NotWritable { flag, path, error });
    }
    let deepest = std::path::absolute(results)
        .unwrap_or_else(|_| results.to_path_buf())
        .join(sweep)
        .join(DEEPEST);
    let bytes = deepest.as_os_str().len();
    if bytes >= PATH_MAX {
        return Err(ResultsFolderError::PathTooLong { flag, bytes });
    }
    Ok(())
}

fn nearest_existing(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    while !p.exists() {
        if !p.pop() || p.as_os_str().is_empty() {
            return PathBuf::from(".");
        }
    }
    p
}

/// `access(2)` for writing and entering: a read-only mount says so here.
fn writable(dir: &Path) -> std::io::Result<()> {
    let path = CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: `path` is a valid NUL-terminated string that outlives the call.
    if unsafe { libc::access(path.as_ptr(), libc::W_OK | libc::X_OK) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_a_long_name_and_a_long_path_are_refused() {
        let tmp = std::env::temp_dir().join(format!("attnres-root-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        assert!(check(&tmp.join("new/deeper"), "s").is_ok());
        let file = tmp.join("afile");
        std::fs::write(&file, "").unwrap();
        let err = check(&file.join("sub"), "s").unwrap_err().to_string();
        assert!(err.contains("afile is not a folder"), "{err}");
        let err = check(&tmp.join("x".repeat(300)), "s")
            .unwrap_err()
            .to_string();
        assert!(err.contains("is 300 bytes"), "{err}");
        let deep = (0..20).fold(tmp.clone(), |p, _| p.join("y".repeat(200)));
        let err = check(&deep, "s").unwrap_err().to_string();
        assert!(err.contains("over the system's limit of 4096"), "{err}");
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
