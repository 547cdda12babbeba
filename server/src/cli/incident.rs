//! Arguments of `z29c incident`: the open incidents, one incident, and its resolution. What
//! they do is in `crate::ops::incident`.

use clap::Subcommand;
use engine::domain::Disposition;
use uuid::Uuid;

use super::shared::{Acting, Output};
use crate::database::DatabaseArgs;

/// `z29c incident …`.
#[derive(Debug, Subcommand)]
pub enum IncidentCommand {
    /// The open incidents, oldest first, a page at a time.
    List {
        /// The most incidents to print.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(i64).range(1..=500))]
        limit: i64,
        /// Continue after this cursor (printed as `more:` by the previous page).
        #[arg(long, value_name = "CURSOR")]
        after: Option<String>,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// The incident: its step, every external reference seen, and its resolution.
    Show {
        id: Uuid,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Name the result that stands, and what happens to the others (approver).
    Resolve {
        id: Uuid,
        /// The external reference that stands (one of the incident's).
        #[arg(long, value_name = "REFERENCE")]
        canonical: String,
        /// withdraw (ask the destination to withdraw the others) or accept-unresolved.
        #[arg(long, value_parser = disposition)]
        disposition: Disposition,
        #[command(flatten)]
        acting: Acting,
    },
}

impl IncidentCommand {
    /// The database the command reads or acts on.
    pub fn database(&self) -> &DatabaseArgs {
        match self {
            IncidentCommand::List { database, .. } | IncidentCommand::Show { database, .. } => {
                database
            }
            IncidentCommand::Resolve { acting, .. } => &acting.database,
        }
    }
}

/// A disposition by its name.
fn disposition(name: &str) -> Result<Disposition, String> {
    match name {
        "withdraw" => Ok(Disposition::Withdraw),
        "accept-unresolved" | "accept_unresolved" => Ok(Disposition::AcceptUnresolved),
        other => Err(format!(
            "`{other}` is not a disposition: use withdraw or accept-unresolved"
        )),
    }
}
