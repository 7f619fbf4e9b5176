//! Helpers for tests that drive the `attnres` binary on tiny runs.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn attnres() -> Command {
    Command::new(env!("CARGO_BIN_EXE_attnres"))
}

/// A fresh, empty folder under the system temp dir, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("attnres-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A tiny synthetic-task RunSpec with `steps` steps of 8 sequences of 48 tokens.
pub fn tiny_spec(residual: &str, steps: usize, extra_train: &str) -> String {
    format!(
        "model: {{vocab_size: 256, d_model: 32, n_blocks: 2, n_heads: 2, context: 48, residual: {residual}}}
data:
  corpus: {{synthetic: {{task: khop, hops: 2, n_vars: 5, train_examples: 2000, val_examples: 64}}}}
train:
  batch_size: 8
  lr: 0.003
  warmup: 2
  budget: {{tokens: {}}}
  eval_every: 5
  eval_batches: 2
  checkpoint_every: 3
{extra_train}seed: 11
",
        steps * 8 * 48
    )
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The `step`, `loss/train`, `loss/val` and `acc/val` columns of a run's steps.csv.
pub fn loss_columns(run: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(run.join("steps.csv")).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            format!("{} {} {} {}", f[0], f[3], f[4], f[5])
        })
        .collect()
}

/// The venv `make setup` installs TensorBoard into (`$TENSORBOARD_VENV`, default
/// `~/.cache/attnres/tensorboard-venv`).
pub fn tensorboard_venv() -> PathBuf {
    std::env::var_os("TENSORBOARD_VENV").map_or_else(
        || PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/attnres/tensorboard-venv"),
        PathBuf::from,
    )
}
