//! Operators' pauses of workflows (docs/DESIGN.md §20): while a workflow is paused no step of
//! it starts.

use chrono::{DateTime, Utc};
use sqlx::{Executor, PgConnection, Postgres};
use uuid::Uuid;

use crate::domain::WorkflowState;

/// A pause in force.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct WorkflowPause {
    pub workflow: Uuid,
    pub paused_by: String,
    pub paused_at: DateTime<Utc>,
    pub reason: String,
}

/// What pausing found.
#[derive(Debug, Clone, PartialEq)]
pub enum Pausing {
    /// Paused now, by this call.
    Paused(WorkflowPause),
    /// Paused already: the pause in force is unchanged.
    Already(WorkflowPause),
    /// Completed or cancelled: nothing of it is left to start.
    Settled(WorkflowState),
    /// No workflow has this id.
    Unknown,
}

/// Pauses `workflow` for `by`, unless it is paused already or settled. The caller holds the
/// workflow's lock.
pub async fn pause(
    conn: &mut PgConnection,
    workflow: Uuid,
    by: &str,
    reason: &str,
) -> sqlx::Result<Pausing> {
    let paused = sqlx::query_as!(
        WorkflowPause,
        r#"update workflow set paused_at = now(), paused_by = $2, paused_reason = $3
           where id = $1 and paused_at is null and state not in ('completed', 'cancelled')
           returning id as workflow, paused_by as "paused_by!",
                     paused_at as "paused_at!: DateTime<Utc>", paused_reason as "reason!""#,
        workflow,
        by,
        reason,
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(paused) = paused {
        return Ok(Pausing::Paused(paused));
    }
    let found = sqlx::query!(
        r#"select state as "state: WorkflowState" from workflow where id = $1"#,
        workflow
    )
    .fetch_optional(&mut *conn)
    .await?;
    Ok(match (found, of(&mut *conn, workflow).await?) {
        (_, Some(standing)) => Pausing::Already(standing),
        (Some(found), None) => Pausing::Settled(found.state),
        (None, None) => Pausing::Unknown,
    })
}

/// Ends the pause of `workflow`; returns the pause it ended, if there was one.
pub async fn resume(
    conn: &mut PgConnection,
    workflow: Uuid,
) -> sqlx::Result<Option<WorkflowPause>> {
    sqlx::query_as!(
        WorkflowPause,
        r#"with before as (
               select id, paused_by, paused_at, paused_reason from workflow
               where id = $1 and paused_at is not null for update
           ), ended as (
               update workflow w set paused_at = null, paused_by = null, paused_reason = null
               from before b where w.id = b.id
           )
           select id as workflow, paused_by as "paused_by!",
                  paused_at as "paused_at!: DateTime<Utc>", paused_reason as "reason!"
           from before"#,
        workflow,
    )
    .fetch_optional(conn)
    .await
}

/// The pause of `workflow` in force, if any.
pub async fn of<'e, E>(executor: E, workflow: Uuid) -> sqlx::Result<Option<WorkflowPause>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_as!(
        WorkflowPause,
        r#"select id as workflow, paused_by as "paused_by!",
                  paused_at as "paused_at!: DateTime<Utc>", paused_reason as "reason!"
           from workflow where id = $1 and paused_at is not null"#,
        workflow
    )
    .fetch_optional(executor)
    .await
}

/// How many workflows are paused now.
pub async fn count<'e, E>(executor: E) -> sqlx::Result<i64>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_scalar!(r#"select count(*) as "n!" from workflow where paused_at is not null"#)
        .fetch_one(executor)
        .await
}
