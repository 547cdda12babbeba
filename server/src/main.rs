//! `z29c`: the console server, workers and operator commands.

use std::process::ExitCode;

use clap::Parser;

fn main() -> anyhow::Result<ExitCode> {
    server::cli::Cli::parse().run()
}
