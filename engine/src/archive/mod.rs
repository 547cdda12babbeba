//! Retention and the archive (docs/DESIGN.md §21): settled workflows leave the hot tables
//! once their retention has passed, their whole evidence written first to the archive
//! ([`ArchiveDir`]) and a tombstone left behind; old audit entries naming no workflow follow
//! their own, longer retention the same way; events every consumer has passed are dropped.
//!
//! One batch is one transaction holding the archiver's lock: the eligible workflows locked,
//! their evidence read, written to the archive and synced, then their tombstones written and
//! their rows removed. A crash between the write and the commit leaves a record no tombstone
//! points at (the workflow stays hot and is archived again): written twice at worst, never
//! lost.

mod file;
mod reconcile;

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::adapter::BoxFuture;
use crate::domain::StepState;
use crate::failpoint::{self, FaultPoint};
use crate::maintenance::{Failure, Pace, Service};
use crate::read::status::{StepStatus, WorkflowStatus};
use crate::store::archive::{self as store, Place, Walked};

pub use crate::store::archive::Tombstone;
pub use file::{ArchiveDir, FORMAT, Finding, Manifest, Member, Placed};
pub use reconcile::{Reconciled, copy_of, reconcile};

/// How long things stay in the hot tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// A settled workflow whose definition names no retention of its own.
    pub settled: Duration,
    /// An audit entry naming no workflow (sign-ins, configuration, holds).
    pub audit: Duration,
    /// An event every consumer has passed.
    pub events: Duration,
    /// Workflows (and audit entries) per batch, one transaction each. A batch's transaction
    /// holds back what vacuum and page pruning may remove while it runs: at 500 workflows (about
    /// a second here) the engine beside it lost its HOT updates (69 → 46 %) and a fifth of its
    /// throughput, so batches stay short.
    pub batch: i64,
}

impl Default for Policy {
    fn default() -> Self {
        const DAY: u64 = 86_400;
        Self {
            settled: Duration::from_secs(30 * DAY),
            audit: Duration::from_secs(400 * DAY),
            events: Duration::from_secs(7 * DAY),
            batch: 100,
        }
    }
}

/// Why the archiver stopped.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
    #[error("the archive: {0}")]
    Io(#[from] std::io::Error),
    #[error("the archive's record of {0} is missing from the member its tombstone names")]
    Missing(Uuid),
    #[error(
        "the archive holds no member at byte {offset} of {file}, where the database's newest \
         tombstone points: it is not this database's archive, or a copy older than the database"
    )]
    Foreign { file: String, offset: i64 },
    #[error("a workflow record in {0} at byte {1} lacks what its tombstone needs")]
    Unreadable(String, u64),
}

/// What the archiver moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Moved {
    pub workflows: i64,
    pub audit_entries: i64,
    pub events: i64,
    pub bytes: i64,
    pub batches: u32,
}

/// The archiver of one process: its database, its archive and its policy.
#[derive(Debug, Clone)]
pub struct Archiver {
    pool: PgPool,
    dir: ArchiveDir,
    policy: Policy,
}

/// How one batch ended.
enum Batch {
    Moved(Moved),
    /// Nothing eligible is left.
    Done,
    /// Another process holds the archiver's lock.
    Busy,
}

impl Archiver {
    pub fn new(pool: PgPool, dir: ArchiveDir, policy: Policy) -> Self {
        Self { pool, dir, policy }
    }

    pub fn dir(&self) -> &ArchiveDir {
        &self.dir
    }

    /// Batches until nothing eligible is left or `budget` has passed, then drops passed
    /// events; says what moved and whether work was left behind.
    pub async fn turn(&self, budget: Duration) -> Result<(Moved, bool), ArchiveError> {
        let started = Instant::now();
        let mut moved = Moved::default();
        let mut from = Walked::default();
        let left = loop {
            if started.elapsed() >= budget {
                break true;
            }
            match self.batch(&mut from).await? {
                Batch::Moved(batch) => moved = moved.plus(batch),
                Batch::Done => break false,
                Batch::Busy => return Ok((moved, false)),
            }
        };
        let (events, events_left) = self
            .prune_events(budget.saturating_sub(started.elapsed()))
            .await?;
        moved.events = events;
        let mut conn = self.pool.acquire().await?;
        store::count(&mut conn, (0, 0, events, 0)).await?;
        store::turn_ended(&mut conn, started.elapsed().as_secs_f64()).await?;
        Ok((moved, left || events_left))
    }

    /// One batch, one transaction: see the module's comment.
    async fn batch(&self, from: &mut Walked) -> Result<Batch, ArchiveError> {
        let mut tx = self.pool.begin().await?;
        if !store::take_turn(&mut tx).await? {
            return Ok(Batch::Busy);
        }
        let policy = self.policy;
        let eligible =
            store::eligible(&mut tx, policy.settled.as_secs_f64(), *from, policy.batch).await?;
        let audit = store::old_audit(&mut tx, policy.audit.as_secs_f64(), policy.batch).await?;
        if eligible.is_empty() && audit.is_empty() {
            return Ok(Batch::Done);
        }
        if let Some(&(id, settled_at, _)) = eligible.last() {
            *from = Walked {
                settled_at: Some(settled_at),
                id,
            };
        }
        let ids: Vec<Uuid> = eligible.iter().map(|(id, _, _)| *id).collect();
        let evidence = store::evidence(&mut tx, &ids).await?;
        let archived_at = Utc::now();
        let lines = records(archived_at, &evidence, &audit);
        let (dir, day) = (self.dir.clone(), archived_at.date_naive());
        let placed = tokio::task::spawn_blocking(move || dir.append(day, &lines))
            .await
            .map_err(std::io::Error::other)??;
        failpoint::hit(FaultPoint::AfterArchiveWrite);
        let place = Place {
            file: &placed.file,
            offset: i64::try_from(placed.offset).unwrap_or(i64::MAX),
            length: i64::try_from(placed.length).unwrap_or(i64::MAX),
        };
        let workflows = match ids.is_empty() {
            true => 0,
            false => store::leave(&mut tx, &ids, place).await?,
        };
        let audit_ids: Vec<i64> = audit.iter().map(|(id, _)| *id).collect();
        let audit_entries = store::remove_audit(&mut tx, &audit_ids).await?;
        store::count(&mut tx, (workflows, audit_entries, 0, place.length)).await?;
        tx.commit().await?;
        Ok(Batch::Moved(Moved {
            workflows,
            audit_entries,
            events: 0,
            bytes: place.length,
            batches: 1,
        }))
    }

    /// Drops events every consumer has passed and older than the policy, ten thousand at a
    /// time, until none is left or `budget` has passed.
    async fn prune_events(&self, budget: Duration) -> Result<(i64, bool), ArchiveError> {
        const AT_ONCE: i32 = 10_000;
        let started = Instant::now();
        let mut conn = self.pool.acquire().await?;
        let mut pruned = 0;
        loop {
            let now =
                store::prune_events(&mut conn, self.policy.events.as_secs_f64(), AT_ONCE).await?;
            pruned += now;
            if now < i64::from(AT_ONCE) {
                return Ok((pruned, false));
            }
            if started.elapsed() >= budget {
                return Ok((pruned, true));
            }
        }
    }

    /// The archived workflow `id`: its tombstone and its record read back from the archive.
    pub async fn show(&self, id: Uuid) -> Result<Option<Archived>, ArchiveError> {
        show(&self.pool, &self.dir, id).await
    }
}

impl Moved {
    /// Both together.
    pub fn plus(self, other: Moved) -> Moved {
        Moved {
            workflows: self.workflows + other.workflows,
            audit_entries: self.audit_entries + other.audit_entries,
            events: self.events + other.events,
            bytes: self.bytes + other.bytes,
            batches: self.batches + other.batches,
        }
    }
}

/// One line per workflow and per audit entry, each naming the format and what it holds.
fn records(
    archived_at: DateTime<Utc>,
    workflows: &[(Uuid, Value)],
    audit: &[(i64, Value)],
) -> Vec<String> {
    let workflows = workflows.iter().map(|(id, evidence)| {
        json!({ "format": FORMAT, "kind": "workflow", "id": id, "archived_at": archived_at, "evidence": evidence })
    });
    let audit = audit.iter().map(|(id, entry)| {
        json!({ "format": FORMAT, "kind": "audit", "id": id, "archived_at": archived_at, "entry": entry })
    });
    workflows
        .chain(audit)
        .map(|line| line.to_string())
        .collect()
}

/// Where the archiver stands: its totals since the database began, and how far it is behind
/// the policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub workflows: i64,
    pub audit_entries: i64,
    pub events: i64,
    pub bytes: i64,
    pub last_turn_at: Option<DateTime<Utc>>,
    pub last_turn_secs: f64,
    /// When the oldest workflow that may leave now settled.
    pub oldest_eligible: Option<DateTime<Utc>>,
    /// How long past its retention that workflow is (0: the archiver is keeping up).
    pub lag_secs: f64,
}

/// Where the archiver stands under `policy`.
pub async fn status(pool: &PgPool, policy: &Policy) -> sqlx::Result<Status> {
    let mut tx = pool.begin().await?;
    let oldest =
        store::eligible(&mut tx, policy.settled.as_secs_f64(), Walked::default(), 1).await?;
    let progress = store::progress(&mut tx).await?;
    tx.rollback().await?;
    Ok(Status {
        workflows: progress.0,
        audit_entries: progress.1,
        events: progress.2,
        bytes: progress.3,
        last_turn_at: progress.4,
        last_turn_secs: progress.5,
        oldest_eligible: oldest.first().map(|(_, at, _)| *at),
        lag_secs: oldest.first().map_or(0.0, |(_, _, lag)| *lag),
    })
}

/// What `verify` read and found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verified {
    pub files: usize,
    pub records: u64,
    pub tombstones: i64,
    /// Nothing: the archive is whole.
    pub findings: Vec<Finding>,
}

/// Reads every day file of `dir` against its manifest, and checks that every tombstone
/// points at a member a manifest names.
pub async fn verify(pool: &PgPool, dir: &ArchiveDir) -> Result<Verified, ArchiveError> {
    let dir = dir.clone();
    let (manifests, mut findings) = tokio::task::spawn_blocking(move || {
        Ok::<_, std::io::Error>((dir.manifests()?, dir.verify()?))
    })
    .await
    .map_err(std::io::Error::other)??;
    let mut tombstones = 0;
    for (file, offset, length, count) in store::members(pool).await? {
        tombstones += count;
        let named = manifests.iter().any(|m| {
            m.file == file
                && m.members
                    .iter()
                    .any(|p| p.offset as i64 == offset && p.length as i64 == length)
        });
        if !named {
            findings.push(Finding {
                file: file.clone(),
                problem: format!(
                    "{count} tombstone(s) point at byte {offset}, a member no manifest names"
                ),
            });
        }
    }
    Ok(Verified {
        files: manifests.len(),
        records: manifests.iter().map(|m| m.records).sum(),
        tombstones,
        findings,
    })
}

/// An archived workflow: its tombstone, and the evidence its record holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Archived {
    pub tombstone: Tombstone,
    pub evidence: Value,
}

/// The archived workflow `id` (or the one `creation_key` started), read back from `dir`.
pub async fn show(
    pool: &PgPool,
    dir: &ArchiveDir,
    id: Uuid,
) -> Result<Option<Archived>, ArchiveError> {
    let Some(tombstone) = store::tombstone(pool, Some(id), None).await? else {
        return Ok(None);
    };
    let place = Placed::stored(
        tombstone.archive_file.clone(),
        tombstone.member_offset,
        tombstone.member_length,
    );
    let mut record = read_record(dir, place, id).await?;
    Ok(Some(Archived {
        tombstone,
        evidence: record["evidence"].take(),
    }))
}

/// The record of workflow `id` in the member at `place`.
async fn read_record(dir: &ArchiveDir, place: Placed, id: Uuid) -> Result<Value, ArchiveError> {
    let dir = dir.clone();
    let lines = tokio::task::spawn_blocking(move || {
        dir.read_member(&place.file, place.offset, place.length)
    })
    .await
    .map_err(std::io::Error::other)??;
    let wanted = id.to_string();
    lines
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|record| record["kind"] == "workflow" && record["id"] == wanted.as_str())
        .ok_or(ArchiveError::Missing(id))
}

impl Archived {
    /// The status projection the archived workflow had, as the API answers it.
    pub fn status(&self) -> WorkflowStatus {
        let (t, e) = (&self.tombstone, &self.evidence);
        let references: std::collections::HashMap<&str, &str> = rows(e, "receipts")
            .filter_map(|r| Some((r["id"].as_str()?, r["external_reference"].as_str()?)))
            .collect();
        let steps = rows(e, "steps")
            .filter_map(|s| {
                let state: StepState = serde_json::from_value(s["state"].clone()).ok()?;
                Some(StepStatus {
                    id: s["id"].as_str()?.parse().ok()?,
                    logical: s["logical"].as_str()?.to_owned(),
                    generation: i32::try_from(s["generation"].as_i64()?).ok()?,
                    state,
                    label: state.label(),
                    attempts: i32::try_from(s["attempt_count"].as_i64().unwrap_or(0)).ok()?,
                    request_key: s["request_key"].as_str().map(str::to_owned),
                    external_reference: s["receipt_id"]
                        .as_str()
                        .and_then(|r| references.get(r))
                        .map(|r| (*r).to_owned()),
                    depends_on: serde_json::from_value(s["depends_on"].clone()).unwrap_or_default(),
                })
            })
            .collect();
        WorkflowStatus {
            id: t.id,
            creation_key: t.creation_key.clone(),
            definition: t.definition_name.clone(),
            definition_version: t.definition_version,
            state: t.state,
            status: e["status"]["sentence"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            revision: e["workflow"]["revision"].as_i64().unwrap_or_default(),
            created_at: t.created_at,
            updated_at: t.settled_at,
            paused: None,
            archived_at: Some(t.archived_at),
            archive_copy_at: None,
            steps,
        }
    }
}

/// The rows of one table in an archived record.
fn rows<'a>(evidence: &'a Value, table: &str) -> impl Iterator<Item = &'a Value> {
    evidence[table].as_array().into_iter().flatten()
}

/// The share of its time the archiver service works while a backlog lasts: each turn of at most
/// [`PACED_TURN`] is followed by a pause nine times as long as it took. Drained at full speed, a
/// backlog took a quarter to a third of the engine's throughput on two cores; at a tenth the
/// archiver still moves tens of times a busy deployment's intake (docs/performance.md,
/// "Retention"). `z29c archive run` drains at full speed.
pub const BACKLOG_SHARE: f64 = 0.1;

/// The longest turn of the paced service.
pub const PACED_TURN: Duration = Duration::from_secs(1);

/// The archiver as a maintenance service of `z29c serve` (docs/DESIGN.md §19): a turn every
/// `every`, and while it leaves work behind, again after a pause that keeps its work to
/// [`BACKLOG_SHARE`] of the time; one process at a time moves rows.
pub fn service(archiver: Archiver, every: Duration) -> impl Service {
    ArchiverService { archiver, every }
}

struct ArchiverService {
    archiver: Archiver,
    every: Duration,
}

impl Service for ArchiverService {
    fn name(&self) -> &'static str {
        "archiver"
    }

    fn every(&self) -> Duration {
        self.every
    }

    fn first_after(&self) -> Duration {
        self.every.min(Duration::from_secs(60))
    }

    fn turn(&mut self) -> BoxFuture<'_, Result<Pace, Failure>> {
        Box::pin(async move {
            let started = Instant::now();
            let (moved, left) = self.archiver.turn(PACED_TURN).await?;
            if moved.workflows + moved.audit_entries + moved.events > 0 {
                tracing::info!(
                    workflows = moved.workflows,
                    audit_entries = moved.audit_entries,
                    events = moved.events,
                    bytes = moved.bytes,
                    "archived"
                );
            }
            Ok(if left {
                Pace::After(paused_after(started.elapsed()))
            } else {
                Pace::Interval
            })
        })
    }
}

/// The pause after a turn of `worked` that left work behind.
fn paused_after(worked: Duration) -> Duration {
    worked.mul_f64((1.0 - BACKLOG_SHARE) / BACKLOG_SHARE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behind_a_backlog_the_service_works_a_tenth_of_the_time() {
        let worked = Duration::from_millis(800);
        let paused = paused_after(worked);
        let share = worked.as_secs_f64() / (worked + paused).as_secs_f64();
        assert!((share - 0.1).abs() < 1e-9, "{share}");
    }
}
