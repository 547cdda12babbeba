//! The outbox's consumers inside Z29C: the status projection people read, the metrics
//! projection `/metrics` exposes, and notification candidates. Each can be dropped and
//! rebuilt from durable state ([`rebuild`]).

use std::collections::{BTreeMap, HashMap};

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::adapter::BoxFuture;
use crate::domain::WorkflowState;
use crate::domain::{EventKind, IncidentKind, ReceiptMethod};
use crate::outbox::consumer::{Consumer, Event, Revision, count, revision, settle_revision};
use crate::store;
use crate::store::outbox::Position;

/// Re-projects one workflow's status from durable state into `status_projection`; returns
/// the workflow's state and the revision it reflects.
async fn reproject(
    tx: &mut PgConnection,
    workflow: Uuid,
) -> sqlx::Result<Option<(WorkflowState, i64, String)>> {
    let Some(status) = crate::read::status::project_on(tx, workflow).await? else {
        return Ok(None);
    };
    store::projection::upsert_status(tx, workflow, status.revision, status.state, &status.status)
        .await?;
    Ok(Some((status.state, status.revision, status.status)))
}

/// The status behind `/status/{id}` (the API reads durable state directly).
pub struct StatusProjection;

impl Consumer for StatusProjection {
    fn name(&self) -> &'static str {
        "status"
    }

    fn handle<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        event: &'a Event,
    ) -> BoxFuture<'a, sqlx::Result<()>> {
        Box::pin(async move {
            let (Some(workflow), Some(rev)) = (event.workflow_id, event.revision) else {
                return Ok(());
            };
            match revision(tx, self.name(), workflow, rev).await? {
                Revision::Stale => return Ok(()),
                Revision::Next => {}
                Revision::Gap { .. } => {
                    count(
                        tx,
                        "z29c_projection_repairs_total",
                        &[("consumer", self.name())],
                        1,
                    )
                    .await?;
                }
            }
            // Durable state is the truth: the projection may land ahead of this event, and
            // the revision it records makes the events in between stale.
            if let Some((_, current, _)) = reproject(tx, workflow).await? {
                settle_revision(tx, self.name(), workflow, current.max(rev)).await?;
            }
            Ok(())
        })
    }

    /// A batch, as [`Consumer::handle`] would take its events one by one, in a few statements:
    /// each workflow is re-projected once, however many of its events the batch holds.
    fn handle_batch<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        events: &'a [Event],
    ) -> BoxFuture<'a, sqlx::Result<()>> {
        Box::pin(async move {
            let brought = revisions_by_workflow(events);
            if brought.is_empty() {
                return Ok(());
            }
            let ids: Vec<Uuid> = brought.keys().copied().collect();
            let applied = applied_revisions(tx, self.name(), &ids).await?;
            let mut repairs = 0;
            let mut live = Vec::new();
            for (workflow, revisions) in &brought {
                let applied = applied.get(workflow).copied().unwrap_or(0);
                // The first event this projection has not reflected: the next, or past a gap.
                if let Some(first) = revisions.iter().find(|r| **r > applied) {
                    repairs += i64::from(*first != applied + 1);
                    live.push(*workflow);
                }
            }
            if live.is_empty() {
                return Ok(());
            }
            if repairs > 0 {
                count(
                    tx,
                    "z29c_projection_repairs_total",
                    &[("consumer", self.name())],
                    repairs,
                )
                .await?;
            }
            let projected = crate::read::status::project_many(tx, &live).await?;
            let settled: Vec<i64> = projected
                .iter()
                .map(|p| {
                    p.revision
                        .max(brought[&p.workflow].last().copied().unwrap_or(0))
                })
                .collect();
            let workflows: Vec<Uuid> = projected.iter().map(|p| p.workflow).collect();
            store::projection::upsert_statuses(
                tx,
                &workflows,
                &projected.iter().map(|p| p.revision).collect::<Vec<_>>(),
                &projected.iter().map(|p| p.state).collect::<Vec<_>>(),
                &projected
                    .iter()
                    .map(|p| p.sentence.clone())
                    .collect::<Vec<_>>(),
            )
            .await?;
            store::outbox::record_revisions(tx, self.name(), &workflows, &settled).await
        })
    }
}

/// The revisions a batch brings for each workflow, ascending.
fn revisions_by_workflow(events: &[Event]) -> BTreeMap<Uuid, Vec<i64>> {
    let mut brought: BTreeMap<Uuid, Vec<i64>> = BTreeMap::new();
    for event in events {
        if let (Some(workflow), Some(revision)) = (event.workflow_id, event.revision) {
            brought.entry(workflow).or_default().push(revision);
        }
    }
    for revisions in brought.values_mut() {
        revisions.sort_unstable();
    }
    brought
}

/// What `consumer` has applied for `workflows`, locked until the transaction ends.
async fn applied_revisions(
    tx: &mut PgConnection,
    consumer: &str,
    workflows: &[Uuid],
) -> sqlx::Result<HashMap<Uuid, i64>> {
    Ok(
        store::outbox::lock_applied_revisions(tx, consumer, workflows)
            .await?
            .into_iter()
            .collect(),
    )
}

/// Counters of what happened, by event: commutative, so order never matters and the cursor
/// alone keeps a repeat from counting twice.
pub struct MetricsProjection;

impl Consumer for MetricsProjection {
    fn name(&self) -> &'static str {
        "metrics"
    }

    fn handle<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        event: &'a Event,
    ) -> BoxFuture<'a, sqlx::Result<()>> {
        Box::pin(count_event(tx, event))
    }

    /// A batch's counters added up first, then written in one statement.
    fn handle_batch<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        events: &'a [Event],
    ) -> BoxFuture<'a, sqlx::Result<()>> {
        Box::pin(async move {
            let mut sums: BTreeMap<(&'static str, String), i64> = BTreeMap::new();
            for event in events {
                for (name, labels) in counters_of(event) {
                    let mut labels: Vec<(&str, &str)> =
                        labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    labels.sort_unstable();
                    let labels = serde_json::to_string(&labels).expect("labels serialize");
                    *sums.entry((name, labels)).or_default() += 1;
                }
            }
            if sums.is_empty() {
                return Ok(());
            }
            let (mut names, mut labels, mut by) = (Vec::new(), Vec::new(), Vec::new());
            for ((name, label), n) in sums {
                names.push(name.to_owned());
                labels.push(label);
                by.push(n);
            }
            store::projection::add_to_counters(tx, &names, &labels, &by).await
        })
    }
}

/// Adds one to every counter `event` counts in.
async fn count_event(tx: &mut PgConnection, event: &Event) -> sqlx::Result<()> {
    for (name, labels) in counters_of(event) {
        let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        count(tx, name, &labels, 1).await?;
    }
    Ok(())
}

/// A counter's name and labels.
type Counter = (&'static str, Vec<(&'static str, String)>);

/// The counters `event` adds to, by its kind.
fn counters_of(event: &Event) -> Vec<Counter> {
    let p = &event.payload;
    let text = |key: &str| p[key].as_str().unwrap_or("").to_owned();
    let attempts = |adapter: String, outcome: String| {
        let labels = vec![
            ("logical", text("logical")),
            ("adapter", adapter),
            ("outcome", outcome),
        ];
        ("z29c_attempts_total", labels)
    };
    let path = |path: &str| ("z29c_recovery_path_total", vec![("path", path.to_owned())]);
    match event.kind() {
        Some(EventKind::StepAttemptEnded) => {
            let mut counters = vec![attempts(text("adapter"), text("outcome"))];
            if text("method") == ReceiptMethod::IdempotentReplay.as_str() {
                counters.push(path("replay"));
            }
            counters
        }
        Some(EventKind::StepSucceeded) => vec![attempts(String::new(), "succeeded".to_owned())],
        Some(EventKind::StepVerified) => match serde_json::from_value(p["method"].clone()) {
            Ok(ReceiptMethod::ManualEvidence) => vec![path("manual")],
            Ok(
                ReceiptMethod::StatusQuery
                | ReceiptMethod::DirectResponse
                | ReceiptMethod::IdempotentReplay,
            )
            | Err(_) => vec![path("query")],
        },
        Some(EventKind::StepWaived) => vec![path("waiver")],
        Some(EventKind::IncidentOpened)
            if text("kind") == IncidentKind::DuplicateEffect.as_str() =>
        {
            let labels = vec![("logical", text("logical")), ("adapter", text("adapter"))];
            vec![("z29c_duplicates_detected_total", labels)]
        }
        Some(EventKind::WorkflowStateChanged) => {
            vec![("z29c_workflow_transitions_total", vec![("to", text("to"))])]
        }
        Some(EventKind::AlertOpened) => {
            vec![("z29c_alerts_opened_total", vec![("rule", text("rule"))])]
        }
        // Counted by none of the metrics: a workflow's start shows in its transitions, the
        // rest in the recovery paths of the steps they concern. A kind this version does not
        // know (written by a newer one) counts nothing either.
        Some(
            EventKind::WorkflowStarted
            | EventKind::StepCancelled
            | EventKind::StepReplaced
            | EventKind::IncidentOpened
            | EventKind::IncidentResolved,
        )
        | None => Vec::new(),
    }
}

/// A customer could be told: the workflow reached a state worth a message. The candidate holds
/// the sentence of that moment; [`dispatch_notifications`] re-projects before sending anything.
pub struct NotificationCandidates;

impl Consumer for NotificationCandidates {
    fn name(&self) -> &'static str {
        "notifications"
    }

    fn handle<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        event: &'a Event,
    ) -> BoxFuture<'a, sqlx::Result<()>> {
        Box::pin(async move {
            let (Some(workflow), Some(rev)) = (event.workflow_id, event.revision) else {
                return Ok(());
            };
            if event.kind() != Some(EventKind::WorkflowStateChanged) {
                return Ok(());
            }
            if revision(tx, self.name(), workflow, rev).await? == Revision::Stale {
                return Ok(());
            }
            settle_revision(tx, self.name(), workflow, rev).await?;
            let worth_telling = matches!(
                event.payload["to"].as_str(),
                Some("completed" | "needs_review" | "cancelled")
            );
            if !worth_telling {
                return Ok(());
            }
            let Some(status) = crate::read::status::project_on(tx, workflow).await? else {
                return Ok(());
            };
            store::projection::insert_notification_candidate(
                tx,
                workflow,
                rev,
                status.state,
                &status.status,
            )
            .await
        })
    }

    /// A batch's state changes, as [`Consumer::handle`] would take them one by one, with each
    /// workflow's revisions locked once and its candidates written in one statement.
    fn handle_batch<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        events: &'a [Event],
    ) -> BoxFuture<'a, sqlx::Result<()>> {
        Box::pin(async move {
            let changes: Vec<&Event> = events
                .iter()
                .filter(|e| e.kind() == Some(EventKind::WorkflowStateChanged))
                .collect();
            let mut brought: BTreeMap<Uuid, Vec<(i64, bool)>> = BTreeMap::new();
            for event in &changes {
                if let (Some(workflow), Some(revision)) = (event.workflow_id, event.revision) {
                    let worth_telling = matches!(
                        event.payload["to"].as_str(),
                        Some("completed" | "needs_review" | "cancelled")
                    );
                    brought
                        .entry(workflow)
                        .or_default()
                        .push((revision, worth_telling));
                }
            }
            if brought.is_empty() {
                return Ok(());
            }
            let ids: Vec<Uuid> = brought.keys().copied().collect();
            let applied = applied_revisions(tx, self.name(), &ids).await?;
            let (mut settled, mut candidates) = (Vec::new(), Vec::new());
            for (workflow, mut revisions) in brought {
                revisions.sort_unstable();
                let mut at = applied.get(&workflow).copied().unwrap_or(0);
                for (revision, worth_telling) in revisions {
                    if revision <= at {
                        continue;
                    }
                    at = revision;
                    if worth_telling {
                        candidates.push((workflow, revision));
                    }
                }
                settled.push((workflow, at));
            }
            let (workflows, revisions): (Vec<Uuid>, Vec<i64>) = settled.into_iter().unzip();
            store::outbox::record_revisions(tx, self.name(), &workflows, &revisions).await?;
            if candidates.is_empty() {
                return Ok(());
            }
            let told: Vec<Uuid> = candidates.iter().map(|(w, _)| *w).collect();
            let projected = crate::read::status::project_many(tx, &told).await?;
            let (mut ws, mut rs, mut states, mut sentences) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for (workflow, revision) in candidates {
                if let Some(p) = projected.iter().find(|p| p.workflow == workflow) {
                    ws.push(workflow);
                    rs.push(revision);
                    states.push(p.state);
                    sentences.push(p.sentence.clone());
                }
            }
            store::projection::insert_notification_candidates(tx, &ws, &rs, &states, &sentences)
                .await
        })
    }
}

/// Goes through due notification candidates: one whose workflow has moved to another state
/// since is superseded (never sent stale); the others are handed to `send` (with their id as
/// the idempotency key) and marked sent once it succeeds. Returns (sent, superseded).
pub async fn dispatch_notifications<F, Fut>(pool: &PgPool, send: F) -> sqlx::Result<(usize, usize)>
where
    F: Fn(i64, Uuid, String) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let due = store::projection::due_notifications(pool).await?;
    let (mut sent, mut superseded) = (0, 0);
    for c in due {
        if c.current != c.state {
            store::projection::supersede_notification(pool, c.id).await?;
            superseded += 1;
        } else if send(c.id, c.workflow_id, c.sentence).await {
            store::projection::mark_notification_sent(pool, c.id).await?;
            sent += 1;
        }
    }
    Ok((sent, superseded))
}

/// Drops every projection and rebuilds it from durable state: statuses re-projected, counters
/// recounted from the outbox's history up to the metrics consumer's cursor, revisions reset to
/// each workflow's current one.
pub async fn rebuild(pool: &PgPool) -> sqlx::Result<u64> {
    let mut tx = pool.begin().await?;
    // The metrics consumer waits until the rebuild commits: a batch it took in between would
    // land both in the replayed history and in counters the rebuild did not clear.
    let published = store::outbox::cursor(&mut tx, store::outbox::PUBLISHER).await?;
    let taken = store::outbox::lock_cursor(&mut tx, MetricsProjection.name(), published).await?;
    store::projection::clear_projections(&mut tx).await?;
    let workflows = store::projection::workflow_ids(&mut tx).await?;
    for workflow in &workflows {
        if let Some((_, current, _)) = reproject(&mut tx, *workflow).await? {
            settle_revision(&mut tx, "status", *workflow, current).await?;
            settle_revision(&mut tx, "notifications", *workflow, current).await?;
        }
    }
    // Counters are a fold over every event: hand what the metrics consumer took to it again.
    let mut after = Position::default();
    loop {
        let chunk = store::outbox::history(&mut tx, after, taken, 5_000).await?;
        let Some(last) = chunk.last() else { break };
        after = last.position;
        let events: Vec<Event> = chunk.into_iter().map(Event::from).collect();
        MetricsProjection.handle_batch(&mut tx, &events).await?;
    }
    tx.commit().await?;
    Ok(workflows.len() as u64)
}
