//! The outbox's delivery side and the consumers' inbox (docs/DESIGN.md §10): claiming
//! unpublished events, marking them published, and what each consumer has taken and applied.
//! Appending an event is [`super::journal`]'s: it belongs to the transaction of the change it
//! announces.

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

/// One outbox event as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    pub event_id: Uuid,
    pub workflow_id: Option<Uuid>,
    pub revision: Option<i64>,
    pub kind: String,
    pub payload: Value,
}

/// Claims up to `batch` unpublished events, oldest first, each with its outbox row id. Rows
/// another publisher holds are skipped; the claim lasts until `conn`'s transaction ends.
pub async fn take_batch(conn: &mut PgConnection, batch: i64) -> sqlx::Result<Vec<(i64, EventRow)>> {
    let rows = sqlx::query!(
        r#"select id, event_id, workflow_id, revision, kind, payload from outbox
               where published_at is null order by id limit $1 for update skip locked"#,
        batch
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let event = EventRow {
                event_id: r.event_id,
                workflow_id: r.workflow_id,
                revision: r.revision,
                kind: r.kind,
                payload: r.payload,
            };
            (r.id, event)
        })
        .collect())
}

/// Marks the outbox rows `ids` published.
pub async fn mark_published(conn: &mut PgConnection, ids: &[i64]) -> sqlx::Result<()> {
    sqlx::query!(
        r#"update outbox set published_at = now() where id = any($1)"#,
        ids
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Every published event, in the order it was appended: the history a rebuild replays.
pub async fn published_history(conn: &mut PgConnection) -> sqlx::Result<Vec<EventRow>> {
    let rows = sqlx::query!(
        r#"select event_id, workflow_id, revision, kind, payload from outbox where published_at is not null order by id"#
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| EventRow {
            event_id: r.event_id,
            workflow_id: r.workflow_id,
            revision: r.revision,
            kind: r.kind,
            payload: r.payload,
        })
        .collect())
}

/// Records in `consumer`'s inbox that it takes event `event_id`; false when the inbox had it
/// already (a redelivery).
pub async fn record_in_inbox(
    conn: &mut PgConnection,
    consumer: &str,
    event_id: Uuid,
) -> sqlx::Result<bool> {
    let inserted = sqlx::query!(
        r#"insert into inbox (consumer, event_id) values ($1, $2) on conflict do nothing"#,
        consumer,
        event_id
    )
    .execute(conn)
    .await?
    .rows_affected();
    Ok(inserted == 1)
}

/// The revision of `workflow` that `consumer` has applied, if any, locking that record until
/// `conn`'s transaction ends (two deliveries for one workflow then apply one after the other).
pub async fn lock_applied_revision(
    conn: &mut PgConnection,
    consumer: &str,
    workflow: Uuid,
) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!(
        r#"select revision from consumer_revision where consumer = $1 and workflow_id = $2 for update"#,
        consumer,
        workflow
    )
    .fetch_optional(conn)
    .await
}

/// Records that `consumer` reflects `workflow` up to `revision`; never moves it backwards.
pub async fn record_revision(
    conn: &mut PgConnection,
    consumer: &str,
    workflow: Uuid,
    revision: i64,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into consumer_revision (consumer, workflow_id, revision) values ($1, $2, $3)
           on conflict (consumer, workflow_id)
           do update set revision = greatest(consumer_revision.revision, excluded.revision)"#,
        consumer,
        workflow,
        revision,
    )
    .execute(conn)
    .await?;
    Ok(())
}
