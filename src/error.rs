//! Errors every floor may raise. [`InputError`] is the user's mistake, by where it lies: the
//! command line exits with status 2 for it and for a sweep file's or results folder's own
//! error (`cli::exit_code`), 1 for everything else.

use std::path::{Path, PathBuf};

use thiserror::Error;

/// Bad input from the user, named by where it lies and saying what to do. Exits with
/// status 2, before anything is written.
#[derive(Debug, Error)]
pub enum InputError {
    /// A flag whose value cannot work (`--steps 0: give at least 1 ...`).
    #[error("{flag}: {problem}")]
    Flag { flag: String, problem: String },
    /// Flags or arguments that do not go together, or one that is missing.
    #[error("{0}")]
    Arguments(String),
    /// A file or folder named on the command line or in a sweep (a run folder, a points
    /// CSV, a model file, a reports folder) that cannot serve.
    #[error("{}: {problem}", path.display())]
    File { path: PathBuf, problem: String },
    /// A run whose settings cannot train.
    #[error("run {run}: {problem}")]
    Run { run: String, problem: String },
}

impl InputError {
    /// `flag` (with its value, as the user gave it) and what is wrong with it.
    pub fn flag(flag: impl Into<String>, problem: impl ToString) -> Self {
        Self::Flag {
            flag: flag.into(),
            problem: problem.to_string(),
        }
    }

    /// The file or folder `path` and what is wrong with it.
    pub fn file(path: &Path, problem: impl ToString) -> Self {
        Self::File {
            path: path.to_path_buf(),
            problem: problem.to_string(),
        }
    }

    /// The run `run` and what is wrong with it.
    pub fn run(run: impl Into<String>, problem: impl ToString) -> Self {
        Self::Run {
            run: run.into(),
            problem: problem.to_string(),
        }
    }
}
