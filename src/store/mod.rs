//! The run store: the layout of a run folder, its status, metrics files, atomic writes and
//! the lease that keeps two runners from training one run.
//! Knows nothing of burn; checkpoints are written by `train` into [`RunDir::checkpoint`].

pub mod event_file;
pub mod lease;
pub mod metrics;
pub mod root;
pub mod status;
pub mod tensorboard;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use thiserror::Error;

pub use status::{RunState, Status};

#[derive(Debug, Error)]
pub enum StoreError {
    /// The OS error is part of the message, not a source: chained, it printed twice.
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: {message}; the file is damaged: delete it (or the run folder) and re-run")]
    Corrupt { path: PathBuf, message: String },
    /// Writing failed (the disk filled, a write error): the files already there are intact.
    #[error("{path}: cannot write it: {message}")]
    Write { path: PathBuf, message: String },
}

impl StoreError {
    pub fn io(path: &Path, error: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            error,
        }
    }

    pub fn write(path: &Path, message: impl std::fmt::Display) -> Self {
        Self::Write {
            path: path.to_path_buf(),
            message: message.to_string(),
        }
    }

    pub fn corrupt(path: &Path, message: impl std::fmt::Display) -> Self {
        Self::Corrupt {
            path: path.to_path_buf(),
            message: message.to_string(),
        }
    }
}

/// One run folder, `results/SWEEP/RUN_ID/`.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub root: PathBuf,
}

impl RunDir {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn spec(&self) -> PathBuf {
        self.root.join("spec.json")
    }
    pub fn status(&self) -> PathBuf {
        self.root.join("status.json")
    }
    pub fn steps(&self) -> PathBuf {
        self.root.join("steps.csv")
    }
    pub fn layers(&self) -> PathBuf {
        self.root.join("layers.parquet")
    }
    pub fn depth_attn(&self) -> PathBuf {
        self.root.join("depth_attn.parquet")
    }
    pub fn summary(&self) -> PathBuf {
        self.root.join("summary.json")
    }
    pub fn tokenizer(&self) -> PathBuf {
        self.root.join("tokenizer.json")
    }
    pub fn checkpoint(&self) -> PathBuf {
        self.root.join("checkpoint")
    }
    /// `checkpoint.new` (being written) or `checkpoint.old` (being replaced).
    pub fn checkpoint_sibling(&self, suffix: &str) -> PathBuf {
        self.root.join(format!("checkpoint{suffix}"))
    }

    /// The newest complete checkpoint folder (one with its `state.json`), if any: the main
    /// one, else one left by a save that was interrupted between its two renames.
    pub fn find_checkpoint(&self) -> Option<PathBuf> {
        [
            self.checkpoint(),
            self.checkpoint_sibling(".new"),
            self.checkpoint_sibling(".old"),
        ]
        .into_iter()
        .find(|p| p.join("state.json").is_file())
    }

    pub fn create(&self) -> Result<(), StoreError> {
        fs::create_dir_all(&self.root).map_err(|e| StoreError::io(&self.root, e))
    }

    pub fn read_status(&self) -> Result<Option<Status>, StoreError> {
        read_json_opt(&self.status())
    }

    pub fn write_status(&self, status: &Status) -> Result<(), StoreError> {
        write_json(&self.status(), status)
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a reader (or a crash)
/// never sees half a file. The temporary name is unique to the process and the call: two
/// processes writing one file (two `attnres run` of a sweep write its `sweep.yaml`) must not
/// rename each other's temporary away.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.{call}.tmp", std::process::id()));
    let tmp = path.with_file_name(name);
    let written = fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_all()))
        .map_err(|e| StoreError::io(&tmp, e))
        .and_then(|_| fs::rename(&tmp, path).map_err(|e| StoreError::io(path, e)));
    if written.is_err() {
        // A failed write leaves no temporary behind.
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// `name.ext` -> `name.ext.tmp` beside it.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    let mut text = serde_json::to_string_pretty(value).map_err(|e| StoreError::corrupt(path, e))?;
    text.push('\n');
    write_atomic(path, text.as_bytes())
}

pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, StoreError> {
    let text = fs::read_to_string(path).map_err(|e| StoreError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| StoreError::corrupt(path, e))
}

pub fn read_json_opt<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StoreError> {
    if !path.exists() {
        return Ok(None);
    }
    read_json(path).map(Some)
}
