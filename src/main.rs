//! The `attnres` command line: parse, run, print `error: ...` and exit non-zero on failure.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = attnres::cli::Cli::parse();
    match attnres::cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(attnres::cli::exit_code(&e))
        }
    }
}
