//! Sweep specs: YAML wire types, validation, grid expansion and run ids. Knows nothing of burn.

pub mod error;
pub mod expand;
pub mod grid;
pub mod locate;
pub mod presets;
pub mod wire;

use std::path::{Path, PathBuf};

pub use crate::train::run_spec::RunSpec;
pub use error::SpecError;
pub use expand::PlannedRun;
pub use wire::SweepFile;

/// A parsed, validated and expanded sweep.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub path: PathBuf,
    pub file: SweepFile,
    pub runs: Vec<PlannedRun>,
    /// Grid points that expanded to a run already in the list (e.g. `block_size: 1` next to `full`).
    pub merged_duplicates: usize,
}

impl Sweep {
    /// Reads, validates and expands a sweep file; nothing is written.
    pub fn load(path: &Path) -> Result<Self, SpecError> {
        let text = std::fs::read_to_string(path).map_err(|e| SpecError {
            key: String::new(),
            message: format!("cannot read the sweep file: {e}"),
            file: Some(path.to_path_buf()),
            location: None,
        })?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Self, SpecError> {
        let file: SweepFile =
            serde_yaml_ng::from_str(text).map_err(|e| SpecError::from_yaml(path, &e))?;
        let locations = locate::Locations::parse(text);
        let (runs, merged_duplicates) =
            expand::expand(&file).map_err(|e| e.in_file(path, &locations))?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            runs,
            merged_duplicates,
        })
    }

    /// `results/NAME`.
    pub fn results_dir(&self, results_root: &Path) -> PathBuf {
        results_root.join(&self.file.name)
    }
}
