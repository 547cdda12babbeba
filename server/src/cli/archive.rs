//! Arguments of retention and the archive (docs/DESIGN.md §21): the policy every serving
//! process runs its archiver with, and `z29c archive`. What they do is in `crate::archive`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;
use uuid::Uuid;

use crate::database::DatabaseArgs;

/// How long things stay in the hot tables, and where the archive is. Give every serving
/// process the same: one of them archives at a time.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RetentionArgs {
    /// The archive's directory: a compressed JSON Lines file per day, each with its manifest.
    #[arg(long, env = "Z29C_ARCHIVE_DIR", default_value = ".z29c/archive")]
    pub(crate) archive_dir: PathBuf,
    /// How long a settled workflow stays in the hot tables unless its definition says
    /// (`retention: { settled: 90d }`).
    #[arg(long, env = "Z29C_RETAIN_SETTLED", default_value = "30d", value_parser = retention)]
    pub(crate) retain_settled: Duration,
    /// How long an audit entry naming no workflow (sign-ins, configuration) stays.
    #[arg(long, env = "Z29C_RETAIN_AUDIT", default_value = "400d", value_parser = retention)]
    pub(crate) retain_audit: Duration,
    /// How long an event every consumer has passed stays in the outbox.
    #[arg(long, env = "Z29C_RETAIN_EVENTS", default_value = "7d", value_parser = retention)]
    pub(crate) retain_events: Duration,
    /// How often the archiver looks for work, in seconds (at once again while work is left).
    #[arg(long, env = "Z29C_ARCHIVE_EVERY_SECS", default_value_t = 60)]
    pub(crate) archive_every_secs: u64,
}

fn retention(text: &str) -> Result<Duration, String> {
    engine::domain::retention::parse(text)
}

impl RetentionArgs {
    pub(crate) fn policy(&self) -> engine::archive::Policy {
        engine::archive::Policy {
            settled: self.retain_settled,
            audit: self.retain_audit,
            events: self.retain_events,
            ..engine::archive::Policy::default()
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum ArchiveCommand {
    /// What the archiver has moved, its last turn, and how far it is behind the policy.
    Status(ArchiveArgs),
    /// Archive everything the policy lets leave now, then exit.
    Run(ArchiveArgs),
    /// An archived workflow: its tombstone and its evidence, read back from the archive.
    Show {
        id: Uuid,
        #[command(flatten)]
        args: ArchiveArgs,
    },
    /// Read every day file against its manifest (lengths, checksums, records) and every
    /// tombstone against its file; exits 1 on anything wrong.
    Verify(ArchiveArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct ArchiveArgs {
    #[command(flatten)]
    pub(crate) retention: RetentionArgs,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) database: DatabaseArgs,
}
