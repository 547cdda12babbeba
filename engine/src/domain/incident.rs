//! Integrity incidents (docs/DESIGN.md §9): what kind of doubt an incident holds about one
//! step's effect, and how a person resolved it. Mirror the PostgreSQL enums `incident_kind` and
//! `duplicate_disposition`.

use serde::{Deserialize, Serialize};

/// What an incident is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(sqlx::Type))]
#[cfg_attr(
    feature = "runtime",
    sqlx(type_name = "incident_kind", rename_all = "snake_case")
)]
#[serde(rename_all = "snake_case")]
pub enum IncidentKind {
    /// Two (or more) accepted external references for one one-effect step.
    DuplicateEffect,
    /// The destination holds the request key under other bytes than Z29C bound to it.
    DigestConflict,
}

impl IncidentKind {
    /// The name PostgreSQL and the API use.
    pub fn as_str(self) -> &'static str {
        match self {
            IncidentKind::DuplicateEffect => "duplicate_effect",
            IncidentKind::DigestConflict => "digest_conflict",
        }
    }

    /// The kind in words, as pages and the command line show it.
    pub fn words(self) -> &'static str {
        match self {
            IncidentKind::DuplicateEffect => "duplicate effect",
            IncidentKind::DigestConflict => "digest conflict",
        }
    }
}

/// How a duplicate-effect incident is resolved. Operators name it by what they ask
/// (`withdraw`, `accept_unresolved`); the incident row records what was done
/// (`withdrawal_requested`, `accepted_unresolved`), which is how PostgreSQL knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(sqlx::Type))]
#[cfg_attr(feature = "runtime", sqlx(type_name = "duplicate_disposition"))]
#[serde(rename_all = "snake_case")]
pub enum Disposition {
    /// Ask the destination to withdraw every other reference (compensation steps).
    #[cfg_attr(feature = "runtime", sqlx(rename = "withdrawal_requested"))]
    Withdraw,
    /// Keep the duplicate, recorded as accepted and unresolved.
    #[cfg_attr(feature = "runtime", sqlx(rename = "accepted_unresolved"))]
    AcceptUnresolved,
}

impl Disposition {
    /// The name the incident row records (`duplicate_disposition`).
    pub fn recorded_as(self) -> &'static str {
        match self {
            Disposition::Withdraw => "withdrawal_requested",
            Disposition::AcceptUnresolved => "accepted_unresolved",
        }
    }
}
