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

/// The advisory lock only the publisher that delivers now holds (one at a time, across every
/// process): a second publisher waits for its turn instead of delivering the same batch.
const PUBLISHER_LOCK: i64 = 0x7a32_3963_0001;

/// Takes the publisher's lock on `conn` if no other session holds it.
pub async fn try_lock_publisher(conn: &mut PgConnection) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"select pg_try_advisory_lock($1) as "locked!""#,
        PUBLISHER_LOCK
    )
    .fetch_one(conn)
    .await
}

/// Releases the publisher's lock held on `conn`.
pub async fn unlock_publisher(conn: &mut PgConnection) -> sqlx::Result<()> {
    sqlx::query_scalar!(
        r#"select pg_advisory_unlock($1) as "unlocked!""#,
        PUBLISHER_LOCK
    )
    .fetch_one(conn)
    .await?;
    Ok(())
}

/// Up to `batch` unpublished events, oldest first, with their outbox row ids; read without
/// a lock and without a transaction held open (the publisher's lock keeps publishers apart).
pub async fn unpublished(
    conn: &mut PgConnection,
    batch: i64,
) -> sqlx::Result<Vec<(i64, EventRow)>> {
    let rows = sqlx::query!(
        r#"select id, event_id, workflow_id, revision, kind, payload from outbox
               where published_at is null order by id limit $1"#,
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

/// Records in `consumer`'s inbox that it takes `events`; returns the ids that were new to it
/// (the others are redeliveries).
pub async fn record_all_in_inbox(
    conn: &mut PgConnection,
    consumer: &str,
    events: &[Uuid],
) -> sqlx::Result<Vec<Uuid>> {
    sqlx::query_scalar!(
        r#"insert into inbox (consumer, event_id) select $1, unnest($2::uuid[])
           on conflict do nothing returning event_id"#,
        consumer,
        events
    )
    .fetch_all(conn)
    .await
}

/// The revisions `consumer` has applied for `workflows` (absent: none yet), locking those
/// records in workflow order until `conn`'s transaction ends.
pub async fn lock_applied_revisions(
    conn: &mut PgConnection,
    consumer: &str,
    workflows: &[Uuid],
) -> sqlx::Result<Vec<(Uuid, i64)>> {
    let rows = sqlx::query!(
        r#"select workflow_id, revision from consumer_revision
           where consumer = $1 and workflow_id = any($2) order by workflow_id for update"#,
        consumer,
        workflows
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.workflow_id, r.revision))
        .collect())
}

/// [`record_revision`] for many workflows at once.
pub async fn record_revisions(
    conn: &mut PgConnection,
    consumer: &str,
    workflows: &[Uuid],
    revisions: &[i64],
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into consumer_revision (consumer, workflow_id, revision)
           select $1, w, r from unnest($2::uuid[], $3::bigint[]) as t(w, r)
           on conflict (consumer, workflow_id)
           do update set revision = greatest(consumer_revision.revision, excluded.revision)"#,
        consumer,
        workflows,
        revisions,
    )
    .execute(conn)
    .await?;
    Ok(())
}
