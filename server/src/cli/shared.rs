//! Arguments many commands take: `--json`, and who acts and why.

use crate::database::DatabaseArgs;

/// `--json`, on every command that prints data.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct Output {
    /// Print JSON for programs instead of a table for people.
    #[arg(long)]
    pub json: bool,
}

/// What every acting command takes: who acts, why, and against which version of the step.
#[derive(Debug, clap::Args)]
pub struct Acting {
    /// The enabled operator the action is taken (and audited) as; their role decides what
    /// is permitted.
    #[arg(long = "as", env = "Z29C_OPERATOR", value_name = "NAME")]
    pub operator: String,
    /// Why, in a sentence (recorded in the audit log).
    #[arg(long)]
    pub reason: String,
    /// Act only if the step's version is still N (as `step show` printed it); refused when
    /// the step moved since.
    #[arg(long, value_name = "N")]
    pub if_version: Option<i64>,
    #[command(flatten)]
    pub output: Output,
    #[command(flatten)]
    pub database: DatabaseArgs,
}
