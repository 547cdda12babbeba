//! The semantic invariants of docs/DESIGN.md §11, as queries. Run continuously by workers'
//! sweeps and on demand by `z29c check`; each violation is recorded once, with the evidence
//! that shows it. Also the preparation of a restored database before workers resume
//! (docs/DESIGN.md §12).

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use sqlx::PgPool;

use crate::failpoint::{self, BrokenRule};
use crate::store::{invariant, restore};

/// The invariants, named as they are recorded and exported.
pub const KINDS: [&str; 6] = [
    "one_effect_step_with_several_references",
    "succeeded_step_without_receipt",
    "dependant_started_before_required_receipt",
    "opaque_retry_without_authorization",
    "request_key_with_two_digests",
    "lease_expired_after_call_without_review",
];

/// One violation found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    pub kind: String,
    pub subject: String,
    pub evidence: Value,
}

/// Finds every current violation and records the new ones; returns all that hold now.
pub async fn check(pool: &PgPool) -> sqlx::Result<Vec<Violation>> {
    let (found, _) = find_and_record(pool).await?;
    Ok(violations(found))
}

/// Of `violations`, the ones an integrity incident (open or resolved) already records: a
/// duplicate Z29C detected itself, say. `z29c check` fails only for the others.
pub async fn seen(pool: &PgPool, violations: &[Violation]) -> sqlx::Result<Vec<Violation>> {
    let subjects: Vec<String> = violations.iter().map(|v| v.subject.clone()).collect();
    let seen = crate::store::invariant::seen_in_incidents(pool, &subjects).await?;
    Ok(violations
        .iter()
        .filter(|v| seen.contains(&v.subject))
        .cloned()
        .collect())
}

/// A periodic pass takes at most one part in `CHECK_SPACING` of the time: the next turn comes
/// that many times the last pass's length after its start, or one interval, whichever is later
/// (docs/DESIGN.md §11).
pub const CHECK_SPACING: f64 = 10.0;

/// [`check`], by the workers' clock: only if no process checked within `every` (one pass per
/// interval however many workers share the database), nor within [`CHECK_SPACING`] times the
/// last pass's length. `None` when the turn was not due; else the violations this pass
/// recorded first. One recorded before is not reported again: it stays in
/// `invariant_violation` and its alert stays open, and a worker repeating it at every interval
/// would bury the next one in its log.
pub async fn check_if_due(pool: &PgPool, every: Duration) -> sqlx::Result<Option<Vec<Violation>>> {
    if !invariant::take_check_turn(pool, every.as_secs_f64(), CHECK_SPACING).await? {
        return Ok(None);
    }
    let started = Instant::now();
    let (_, first) = find_and_record(pool).await?;
    invariant::end_check_turn(pool, started.elapsed().as_secs_f64()).await?;
    Ok(Some(violations(first)))
}

/// Every current violation, and those of them this pass recorded first, as rows: each caller
/// turns into [`Violation`]s only the ones it returns (at 1M workflows the first are few and
/// the current may be many).
async fn find_and_record(pool: &PgPool) -> sqlx::Result<(Vec<ViolationRow>, Vec<ViolationRow>)> {
    let found = invariant::current_violations(pool).await?;
    let first = invariant::record_violations(pool, &found).await?;
    Ok((found, first))
}

/// A violation as the store reads and records it: kind, subject, evidence.
type ViolationRow = (String, String, Value);

/// (kind, subject, evidence) rows as violations.
fn violations(rows: Vec<ViolationRow>) -> Vec<Violation> {
    rows.into_iter()
        .map(|(kind, subject, evidence)| Violation {
            kind,
            subject,
            evidence,
        })
        .collect()
}

/// References without their row, as `z29c check` reports them: the hot tables keep their
/// references without foreign keys, so that no insert on the happy path pays for a check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Orphans {
    /// `table.column -> table`, as the reference is named.
    pub reference: String,
    pub rows: i64,
    /// One of the rows, by its id or key.
    pub example: String,
}

/// Every reference of the hot tables that points at nothing (a full scan: on demand only).
pub async fn orphans(pool: &PgPool) -> sqlx::Result<Vec<Orphans>> {
    Ok(invariant::orphans(pool)
        .await?
        .into_iter()
        .map(|(reference, rows, example)| Orphans {
            reference,
            rows,
            example,
        })
        .collect())
}

/// What [`prepare_resume`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume {
    /// External steps now outcome unknown: caught mid-call, or ready to be called.
    pub to_recovery: usize,
    /// External steps waiting for their dependencies, marked to start as outcome unknown.
    pub marked: usize,
    /// Pure steps caught running, ready again.
    pub to_ready: usize,
    /// Outbox events whose positions were re-based below this cluster's transaction ids
    /// (restored into another cluster; none otherwise).
    pub rebased_events: u64,
}

/// Before workers resume after a restore. The live system went on after the backup was taken,
/// so any external step the backup saw unfinished may have been sent since — and the
/// destination keeps what it received. Such a step is never sent blind:
///
/// - caught `running` or `invoking`, or `ready` to be called: its open attempt (if any) ends
///   `outcome_unknown` ("restored") and the step goes to recovery under its request key — a
///   query or a same-key replay where the contract allows, review otherwise;
/// - `blocked` on its dependencies: it is marked (`restored_at`), and starts as outcome unknown
///   instead of ready once they are met.
///
/// Pure steps caught `running` simply run again. Outbox positions ahead of this cluster's
/// transaction ids (a dump restored into another cluster) are re-based first
/// ([`crate::store::outbox::rebase_positions`]). Run it with every worker stopped.
pub async fn prepare_resume(pool: &PgPool) -> sqlx::Result<Resume> {
    let restored = serde_json::to_value(crate::domain::TransportObservation::Restored)
        .expect("an observation serializes");
    // The harness's broken rule: only steps caught mid-call, as if the live system had stopped
    // at the backup.
    let unfinished: &[&str] = if failpoint::broken(BrokenRule::ResumeBlind) {
        &["running", "invoking"]
    } else {
        &["blocked", "ready", "running", "invoking"]
    };
    let unfinished: Vec<String> = unfinished.iter().map(|s| (*s).to_owned()).collect();
    let mut tx = pool.begin().await?;
    // First, so the events this transaction writes sort after every restored one.
    let rebased_events = crate::store::outbox::rebase_positions(&mut tx).await?;
    // The derived key (RequestKey::derive) where none was persisted, so recovery can ask about it.
    let keyed = restore::mark_restored(&mut tx, &unfinished).await?;
    let to_recovery = restore::send_to_recovery(&mut tx, &restored, &unfinished).await?;
    restore::expire_running_leases(&mut tx).await?;
    let to_ready = crate::store::lease::reclaim_expired(&mut tx)
        .await?
        .to_ready;
    for (_, workflow) in &to_recovery {
        crate::store::workflow::refresh_state(&mut tx, *workflow).await?;
    }
    tx.commit().await?;
    Ok(Resume {
        to_recovery: to_recovery.len(),
        marked: keyed.iter().filter(|(_, state)| state == "blocked").count(),
        to_ready: to_ready.len(),
        rebased_events,
    })
}
