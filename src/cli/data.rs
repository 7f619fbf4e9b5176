//! `attnres data fetch`: the explicit, cached set-up step for built-in corpora.

use clap::{Args, Subcommand};

use crate::data::{cache::cache_dir, shakespeare};

#[derive(Debug, Args)]
pub struct DataArgs {
    #[command(subcommand)]
    pub command: DataCommand,
}

#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Download a built-in corpus once into the cache (`$ATTNRES_CACHE` or ~/.cache/attnres).
    Fetch {
        /// The corpus: shakespeare.
        corpus: String,
    },
}

pub fn run(args: DataArgs) -> anyhow::Result<()> {
    match args.command {
        DataCommand::Fetch { corpus } => match corpus.as_str() {
            "shakespeare" => {
                let dir = shakespeare::fetch(&cache_dir())?;
                println!("shakespeare: ready in {}", dir.display());
                Ok(())
            }
            other => anyhow::bail!(super::InputError::Arguments(format!(
                "unknown built-in corpus `{other}`; the built-in one is `shakespeare` (other text \
                 goes in data.corpus.text)"
            ))),
        },
    }
}
