//! Command-line interface: clap derive types and the dispatch to each subcommand.

mod model;

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
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Model(args) => model::run(args),
    }
}

/// The exit status for an error: 2 for bad input, 1 for everything else.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<InputError>()) {
        2
    } else {
        1
    }
}
