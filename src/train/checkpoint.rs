//! Checkpoints: model, optimizer, step and data cursor, written atomically.
//!
//! A checkpoint is a folder written as `checkpoint.new/` (state.json last, as the mark of a
//! complete write) and then swapped in by renames. A crash at any point leaves one complete
//! checkpoint to resume from: `checkpoint/`, else `checkpoint.new/`, else `checkpoint.old/`.

use std::fs;
use std::path::Path;

use burn::module::Module;
use burn::optim::ModuleOptimizer;
use serde::{Deserialize, Serialize};

use crate::model::Lm;
use crate::store::{RunDir, StoreError, read_json, write_json};

/// Where training stands. Batches are a pure function of (seed, step), so the step is the
/// whole data cursor and the seed the whole RNG state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointState {
    pub run_id: String,
    /// Optimizer steps completed.
    pub step: u64,
    pub tokens: u64,
    pub wall_s: f64,
    pub seed: u64,
}

pub fn save(
    dir: &RunDir,
    model: &Lm,
    optim: &ModuleOptimizer,
    state: &CheckpointState,
) -> anyhow::Result<()> {
    let (main, new, old) = (
        dir.checkpoint(),
        dir.checkpoint_sibling(".new"),
        dir.checkpoint_sibling(".old"),
    );
    if new.exists() {
        fs::remove_dir_all(&new).map_err(|e| StoreError::io(&new, e))?;
    }
    fs::create_dir_all(&new).map_err(|e| StoreError::io(&new, e))?;
    model
        .clone()
        .save_file(new.join("model.bpk"))
        .map_err(|e| anyhow::anyhow!("{}: cannot save model: {e}", new.display()))?;
    optim
        .save(new.join("optim.bpk"))
        .map_err(|e| anyhow::anyhow!("{}: cannot save optimizer: {e}", new.display()))?;
    write_json(&new.join("state.json"), state)?;
    if old.exists() {
        fs::remove_dir_all(&old).map_err(|e| StoreError::io(&old, e))?;
    }
    if main.exists() {
        fs::rename(&main, &old).map_err(|e| StoreError::io(&main, e))?;
    }
    fs::rename(&new, &main).map_err(|e| StoreError::io(&main, e))?;
    if old.exists() {
        fs::remove_dir_all(&old).map_err(|e| StoreError::io(&old, e))?;
    }
    Ok(())
}

pub fn read_state(path: &Path) -> Result<CheckpointState, StoreError> {
    read_json(&path.join("state.json"))
}

/// Loads the optimizer state into `optim`. The state is keyed by parameter id, so `optim`
/// must have been built (its groups included) from a model loaded by [`load_model`], which
/// restores the saved ids.
pub fn load_optimizer(path: &Path, optim: ModuleOptimizer) -> anyhow::Result<ModuleOptimizer> {
    optim.load(path.join("optim.bpk")).map_err(|e| {
        anyhow::anyhow!(
            "{}: cannot load optimizer state: {e:?}; delete the checkpoint to restart",
            path.display()
        )
    })
}

/// Loads the weights and their parameter ids into `model`.
pub fn load_model(path: &Path, model: Lm) -> anyhow::Result<Lm> {
    model.try_load_file(path.join("model.bpk")).map_err(|e| {
        anyhow::anyhow!(
            "{}: cannot load model weights: {e:?}; delete the checkpoint to restart",
            path.display()
        )
    })
}
