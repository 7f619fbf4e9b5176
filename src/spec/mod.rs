//! Sweep specs: YAML wire types, validation, grid expansion and run ids. Knows nothing of burn.

pub mod axes;
pub mod error;
pub mod expand;
pub mod family;
pub mod grid;
pub mod locate;
pub mod presets;
pub mod read;
pub mod run_file;
mod sizes;
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
    /// Line and column of every key, for errors found after loading.
    locations: locate::Locations,
}

/// The memory one run may use, and what it is, for errors ("this machine's 25.2 GB of RAM").
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryLimit {
    pub bytes: f64,
    pub what: String,
}

impl Sweep {
    /// Reads, validates and expands a sweep file; nothing is written.
    pub fn load(path: &Path) -> Result<Self, SpecError> {
        let text = read::read_text(path)?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Self, SpecError> {
        let file: SweepFile =
            serde_yaml_ng::from_str(text).map_err(|e| SpecError::from_yaml_text(path, &e, text))?;
        let locations = locate::Locations::parse(text);
        let (runs, merged_duplicates) =
            expand::expand(&file).map_err(|e| e.in_file(path, &locations))?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            runs,
            merged_duplicates,
            locations,
        })
    }

    /// What depends on the machine rather than the file: the corpus and tokenizer files
    /// exist (and a tokenizer file loads), and the estimated training memory of every run
    /// `selected` fits `limit`. Errors name the file, line and key; nothing is written.
    pub fn check_environment(
        &self,
        limit: Option<&MemoryLimit>,
        selected: &dyn Fn(&PlannedRun) -> bool,
    ) -> Result<(), SpecError> {
        let locate = |e: SpecError| e.in_file(&self.path, &self.locations);
        // Each data configuration once, with the longest context that reads it.
        let mut data: Vec<(&crate::data::DataConfig, usize)> = Vec::new();
        for run in &self.runs {
            let context = run.spec.model.context;
            match data.iter_mut().find(|(c, _)| *c == &run.spec.data) {
                Some(seen) => seen.1 = seen.1.max(context),
                None => data.push((&run.spec.data, context)),
            }
        }
        for (config, context) in data {
            let vocab = crate::data::check_available(config, context)
                .map_err(|(key, e)| locate(SpecError::at(key, e)))?;
            let runs = self.runs.iter().filter(|r| r.spec.data == *config);
            for run in runs {
                run_file::check_vocab(&run.spec, vocab)
                    .map_err(|e| locate(SpecError::at("model.vocab_size", e)))?;
            }
        }
        let Some(limit) = limit else { return Ok(()) };
        for run in self.runs.iter().filter(|r| selected(r)) {
            let need = run.spec.memory();
            if need.total() > limit.bytes {
                return Err(locate(SpecError::at(
                    &run.size_key,
                    format!(
                        "size `{}` with {} needs about {} to train ({} weights, gradients and Adam state, {} activations for {} sequences of {} tokens at once, {} of the allocator's kept heap), more than {}; use a smaller size, a shorter context or more train.micro_batches",
                        run.size,
                        run.arm,
                        crate::fmt::bytes_text(need.total()),
                        crate::fmt::bytes_text(need.state),
                        crate::fmt::bytes_text(need.activations),
                        run.spec.sequences_in_flight(),
                        run.spec.model.context,
                        crate::fmt::bytes_text(need.heap),
                        limit.what
                    ),
                )));
            }
        }
        Ok(())
    }

    /// `results/NAME`.
    pub fn results_dir(&self, results_root: &Path) -> PathBuf {
        results_root.join(&self.file.name)
    }
}
