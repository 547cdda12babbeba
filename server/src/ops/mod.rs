//! The operator commands (`z29c queue`, `step`, `incident`, `workflow`): thin clients of the engine
//! functions the console calls, so a refusal at the command line is the console's refusal, in
//! its words. An acting command names its operator with `--as` (or `Z29C_OPERATOR`): whoever
//! can reach the database may act as any enabled operator, and the audit log names that one.
//!
//! Exit codes: 0 done, 1 refused (the engine's sentence on stderr), 2 a usage error (an
//! argument clap or the engine finds malformed, an operator no one has enabled).

mod hold;
mod incident;
pub mod listing;
mod note;
pub mod print;
mod proposal;
mod queue;
mod step;
mod workflow;

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use engine::operators::Operator;
use engine::recovery::ActionError;
use sqlx::PgPool;

use crate::cli::ops::OpsCommand;
use crate::cli::{Cli, Command};
use crate::database::Database;

/// Where a command writes: its output, and the sentences that explain a refusal.
pub struct Io<'a> {
    pub out: &'a mut dyn Write,
    pub err: &'a mut dyn Write,
}

/// How an operator command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Done (exit 0).
    Done,
    /// The engine refused, or there is no such thing (exit 1).
    Refused,
    /// The command was malformed or named no enabled operator (exit 2).
    Usage,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        match exit {
            Exit::Done => ExitCode::SUCCESS,
            Exit::Refused => ExitCode::from(1),
            Exit::Usage => ExitCode::from(2),
        }
    }
}

/// Why a command stopped before it was done.
pub(crate) enum Stop {
    /// Refused, with the sentence to print.
    Refused(String),
    /// Malformed, with the sentence to print.
    Usage(String),
    /// The database or the terminal failed.
    Failed(anyhow::Error),
}

impl From<sqlx::Error> for Stop {
    fn from(error: sqlx::Error) -> Self {
        Stop::Failed(anyhow::Error::new(error).context("reading the database"))
    }
}

impl From<std::io::Error> for Stop {
    fn from(error: std::io::Error) -> Self {
        Stop::Failed(anyhow::Error::new(error).context("writing the output"))
    }
}

/// The engine's refusal as the command line reports it; `missing` says what was not found.
pub(crate) fn refusal(error: ActionError, missing: &str) -> Stop {
    match error {
        ActionError::NotFound => Stop::Refused(missing.to_owned()),
        ActionError::Invalid(sentence) => Stop::Usage(sentence),
        ActionError::Forbidden(sentence)
        | ActionError::NotPermitted(sentence)
        | ActionError::Stale(sentence)
        | ActionError::Conflict(sentence) => Stop::Refused(sentence),
        ActionError::Destination => Stop::Refused(ActionError::Destination.to_string()),
        ActionError::Sqlx(error) => error.into(),
    }
}

/// The enabled operator `name`, acting from the command line.
pub(crate) async fn operator(pool: &PgPool, name: &str) -> Result<Operator, Stop> {
    engine::operators::named(pool, name).await?.ok_or_else(|| {
        Stop::Usage(format!(
            "No enabled operator is named `{name}`: `--as` (or Z29C_OPERATOR) names one that \
             `z29c user list` shows enabled."
        ))
    })
}

/// `z29c bulk stop RUN --as NAME --reason …`.
async fn stop_bulk(
    pool: &PgPool,
    run: uuid::Uuid,
    name: &str,
    reason: &str,
    io: &mut Io<'_>,
) -> Result<(), Stop> {
    use engine::recovery::bulk::{self, BulkError};
    let operator = operator(pool, name).await?;
    match bulk::stop(pool, run, &operator, reason).await {
        Ok(true) => Ok(writeln!(
            io.out,
            "Bulk run {run} stopped: the items it had not performed are refused."
        )?),
        Ok(false) => Err(Stop::Refused(format!(
            "Bulk run {run} had finished already."
        ))),
        Err(BulkError::Invalid(sentence)) => Err(Stop::Refused(sentence)),
        Err(BulkError::Sqlx(error)) => Err(error.into()),
    }
}

/// Opens the command's database, runs it, and prints to this process's stdout and stderr.
pub async fn run(command: OpsCommand) -> anyhow::Result<ExitCode> {
    let db = Database::open(command.database()).await?;
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    let mut io = Io {
        out: &mut out,
        err: &mut err,
    };
    let ran = execute(&db.pool, command, &mut io).await;
    db.close().await?;
    Ok(ran?.into())
}

/// Runs `command` on `pool`, writing to `io`.
pub async fn execute(pool: &PgPool, command: OpsCommand, io: &mut Io<'_>) -> anyhow::Result<Exit> {
    let ran = match command {
        OpsCommand::Queue(args) => queue::show(pool, &args, io).await,
        OpsCommand::Step(command) => step::run(pool, command, io).await,
        OpsCommand::Incident(command) => incident::run(pool, command, io).await,
        OpsCommand::Workflow(command) => workflow::run(pool, command, io).await,
        OpsCommand::Bulk(crate::cli::ops::BulkCommand::Stop {
            run,
            operator: name,
            reason,
            ..
        }) => stop_bulk(pool, run, &name, &reason, io).await,
        OpsCommand::Hold(args) => hold::hold(pool, &args, io).await,
        OpsCommand::Resume(args) => hold::resume(pool, &args, io).await,
        OpsCommand::Limit(args) => hold::limit(pool, &args, io).await,
        OpsCommand::Note(args) => note::write(pool, &args, io).await,
        OpsCommand::Proposal(command) => proposal::run(pool, command, io).await,
    };
    match ran {
        Ok(()) => Ok(Exit::Done),
        Err(Stop::Refused(sentence)) => {
            writeln!(io.err, "{sentence}")?;
            Ok(Exit::Refused)
        }
        Err(Stop::Usage(sentence)) => {
            writeln!(io.err, "{sentence}")?;
            Ok(Exit::Usage)
        }
        Err(Stop::Failed(error)) => Err(error),
    }
}

/// Parses `args` as typed after `z29c` and runs the operator command they name on `pool`
/// (whatever database they name), as the binary would: how tests drive the command line.
pub async fn run_on(pool: &PgPool, args: &[&str], io: &mut Io<'_>) -> anyhow::Result<Exit> {
    let parsed = Cli::try_parse_from(std::iter::once("z29c").chain(args.iter().copied()));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(error) => {
            write!(io.err, "{}", error.render())?;
            return Ok(if error.use_stderr() {
                Exit::Usage
            } else {
                Exit::Done
            });
        }
    };
    let Command::Ops(command) = cli.command else {
        writeln!(io.err, "`{}` is not an operator command", args.join(" "))?;
        return Ok(Exit::Usage);
    };
    execute(pool, command, io).await
}

/// Writes the completion script of `z29c` for `shell`.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn Write) {
    clap_complete::generate(shell, &mut Cli::command(), "z29c", out);
}
