//! The projections' writes (docs/DESIGN.md §10): the status projection, the metrics counters,
//! notification candidates (and their sending), and the resets a rebuild starts from. A
//! consumer's write runs in the transaction that moves its cursor past the event, so the two
//! commit together.

use serde_json::Value;
use sqlx::{Executor, PgConnection, Postgres};
use uuid::Uuid;

use crate::domain::WorkflowState;

/// Adds `by` to counter `name` with `labels` (already serialized, pairs sorted).
pub async fn add_to_counter(
    conn: &mut PgConnection,
    name: &str,
    labels: &str,
    by: i64,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into metric_counter (name, labels, value) values ($1, $2, $3)
           on conflict (name, labels) do update set value = metric_counter.value + excluded.value"#,
        name,
        labels,
        by,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A notification candidate not yet sent nor superseded, with its workflow's state now.
#[derive(Debug, Clone, PartialEq)]
pub struct DueNotification {
    pub id: i64,
    pub workflow_id: Uuid,
    /// The state the candidate was recorded for.
    pub state: WorkflowState,
    pub sentence: String,
    /// The workflow's state at this read.
    pub current: WorkflowState,
}

/// Up to 100 due notification candidates, oldest first.
pub async fn due_notifications<'e, E>(executor: E) -> sqlx::Result<Vec<DueNotification>>
where
    E: Executor<'e, Database = Postgres>,
{
    let rows = sqlx::query!(
        r#"select c.id, c.workflow_id, c.state as "state: WorkflowState", c.sentence,
                  w.state as "current: WorkflowState"
           from notification_candidate c join workflow w on w.id = c.workflow_id
           where c.sent_at is null and c.superseded_at is null order by c.id limit 100"#
    )
    .fetch_all(executor)
    .await?;
    Ok(rows
        .into_iter()
        .map(|c| DueNotification {
            id: c.id,
            workflow_id: c.workflow_id,
            state: c.state,
            sentence: c.sentence,
            current: c.current,
        })
        .collect())
}

/// Marks candidate `id` superseded: its workflow moved on, so it is never sent.
pub async fn supersede_notification<'e, E>(executor: E, id: i64) -> sqlx::Result<()>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query!(
        r#"update notification_candidate set superseded_at = now() where id = $1"#,
        id
    )
    .execute(executor)
    .await?;
    Ok(())
}

/// Marks candidate `id` sent.
pub async fn mark_notification_sent<'e, E>(executor: E, id: i64) -> sqlx::Result<()>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query!(
        r#"update notification_candidate set sent_at = now() where id = $1"#,
        id
    )
    .execute(executor)
    .await?;
    Ok(())
}

/// Empties every rebuildable projection: status rows (with the revisions they reflect) and the
/// counters (the metrics consumer's cursor stays: history up to it is replayed). Notification
/// candidates and the webhook queue are kept.
pub async fn clear_projections(conn: &mut PgConnection) -> sqlx::Result<()> {
    sqlx::query!("delete from status_projection")
        .execute(&mut *conn)
        .await?;
    sqlx::query!("delete from metric_counter")
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// The id of every workflow, for re-projecting them all.
pub async fn workflow_ids(conn: &mut PgConnection) -> sqlx::Result<Vec<Uuid>> {
    sqlx::query_scalar!("select id from workflow")
        .fetch_all(conn)
        .await
}

/// [`add_to_counter`] for many counters at once: `(name, labels, by)` each, labels serialized.
pub async fn add_to_counters(
    conn: &mut PgConnection,
    names: &[String],
    labels: &[String],
    by: &[i64],
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into metric_counter (name, labels, value)
           select n, l, sum(b) from unnest($1::text[], $2::text[], $3::bigint[]) as t(n, l, b)
           group by n, l
           on conflict (name, labels) do update set value = metric_counter.value + excluded.value"#,
        names,
        labels,
        by,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Writes each workflow's status row at its revision, unless the row already reflects a later
/// one.
pub async fn upsert_statuses(
    conn: &mut PgConnection,
    workflows: &[Uuid],
    revisions: &[i64],
    states: &[WorkflowState],
    sentences: &[String],
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into status_projection (workflow_id, revision, state, sentence, updated_at)
           select w, r, s, t, now()
           from unnest($1::uuid[], $2::bigint[], $3::workflow_state[], $4::text[]) as x(w, r, s, t)
           on conflict (workflow_id) do update
              set revision = excluded.revision, state = excluded.state,
                  sentence = excluded.sentence, updated_at = now()
            where status_projection.revision <= excluded.revision"#,
        workflows,
        revisions,
        states as &[WorkflowState],
        sentences,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// What a flush knows of one workflow's status projection (docs/DESIGN.md §10).
#[derive(Debug, Clone)]
pub struct KeptStatus {
    pub workflow: Uuid,
    /// The workflow's revision before the flush: the projection is kept only if it reflects it.
    pub before: i64,
    /// The definition's status step, and its sentence in each state (`words::sentences_by_state`).
    pub status_step: String,
    pub sentences: Value,
    /// The status step this flush settled with a receipt, and its sentence quoting the reference.
    pub settled: Option<(Uuid, String)>,
}

/// Keeps the status projection of the workflows a flush changed current, in the flush's own
/// transaction, where it reflects the revision before the flush: at the workflow's revision and
/// state now, with the sentence of its status step's latest row. A state's sentence is the
/// definition's (`sentences`); a step succeeded with a receipt says its reference, known to the
/// flush that settled it, or to the projection already (a succeeded step never changes, and a
/// projection made at or after the revision of its success said it). A status step with a
/// duplicate-effect incident or a withdrawal, a projection behind its workflow, or a workflow with
/// no status step row are left to the status consumer, which projects from durable state.
pub async fn keep_statuses(conn: &mut PgConnection, kept: &[KeptStatus]) -> sqlx::Result<u64> {
    let workflows: Vec<Uuid> = kept.iter().map(|k| k.workflow).collect();
    let before: Vec<i64> = kept.iter().map(|k| k.before).collect();
    let steps: Vec<String> = kept.iter().map(|k| k.status_step.clone()).collect();
    let sentences: Vec<Value> = kept.iter().map(|k| k.sentences.clone()).collect();
    let settled: Vec<Option<Uuid>> = kept
        .iter()
        .map(|k| k.settled.as_ref().map(|s| s.0))
        .collect();
    let said: Vec<Option<String>> = kept
        .iter()
        .map(|k| k.settled.as_ref().map(|s| s.1.clone()))
        .collect();
    let done = sqlx::query!(
        r#"with k as (
               select * from unnest($1::uuid[], $2::bigint[], $3::text[], $4::jsonb[], $5::uuid[], $6::text[])
                   as k(workflow_id, before, status_step, sentences, settled_step, settled_sentence)
           ), said as (
               select k.workflow_id, k.before,
                      (t.state = 'succeeded' and t.receipt_id is not null
                       and t.id is distinct from k.settled_step) as unchanged,
                      case when t.state = 'succeeded' and t.receipt_id is not null
                           then case when t.id = k.settled_step then k.settled_sentence end
                           else k.sentences ->> t.state::text end as sentence
               from k cross join lateral (
                   -- The latest row of the status step speaks for it, as in the projection.
                   select s.id, s.state, s.receipt_id from step s
                   where s.workflow_id = k.workflow_id and s.logical = k.status_step
                   order by s.created_at desc, s.generation desc, s.id desc limit 1
               ) t
               where not exists (select 1 from integrity_incident i
                                 where i.step_id = t.id and i.kind = 'duplicate_effect')
                 and not exists (select 1 from compensation_link c where c.original_step_id = t.id)
           )
           update status_projection p
           set revision = w.revision, state = w.state, updated_at = now(),
               sentence = case when x.unchanged then p.sentence else x.sentence end
           from said x join workflow w on w.id = x.workflow_id
           where p.workflow_id = x.workflow_id and p.revision = x.before
             and (x.unchanged or x.sentence is not null)"#,
        &workflows,
        &before,
        &steps,
        &sentences,
        &settled as &[Option<Uuid>],
        &said as &[Option<String>],
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// The revision each of `workflows`' status rows reflects (absent: never projected), locked
/// in workflow order until `conn`'s transaction ends: the status consumer's applied revisions.
pub async fn lock_status_revisions(
    conn: &mut PgConnection,
    workflows: &[Uuid],
) -> sqlx::Result<Vec<(Uuid, i64)>> {
    let rows = sqlx::query!(
        r#"select workflow_id, revision from status_projection
           where workflow_id = any($1) order by workflow_id for update"#,
        workflows
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.workflow_id, r.revision))
        .collect())
}

/// Records a notification candidate for each (workflow, revision, state, sentence), unless
/// the workflow already has one at that revision or a later one (a late or repeated state
/// change then tells nothing new).
pub async fn insert_notification_candidates(
    conn: &mut PgConnection,
    workflows: &[Uuid],
    revisions: &[i64],
    states: &[WorkflowState],
    sentences: &[String],
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into notification_candidate (workflow_id, revision, state, sentence)
           select w, r, s, t
           from unnest($1::uuid[], $2::bigint[], $3::workflow_state[], $4::text[]) as x(w, r, s, t)
           where not exists (select 1 from notification_candidate c
                             where c.workflow_id = x.w and c.revision >= x.r)
           on conflict (workflow_id, revision) do nothing"#,
        workflows,
        revisions,
        states as &[WorkflowState],
        sentences,
    )
    .execute(conn)
    .await?;
    Ok(())
}
