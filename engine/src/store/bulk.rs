//! Bulk runs and their items: a run records who asked for which action over which previewed
//! rows; each item records what became of its row.

use chrono::{DateTime, Utc};
use sqlx::{Executor, PgConnection, Postgres};
use uuid::Uuid;

use crate::domain::{BulkOutcome, OperatorAction, Role};

/// A run about to be inserted.
#[derive(Debug, Clone)]
pub struct NewRunRow<'a> {
    pub id: Uuid,
    pub author: &'a str,
    pub author_role: Role,
    /// The token that started the run, when a token did (the author is then its name).
    pub author_token: Option<Uuid>,
    pub action: OperatorAction,
    pub reason: &'a str,
    pub residual_uncertainty: Option<&'a str>,
    pub rate_per_sec: i32,
}

/// Inserts a run (its items follow with [`insert_items`]).
pub async fn insert_run(conn: &mut PgConnection, run: &NewRunRow<'_>) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into bulk_run (id, author, author_role, by_token, author_token, action, reason,
                                 residual_uncertainty, rate_per_sec)
           values ($1, $2, $3, $4::uuid is not null, $4, $5, $6, $7, $8)"#,
        run.id,
        run.author,
        run.author_role as Role,
        run.author_token,
        run.action as OperatorAction,
        run.reason,
        run.residual_uncertainty,
        run.rate_per_sec,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Inserts run `run`'s items: `steps[i]` as previewed at `versions[i]`. A step listed twice is
/// one item; a step that does not exist is none. Returns how many items there are.
pub async fn insert_items(
    conn: &mut PgConnection,
    run: Uuid,
    steps: &[Uuid],
    versions: &[i64],
) -> sqlx::Result<u64> {
    let inserted = sqlx::query!(
        r#"insert into bulk_item (run_id, step_id, seen_version)
           select $1, t.s, t.v from unnest($2::uuid[], $3::bigint[]) as t(s, v)
           where exists (select 1 from step where id = t.s)
           on conflict do nothing"#,
        run,
        steps,
        versions,
    )
    .execute(conn)
    .await?;
    Ok(inserted.rows_affected())
}

/// The adapters the steps `steps` call, each once (a pure step calls none).
pub async fn adapters_of<'e, E>(executor: E, steps: &[Uuid]) -> sqlx::Result<Vec<String>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_scalar!(
        r#"select distinct s.adapter as "adapter!"
           from unnest($1::uuid[]) as t(id) join step s on s.id = t.id
           where s.adapter is not null"#,
        steps
    )
    .fetch_all(executor)
    .await
}

/// What an unfinished run performs on each of its items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnfinishedRun {
    pub author: String,
    pub role: Role,
    pub by_token: bool,
    /// The token that started it, when one did: four eyes counts its items as its person's.
    pub author_token: Option<Uuid>,
    pub action: OperatorAction,
    pub reason: String,
    pub residual_uncertainty: Option<String>,
    pub rate_per_sec: i32,
}

/// Run `id` if it has not finished.
pub async fn unfinished<'e, E>(executor: E, id: Uuid) -> sqlx::Result<Option<UnfinishedRun>>
where
    E: Executor<'e, Database = Postgres>,
{
    let row = sqlx::query!(
        r#"select author, author_role as "role: Role", by_token, author_token,
                  action as "action: OperatorAction", reason, residual_uncertainty, rate_per_sec
           from bulk_run where id = $1 and finished_at is null"#,
        id
    )
    .fetch_optional(executor)
    .await?;
    Ok(row.map(|r| UnfinishedRun {
        author: r.author,
        role: r.role,
        by_token: r.by_token,
        author_token: r.author_token,
        action: r.action,
        reason: r.reason,
        residual_uncertainty: r.residual_uncertainty,
        rate_per_sec: r.rate_per_sec,
    }))
}

/// Claims run `run`'s next pending item (`for update skip locked`, until the caller's
/// transaction ends): its step and the version the preview showed. `None` when no pending
/// item is left unclaimed.
pub async fn claim_next_item(
    conn: &mut PgConnection,
    run: Uuid,
) -> sqlx::Result<Option<(Uuid, i64)>> {
    let item = sqlx::query!(
        r#"select step_id, seen_version from bulk_item
               where run_id = $1 and outcome is null
               order by step_id limit 1 for update skip locked"#,
        run
    )
    .fetch_optional(conn)
    .await?;
    Ok(item.map(|i| (i.step_id, i.seen_version)))
}

/// Records what became of run `run`'s item for `step`, and the message shown for it.
pub async fn record_item_outcome(
    conn: &mut PgConnection,
    run: Uuid,
    step: Uuid,
    outcome: BulkOutcome,
    message: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"update bulk_item set outcome = $3, message = $4, done_at = now()
               where run_id = $1 and step_id = $2"#,
        run,
        step,
        outcome as BulkOutcome,
        message,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The role run `id`'s author holds now: `None` once the account is disabled or the token
/// revoked (a run from before tokens were recorded follows the live token of its name).
pub async fn author_role_now(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<Option<Role>> {
    sqlx::query_scalar!(
        r#"select case when r.by_token
                       then (select t.role from api_token t
                             where t.revoked_at is null
                               and (t.id = r.author_token or (r.author_token is null and t.name = r.author))
                             limit 1)
                       else (select o.role from operator o
                             where o.username = r.author and o.disabled_at is null)
                  end as "role: Role"
           from bulk_run r where r.id = $1"#,
        id
    )
    .fetch_optional(conn)
    .await
    .map(Option::flatten)
}

/// Stops run `id`: its pending items are refused with `message`, and it is finished, stopped
/// by `by` for `reason`. False when it had finished already.
pub async fn stop(
    conn: &mut PgConnection,
    id: Uuid,
    by: &str,
    reason: &str,
    message: &str,
) -> sqlx::Result<bool> {
    let stopped = sqlx::query!(
        r#"update bulk_run set finished_at = now(), stopped_at = now(), stopped_by = $2, stop_reason = $3
           where id = $1 and finished_at is null"#,
        id,
        by,
        reason,
    )
    .execute(&mut *conn)
    .await?;
    if stopped.rows_affected() == 0 {
        return Ok(false);
    }
    sqlx::query!(
        r#"update bulk_item set outcome = 'refused', message = $2, done_at = now()
           where run_id = $1 and outcome is null"#,
        id,
        message,
    )
    .execute(&mut *conn)
    .await?;
    Ok(true)
}

/// Marks run `id` finished if none of its items is pending.
pub async fn finish<'e, E>(executor: E, id: Uuid) -> sqlx::Result<()>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query!(
        r#"update bulk_run set finished_at = now()
           where id = $1 and finished_at is null
             and not exists (select 1 from bulk_item where run_id = $1 and outcome is null)"#,
        id
    )
    .execute(executor)
    .await?;
    Ok(())
}

/// Every unfinished run, oldest first.
pub async fn unfinished_ids<'e, E>(executor: E) -> sqlx::Result<Vec<Uuid>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_scalar!(r#"select id from bulk_run where finished_at is null order by created_at"#)
        .fetch_all(executor)
        .await
}

/// A run as its page heads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    pub author: String,
    /// The token that started it, when a token did (its name alone names no one: a console
    /// account or a later token may carry the same).
    pub author_token: Option<Uuid>,
    pub by_token: bool,
    pub action: OperatorAction,
    pub reason: String,
    pub rate_per_sec: i32,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Who stopped it and why, when it was stopped.
    pub stopped: Option<(String, String)>,
}

/// Run `id`, finished or not.
pub async fn summary<'e, E>(executor: E, id: Uuid) -> sqlx::Result<Option<RunSummary>>
where
    E: Executor<'e, Database = Postgres>,
{
    let row = sqlx::query!(
        r#"select author, author_token, by_token, action as "action: OperatorAction", reason, rate_per_sec,
                  created_at as "created_at: DateTime<Utc>", finished_at as "finished_at: DateTime<Utc>",
                  stopped_by, stop_reason
           from bulk_run where id = $1"#,
        id
    )
    .fetch_optional(executor)
    .await?;
    Ok(row.map(|r| RunSummary {
        author: r.author,
        author_token: r.author_token,
        by_token: r.by_token,
        action: r.action,
        reason: r.reason,
        rate_per_sec: r.rate_per_sec,
        created_at: r.created_at,
        finished_at: r.finished_at,
        stopped: r.stopped_by.zip(r.stop_reason),
    }))
}

/// Every item of run `id`: step, workflow creation key, outcome (none while pending), message;
/// done items first, in the order they were done.
pub async fn items<'e, E>(
    executor: E,
    id: Uuid,
) -> sqlx::Result<Vec<(Uuid, String, Option<BulkOutcome>, Option<String>)>>
where
    E: Executor<'e, Database = Postgres>,
{
    let rows = sqlx::query!(
        r#"select i.step_id, w.creation_key, i.outcome as "outcome: BulkOutcome", i.message
           from bulk_item i join step s on s.id = i.step_id join workflow w on w.id = s.workflow_id
           where i.run_id = $1 order by i.done_at nulls last, i.step_id"#,
        id
    )
    .fetch_all(executor)
    .await?;
    Ok(rows
        .into_iter()
        .map(|i| (i.step_id, i.creation_key, i.outcome, i.message))
        .collect())
}
