//! The outbox's consumers inside Z29C: the status projection people read, the metrics
//! projection `/metrics` exposes, and notification candidates. Each can be dropped and
//! rebuilt from durable state ([`rebuild`]).

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::adapter::BoxFuture;
use crate::domain::WorkflowState;
use crate::outbox::{Consumer, Event, Revision, count, revision, settle_revision};

/// Re-projects one workflow's status from durable state into `status_projection`; returns
/// the workflow's state and the revision it reflects.
async fn reproject(
    tx: &mut PgConnection,
    workflow: Uuid,
) -> sqlx::Result<Option<(WorkflowState, i64, String)>> {
    let Some(status) = crate::status::project_on(tx, workflow).await? else {
        return Ok(None);
    };
    sqlx::query!(
        r#"insert into status_projection (workflow_id, revision, state, sentence, updated_at)
           values ($1, $2, $3, $4, now())
           on conflict (workflow_id) do update
              set revision = excluded.revision, state = excluded.state,
                  sentence = excluded.sentence, updated_at = now()
            where status_projection.revision <= excluded.revision"#,
        workflow,
        status.revision,
        status.state as WorkflowState,
        status.status,
    )
    .execute(&mut *tx)
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
}

/// Counters of what happened, by event: commutative, so order never matters and the inbox
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
        Box::pin(async move {
            let p = &event.payload;
            let text = |key: &str| p[key].as_str().unwrap_or("").to_owned();
            let (logical, adapter) = (text("logical"), text("adapter"));
            match event.kind.as_str() {
                "step.attempt_ended" => {
                    let outcome = text("outcome");
                    count(
                        tx,
                        "z29c_attempts_total",
                        &[
                            ("logical", &logical),
                            ("adapter", &adapter),
                            ("outcome", &outcome),
                        ],
                        1,
                    )
                    .await?;
                    if text("method") == "idempotent_replay" {
                        count(tx, "z29c_recovery_path_total", &[("path", "replay")], 1).await?;
                    }
                }
                "step.succeeded" => {
                    count(
                        tx,
                        "z29c_attempts_total",
                        &[
                            ("logical", &logical),
                            ("adapter", ""),
                            ("outcome", "succeeded"),
                        ],
                        1,
                    )
                    .await?;
                }
                "step.verified" => {
                    let path = match text("method").as_str() {
                        "manual_evidence" => "manual",
                        _ => "query",
                    };
                    count(tx, "z29c_recovery_path_total", &[("path", path)], 1).await?;
                }
                "step.waived" => {
                    count(tx, "z29c_recovery_path_total", &[("path", "waiver")], 1).await?;
                }
                "incident.opened" if text("kind") == "duplicate_effect" => {
                    count(
                        tx,
                        "z29c_duplicates_detected_total",
                        &[("logical", &logical), ("adapter", &adapter)],
                        1,
                    )
                    .await?;
                }
                "workflow.state_changed" => {
                    count(
                        tx,
                        "z29c_workflow_transitions_total",
                        &[("to", &text("to"))],
                        1,
                    )
                    .await?;
                }
                "alert.opened" => {
                    count(
                        tx,
                        "z29c_alerts_opened_total",
                        &[("rule", &text("rule"))],
                        1,
                    )
                    .await?;
                }
                _ => {}
            }
            Ok(())
        })
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
            if event.kind != "workflow.state_changed" {
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
            let Some(status) = crate::status::project_on(tx, workflow).await? else {
                return Ok(());
            };
            sqlx::query!(
                r#"insert into notification_candidate (workflow_id, revision, state, sentence)
                   values ($1, $2, $3, $4) on conflict (workflow_id, revision) do nothing"#,
                workflow,
                rev,
                status.state as WorkflowState,
                status.status,
            )
            .execute(&mut *tx)
            .await?;
            Ok(())
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
    let due = sqlx::query!(
        r#"select c.id, c.workflow_id, c.state as "state: WorkflowState", c.sentence,
                  w.state as "current: WorkflowState"
           from notification_candidate c join workflow w on w.id = c.workflow_id
           where c.sent_at is null and c.superseded_at is null order by c.id limit 100"#
    )
    .fetch_all(pool)
    .await?;
    let (mut sent, mut superseded) = (0, 0);
    for c in due {
        if c.current != c.state {
            sqlx::query!(
                r#"update notification_candidate set superseded_at = now() where id = $1"#,
                c.id
            )
            .execute(pool)
            .await?;
            superseded += 1;
        } else if send(c.id, c.workflow_id, c.sentence).await {
            sqlx::query!(
                r#"update notification_candidate set sent_at = now() where id = $1"#,
                c.id
            )
            .execute(pool)
            .await?;
            sent += 1;
        }
    }
    Ok((sent, superseded))
}

/// Drops every projection and rebuilds it from durable state: statuses re-projected, counters
/// recounted from the outbox's history, revisions reset to each workflow's current one.
pub async fn rebuild(pool: &PgPool) -> sqlx::Result<u64> {
    let mut tx = pool.begin().await?;
    sqlx::query!("delete from status_projection")
        .execute(&mut *tx)
        .await?;
    sqlx::query!("delete from consumer_revision where consumer in ('status', 'notifications')")
        .execute(&mut *tx)
        .await?;
    sqlx::query!("delete from metric_counter")
        .execute(&mut *tx)
        .await?;
    sqlx::query!("delete from inbox where consumer = 'metrics'")
        .execute(&mut *tx)
        .await?;
    let workflows = sqlx::query_scalar!("select id from workflow")
        .fetch_all(&mut *tx)
        .await?;
    for workflow in &workflows {
        if let Some((_, current, _)) = reproject(&mut tx, *workflow).await? {
            settle_revision(&mut tx, "status", *workflow, current).await?;
            settle_revision(&mut tx, "notifications", *workflow, current).await?;
        }
    }
    // Counters are a fold over every event: deliver the history to the metrics consumer again.
    let history = sqlx::query!(
        r#"select event_id, workflow_id, revision, kind, payload from outbox where published_at is not null order by id"#
    )
    .fetch_all(&mut *tx)
    .await?;
    for row in history {
        let event = Event {
            event_id: row.event_id,
            workflow_id: row.workflow_id,
            revision: row.revision,
            kind: row.kind,
            payload: row.payload,
        };
        crate::outbox::take(&mut tx, &MetricsProjection, &event).await?;
    }
    tx.commit().await?;
    Ok(workflows.len() as u64)
}

/// The customer's sentence for `workflow` and when it last changed, from the status
/// projection; re-projected from durable state when the projection has no row yet.
pub async fn customer_status(
    pool: &PgPool,
    workflow: Uuid,
) -> sqlx::Result<Option<(String, chrono::DateTime<chrono::Utc>)>> {
    if let Some(row) = sqlx::query!(
        r#"select sentence, updated_at as "updated_at: chrono::DateTime<chrono::Utc>"
           from status_projection where workflow_id = $1"#,
        workflow
    )
    .fetch_optional(pool)
    .await?
    {
        return Ok(Some((row.sentence, row.updated_at)));
    }
    Ok(crate::status::project(pool, workflow)
        .await?
        .map(|s| (s.status, s.updated_at)))
}
