//! Command-line interface: clap derive types and the dispatch to each subcommand.

mod bench;
mod data;
mod model;
mod train;

use clap::{Parser, Subcommand};
use thiserror::Error;

/// Bad input from the user (a file, a flag, a key). Exits with status 2.
#[derive(Debug, Error)]
#[error("{0}")]
pub struct InputError(pub String);

#[derive(Debug, Parser)]
#[command(
    name = "attnres",
    version,
    about = "Scaling-law and ablation experiments for Attention Residuals"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print parameters, FLOPs per token, depth sources and their memory for model settings.
    Model(model::ModelArgs),
    /// Train one run from a RunSpec YAML file into a run folder (resumes a partial one).
    Train(train::TrainArgs),
    /// Write a run's final weights as safetensors.
    Export(train::ExportArgs),
    /// Mean next-token loss and bits per byte of a run's model on a text file.
    Score(train::ScoreArgs),
    /// Corpus set-up (fetch the built-in corpora once).
    Data(data::DataArgs),
    /// Tokens/s, step time and MFU of baseline, Full and Block S=4, per backend.
    Bench(bench::BenchArgs),
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Model(args) => model::run(args),
        Command::Train(args) => train::run_train(args),
        Command::Export(args) => train::run_export(args),
        Command::Score(args) => train::run_score(args),
        Command::Data(args) => data::run(args),
        Command::Bench(args) => bench::run(args),
    }
}

/// Reads a YAML file into `T`; errors name the file, the line and column, and the key.
pub fn read_yaml<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| InputError(format!("cannot read {}: {e}", path.display())))?;
    serde_yaml_ng::from_str(&text).map_err(|e| {
        let at = e
            .location()
            .map(|l| format!(":{}:{}", l.line(), l.column()))
            .unwrap_or_default();
        InputError(format!("{}{at}: {e}", path.display())).into()
    })
}

/// The exit status for an error: 2 for bad input, 1 for everything else.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<InputError>()) {
        2
    } else {
        1
    }
}
