//! Helpers for the command-line tests: the binary, the repository, a tiny synthetic sweep.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};

use assert_cmd::Command;

pub fn attnres() -> Command {
    Command::cargo_bin("attnres").expect("the attnres binary is built")
}

pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Runs `args`, expects success, returns stdout.
pub fn ok(args: &[&str]) -> String {
    let out = attnres()
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    String::from_utf8(out).unwrap()
}

/// Runs `args`, expects exit 2 (bad input), returns stderr.
pub fn refused(args: &[&str]) -> String {
    let out = attnres()
        .args(args)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    String::from_utf8(out).unwrap()
}

pub const TINY: &str = "name: tiny
data: {corpus: {synthetic: {task: khop, hops: 2, n_vars: 5, train_examples: 1000, val_examples: 32}}}
model: {context: 48, head_dim: 16}
sizes: [nano]
residual: [baseline, full]
seeds: [0, 1]
train: {batch_size: 8, lr: 0.003, budget: {tokens: 4000}, eval_every: 5, eval_batches: 1}
";

pub fn tiny_sweep(dir: &Path) -> PathBuf {
    let path = dir.join("tiny.yaml");
    std::fs::write(&path, TINY).unwrap();
    path
}

/// The run folders of the sweep (not its copy of the sweep file).
pub fn run_ids(results: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(results.join("tiny"))
        .map(|d| {
            d.map(|e| e.unwrap().path())
                .filter(|p| p.join("spec.json").exists())
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

/// A JSON array of numbers.
pub fn floats(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}
