//! The outbox's consumers inside Z29C: the status projection people read, the metrics
//! projection `/metrics` exposes, and notification candidates. Each can be dropped and
//! rebuilt from durable state ([`rebuild`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::adapter::BoxFuture;
use crate::domain::WorkflowState;
use crate::domain::{EventKind, IncidentKind, ReceiptMethod};
use crate::outbox::consumer::{Consumer, Event, count};
use crate::read::status::Projected;
use crate::store;
use crate::store::outbox::Position;

/// Writes each of `projected` into `status_projection` at the matching one of `revisions`
/// (the revision it is recorded as reflecting).
async fn write_statuses(
    tx: &mut PgConnection,
    projected: &[Projected],
    revisions: &[i64],
) -> sqlx::Result<()> {
    store::projection::upsert_statuses(
        tx,
        &projected.iter().map(|p| p.workflow).collect::<Vec<_>>(),
        revisions,
        &projected.iter().map(|p| p.state).collect::<Vec<_>>(),
        &projected
            .iter()
            .map(|p| p.sentence.clone())
            .collect::<Vec<_>>(),
    )
    .await
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
        self.handle_batch(tx, std::slice::from_ref(event))
    }

    /// Each workflow the batch brings events of is compared with the revision its status row
    /// reflects (locked): older or equal events are ignored, a gap counts a repair, and the row
    /// is re-projected from durable state once, however many events the batch holds, at the
    /// larger of the newest event's revision and the workflow's current one.
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
            let applied: HashMap<Uuid, i64> = store::projection::lock_status_revisions(tx, &ids)
                .await?
                .into_iter()
                .collect();
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
            write_statuses(tx, &projected, &settled).await
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
        Some(EventKind::StepHeld) => {
            vec![("z29c_steps_held_total", vec![("adapter", text("adapter"))])]
        }
        // Counted by none of the metrics: a workflow's start shows in its transitions, the
        // rest in the recovery paths of the steps they concern. A kind this version does not
        // know (written by a newer one) counts nothing either.
        Some(
            EventKind::WorkflowStarted
            | EventKind::StepCancelled
            | EventKind::StepReplaced
            | EventKind::StepReleased
            | EventKind::IncidentOpened
            | EventKind::IncidentResolved,
        )
        | None => Vec::new(),
    }
}

/// A customer could be told: the workflow reached a state worth a message. The candidate holds
/// the sentence of that moment; [`dispatch_notifications`] re-projects before sending anything.
pub struct NotificationCandidates;

/// The states a customer hears about.
fn worth_telling(state: WorkflowState) -> bool {
    matches!(
        state,
        WorkflowState::Completed | WorkflowState::NeedsReview | WorkflowState::Cancelled
    )
}

impl Consumer for NotificationCandidates {
    fn name(&self) -> &'static str {
        "notifications"
    }

    fn handle<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        event: &'a Event,
    ) -> BoxFuture<'a, sqlx::Result<()>> {
        self.handle_batch(tx, std::slice::from_ref(event))
    }

    /// For each workflow, the batch's newest change to a state worth telling: the workflow's
    /// status of now is read (its status row where that is current, else projected from durable
    /// state), and if it is still in that state a candidate is recorded at the change's revision
    /// with the sentence of now, unless the workflow has a candidate at that revision
    /// or a later one. A repeated change, or one arriving after a newer change (or after the
    /// workflow moved on), therefore records nothing, with no applied revisions to keep.
    fn handle_batch<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        events: &'a [Event],
    ) -> BoxFuture<'a, sqlx::Result<()>> {
        Box::pin(async move {
            let mut told: BTreeMap<Uuid, (i64, WorkflowState)> = BTreeMap::new();
            for event in events {
                if event.kind() != Some(EventKind::WorkflowStateChanged) {
                    continue;
                }
                let (Some(workflow), Some(revision)) = (event.workflow_id, event.revision) else {
                    continue;
                };
                let Ok(to) = serde_json::from_value::<WorkflowState>(event.payload["to"].clone())
                else {
                    continue;
                };
                if worth_telling(to) && told.get(&workflow).is_none_or(|(r, _)| *r < revision) {
                    told.insert(workflow, (revision, to));
                }
            }
            if told.is_empty() {
                return Ok(());
            }
            let ids: Vec<Uuid> = told.keys().copied().collect();
            // What the status rows say where they are current (the flush that announced the
            // change kept them so); the others are projected from durable state.
            let mut projected = crate::read::status::current(tx, &ids).await?;
            let current: BTreeSet<Uuid> = projected.iter().map(|p| p.workflow).collect();
            let behind: Vec<Uuid> = ids
                .iter()
                .filter(|id| !current.contains(id))
                .copied()
                .collect();
            if !behind.is_empty() {
                projected.extend(crate::read::status::project_many(tx, &behind).await?);
            }
            let (mut ws, mut rs, mut states, mut sentences) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for p in projected {
                let (revision, to) = told[&p.workflow];
                if p.state == to {
                    ws.push(p.workflow);
                    rs.push(revision);
                    states.push(p.state);
                    sentences.push(p.sentence);
                }
            }
            if ws.is_empty() {
                return Ok(());
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

/// Drops every projection and rebuilds it from durable state: statuses re-projected at each
/// workflow's current revision, counters recounted from the outbox's history up to the metrics
/// consumer's cursor.
pub async fn rebuild(pool: &PgPool) -> sqlx::Result<u64> {
    let mut tx = pool.begin().await?;
    // The metrics consumer waits until the rebuild commits: a batch it took in between would
    // land both in the replayed history and in counters the rebuild did not clear.
    let published = store::outbox::cursor(&mut tx, store::outbox::PUBLISHER).await?;
    let taken = store::outbox::lock_cursor(&mut tx, MetricsProjection.name(), published).await?;
    store::projection::clear_projections(&mut tx).await?;
    let workflows = store::projection::workflow_ids(&mut tx).await?;
    // As the status consumer projects a publisher batch's workflows, at their current revision.
    for chunk in workflows.chunks(500) {
        let projected = crate::read::status::project_many(&mut tx, chunk).await?;
        let current: Vec<i64> = projected.iter().map(|p| p.revision).collect();
        write_statuses(&mut tx, &projected, &current).await?;
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
